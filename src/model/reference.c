// reference.c: the whole model, forward and backward, in plain loops: the
// file to read first. A GPT-2-style pre-norm decoder (docs/MODEL.md,
// docs/FORMAT.md), with one positional scheme's hooks (pos.h):
//
//   x = wte[tokens] (+ P[t])                              embedding (+ learned/sinusoidal)
//   per layer l:
//     qkv = LN1(x) Wattn^T + battn                        (B,T,3C)
//     rotate q, k                                         rope
//     y = softmax(q k^T / sqrt(D) + bias[i-j], causal) v  per head (+ t5/alibi bias)
//     x = x + (y Wproj^T + bproj)
//     x = x + (GELU(LN2(x) Wfc^T + bfc) Wmlp^T + bmlp)    MLP, hidden width 4C
//   logits = LN_f(x) wte^T                                the head is tied to wte
//   loss = mean over positions of -log softmax(logits)[target]
//
// block=llama (the LLaMA family's block) changes two layers and drops every bias:
//   LN(x)  = RMSNorm: x / rms(x) * w                      no mean, no bias
//   MLP(x) = (silu(x Wgate^T) * (x Wup^T)) Wmlp^T         SwiGLU, hidden width F ~ 8C/3
// with [Wgate; Wup] stacked as c_fc's (2F,C) weight (its two layers: block_llama.c).
//
// and backward the same path in reverse. Shapes: B batch, T positions, C =
// d_model, H heads of D = C/H, V vocabulary, L layers; every tensor is fp32,
// row-major; N = B*T rows.
//
// The order of this file: the layers, each a *_forward / *_backward pair
// (embedding, LayerNorm, residual, GELU, cross-entropy; block=llama's RMSNorm
// and SwiGLU are in block_llama.c),
// then the model's two passes that chain them: model_forward (for training,
// and for decoding with a KV cache, where attention reads the earlier
// positions from the cache) and model_backward. (gpt.c's gpt_forward and
// gpt_backward check the inputs and run them.)
//
// The linear layers' and attention's products run on an engine (engine.h,
// where each is defined in one line of maths): the model calls
// e->linear_forward, e->attention_forward, ... The reference engine
// (`--matmul=reference`, engine_reference.c) computes them in plain loops,
// the fast ones (OpenBLAS, oneDNN) as matrix products. Everything else is
// this file's code, the same for every engine.
//
// Backward conventions: parameter gradients are added to (+=), so gradient
// accumulation over micro-batches is zero_grad then k forward/backward
// pairs; input gradients are "=" into a fresh buffer, or "+=" into the
// residual stream's gradient, as each function says.
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/engine_shared.h"   // attention_row, decoding's attention
#include "engine/kernels.h"
#include "model/gpt_internal.h"
#include "model/layers.h"

/* ---- embedding ---- */

// out[n,:] = wte[inp[n],:]:  inp (N) token ids, wte (V,C) -> out (N,C)
void encoder_forward(float *out, const int *inp, const float *wte, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)inp[n] * C, (size_t)C * sizeof(float));
}

// dwte[inp[n], c] += dout[n, c]. Two positions with the same token write the
// same row, so the loop is split over channel blocks instead of positions:
// each thread owns its columns and adds positions in order 0..N-1.
void encoder_backward(float *dwte, const float *dout, const int *inp, int N, int C) {
    enum { BLOCK = 32 };
    int n_blocks = (C + BLOCK - 1) / BLOCK;
    #pragma omp parallel for
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        for (int n = 0; n < N; n++) {
            float *drow = dwte + (size_t)inp[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) drow[c] += g[c];
        }
    }
}

/* ---- LayerNorm, over the channel dim (eps 1e-5, biased variance) ----
 *
 * Forward: xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps), y = w*xhat + b.
 * Backward (per row, g = dy * w):
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   dw += dy * xhat,  db += dy   (summed over rows)
 * Only mean and rstd are saved; xhat is recomputed from the input. The row
 * sums are LANE_SUMs (engine/kernels.h): 16 partial sums in a fixed order, which
 * vectorise and round the same on every CPU. */

// inp (N,C) -> out (N,C), mean (N), rstd (N); eps LN_EPS (layers.h)
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float m, v;
        LANE_SUM(m, c, C, x[c]);
        m /= C;
        LANE_SUM(v, c, C, (x[c] - m) * (x[c] - m));
        v /= C;
        float s = 1.0f / sqrtf(v + LN_EPS);
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

// dinp += ..., dweight += ..., dbias += ...
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    // 1. input gradient: rows are independent.
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float g_mean, gx_mean;
        LANE_SUM(g_mean, c, C, dy[c] * weight[c]);
        LANE_SUM(gx_mean, c, C, dy[c] * weight[c] * (x[c] - m) * s);
        g_mean /= C;
        gx_mean /= C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            dx[c] += s * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
        }
    }
    // 2. weight and bias gradients: a sum over rows, split over channel
    //    blocks so every thread owns its outputs (no races, fixed order).
    enum { BLOCK = 32 };
    int n_blocks = (C + BLOCK - 1) / BLOCK;
    #pragma omp parallel for
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        float dw[BLOCK] = {0}, db[BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            for (int c = c0; c < c1; c++) {
                dw[c - c0] += dy[c] * (x[c] - m) * s;
                db[c - c0] += dy[c];
            }
        }
        for (int c = c0; c < c1; c++) { dweight[c] += dw[c - c0]; dbias[c] += db[c - c0]; }
    }
}

/* ---- residual ---- */

// out = a + b. Its backward is the identity into both inputs: the model
// keeps one gradient of the residual stream (dres) and each branch adds its
// input's gradient into it (layernorm_backward's +=), so no pass is needed.
void residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* ---- GELU, tanh approximation (as GPT-2) ----
 *   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3*0.044715 x^2)
 * tanh is tanh_fast (engine/kernels.h): glibc's tanhf is a scalar call, and these
 * loops run over (B,T,4C) per layer, so a vectorised tanh makes them
 * memory-bound instead of call-bound. */

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)

// inp (n) -> out (n)
void gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_fast(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

// dinp = gelu'(inp) * dout (overwritten; dinp may be dout)
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanh_fast(GELU_SCALE * (x + 0.044715f * x * x * x));
        float d = 0.5f * (1.0f + th) +
                  0.5f * x * (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = d * dout[i];
    }
}

/* ---- softmax cross-entropy, fused ----
 *   loss_n = lse_n - logits[n, target_n],  lse_n = log sum_v exp(logits[n,v])
 *   d loss_n / d logits[n,v] = softmax(logits[n])_v - [v == target_n]
 * Forward keeps lse (N); backward rebuilds the softmax from it in place, so
 * no separate probability tensor is stored. Each pass touches every logit
 * once (N x V floats: 32 MB at B*T = 4096, V = 2048): the exponentials are
 * exp_fast, the row max an `omp simd` reduction (a max is the same in any
 * order) and the row sum a LANE_SUM (16 lanes in a fixed order, engine/kernels.h),
 * so the passes run in vector lanes. The row sum is float (a short sum of
 * positive terms per lane, then the lanes): its rounding error is far below
 * the float rounding of lse itself. */

// logits (N,V), targets (N) -> losses (N), lse (N); returns the losses' sum (in double)
double crossentropy_forward(float *losses, float *lse, const float *logits,
                            const int *targets, int N, int V) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float mx = z[0];
        #pragma omp simd reduction(max : mx)
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        float sum;
        LANE_SUM(sum, v, V, exp_fast(z[v] - mx));
        lse[n] = mx + logf(sum);
        losses[n] = lse[n] - z[targets[n]];
    }
    double total = 0.0;   // in a fixed order, in double
    for (int n = 0; n < N; n++) total += losses[n];
    return total;
}

// logits (N,V) := dlogits = scale * (softmax(logits) - onehot(target)), in place;
// scale is d(loss)/d(each position's loss) (loss_scale / N for a mean)
void crossentropy_backward(float *logits, const float *lse, const int *targets,
                           int N, int V, float scale) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
        float row_lse = lse[n];
        #pragma omp simd
        for (int v = 0; v < V; v++) z[v] = scale * exp_fast(z[v] - row_lse);
        z[targets[n]] -= scale;
    }
}

/* ---- the block's two choices (block = gpt2 | llama) ---- */

// LN(x) (N,C): LayerNorm (gpt2) or RMSNorm (llama: no bias, no mean)
void block_norm_forward(const GPTConfig *c, float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N) {
    if (c->block == BLOCK_LLAMA) rmsnorm_forward(out, rstd, inp, weight, N, c->d_model);
    else layernorm_forward(out, mean, rstd, inp, weight, bias, N, c->d_model);
}

void block_norm_backward(const GPTConfig *c, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, const float *mean, const float *rstd, int N) {
    if (c->block == BLOCK_LLAMA) rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, c->d_model);
    else layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, c->d_model);
}

// The MLP's activation: c_fc's output (N,FC) -> (N,F). GELU (gpt2) or SwiGLU (llama).
void block_act_forward(const GPTConfig *c, float *out, const float *fch, int N, int F) {
    if (c->block == BLOCK_LLAMA) swiglu_forward(out, fch, N, F);
    else gelu_forward(out, fch, (size_t)N * F);
}

// dout (N,F) -> dfch (N,FC) (overwritten; gpt2: dfch may be dout)
void block_act_backward(const GPTConfig *c, float *dfch, const float *fch, const float *dout, int N, int F) {
    if (c->block == BLOCK_LLAMA) swiglu_backward(dfch, fch, dout, N, F);
    else gelu_backward(dfch, fch, dout, (size_t)N * F);
}

/* ---- attention over a KV cache (decoding) ---- */

// Decoding's attention (model_forward with a KV cache kv, layer l: kvcache.c), one
// sequence: the T query rows of positions pos0..pos0+T-1 (pos0 = kv->len)
// over the cache. Their keys and values are appended to the layer's cache
// rows pos0.., then each row attends to the cache's positions 0..its own,
// one attention_row per row and head.
// qkv (T,3C), bias (H, pos0+T) or NULL -> out (T,C), lse (H,T)
static void attention_cached_forward(float *out, float *lse, const float *qkv, const float *bias, KVCache *kv, int l,
                                     int T, int C, int H) {
    const int D = C / H, pos0 = kv->len, n_keys = pos0 + T;
    const float scale = 1.0f / sqrtf((float)D);
    float *k = kv->k + (size_t)l * kv->max_len * C, *v = kv->v + (size_t)l * kv->max_len * C;   // (max_len, C)
    for (int t = 0; t < T; t++) {
        memcpy(k + (size_t)(pos0 + t) * C, qkv + (size_t)t * 3 * C + C, (size_t)C * sizeof(float));
        memcpy(v + (size_t)(pos0 + t) * C, qkv + (size_t)t * 3 * C + 2 * C, (size_t)C * sizeof(float));
    }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            lse[(size_t)h * T + t] = attention_row(out + (size_t)t * C + h * D, kv->scores,
                                                   qkv + (size_t)t * 3 * C + h * D, k + h * D, v + h * D,
                                                   (size_t)C, bias ? bias + (size_t)h * n_keys : NULL, pos0 + t, D,
                                                   scale);
}

/* ---- the model ---- */

// tokens (B,T), targets (B,T) or NULL -> a->logits (B,T,V), and with targets
// a->losses (B,T) and the mean loss (returned; 0 without). kv: decoding (gpt_internal.h).
double model_forward(GPT *m, const int *tokens, const int *targets, int B, int T, KVCache *kv) {
    const GPTConfig *c = &m->cfg;
    const PosScheme *pos = m->pos;
    const PosCtx *pc = kv ? &kv->pos : &m->pos_ctx;
    Activations *a = kv ? &kv->acts : &m->acts;
    Engine *e = m->engine;
    int pos0 = kv ? kv->len : 0;   // the positions: pos0..pos0+T-1
    int BT = B * T, C = c->d_model, H = c->n_head, V = c->vocab_size;
    int F = m->mlp_hidden, FC = m->mlp_fc_width;   // the MLP's hidden width, c_fc's outputs

    // x = wte[tok] (+ P[pos0+t])  (B,T,C); the distance-bias table bias[h][i-j] (H,pos0+T)
    encoder_forward(a->encoded, tokens, m->p.wte, BT, C);
    if (pos->embed_forward) pos->embed_forward(pc, a->encoded, B, T, pos0);
    if (pos->bias_fill) pos->bias_fill(pc, a->pos_bias, pos0 + T);

    for (int l = 0; l < c->n_layer; l++) {   // layer l: la.x (its input, B,T,C) -> la.res3
        const LayerTensors *w = &m->p.h[l];
        const LayerActs la = a->layer[l];
        // attention block: x + c_proj(attn(rot(c_attn(LN1(x)))))
        block_norm_forward(c, la.ln1, la.ln1_mean, la.ln1_rstd, la.x, w->ln_1_w, w->ln_1_b, BT);
        e->linear_forward(e, la.qkv, la.ln1, w->c_attn_w, w->c_attn_b, BT, C, 3 * C);    // (B,T,3C)
        if (pos->qk_forward) pos->qk_forward(pc, la.qkv, B, T, pos0);
        if (kv) attention_cached_forward(la.atty, la.att_lse, la.qkv, a->pos_bias, kv, l, T, C, H);   // (T,C)
        else e->attention_forward(e, la.atty, la.att_lse, la.qkv, a->pos_bias, B, T, C, H);     // (B,T,C)
        e->linear_forward(e, a->proj_out, la.atty, w->attn_proj_w, w->attn_proj_b, BT, C, C);
        residual_forward(la.res2, la.x, a->proj_out, (size_t)BT * C);
        // MLP block: x + c_proj(act(c_fc(LN2(x)))), act GELU or SwiGLU
        block_norm_forward(c, la.ln2, la.ln2_mean, la.ln2_rstd, la.res2, w->ln_2_w, w->ln_2_b, BT);
        e->linear_forward(e, la.fch, la.ln2, w->c_fc_w, w->c_fc_b, BT, C, FC);          // (B,T,FC)
        block_act_forward(c, la.fch_act, la.fch, BT, F);                                 // (B,T,F)
        e->linear_forward(e, a->proj_out, la.fch_act, w->mlp_proj_w, w->mlp_proj_b, BT, F, C);
        residual_forward(la.res3, la.res2, a->proj_out, (size_t)BT * C);
    }
    block_norm_forward(c, a->lnf, a->lnf_mean, a->lnf_rstd, a->layer[c->n_layer - 1].res3, m->p.ln_f_w,
                       m->p.ln_f_b, BT);
    // the tied head and the loss, a->logits_rows positions at a time: (rows,V) logits held at
    // once (all B*T of them where they fit, gpt_alloc_activations; not GPT-2's 50,257 x 8,192)
    double loss_sum = 0.0;
    for (int n0 = 0; n0 < BT; n0 += a->logits_rows) {
        int rows = BT - n0 < a->logits_rows ? BT - n0 : a->logits_rows;
        e->linear_forward(e, a->logits, a->lnf + (size_t)n0 * C, m->p.wte, NULL, rows, C, V);   // (rows,V)
        if (targets)
            loss_sum += crossentropy_forward(a->losses + n0, a->ce_lse + n0, a->logits, targets + n0, rows, V);
    }
    return loss_sum / BT;
}

// Adds the gradient of loss_scale * (the mean loss of the last model_forward, of (B,T)
// tokens and targets a->tokens, a->targets) into the gradients.
void model_backward(GPT *m, int B, int T, float loss_scale) {
    const GPTConfig *c = &m->cfg;
    const PosScheme *pos = m->pos;
    Activations *a = &m->acts;
    Engine *e = m->engine;
    int BT = B * T, C = c->d_model, H = c->n_head, V = c->vocab_size;
    int F = m->mlp_hidden, FC = m->mlp_fc_width;
    if (a->dpos_bias) memset(a->dpos_bias, 0, (size_t)BT * H * sizeof(float));

    // loss = loss_scale * mean_n loss_n -> dlogits (in place), then the tied head, a->logits_rows
    // positions at a time: a chunk's logits made again, unless one chunk holds them all
    for (int n0 = 0; n0 < BT; n0 += a->logits_rows) {
        int rows = BT - n0 < a->logits_rows ? BT - n0 : a->logits_rows;
        if (rows < BT) e->linear_forward(e, a->logits, a->lnf + (size_t)n0 * C, m->p.wte, NULL, rows, C, V);
        crossentropy_backward(a->logits, a->ce_lse + n0, a->targets + n0, rows, V, loss_scale / BT);
        e->linear_backward(e, a->dact + (size_t)n0 * C, m->g.wte, NULL, a->logits, a->lnf + (size_t)n0 * C,
                           m->p.wte, rows, C, V);
    }
    memset(a->dres, 0, (size_t)BT * C * sizeof(float));
    block_norm_backward(c, a->dres, m->g.ln_f_w, m->g.ln_f_b, a->dact, a->layer[c->n_layer - 1].res3, m->p.ln_f_w,
                        a->lnf_mean, a->lnf_rstd, BT);

    // dres holds d(loss)/d(residual stream); each block adds its branch's input gradient
    for (int l = c->n_layer - 1; l >= 0; l--) {
        const LayerTensors *w = &m->p.h[l];
        LayerTensors *g = &m->g.h[l];
        const LayerActs la = a->layer[l];
        // MLP block
        e->linear_backward(e, a->dact_out, g->mlp_proj_w, g->mlp_proj_b, a->dres, la.fch_act, w->mlp_proj_w,
                           BT, F, C);
        block_act_backward(c, a->dhidden, la.fch, a->dact_out, BT, F);
        e->linear_backward(e, a->dact, g->c_fc_w, g->c_fc_b, a->dhidden, la.ln2, w->c_fc_w, BT, C, FC);
        block_norm_backward(c, a->dres, g->ln_2_w, g->ln_2_b, a->dact, la.res2, w->ln_2_w,
                            la.ln2_mean, la.ln2_rstd, BT);
        // attention block
        e->linear_backward(e, a->dact, g->attn_proj_w, g->attn_proj_b, a->dres, la.atty, w->attn_proj_w,
                           BT, C, C);
        e->attention_backward(e, a->dqkv, a->dpos_bias, a->dact, la.qkv, la.atty, la.att_lse, a->pos_bias, B, T, C,
                              H);
        if (pos->qk_backward) pos->qk_backward(&m->pos_ctx, a->dqkv, B, T);
        e->linear_backward(e, a->dact, g->c_attn_w, g->c_attn_b, a->dqkv, la.ln1, w->c_attn_w, BT, C, 3 * C);
        block_norm_backward(c, a->dres, g->ln_1_w, g->ln_1_b, a->dact, la.x, w->ln_1_w,
                            la.ln1_mean, la.ln1_rstd, BT);
    }
    if (pos->bias_backward) pos->bias_backward(&m->pos_ctx, a->dpos_bias, B, T);
    if (pos->embed_backward) pos->embed_backward(&m->pos_ctx, a->dres, B, T);
    encoder_backward(m->g.wte, a->dres, a->tokens, BT, C);
}
