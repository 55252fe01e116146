// gpt.c: the whole model: creation, activation buffers, and the forward and
// backward passes that chain the layers of layers.h with the positional
// scheme's hooks (pos.h).
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "common/memory.h"
#include "model/gpt_internal.h"
#include "model/layers.h"

int gpt_describe(GPT **model, const GPTConfig *cfg, char *err, size_t errlen) {
    *model = NULL;
    GPTConfig c = *cfg;
    if (gpt_config_validate(&c, err, errlen) != 0) return -1;
    gpt_config_resolve(&c);
    GPT *m = calloc(1, sizeof(GPT));
    if (!m) { snprintf(err, errlen, "out of memory"); return -1; }
    m->cfg = c;
    m->pos = pos_scheme(c.pos);
    if (params_build_table(m, err, errlen) != 0) { gpt_free(m); return -1; }
    *model = m;
    return 0;
}

int gpt_set_matmul(GPT *m, GPTMatmul matmul, GPTPrecision precision, char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    int C = c->d_model, L = c->n_layer;
    LinearEngine *e = NULL;
    int *wid = malloc((size_t)4 * L * sizeof *wid);
    if (!wid) { snprintf(err, errlen, "out of memory"); return -1; }
    if (linear_engine_create(&e, matmul == GPT_MATMUL_ONEDNN ? MATMUL_ONEDNN : MATMUL_OPENBLAS,
                             precision == GPT_BF16 ? PRECISION_BF16 : PRECISION_FP32, err, errlen) != 0) {
        free(wid);
        return -1;
    }
    int head = linear_engine_add_weight(e, m->p.wte, c->vocab_size, C, err, errlen), ok = head >= 0;
    for (int l = 0; ok && l < L; l++) {
        const LayerTensors *w = &m->p.h[l];
        ok = (wid[4 * l] = linear_engine_add_weight(e, w->c_attn_w, 3 * C, C, err, errlen)) >= 0 &&
             (wid[4 * l + 1] = linear_engine_add_weight(e, w->attn_proj_w, C, C, err, errlen)) >= 0 &&
             (wid[4 * l + 2] = linear_engine_add_weight(e, w->c_fc_w, 4 * C, C, err, errlen)) >= 0 &&
             (wid[4 * l + 3] = linear_engine_add_weight(e, w->mlp_proj_w, C, 4 * C, err, errlen)) >= 0;
    }
    AttentionEngine *attn = NULL;
    if (ok && matmul == GPT_MATMUL_ONEDNN)
        ok = attention_engine_create(&attn, precision == GPT_BF16, C, c->n_head, err, errlen) == 0;
    if (!ok) {
        linear_engine_free(e);
        free(wid);
        return -1;
    }
    linear_engine_free(m->linear);
    attention_engine_free(m->attn);
    free(m->wid_layer);
    m->linear = e;
    m->attn = attn;
    m->matmul = matmul;
    m->precision = precision;
    m->wid_head = head;
    m->wid_layer = wid;
    return 0;
}

const char *gpt_matmul_describe(GPT *m) {
    snprintf(m->matmul_desc, sizeof m->matmul_desc, "%s; attention's products on %s", linear_engine_describe(m->linear),
             m->attn ? "oneDNN" : "OpenBLAS");
    return m->matmul_desc;
}

size_t gpt_matmul_bytes(const GPT *m) {
    LinearEngineStats s;
    linear_engine_stats(m->linear, &s);
    return s.weight_copy_bytes + s.scratch_bytes + attention_engine_bytes(m->attn);
}

int gpt_set_attention_onednn(GPT *m, int on, char *err, size_t errlen) {
    if (!on) {
        attention_engine_free(m->attn);
        m->attn = NULL;
        return 0;
    }
    if (m->attn) return 0;
    if (m->matmul != GPT_MATMUL_ONEDNN) {
        snprintf(err, errlen, "attention on oneDNN needs the oneDNN matmul engine");
        return -1;
    }
    return attention_engine_create(&m->attn, m->precision == GPT_BF16, m->cfg.d_model, m->cfg.n_head, err, errlen);
}

int gpt_reconfigure(GPT *m, const GPTConfig *cfg, char *err, size_t errlen) {
    GPTConfig c = *cfg;
    const char *key;
    if (gpt_config_validate(&c, err, errlen) != 0) return -1;
    gpt_config_resolve(&c);
    if (gpt_config_diff(&c, &m->cfg, 1, &key) != 0) {
        snprintf(err, errlen, "%s cannot change for a trained model (only block_size and the rope scaling keys can)", key);
        return -1;
    }
    if (m->pos->max_pos_is_block && c.block_size != m->cfg.block_size) {
        snprintf(err, errlen, "pos=%s has one learned row per position: block_size cannot change (%d -> %d)",
                 pos_kind_name(c.pos), m->cfg.block_size, c.block_size);
        return -1;
    }
    // The tables cover as many positions as before (activations may be sized for T > block_size).
    int n_pos = m->pos_ctx.n_pos > c.block_size ? m->pos_ctx.n_pos : c.block_size;
    m->cfg = c;
    pos_ctx_free(&m->pos_ctx);
    if (pos_ctx_init(&m->pos_ctx, m->pos, &m->cfg, n_pos, err, errlen) != 0) return -1;
    for (int i = 0; i < m->n_pos_params; i++) {
        m->pos_ctx.param[i] = m->p.pos[i];
        m->pos_ctx.dparam[i] = m->g.pos[i];
    }
    return 0;
}
void gpt_params_changed(GPT *m) { linear_engine_weights_changed(m->linear); }

int gpt_create_uninit(GPT **model, const GPTConfig *cfg, char *err, size_t errlen) {
    if (gpt_describe(model, cfg, err, errlen) != 0) return -1;
    GPT *m = *model;
    *model = NULL;
    if (params_alloc(m, err, errlen) != 0 ||
        pos_ctx_init(&m->pos_ctx, m->pos, &m->cfg, m->cfg.block_size, err, errlen) != 0 ||
        gpt_set_matmul(m, GPT_MATMUL_OPENBLAS, GPT_FP32, err, errlen) != 0) {
        gpt_free(m);
        return -1;
    }
    for (int i = 0; i < m->n_pos_params; i++) {
        m->pos_ctx.param[i] = m->p.pos[i];
        m->pos_ctx.dparam[i] = m->g.pos[i];
    }
    *model = m;
    return 0;
}

int gpt_create(GPT **model, const GPTConfig *cfg, uint64_t seed, char *err, size_t errlen) {
    if (gpt_create_uninit(model, cfg, err, errlen) != 0) return -1;
    params_init(*model, seed);
    return 0;
}

void gpt_free(GPT *m) {
    if (!m) return;
    params_free(m);
    pos_ctx_free(&m->pos_ctx);
    linear_engine_free(m->linear);
    attention_engine_free(m->attn);
    free(m->wid_layer);
    free(m->acts.encoded);   // the one activation allocation starts here
    free(m->acts.tokens);
    free(m);
}

const GPTConfig *gpt_config(const GPT *m) { return &m->cfg; }
size_t gpt_num_params(const GPT *m) { return m->num_params; }
float *gpt_params(GPT *m) { return m->params; }
float *gpt_grads(GPT *m) { return m->grads; }
int gpt_param_entries(const GPT *m, const ParamEntry **entries) {
    *entries = m->entries;
    return m->n_entries;
}
const ParamEntry *gpt_find_param(const GPT *m, const char *name) {
    for (int i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0) return &m->entries[i];
    return NULL;
}
const float *gpt_logits(const GPT *m) { return m->acts.logits; }
const float *gpt_losses(const GPT *m) { return m->acts.losses; }
size_t gpt_activation_bytes(const GPT *m) { return m->acts.bytes; }
int gpt_max_positions(const GPT *m) { return m->pos->max_pos_is_block ? m->cfg.block_size : INT_MAX; }
void gpt_zero_grad(GPT *m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

int gpt_check_batch(const GPTConfig *c, int B, int T, char *err, size_t errlen) {
    if (B < 1 || T < 1) { snprintf(err, errlen, "batch size (%d) and sequence length (%d) must be >= 1", B, T); return -1; }
    const PosScheme *s = pos_scheme(c->pos);
    if (s && s->max_pos_is_block && T > c->block_size) {
        snprintf(err, errlen, "pos=%s cannot run sequences of %d tokens: block_size is %d",
                 pos_kind_name(c->pos), T, c->block_size);
        return -1;
    }
    // The widest activation row is max(V, 4C) floats; every index stays below 2^31.
    size_t widest = (size_t)c->vocab_size > (size_t)4 * c->d_model ? (size_t)c->vocab_size : (size_t)4 * c->d_model;
    if ((size_t)B * T > ((size_t)1 << 31) / widest) {
        snprintf(err, errlen, "batch (%d x %d) too large for the activation buffers (B*T*max(V, 4C) must stay "
                 "below 2^31)", B, T);
        return -1;
    }
    return 0;
}

// One allocation for every activation buffer, carved up by this table, plus
// the (B,T) token copies. The previous buffers are freed first, then the
// total is checked against the memory available, before the scheme's tables
// grow to T positions (at most T x C floats, no more than one (B,T,C)
// buffer) and before the buffers are allocated and zeroed.
int gpt_alloc_activations(GPT *m, int B, int T, char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    if (gpt_check_batch(c, B, T, err, errlen) != 0) return -1;
    Activations *a = &m->acts;
    free(a->encoded);
    free(a->tokens);
    memset(a, 0, sizeof *a);
    size_t L = c->n_layer, C = c->d_model, H = c->n_head, V = c->vocab_size;
    size_t BT = (size_t)B * T;
    int n_threads = omp_get_max_threads();
    struct { float **ptr; size_t n; } table[] = {
        {&a->encoded, BT * C},      {&a->ln1, L * BT * C},     {&a->ln1_mean, L * BT},
        {&a->ln1_rstd, L * BT},     {&a->qkv, L * BT * 3 * C}, {&a->atty, L * BT * C},
        {&a->att_lse, L * BT * H},  {&a->res2, L * BT * C},    {&a->ln2, L * BT * C},
        {&a->ln2_mean, L * BT},     {&a->ln2_rstd, L * BT},    {&a->fch, L * BT * 4 * C},
        {&a->fch_gelu, L * BT * 4 * C}, {&a->res3, L * BT * C}, {&a->lnf, BT * C},
        {&a->lnf_mean, BT},         {&a->lnf_rstd, BT},        {&a->logits, BT * V},
        {&a->ce_lse, BT},           {&a->losses, BT},          {&a->pos_bias, H * T},
        {&a->dres, BT * C},         {&a->dact, BT * C},      {&a->dqkv, BT * 3 * C},
        {&a->dhidden, BT * 4 * C},  {&a->dpos_bias, BT * H},   {&a->scratch, (size_t)n_threads * attention_scratch_floats(T)},
        {&a->proj_out, BT * C},
    };
    int n = (int)(sizeof table / sizeof table[0]);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (table[i].n + 15) / 16 * 16;   // 64-byte aligned slices
    size_t bytes = total * sizeof(float) + 2 * BT * sizeof(int);
    char what[96];
    snprintf(what, sizeof what, "activations for batch %d x %d tokens", B, T);
    if (mem_check(bytes, what, err, errlen) != 0) return -1;
    if (pos_ctx_ensure(&m->pos_ctx, m->pos, T > c->block_size ? T : c->block_size, err, errlen) != 0) return -1;
    float *base = aligned_alloc(64, total * sizeof(float));
    int *tokens = malloc(2 * BT * sizeof(int));
    if (!base || !tokens) {
        free(base);
        free(tokens);
        snprintf(err, errlen, "out of memory for activations (%.1f MB for B=%d, T=%d)",
                 total * 4.0 / 1e6, B, T);
        return -1;
    }
    memset(base, 0, total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < n; i++) { *table[i].ptr = base + off; off += (table[i].n + 15) / 16 * 16; }
    a->tokens = tokens;
    a->targets = tokens + BT;
    a->B_max = B;
    a->T_max = T;
    a->n_threads = n_threads;
    a->bytes = bytes;
    return 0;
}

// The buffers of one layer (per-layer slices have B_max*T_max rows).
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att_lse, *res2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *res3;
} LayerActs;

static LayerActs layer_acts(const GPT *m, int l) {
    const Activations *a = &m->acts;
    size_t S = (size_t)a->B_max * a->T_max, C = m->cfg.d_model, H = m->cfg.n_head;
    LayerActs la = {
        a->ln1 + l * S * C, a->ln1_mean + l * S, a->ln1_rstd + l * S, a->qkv + l * S * 3 * C,
        a->atty + l * S * C, a->att_lse + l * S * H, a->res2 + l * S * C,
        a->ln2 + l * S * C, a->ln2_mean + l * S, a->ln2_rstd + l * S, a->fch + l * S * 4 * C,
        a->fch_gelu + l * S * 4 * C, a->res3 + l * S * C,
    };
    return la;
}

int gpt_forward(GPT *m, const int *inputs, const int *targets, int B, int T, float *loss_out,
                char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    Activations *a = &m->acts;
    m->have_targets = 0;
    if (!a->encoded || B < 1 || T < 1 || B > a->B_max || T > a->T_max) {
        snprintf(err, errlen, "batch %dx%d does not fit the activations (%dx%d)", B, T, a->B_max, a->T_max);
        return -1;
    }
    int BT = B * T, C = c->d_model, H = c->n_head, V = c->vocab_size;
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
            snprintf(err, errlen, "token %d at index %d is outside the vocabulary (%d)",
                     inputs[i] < 0 || inputs[i] >= V ? inputs[i] : targets[i], i, V);
            return -1;
        }
    }
    memcpy(a->tokens, inputs, (size_t)BT * sizeof(int));
    if (targets) memcpy(a->targets, targets, (size_t)BT * sizeof(int));
    m->B = B;
    m->T = T;

    // x = wte[tok] (+ P[t])  (B,T,C)
    encoder_forward(a->encoded, a->tokens, m->p.wte, BT, C);
    if (m->pos->embed_forward) m->pos->embed_forward(&m->pos_ctx, a->encoded, B, T, 0);
    const float *bias = NULL;
    if (m->pos->bias_fill) { m->pos->bias_fill(&m->pos_ctx, a->pos_bias, T); bias = a->pos_bias; }

    const float *x = a->encoded;
    for (int l = 0; l < c->n_layer; l++) {
        const LayerTensors *w = &m->p.h[l];
        LayerActs la = layer_acts(m, l);
        // attention block: x + c_proj(attn(rot(c_attn(LN1(x)))))
        layernorm_forward(la.ln1, la.ln1_mean, la.ln1_rstd, x, w->ln_1_w, w->ln_1_b, BT, C);
        const int *wid = m->wid_layer + 4 * l;
        if (linear_forward(m->linear, wid[0], la.qkv, la.ln1, w->c_attn_b, BT) != 0) goto linear_failed;  // (B,T,3C)
        if (m->pos->qk_forward) m->pos->qk_forward(&m->pos_ctx, la.qkv, B, T, 0);
        if (!m->attn)
            attention_forward(la.atty, la.att_lse, la.qkv, bias, a->scratch, a->n_threads, B, T, C, H);
        else if (attention_engine_forward(m->attn, la.atty, la.att_lse, la.qkv, bias, a->n_threads, B, T) != 0)
            goto attention_failed;
        if (linear_forward(m->linear, wid[1], a->proj_out, la.atty, w->attn_proj_b, BT) != 0) goto linear_failed;
        residual_forward(la.res2, x, a->proj_out, (size_t)BT * C);
        // MLP block: x + c_proj(GELU(c_fc(LN2(x))))
        layernorm_forward(la.ln2, la.ln2_mean, la.ln2_rstd, la.res2, w->ln_2_w, w->ln_2_b, BT, C);
        if (linear_forward(m->linear, wid[2], la.fch, la.ln2, w->c_fc_b, BT) != 0) goto linear_failed;  // (B,T,4C)
        gelu_forward(la.fch_gelu, la.fch, (size_t)BT * 4 * C);
        if (linear_forward(m->linear, wid[3], a->proj_out, la.fch_gelu, w->mlp_proj_b, BT) != 0) goto linear_failed;
        residual_forward(la.res3, la.res2, a->proj_out, (size_t)BT * C);
        x = la.res3;
    }
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, m->p.ln_f_w, m->p.ln_f_b, BT, C);
    if (linear_forward(m->linear, m->wid_head, a->logits, a->lnf, NULL, BT) != 0) goto linear_failed;  // (B,T,V)
    if (!targets) return 0;
    double loss = crossentropy_forward(a->losses, a->ce_lse, a->logits, a->targets, BT, V);
    if (loss_out) *loss_out = (float)loss;
    m->have_targets = 1;
    return 0;
linear_failed:
    snprintf(err, errlen, "%s", linear_engine_error(m->linear));
    return -1;
attention_failed:
    snprintf(err, errlen, "%s", attention_engine_error(m->attn));
    return -1;
}

void gpt_set_grad_ready_hook(GPT *m, GradReadyFn fn, void *user) {
    m->grad_ready = fn;
    m->grad_ready_user = user;
}

// The flat-buffer range of layer l's 12 tensors (consecutive in the table, after wte and the scheme's).
static void layer_range(const GPT *m, int l, size_t *offset, size_t *count) {
    const ParamEntry *first = &m->entries[1 + m->n_pos_params + 12 * l], *last = first + 11;
    *offset = first->offset;
    *count = last->offset + last->numel - first->offset;
}

int gpt_backward(GPT *m, float loss_scale, char *err, size_t errlen) {
    if (!m->have_targets) {
        snprintf(err, errlen, "backward: the last forward had no targets (or was already backpropagated)");
        return -1;
    }
    const GPTConfig *c = &m->cfg;
    Activations *a = &m->acts;
    int B = m->B, T = m->T, BT = B * T, C = c->d_model, H = c->n_head, V = c->vocab_size;
    const float *bias = m->pos->bias_fill ? a->pos_bias : NULL;
    float *dbias = m->pos->bias_backward ? a->dpos_bias : NULL;
    if (dbias) memset(dbias, 0, (size_t)BT * H * sizeof(float));

    // loss = loss_scale * mean_n loss_n -> dlogits (in place), then the tied head
    crossentropy_backward(a->logits, a->ce_lse, a->targets, BT, V, loss_scale / BT);
    if (linear_backward(m->linear, m->wid_head, a->dact, m->g.wte, NULL, a->logits, a->lnf, BT) != 0)
        goto linear_failed;
    const float *x_last = c->n_layer > 0 ? layer_acts(m, c->n_layer - 1).res3 : a->encoded;
    memset(a->dres, 0, (size_t)BT * C * sizeof(float));
    layernorm_backward(a->dres, m->g.ln_f_w, m->g.ln_f_b, a->dact, x_last, m->p.ln_f_w,
                       a->lnf_mean, a->lnf_rstd, BT, C);

    // dres holds d(loss)/d(residual stream); each block adds its branch's input gradient
    for (int l = c->n_layer - 1; l >= 0; l--) {
        const LayerTensors *w = &m->p.h[l];
        LayerTensors *g = &m->g.h[l];
        LayerActs la = layer_acts(m, l);
        const float *x_in = l == 0 ? a->encoded : layer_acts(m, l - 1).res3;
        // MLP block
        const int *wid = m->wid_layer + 4 * l;
        if (linear_backward(m->linear, wid[3], a->dhidden, g->mlp_proj_w, g->mlp_proj_b, a->dres, la.fch_gelu, BT))
            goto linear_failed;
        gelu_backward(a->dhidden, la.fch, a->dhidden, (size_t)BT * 4 * C);
        if (linear_backward(m->linear, wid[2], a->dact, g->c_fc_w, g->c_fc_b, a->dhidden, la.ln2, BT))
            goto linear_failed;
        layernorm_backward(a->dres, g->ln_2_w, g->ln_2_b, a->dact, la.res2, w->ln_2_w,
                           la.ln2_mean, la.ln2_rstd, BT, C);
        // attention block
        if (linear_backward(m->linear, wid[1], a->dact, g->attn_proj_w, g->attn_proj_b, a->dres, la.atty, BT))
            goto linear_failed;
        if (!m->attn)
            attention_backward(a->dqkv, dbias, a->dact, la.qkv, la.att_lse, bias,
                               a->scratch, a->n_threads, B, T, C, H);
        else if (attention_engine_backward(m->attn, a->dqkv, dbias, a->dact, la.qkv, la.att_lse, bias,
                                           a->n_threads, B, T) != 0)
            goto attention_failed;
        if (m->pos->qk_backward) m->pos->qk_backward(&m->pos_ctx, a->dqkv, B, T);
        if (linear_backward(m->linear, wid[0], a->dact, g->c_attn_w, g->c_attn_b, a->dqkv, la.ln1, BT))
            goto linear_failed;
        layernorm_backward(a->dres, g->ln_1_w, g->ln_1_b, a->dact, x_in, w->ln_1_w,
                           la.ln1_mean, la.ln1_rstd, BT, C);
        if (m->grad_ready) {   // layer l's gradients are final
            size_t off, n;
            layer_range(m, l, &off, &n);
            m->grad_ready(m->grad_ready_user, off, n);
        }
    }
    if (dbias) m->pos->bias_backward(&m->pos_ctx, dbias, B, T);
    if (m->pos->embed_backward) m->pos->embed_backward(&m->pos_ctx, a->dres, B, T);
    encoder_backward(m->g.wte, a->dres, a->tokens, BT, C);
    if (m->grad_ready) {   // the rest: wte and the scheme's tensors before the layers, ln_f after them
        size_t first_layer, last_layer, n;
        layer_range(m, 0, &first_layer, &n);
        layer_range(m, c->n_layer - 1, &last_layer, &n);
        m->grad_ready(m->grad_ready_user, 0, first_layer);
        m->grad_ready(m->grad_ready_user, last_layer + n, m->num_params - last_layer - n);
    }
    m->have_targets = 0;   // the logits buffer now holds dlogits
    return 0;
linear_failed:
    m->have_targets = 0;
    snprintf(err, errlen, "%s", linear_engine_error(m->linear));
    return -1;
attention_failed:
    m->have_targets = 0;
    snprintf(err, errlen, "%s", attention_engine_error(m->attn));
    return -1;
}
