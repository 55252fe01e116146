// kvcache.c: inference with a key/value cache. Each layer keeps the k (after
// rotation, for rope) and v of every position fed so far, so a new token
// costs one position's work: its own q, k, v, and attention over the cache.
// The maths is the forward pass of reference.c restricted to the last
// position, its linear products on the model's engine:
// embedding (+ P[pos]), then per layer LN1, c_attn, rope at pos, attention
// to positions 0..pos with the distance bias bias[h][pos-j], c_proj,
// residual, LN2, MLP, residual; then LN_f and the tied head (LN and the MLP's
// activation as the block says: block_norm_forward, block_act_forward).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt_internal.h"
#include "model/layers.h"

struct KVCache {
    const GPT *model;
    int max_len, len;
    PosCtx pos;            // the scheme's tables for max_len positions
    float *k, *v;          // (L, max_len, C)
    float *x, *ln;         // (C) residual stream, LN output
    float *qkv;            // (3C)
    float *atty, *tmp;     // (C)
    float *fch, *fch_act;  // (FC), (F): c_fc's output, the activation's
    float *scores;         // (max_len)
    float *bias;           // (H, max_len) distance-bias table
};

// The floats of k and v, (L, max_len, C) each, and of the rest: x ln qkv
// atty tmp (7 C), fch (FC), fch_act (F), scores (max_len), bias (H, max_len).
static size_t kv_floats(const GPTConfig *c, int max_len) { return (size_t)c->n_layer * max_len * c->d_model; }
static size_t rest_floats(const GPTConfig *c, int max_len) {
    return (size_t)c->d_model * 7 + gpt_mlp_fc_width(c) + gpt_mlp_hidden(c) + (size_t)max_len * (1 + c->n_head);
}

size_t kv_cache_bytes(const GPTConfig *cfg, int max_len) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);   // rope_dims, which sizes rope's tables
    return sizeof(KVCache) + (2 * kv_floats(&c, max_len) + rest_floats(&c, max_len)) * sizeof(float) +
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
    KVCache *kv = calloc(1, sizeof(KVCache));
    if (!kv) { snprintf(err, errlen, "out of memory for the KV cache"); return -1; }
    size_t C = c->d_model, F = gpt_mlp_hidden(c), FC = gpt_mlp_fc_width(c);
    kv->model = m;
    kv->max_len = max_len;
    kv->k = malloc(kv_floats(c, max_len) * sizeof(float));
    kv->v = malloc(kv_floats(c, max_len) * sizeof(float));
    kv->x = malloc(rest_floats(c, max_len) * sizeof(float));
    if (!kv->k || !kv->v || !kv->x) {
        snprintf(err, errlen, "out of memory for a KV cache of %d positions", max_len);
        kv_cache_free(kv);
        return -1;
    }
    kv->ln = kv->x + C;
    kv->qkv = kv->ln + C;
    kv->atty = kv->qkv + 3 * C;
    kv->tmp = kv->atty + C;
    kv->fch = kv->tmp + C;
    kv->fch_act = kv->fch + FC;
    kv->scores = kv->fch_act + F;
    kv->bias = kv->scores + max_len;
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
    free(kv->x);
    free(kv);
}

int kv_cache_len(const KVCache *kv) { return kv->len; }
void kv_cache_reset(KVCache *kv) { kv->len = 0; }

// Attention of the single query of position pos over the cached keys 0..pos,
// head by head: reference.c's attention row for the newest position.
// q (C), keys/values (pos+1, C) -> kv->atty (C)
static void attend_one(KVCache *kv, const float *q, const float *keys, const float *values, int pos) {
    const GPTConfig *c = &kv->model->cfg;
    int C = c->d_model, H = c->n_head, D = C / H, n = pos + 1;
    float scale = 1.0f / sqrtf((float)D);
    int has_bias = kv->model->pos->bias_fill != NULL;
    for (int h = 0; h < H; h++)
        attention_row(kv->atty + h * D, kv->scores, q + h * D, keys + h * D, values + h * D, (size_t)C,
                      has_bias ? kv->bias + (size_t)h * n : NULL, pos, D, scale);
}

int gpt_decode_step(GPT *m, KVCache *kv, int token, float *logits, char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    int C = c->d_model, F = gpt_mlp_hidden(c), FC = gpt_mlp_fc_width(c), pos = kv->len;
    if (kv->model != m) { snprintf(err, errlen, "decode: the KV cache belongs to another model"); return -1; }
    if (pos >= kv->max_len) { snprintf(err, errlen, "decode: the KV cache is full (%d positions)", kv->max_len); return -1; }
    if (token < 0 || token >= c->vocab_size) {
        snprintf(err, errlen, "decode: token %d is outside the vocabulary (%d)", token, c->vocab_size);
        return -1;
    }
    Engine *e = m->engine;
    float mean, rstd;
    // x = wte[token] (+ P[pos])
    memcpy(kv->x, m->p.wte + (size_t)token * C, (size_t)C * sizeof(float));
    if (m->pos->embed_forward) m->pos->embed_forward(&kv->pos, kv->x, 1, 1, pos);
    if (m->pos->bias_fill) m->pos->bias_fill(&kv->pos, kv->bias, pos + 1);
    for (int l = 0; l < c->n_layer; l++) {
        const LayerTensors *w = &m->p.h[l];
        float *keys = kv->k + (size_t)l * kv->max_len * C, *values = kv->v + (size_t)l * kv->max_len * C;
        block_norm_forward(c, kv->ln, &mean, &rstd, kv->x, w->ln_1_w, w->ln_1_b, 1);
        e->linear_forward(e, kv->qkv, kv->ln, w->c_attn_w, w->c_attn_b, 1, C, 3 * C);
        if (m->pos->qk_forward) m->pos->qk_forward(&kv->pos, kv->qkv, 1, 1, pos);
        memcpy(keys + (size_t)pos * C, kv->qkv + C, (size_t)C * sizeof(float));
        memcpy(values + (size_t)pos * C, kv->qkv + 2 * C, (size_t)C * sizeof(float));
        attend_one(kv, kv->qkv, keys, values, pos);
        e->linear_forward(e, kv->tmp, kv->atty, w->attn_proj_w, w->attn_proj_b, 1, C, C);
        for (int i = 0; i < C; i++) kv->x[i] += kv->tmp[i];
        block_norm_forward(c, kv->ln, &mean, &rstd, kv->x, w->ln_2_w, w->ln_2_b, 1);
        e->linear_forward(e, kv->fch, kv->ln, w->c_fc_w, w->c_fc_b, 1, C, FC);
        block_act_forward(c, kv->fch_act, kv->fch, 1);
        e->linear_forward(e, kv->tmp, kv->fch_act, w->mlp_proj_w, w->mlp_proj_b, 1, F, C);
        for (int i = 0; i < C; i++) kv->x[i] += kv->tmp[i];
    }
    block_norm_forward(c, kv->ln, &mean, &rstd, kv->x, m->p.ln_f_w, m->p.ln_f_b, 1);
    e->linear_forward(e, logits, kv->ln, m->p.wte, NULL, 1, C, c->vocab_size);
    if (engine_failed(e, err, errlen)) return -1;
    kv->len++;
    return 0;
}
