// weights_file.c: the model's weights file, a safetensors file (names,
// shapes and __metadata__ as docs/FORMAT.md fixes them), and loading it back
// with every name, dtype and shape checked. The only code that writes or
// checks that format: training checkpoints and debug states are weights
// files with extra tensors and metadata, written and read through here.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt_internal.h"
#include "model/safetensors.h"

void gpt_metadata(const GPT *m, GPTMetadata *md) {
    const ModelKey *keys;
    int n_keys = gpt_model_keys(&keys);
    md->count = 0;
    md->items[md->count++] = (StMeta){"format", "pt"};   // read by tools that expect PyTorch's layout
    for (int k = 0; k < n_keys; k++) {
        gpt_config_get(&m->cfg, k, md->values[md->count], sizeof md->values[0]);
        md->items[md->count] = (StMeta){keys[k].name, md->values[md->count]};
        md->count++;
    }
}

int gpt_save_with(const GPT *m, const char *path, const StTensorOut *extra, int n_extra,
                  char *err, size_t errlen) {
    int n = m->n_entries + (n_extra > 0 ? n_extra : 0);
    StTensorOut *t = calloc((size_t)n, sizeof(StTensorOut));
    if (!t) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    for (int i = 0; i < m->n_entries; i++) {
        const ParamEntry *e = &m->entries[i];
        t[i].name = e->name;
        t[i].dtype = ST_F32;
        t[i].ndim = e->ndim;
        t[i].shape[0] = e->shape[0];
        t[i].shape[1] = e->shape[1];
        t[i].data = m->params + e->offset;
    }
    for (int i = 0; i < n_extra; i++) t[m->n_entries + i] = extra[i];
    GPTMetadata md;
    gpt_metadata(m, &md);
    int rc = st_write(path, t, n, md.items, md.count, err, errlen);
    free(t);
    return rc;
}

int gpt_save(const GPT *m, const char *path, char *err, size_t errlen) {
    return gpt_save_with(m, path, NULL, 0, err, errlen);
}

// Every key of the table from the metadata, parsed and range-checked by the
// table; a key written before it existed takes its if_absent value.
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

int gpt_load(GPT **model, const char *path, int allow_extra, char *err, size_t errlen) {
    *model = NULL;
    StFile *f;
    if (st_open(&f, path, err, errlen) != 0) return -1;
    GPTConfig cfg;
    GPT *m = NULL;
    if (gpt_config_from_file(f, &cfg, err, errlen) != 0) goto fail;
    char msg[256];
    if (gpt_create_uninit(&m, &cfg, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        goto fail;
    }
    for (int i = 0; i < m->n_entries; i++) {
        const ParamEntry *e = &m->entries[i];
        const StTensor *t = st_find(f, e->name);
        if (!t) { snprintf(err, errlen, "%s: missing tensor %s", path, e->name); goto fail; }
        if (t->dtype != ST_F32) {
            snprintf(err, errlen, "%s: tensor %s has dtype %s, expected F32", path, e->name, st_dtype_name(t->dtype));
            goto fail;
        }
        int64_t want[2] = {e->shape[0], e->shape[1]};
        if (t->ndim != e->ndim || t->shape[0] != want[0] || (e->ndim == 2 && t->shape[1] != want[1])) {
            char got_s[96], want_s[96];
            format_shape(got_s, sizeof got_s, t->ndim, t->shape);
            format_shape(want_s, sizeof want_s, e->ndim, want);
            snprintf(err, errlen, "%s: tensor %s has shape %s, expected %s", path, e->name, got_s, want_s);
            goto fail;
        }
        memcpy(m->params + e->offset, t->data, e->numel * sizeof(float));
    }
    if (!allow_extra) {
        for (int i = 0; i < st_num_tensors(f); i++) {
            const char *name = st_tensor_at(f, i)->name;
            if (!gpt_find_param(m, name)) {
                snprintf(err, errlen, "%s: unexpected tensor %s (not a parameter of pos=%s)", path, name,
                         pos_kind_name(cfg.pos));
                goto fail;
            }
        }
    }
    st_close(f);
    *model = m;
    return 0;
fail:
    gpt_free(m);
    st_close(f);
    return -1;
}
