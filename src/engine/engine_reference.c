// engine_reference.c: the reference engine (`--matmul=reference`): the
// engine of engine.h in plain loops, fp32. A linear layer is the naive
// triple loop of its definition and attention runs one query row at a time,
// so every product of a step reads as its maths. It is slow, and it is what
// the fast engines (engine_openblas.c, engine_onednn.c) are checked against
// (tests/util_engine.h). Its one-row attention, attention_row, is also
// decoding's (reference.c's attention_cached_forward, for kvcache.c): a new
// position is one query row over the cache.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <omp.h>

#include "engine/engine_create.h"
#include "engine/engine_shared.h"

/* ---- linear layer (PyTorch nn.Linear: weight W (OC,C)) ---- */

// out (N,OC) = inp (N,C) W^T + b:  out[n,o] = b[o] + sum_k inp[n,k] W[o,k]
static void reference_linear_forward(Engine *e, float *out, const float *inp, const float *W, const float *b,
                                     int N, int C, int OC) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            const float *x = inp + (size_t)n * C, *w = W + (size_t)o * C;
            float y = b ? b[o] : 0.0f;
            for (int k = 0; k < C; k++) y += x[k] * w[k];
            out[(size_t)n * OC + o] = y;
        }
}

// dinp (N,C) = dout W:           dinp[n,k] = sum_o dout[n,o] W[o,k]
// dW (OC,C) += dout^T inp:      dW[o,k] += sum_n dout[n,o] inp[n,k]
// db (OC) += sum_n dout[n,:]    (a NULL dinp, dW or db is skipped)
static void reference_linear_backward(Engine *e, float *dinp, float *dW, float *db, const float *dout,
                                      const float *inp, const float *W, int N, int C, int OC) {
    if (dinp) {
        #pragma omp parallel for
        for (int n = 0; n < N; n++) {
            float *dx = dinp + (size_t)n * C;
            for (int k = 0; k < C; k++) dx[k] = 0.0f;
            for (int o = 0; o < OC; o++) {
                float g = dout[(size_t)n * OC + o];
                const float *w = W + (size_t)o * C;
                for (int k = 0; k < C; k++) dx[k] += g * w[k];
            }
        }
    }
    #pragma omp parallel for
    for (int o = 0; o < OC; o++)
        for (int n = 0; n < N; n++) {
            float g = dout[(size_t)n * OC + o];
            const float *x = inp + (size_t)n * C;
            if (dW)
                for (int k = 0; k < C; k++) dW[(size_t)o * C + k] += g * x[k];
            if (db) db[o] += g;
        }
}

/* ---- causal multi-head attention ----
 *
 * For query i and key j <= i of head h (D = C/H, scale = 1/sqrt(D)):
 *   s_ij = scale q_i.k_j + bias[h][i-j]             (bias: t5, alibi; else 0)
 *   p_ij = softmax_j(s_ij) = exp(s_ij - lse_i),     lse_i = log sum_j exp(s_ij)
 *   y_i  = sum_j p_ij v_j
 * Backward, with dy_i given:
 *   dp_ij = dy_i.v_j,   ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij')
 *   dq_i  = scale sum_j ds_ij k_j,   dk_j += scale ds_ij q_i,   dv_j += p_ij dy_i
 *   dbias[h][i-j] += ds_ij
 * q, k and v are read where c_attn wrote them: in qkv (B,T,3C), head h of q
 * is columns h*D..h*D+D-1, of k the same plus C, of v plus 2C. The forward
 * keeps only lse per row; backward recomputes p from it. */

// One query row i over keys 0..i (engine_shared.h): the three lines of the maths above.
float attention_row(float *y, float *p, const float *q, const float *k, const float *v, size_t ld,
                    const float *bias_h, int i, int D, float scale) {
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j <= i; j++) {   // scores, and their max for a stable exp
        const float *kj = k + (size_t)j * ld;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q[d] * kj[d];
        p[j] = dot * scale;
        if (bias_h) p[j] += bias_h[i - j];
        if (p[j] > mx) mx = p[j];
    }
    for (int j = 0; j <= i; j++) { p[j] = expf(p[j] - mx); sum += p[j]; }
    for (int d = 0; d < D; d++) y[d] = 0.0f;
    for (int j = 0; j <= i; j++) {
        const float *vj = v + (size_t)j * ld;
        p[j] = p[j] / sum;
        for (int d = 0; d < D; d++) y[d] += p[j] * vj[d];
    }
    return mx + logf(sum);
}

typedef struct {
    Engine base;
    float *scratch;          // per thread: two rows of T floats (p, then dp)
    size_t scratch_bytes;
    int scratch_T, scratch_threads;   // what it is sized for
} ReferenceEngine;

// Two rows of T floats per thread.
static size_t reference_scratch_bytes(int T, int n_threads) { return (size_t)n_threads * 2 * T * sizeof(float); }

// The scratch for sequences of length T on the current thread count, made
// at the first call of a longer T (or of more threads): NULL (recorded) if
// out of memory. A step of the same shape only reads it.
static float *reference_scratch(Engine *e, int T) {
    ReferenceEngine *r = (ReferenceEngine *)e;
    int n_threads = omp_get_max_threads();
    if (T <= r->scratch_T && n_threads <= r->scratch_threads) return r->scratch;
    size_t bytes = reference_scratch_bytes(T, n_threads);
    if (grow_buffer((void **)&r->scratch, &r->scratch_bytes, bytes) != 0) {
        engine_fail(e, "out of memory for the attention scratch (%zu bytes)", bytes);
        return NULL;
    }
    r->scratch_T = T;
    r->scratch_threads = n_threads;
    return r->scratch;
}

// qkv (B,T,3C), bias (H,T) or NULL -> out (B,T,C), lse (B,H,T)
static void reference_attention_forward(Engine *e, float *out, float *lse, const float *qkv, const float *bias,
                                        int B, int T, int C, int H) {
    float *scratch = reference_scratch(e, T);
    if (!scratch) return;
    const int D = C / H;
    const float scale = 1.0f / sqrtf((float)D);
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        float *p = scratch + (size_t)omp_get_thread_num() * 2 * T;
        const float *q = qkv + (size_t)b * T * 3 * C + h * D, *k = q + C, *v = q + 2 * C;
        const float *bias_h = bias ? bias + (size_t)h * T : NULL;
        for (int i = 0; i < T; i++)
            lse[(size_t)bh * T + i] = attention_row(out + ((size_t)b * T + i) * C + h * D, p,
                                                    q + (size_t)i * 3 * C, k, v, 3 * (size_t)C, bias_h, i, D, scale);
    }
}

// dout (B,T,C) -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (NULL: skipped); out not read
static void reference_attention_backward(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                                         const float *out, const float *lse, const float *bias, int B, int T, int C,
                                         int H) {
    float *scratch = reference_scratch(e, T);
    if (!scratch) return;
    const int D = C / H;
    const size_t ld = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)D);
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        float *p = scratch + (size_t)omp_get_thread_num() * 2 * T, *dp = p + T;
        const float *q = qkv + (size_t)b * T * ld + h * D, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + (size_t)b * T * ld + h * D, *dk = dq + C, *dv = dq + 2 * C;
        const float *bias_h = bias ? bias + (size_t)h * T : NULL;
        float *dbias_bh = dbias ? dbias + (size_t)bh * T : NULL;
        for (int t = 0; t < T; t++)   // dk, dv are sums over the queries that see them
            for (int d = 0; d < D; d++) dk[t * ld + d] = dv[t * ld + d] = 0.0f;
        for (int i = 0; i < T; i++) {
            const float *qi = q + i * ld, *dy = dout + ((size_t)b * T + i) * C + h * D;
            float *dqi = dq + i * ld, row_lse = lse[(size_t)bh * T + i], rho = 0.0f;
            for (int j = 0; j <= i; j++) {   // p_ij again, from lse; dp_ij = dy_i.v_j
                float s = 0.0f, g = 0.0f;
                for (int d = 0; d < D; d++) { s += qi[d] * k[j * ld + d]; g += dy[d] * v[j * ld + d]; }
                s *= scale;
                if (bias_h) s += bias_h[i - j];
                p[j] = expf(s - row_lse);
                dp[j] = g;
                rho += p[j] * dp[j];
            }
            for (int d = 0; d < D; d++) dqi[d] = 0.0f;
            for (int j = 0; j <= i; j++) {
                float ds = p[j] * (dp[j] - rho);
                if (dbias_bh) dbias_bh[i - j] += ds;
                for (int d = 0; d < D; d++) {
                    dqi[d] += scale * ds * k[j * ld + d];
                    dk[j * ld + d] += scale * ds * qi[d];
                    dv[j * ld + d] += p[j] * dy[d];
                }
            }
        }
    }
}

/* ---- the engine ---- */

static size_t reference_bytes(const Engine *e) { return ((const ReferenceEngine *)e)->scratch_bytes; }

size_t engine_reference_bytes_for(const EngineShapes *s, int n_threads) {
    return s->B > 0 ? grow_buffer_bytes(reference_scratch_bytes(s->T, n_threads)) : 0;
}

static void reference_free(Engine *e) {
    if (!e) return;
    free(((ReferenceEngine *)e)->scratch);
    free(e);
}

int engine_reference_create(Engine **out, char *err, size_t errlen) {
    *out = NULL;
    ReferenceEngine *r = calloc(1, sizeof *r);
    if (!r) { snprintf(err, errlen, "out of memory"); return -1; }
    r->base = (Engine){.linear_forward = reference_linear_forward, .linear_backward = reference_linear_backward,
                       .attention_forward = reference_attention_forward,
                       .attention_backward = reference_attention_backward,
                       .bytes = reference_bytes, .free = reference_free};
    snprintf(r->base.describe, sizeof r->base.describe,
             "reference fp32 (engine_reference.c: plain loops, a naive matmul and attention one query row at a time)");
    *out = &r->base;
    return 0;
}
