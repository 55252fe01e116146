// kvcache.c: inference with a key/value cache. Each layer keeps the k (after
// rotation, for rope) and v of every position fed so far, so a new token
// costs one position's work: its own q, k, v, and attention over the cache.
// Decoding a token is the model's forward (model_forward, reference.c) with
// T = 1 at position len: the same layers in the same order as training, but
// for attention, which reads the earlier positions' k and v from the cache
// (and appends the new position's).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "model/gpt_internal.h"

// The floats of k and v, (L, max_len, C) each, and of one row's forward:
// x ln qkv atty proj (7 C), fch (FC), fch_act (F), a norm's mean and rstd
// (2), att_lse (H), scores (max_len), the bias table (H, max_len).
static size_t kv_floats(const GPTConfig *c, int max_len) { return (size_t)c->n_layer * max_len * c->d_model; }
static size_t row_floats(const GPTConfig *c, int max_len) {
    return (size_t)c->d_model * 7 + gpt_mlp_fc_width(c) + gpt_mlp_hidden(c) + 2 + c->n_head +
           (size_t)max_len * (1 + c->n_head);
}
static size_t kv_struct_bytes(const GPTConfig *c) { return sizeof(KVCache) + (size_t)c->n_layer * sizeof(LayerActs); }

size_t kv_cache_bytes(const GPTConfig *cfg, int max_len) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);   // rope_dims, which sizes rope's tables
    return kv_struct_bytes(&c) + (2 * kv_floats(&c, max_len) + row_floats(&c, max_len)) * sizeof(float) +
           pos_tables_bytes(pos_scheme(c.pos), &c, max_len);
}

int kv_cache_create(KVCache **out, const GPT *m, int max_len, char *err, size_t errlen) {
    *out = NULL;
    const GPTConfig *c = &m->cfg;
    if (max_len < 1) { snprintf(err, errlen, "KV cache length (%d) must be >= 1", max_len); return -1; }
    if (max_len > gpt_max_positions(m)) {
        snprintf(err, errlen, "pos=%s cannot decode beyond block_size (%d), asked for %d positions",
                 pos_kind_name(c->pos), c->block_size, max_len);
        return -1;
    }
    KVCache *kv = calloc(1, kv_struct_bytes(c));
    if (!kv) { snprintf(err, errlen, "out of memory for the KV cache"); return -1; }
    size_t C = c->d_model, F = gpt_mlp_hidden(c), FC = gpt_mlp_fc_width(c), H = c->n_head;
    kv->model = m;
    kv->max_len = max_len;
    kv->k = malloc(kv_floats(c, max_len) * sizeof(float));
    kv->v = malloc(kv_floats(c, max_len) * sizeof(float));
    float *row = malloc(row_floats(c, max_len) * sizeof(float));
    kv->acts.encoded = row;   // the start of that allocation, freed through it
    if (!kv->k || !kv->v || !row) {
        snprintf(err, errlen, "out of memory for a KV cache of %d positions", max_len);
        kv_cache_free(kv);
        return -1;
    }
    // One row's buffers, the same for every layer: nothing is kept for a
    // backward. The residual stream x is every layer's input and output
    // (encoded, x, res2, res3), updated in place (a layer reads its input
    // before it writes its output, and residual_forward adds elementwise);
    // ln serves the three norms, which share their statistics' two floats.
    float *x = row, *ln = x + C, *qkv = ln + C, *atty = qkv + 3 * C, *proj = atty + C;
    float *fch = proj + C, *fch_act = fch + FC, *mean = fch_act + F, *rstd = mean + 1, *lse = rstd + 1;
    kv->scores = lse + H;
    Activations *a = &kv->acts;
    a->B_max = a->T_max = a->logits_rows = 1;
    a->layer = kv->layer;
    a->lnf = ln;
    a->lnf_mean = mean;
    a->lnf_rstd = rstd;
    a->proj_out = proj;
    a->pos_bias = m->pos->bias_fill ? kv->scores + max_len : NULL;   // (H, max_len)
    for (int l = 0; l < c->n_layer; l++)
        kv->layer[l] = (LayerActs){.x = x, .ln1 = ln, .ln1_mean = mean, .ln1_rstd = rstd, .qkv = qkv, .atty = atty,
                                   .att_lse = lse, .res2 = x, .ln2 = ln, .ln2_mean = mean, .ln2_rstd = rstd,
                                   .fch = fch, .fch_act = fch_act, .res3 = x};
    // Same config and parameters as the model, own tables, no gradients.
    if (pos_ctx_init(&kv->pos, m->pos, &m->cfg, max_len, err, errlen) != 0) {
        kv_cache_free(kv);
        return -1;
    }
    for (int i = 0; i < POS_MAX_PARAMS; i++) kv->pos.param[i] = m->pos_ctx.param[i];
    *out = kv;
    return 0;
}

void kv_cache_free(KVCache *kv) {
    if (!kv) return;
    pos_ctx_free(&kv->pos);
    free(kv->k);
    free(kv->v);
    free(kv->acts.encoded);
    free(kv);
}

int kv_cache_len(const KVCache *kv) { return kv->len; }

int gpt_decode_step(GPT *m, KVCache *kv, int token, float *logits, char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    if (kv->model != m) { snprintf(err, errlen, "decode: the KV cache belongs to another model"); return -1; }
    if (kv->len >= kv->max_len) {
        snprintf(err, errlen, "decode: the KV cache is full (%d positions)", kv->max_len);
        return -1;
    }
    if (token < 0 || token >= c->vocab_size) {
        snprintf(err, errlen, "decode: token %d is outside the vocabulary (%d)", token, c->vocab_size);
        return -1;
    }
    kv->acts.logits = logits;   // the head writes the caller's row
    model_forward(m, &token, NULL, 1, 1, kv);
    if (engine_failed(m->engine, err, errlen)) return -1;
    kv->len++;
    return 0;
}
