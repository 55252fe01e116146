// checkpoint_io.c: the model's weights as the safetensors file of the
// contract (names, shapes, __metadata__), and loading such a file back with
// every name, dtype and shape checked.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt_internal.h"
#include "model/safetensors.h"

void gpt_metadata(const GPT *m, GPTMetadata *md) {
    const GPTConfig *c = &m->cfg;
    static const char *const keys[GPT_META_COUNT] = {
        "format", "pos", "n_layer", "n_head", "d_model", "vocab_size", "block_size",
        "rope_base", "rope_dims", "t5_num_buckets", "t5_max_distance", "sinusoidal_scale"};
    snprintf(md->values[0], sizeof md->values[0], "pt");
    snprintf(md->values[1], sizeof md->values[1], "%s", pos_kind_name(c->pos));
    int ints[] = {c->n_layer, c->n_head, c->d_model, c->vocab_size, c->block_size};
    for (int i = 0; i < 5; i++) snprintf(md->values[2 + i], sizeof md->values[0], "%d", ints[i]);
    snprintf(md->values[7], sizeof md->values[0], "%.9g", (double)c->rope_base);
    snprintf(md->values[8], sizeof md->values[0], "%d", c->rope_dims);
    snprintf(md->values[9], sizeof md->values[0], "%d", c->t5_num_buckets);
    snprintf(md->values[10], sizeof md->values[0], "%d", c->t5_max_distance);
    snprintf(md->values[11], sizeof md->values[0], "%.9g", (double)c->sinusoidal_scale);
    for (int i = 0; i < GPT_META_COUNT; i++) {
        md->items[i].key = keys[i];
        md->items[i].value = md->values[i];
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
    int rc = st_write(path, t, n, md.items, GPT_META_COUNT, err, errlen);
    free(t);
    return rc;
}

int gpt_save(const GPT *m, const char *path, char *err, size_t errlen) {
    return gpt_save_with(m, path, NULL, 0, err, errlen);
}

// A whole decimal int, nothing else.
static int parse_int(const char *s, int *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

int gpt_config_from_file(const StFile *f, GPTConfig *c, char *err, size_t errlen) {
    const char *path = st_path(f);
    memset(c, 0, sizeof *c);
    const char *pos = st_meta(f, "pos");
    if (!pos) { snprintf(err, errlen, "%s: metadata lacks key pos", path); return -1; }
    if (pos_kind_from_name(pos, &c->pos) != 0) {
        snprintf(err, errlen, "%s: metadata pos=%s is not a known scheme", path, pos);
        return -1;
    }
    struct { const char *key; int *dst; } ints[] = {
        {"n_layer", &c->n_layer}, {"n_head", &c->n_head}, {"d_model", &c->d_model},
        {"vocab_size", &c->vocab_size}, {"block_size", &c->block_size}, {"rope_dims", &c->rope_dims},
        {"t5_num_buckets", &c->t5_num_buckets}, {"t5_max_distance", &c->t5_max_distance},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const char *v = st_meta(f, ints[i].key);
        if (!v) { snprintf(err, errlen, "%s: metadata lacks key %s", path, ints[i].key); return -1; }
        if (parse_int(v, ints[i].dst) != 0) {
            snprintf(err, errlen, "%s: metadata %s=%s is not an integer", path, ints[i].key, v);
            return -1;
        }
    }
    const char *base = st_meta(f, "rope_base");
    char *end;
    if (!base) { snprintf(err, errlen, "%s: metadata lacks key rope_base", path); return -1; }
    c->rope_base = strtof(base, &end);
    if (!*base || *end) { snprintf(err, errlen, "%s: metadata rope_base=%s is not a number", path, base); return -1; }
    // Files written before the key existed hold unscaled sinusoidal tables.
    const char *scale = st_meta(f, "sinusoidal_scale");
    c->sinusoidal_scale = 1.0f;
    if (scale) {
        c->sinusoidal_scale = strtof(scale, &end);
        if (!*scale || *end) {
            snprintf(err, errlen, "%s: metadata sinusoidal_scale=%s is not a number", path, scale);
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
