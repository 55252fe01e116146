// weights_file.c: the model's weights file, a safetensors file (names,
// shapes and __metadata__ as docs/FORMAT.md fixes them), and loading it back
// with every name, dtype and shape checked. The only code that writes or
// checks that format: training checkpoints and debug states are weights
// files with extra tensors and metadata, written and read through here.
#include "format/weights_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/hf_read.h"
#include "model/params.h"

// The one place a weights path's kind is decided: a directory is a Hugging
// Face model directory (format/hf_read.h), anything else a weights file.
static int is_hf_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

void gpt_metadata(const GPT *m, GPTMetadata *md) {
    const ModelKey *keys;
    int n_keys = gpt_model_keys(&keys);
    if (n_keys + 1 > GPT_META_MAX) {   // a key added to the table without room for it here
        fprintf(stderr, "internal error: GPT_META_MAX (%d) is below the %d model keys + format\n", GPT_META_MAX, n_keys);
        abort();
    }
    md->count = 0;
    md->items[md->count++] = (StMeta){"format", "pt"};   // read by tools that expect PyTorch's layout
    for (int k = 0; k < n_keys; k++) {
        gpt_config_get(&m->cfg, k, md->values[md->count], sizeof md->values[0]);
        md->items[md->count] = (StMeta){keys[k].name, md->values[md->count]};
        md->count++;
    }
}

int gpt_save_with(const GPT *m, const char *path, const StTensorOut *extra, int n_extra,
                  const StMeta *extra_meta, int n_extra_meta, AtomicMode mode, char *err, size_t errlen) {
    if (n_extra < 0 || n_extra_meta < 0 || n_extra_meta > GPT_META_MAX) {
        snprintf(err, errlen, "%s: bad count of extra tensors or metadata", path);
        return -1;
    }
    int n = m->n_entries + n_extra;
    StTensorOut *t = calloc((size_t)n, sizeof(StTensorOut));
    if (!t) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    for (int i = 0; i < m->n_entries; i++) {
        const ParamEntry *e = &m->entries[i];
        t[i] = (StTensorOut){.name = e->name, .dtype = ST_F32, .ndim = e->ndim,
                             .shape = {e->shape[0], e->shape[1]}, .data = m->params + e->offset};
    }
    for (int i = 0; i < n_extra; i++) t[m->n_entries + i] = extra[i];
    GPTMetadata md;
    gpt_metadata(m, &md);
    StMeta meta[2 * GPT_META_MAX];
    memcpy(meta, md.items, (size_t)md.count * sizeof *meta);
    for (int i = 0; i < n_extra_meta; i++) meta[md.count + i] = extra_meta[i];
    int rc = st_write(path, t, n, meta, md.count + n_extra_meta, mode, err, errlen);
    free(t);
    return rc;
}

int gpt_save(const GPT *m, const char *path, char *err, size_t errlen) {
    return gpt_save_with(m, path, NULL, 0, NULL, 0, ATOMIC_REPLACE, err, errlen);
}

int gpt_config_from_file(const StFile *f, GPTConfig *c, char *err, size_t errlen) {
    const char *path = st_path(f);
    memset(c, 0, sizeof *c);
    const ModelKey *keys;
    int n_keys = gpt_model_keys(&keys);
    for (int k = 0; k < n_keys; k++) {
        const char *v = st_meta(f, keys[k].name);
        if (!v) v = keys[k].if_absent;
        if (!v) { snprintf(err, errlen, "%s: metadata lacks key %s", path, keys[k].name); return -1; }
        char msg[160];
        if (gpt_config_set(c, k, v, msg, sizeof msg) != 0) {
            snprintf(err, errlen, "%s: metadata %s: %s", path, keys[k].name, msg);
            return -1;
        }
    }
    char msg[256];
    if (gpt_config_validate(c, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: bad model metadata: %s", path, msg);
        return -1;
    }
    return 0;
}

static void format_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

int gpt_check_tensor(const StFile *f, const char *name, const ParamEntry *e, char *err, size_t errlen) {
    const char *path = st_path(f);
    const StTensor *t = st_find(f, name);
    if (!t) { snprintf(err, errlen, "%s: missing tensor %s", path, name); return -1; }
    if (t->dtype != ST_F32) {
        snprintf(err, errlen, "%s: tensor %s has dtype %s, expected F32", path, name, st_dtype_name(t->dtype));
        return -1;
    }
    int64_t want[2] = {e->shape[0], e->shape[1]};
    if (t->ndim != e->ndim || t->shape[0] != want[0] || (e->ndim == 2 && t->shape[1] != want[1])) {
        char got_s[96], want_s[96];
        format_shape(got_s, sizeof got_s, t->ndim, t->shape);
        format_shape(want_s, sizeof want_s, e->ndim, want);
        snprintf(err, errlen, "%s: tensor %s has shape %s, expected %s", path, name, got_s, want_s);
        return -1;
    }
    return 0;
}

int gpt_read_tensor(const StFile *f, const char *name, const ParamEntry *e, float *dst, char *err, size_t errlen) {
    if (gpt_check_tensor(f, name, e, err, errlen) != 0) return -1;
    if (st_read_tensor(f, st_find(f, name), dst, err, errlen) != 0) return -1;
    for (size_t i = 0; i < e->numel; i++)
        if (!isfinite(dst[i])) {
            snprintf(err, errlen, "%s: tensor %s holds %s at index %zu", st_path(f), name,
                     isnan(dst[i]) ? "NaN" : "an infinity", i);
            return -1;
        }
    return 0;
}

// A file's configuration (resolved) against the model's: equal, but for the
// length keys where they may differ; else the file is another model's.
static int check_config(const GPT *m, const GPTConfig *file_cfg, const char *path, int length_keys_may_differ,
                        char *err, size_t errlen) {
    const char *key;
    if (m->pos->max_pos_is_block && file_cfg->block_size != m->cfg.block_size) {
        snprintf(err, errlen, "%s: pos=%s has one learned row per position: block_size %d in the file, %d in "
                 "this run", path, pos_kind_name(m->cfg.pos), file_cfg->block_size, m->cfg.block_size);
        return GPT_FILE_OTHER_MODEL;
    }
    if (gpt_config_diff(file_cfg, &m->cfg, length_keys_may_differ, &key) != 0) {
        char in_file[64], in_model[64];
        int k = gpt_model_key_find(key);
        gpt_config_get(file_cfg, k, in_file, sizeof in_file);
        gpt_config_get(&m->cfg, k, in_model, sizeof in_model);
        snprintf(err, errlen, "%s: %s is %s in the file but %s in this run", path, key, in_file, in_model);
        return GPT_FILE_OTHER_MODEL;
    }
    return 0;
}

// The metadata: a valid configuration (else the file is bad), then this
// model's (else the file is another model's).
static int check_file_config(const GPT *m, const StFile *f, int length_keys_may_differ, char *err, size_t errlen) {
    GPTConfig file_cfg;
    if (gpt_config_from_file(f, &file_cfg, err, errlen) != 0) return GPT_FILE_BAD;
    gpt_config_resolve(&file_cfg);
    return check_config(m, &file_cfg, st_path(f), length_keys_may_differ, err, errlen);
}

// Whether name is a checkpoint's AdamW moment (GPT_MOMENT_M or GPT_MOMENT_V
// + a parameter's name); *param gets that parameter.
static int is_moment(const GPT *m, const char *name, const ParamEntry **param) {
    const char *prefix[] = {GPT_MOMENT_M, GPT_MOMENT_V};
    for (int k = 0; k < 2; k++)
        if (strncmp(name, prefix[k], strlen(prefix[k])) == 0 && (*param = gpt_find_param(m, name + strlen(prefix[k]))))
            return 1;
    return 0;
}

int gpt_check_file(const GPT *m, const StFile *f, int length_keys_may_differ, int allow_extra,
                   char *err, size_t errlen) {
    int rc = check_file_config(m, f, length_keys_may_differ, err, errlen);
    if (rc != 0) return rc;
    for (int i = 0; i < m->n_entries; i++)
        if (gpt_check_tensor(f, m->entries[i].name, &m->entries[i], err, errlen) != 0) return GPT_FILE_BAD;
    for (int i = 0; allow_extra != GPT_EXTRA_ANY && i < st_num_tensors(f); i++) {
        const char *name = st_tensor_at(f, i)->name;
        const ParamEntry *param;
        if (gpt_find_param(m, name)) continue;
        if (allow_extra == GPT_EXTRA_MOMENTS && is_moment(m, name, &param)) {
            if (gpt_check_tensor(f, name, param, err, errlen) != 0) return GPT_FILE_BAD;
            continue;
        }
        snprintf(err, errlen, "%s: unexpected tensor %s (not a parameter of pos=%s%s)", st_path(f), name,
                 pos_kind_name(m->cfg.pos), allow_extra == GPT_EXTRA_MOMENTS ? ", nor an AdamW moment of one" : "");
        return GPT_FILE_BAD;
    }
    return 0;
}

// The parameters, read once the file passed gpt_check_file.
static int read_params(GPT *m, const StFile *f, char *err, size_t errlen) {
    float *params = gpt_params(m);   // written through gpt_params: the engine re-reads the weights
    for (int i = 0; i < m->n_entries; i++) {
        const ParamEntry *e = &m->entries[i];
        if (gpt_read_tensor(f, e->name, e, params + e->offset, err, errlen) != 0) return GPT_FILE_BAD;
    }
    return 0;
}

int gpt_read_params(GPT *m, const StFile *f, int length_keys_may_differ, char *err, size_t errlen) {
    int rc = gpt_check_file(m, f, length_keys_may_differ, GPT_EXTRA_MOMENTS, err, errlen);   // all before any data
    return rc != 0 ? rc : read_params(m, f, err, errlen);
}

int gpt_read_params_at(GPT *m, const char *path, int length_keys_may_differ, char *err, size_t errlen) {
    int rc;
    if (is_hf_dir(path)) {
        HfDir *d;
        if (hf_open(&d, path, err, errlen) != 0) return GPT_FILE_BAD;
        rc = check_config(m, hf_config(d), path, length_keys_may_differ, err, errlen);
        if (rc == 0 && hf_read_params(d, m, err, errlen) != 0) rc = GPT_FILE_BAD;
        hf_close(d);
        return rc;
    }
    StFile *f;
    if (st_open_header(&f, path, err, errlen) != 0) return GPT_FILE_BAD;
    rc = gpt_read_params(m, f, length_keys_may_differ, err, errlen);
    st_close(f);
    return rc;
}

int gpt_config_at(const char *path, GPTConfig *cfg, char *err, size_t errlen) {
    int rc = -1;
    if (is_hf_dir(path)) {
        HfDir *d;
        if (hf_open(&d, path, err, errlen) != 0) return -1;
        *cfg = *hf_config(d);
        hf_close(d);
        return 0;
    }
    StFile *f;
    if (st_open_header(&f, path, err, errlen) != 0) return -1;
    if (gpt_config_from_file(f, cfg, err, errlen) == 0) {
        gpt_config_resolve(cfg);
        rc = 0;
    }
    st_close(f);
    return rc;
}

int gpt_check_tokenizer(const GPT *m, const char *weights, int vocab_size, uint64_t checksum, const char *source,
                        char *err, size_t errlen) {
    if (vocab_size > 0 && vocab_size != m->cfg.vocab_size) {
        snprintf(err, errlen, "%s: vocabulary size %d does not match the tokenizer %s (%d)", weights,
                 m->cfg.vocab_size, source, vocab_size);
        return -1;
    }
    uint64_t trained = m->cfg.tokenizer_checksum;
    if (trained == 0 || checksum == 0 || trained == checksum) return 0;
    snprintf(err, errlen, "%s and %s are of different tokenizers (tokenizer_checksum %016llx in the weights, "
             "%016llx for %s)", weights, source, (unsigned long long)trained, (unsigned long long)checksum, source);
    return -1;
}

int gpt_load_probe(const char *path, int allow_extra, GPTConfig *cfg, char *err, size_t errlen) {
    if (is_hf_dir(path)) return gpt_config_at(path, cfg, err, errlen);   // hf_open's checks are all before reading
    StFile *f;
    if (st_open_header(&f, path, err, errlen) != 0) return -1;
    GPT *shell = NULL;
    char msg[256];
    int rc = -1;
    if (gpt_config_from_file(f, cfg, err, errlen) != 0) goto done;
    if (gpt_describe(&shell, cfg, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        goto done;
    }
    if (gpt_check_file(shell, f, 0, allow_extra, err, errlen) != 0) goto done;
    *cfg = *gpt_config(shell);
    rc = 0;
done:
    gpt_free(shell);
    st_close(f);
    return rc;
}

// A Hugging Face directory: its checks (hf_open), then the model allocated and read.
static int load_hf_dir(GPT **model, const char *path, char *err, size_t errlen) {
    HfDir *d;
    GPT *m = NULL;
    char msg[256];
    if (hf_open(&d, path, err, errlen) != 0) return -1;
    int rc = gpt_create_uninit(&m, hf_config(d), 0, msg, sizeof msg);
    if (rc != 0) snprintf(err, errlen, "%s: %s", path, msg);
    else rc = hf_read_params(d, m, err, errlen);
    hf_close(d);
    if (rc != 0) gpt_free(m);
    else *model = m;
    return rc;
}

// The header first: metadata, then the tensor table against the model those
// keys describe (gpt_describe sizes no buffer). Only a file that passes is
// allocated for and read, tensor by tensor into the model: a bad file costs
// its header, whatever its size, and a good one is never held twice.
int gpt_load(GPT **model, const char *path, int allow_extra, char *err, size_t errlen) {
    *model = NULL;
    if (is_hf_dir(path)) return load_hf_dir(model, path, err, errlen);
    StFile *f;
    if (st_open_header(&f, path, err, errlen) != 0) return -1;
    GPTConfig cfg;
    GPT *shell = NULL, *m = NULL;
    char msg[256];
    if (gpt_config_from_file(f, &cfg, err, errlen) != 0) goto fail;
    if (gpt_describe(&shell, &cfg, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        goto fail;
    }
    if (gpt_check_file(shell, f, 0, allow_extra, err, errlen) != 0) goto fail;
    if (gpt_create_uninit(&m, &cfg, 0, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        goto fail;
    }
    if (read_params(m, f, err, errlen) != 0) goto fail;   // checked above, with allow_extra
    gpt_free(shell);
    st_close(f);
    *model = m;
    return 0;
fail:
    gpt_free(shell);
    gpt_free(m);
    st_close(f);
    return -1;
}
