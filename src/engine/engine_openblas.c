// engine_openblas.c: the engine of engine.h on OpenBLAS: every product one
// cblas_sgemm call, row-major, transposes as sgemm flags, never copies. fp32.
//
// Linear layers (PyTorch nn.Linear, W (OC,C)):
//   forward:  out (N,OC)  = inp (N,C) . W^T (C,OC) + b
//   backward: dinp (N,C)  = dout (N,OC) . W (OC,C)
//             dW (OC,C)  += dout^T (OC,N) . inp (N,C)
//             db (OC)    += sum_n dout[n,:]
// Threads: each product is split into slices of SLICE_ROWS rows, dealt to
// the OpenMP threads in order, and each thread runs a single-threaded sgemm
// per slice (OpenBLAS's OpenMP build runs a call made inside a parallel
// region on the calling thread). The forward and dinp are split by rows n,
// dW and db by output rows o, so every slice is a whole, independent
// product: no two threads write the same element and nobody waits for
// anybody until the region ends. The slices are the same whatever the
// thread count: OpenBLAS's kernels round an element differently with the
// shape of the call (Haswell's do, for a row split at any multiple of 16),
// so slicing per thread would make the bits depend on the thread count. The
// alternative, one sgemm call on all threads, makes OpenBLAS partition the
// product itself and synchronise its threads inside every call (they wait
// with sched_yield), which is slower at these shapes (docs/PERFORMANCE.md
// has the measurement). Slicing also lets the bias copy and the bias
// gradient run in the same parallel region as the product, on the same rows.
//
// Attention: engine_reference.c's maths, one (batch, head) pair per task, as
// matrices per block of query rows I = i0..i1-1 (keys J = 0..i1-1, all a
// causal row of the block can see):
//   forward   S = scale Q_I K_J^T (+ bias),  P = softmax(S) masked,  Y_I = P V_J
//   backward  dP = dY_I V_J^T,  dS = P * (dP - rowsum(P * dP)),
//             dQ_I = scale dS K_J,  dK_J += scale dS^T Q_I,  dV_J += P^T dY_I
// Each product is one cblas_sgemm call on q, k, v where c_attn wrote them:
// head h of q is the (T, D) matrix at qkv + h*D with row stride 3C. The
// calls run inside our parallel loop over (batch, head), so OpenBLAS runs
// each on the calling thread. The query rows are split into blocks of
// ATT_BLOCK so that only the diagonal blocks compute scores above the
// diagonal (then masked): for T = 256 that is 5/8 of the full T x T square,
// and the per-thread scratch is 2 x ATT_BLOCK x T floats instead of T x T.
// The loops between the products (attention_block_probs, _dscores) are
// engine/kernels.h's, which the oneDNN engine runs too. The fused attention (engine_openblas_create's
// fused_attention) cuts the keys into blocks too: attention_fused.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "engine/engine_create.h"
#include "engine/engine_shared.h"
#include "engine/kernels.h"

#ifndef SLICE_ROWS
#define SLICE_ROWS 64   // rows (or output rows) per sgemm call of a linear layer
#endif

typedef struct {
    Engine base;
    int fused;             // attention: 1 fused (key blocks, online softmax), 0 blocked (all keys at once)
    float *scratch;        // attention: per thread, a block of scores and one of their gradients
    size_t scratch_bytes;
    int scratch_T, scratch_threads;   // what it is sized for
} OpenblasEngine;

/* ---- linear layers ---- */

static void linear_forward(Engine *e, float *out, const float *inp, const float *W, const float *b,
                           int N, int C, int OC) {
    #pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += SLICE_ROWS) {
        int n1 = n0 + SLICE_ROWS < N ? n0 + SLICE_ROWS : N;
        float beta = 0.0f;
        if (b) {   // start every row from the bias, then let sgemm add inp W^T
            for (int n = n0; n < n1; n++) memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof(float));
            beta = 1.0f;
        }
        // out[n0:n1] (rows, OC) = inp[n0:n1] (rows, C) . W^T (C, OC) (+ bias)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n1 - n0, OC, C,
                    1.0f, inp + (size_t)n0 * C, C, W, C, beta, out + (size_t)n0 * OC, OC);
    }
}

static void linear_backward(Engine *e, float *dinp, float *dW, float *db, const float *dout, const float *inp,
                            const float *W, int N, int C, int OC) {
    #pragma omp parallel
    {
        // dinp[n0:n1] (rows, C) = dout[n0:n1] (rows, OC) . W (OC, C)
        if (dinp) {
            #pragma omp for schedule(static) nowait
            for (int n0 = 0; n0 < N; n0 += SLICE_ROWS) {
                int n1 = n0 + SLICE_ROWS < N ? n0 + SLICE_ROWS : N;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n1 - n0, C, OC,
                            1.0f, dout + (size_t)n0 * OC, OC, W, C, 0.0f, dinp + (size_t)n0 * C, C);
            }
        }
        #pragma omp for schedule(static)
        for (int o0 = 0; o0 < OC; o0 += SLICE_ROWS) {
            int o1 = o0 + SLICE_ROWS < OC ? o0 + SLICE_ROWS : OC;
            // dW[o0:o1] (outs, C) += dout[:, o0:o1]^T (outs, N) . inp (N, C)
            if (dW)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, C, N,
                            1.0f, dout + o0, OC, inp, C, 1.0f, dW + (size_t)o0 * C, C);
            // db[o0:o1] += column sums of dout, rows added in order
            if (db) bias_grad_columns(db, NULL, dout, N, OC, o0, o1);
        }
    }
}

/* ---- attention ---- */

// One thread's scratch floats for the engine's attention.
static size_t thread_scratch_floats(int fused, int T) {
    return fused ? attention_fused_scratch_floats(T) : attention_scratch_floats(T);
}

// Scores of query rows i0..i0+rows-1 against keys 0..keys-1 into s (rows, keys);
// q and k are (T, D) head matrices with row stride ld: the product, then
// attention_block_probs.
static void att_probs(float *s, const float *q, const float *k, size_t ld, const float *bias_h,
                      const float *lse_in, float *lse_out, int i0, int rows, int keys, int D, float scale) {
    // S (rows, keys) = scale Q_I K_J^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, scale, q + i0 * ld, ld, k, ld,
                0.0f, s, keys);
    attention_block_probs(s, i0, rows, keys, bias_h, lse_in, lse_out);
}

// The task of one (batch, head) pair, run by the calling thread (its scratch: scratch_ready's).
static AttHead att_head(const OpenblasEngine *ob, int bh, const float *qkv, const float *bias, int T, int C, int H) {
    AttHead a;
    int b = bh / H, h = bh % H;
    a.D = C / H;
    a.nb = attention_block_rows(T);
    a.C3 = 3 * (size_t)C;
    a.scale = 1.0f / sqrtf((float)a.D);
    a.qkv_off = (size_t)b * T * a.C3 + (size_t)h * a.D;
    a.out_off = (size_t)b * T * C + (size_t)h * a.D;
    a.lse_off = (size_t)bh * T;
    a.q = qkv + a.qkv_off;
    a.k = a.q + C;
    a.v = a.q + 2 * C;
    a.bias_h = bias ? bias + (size_t)h * T : NULL;
    a.scratch = ob->scratch + (size_t)omp_get_thread_num() * thread_scratch_floats(ob->fused, T);
    return a;
}

// The scratch of n_threads threads for sequences of length T.
static size_t scratch_bytes(int fused, int T, int n_threads) {
    return (size_t)n_threads * thread_scratch_floats(fused, T) * sizeof(float);
}

// This engine's scratch for sequences of length T on the current thread
// count, made at the first call that needs more (a longer T, more threads):
// 0, or -1 (recorded) if out of memory. A step of the same shape only reads it.
static int scratch_ready(OpenblasEngine *ob, int T) {
    int n_threads = omp_get_max_threads();
    if (T <= ob->scratch_T && n_threads <= ob->scratch_threads) return 0;
    size_t bytes = scratch_bytes(ob->fused, T, n_threads);
    if (grow_buffer((void **)&ob->scratch, &ob->scratch_bytes, bytes) != 0) {
        engine_fail(&ob->base, "out of memory for the attention scratch (%zu bytes)", bytes);
        return -1;
    }
    ob->scratch_T = T;
    ob->scratch_threads = n_threads;
    return 0;
}

// One (batch, head) pair's attention, blocks of query rows against all their
// keys: q, k, v (T, D), bias row or NULL -> its columns of out (T, D of C), its lse (T)
static void head_forward(const AttHead *a, float *out, float *lse, int T, int C) {
    float *s = a->scratch;
    for (int i0 = 0; i0 < T; i0 += a->nb) {
        int rows = T - i0 < a->nb ? T - i0 : a->nb, keys = i0 + rows;
        att_probs(s, a->q, a->k, a->C3, a->bias_h, NULL, lse + a->lse_off, i0, rows, keys, a->D, a->scale);
        // Y_I (rows, D) = P (rows, keys) V_J (keys, D), written into out's head columns
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, a->D, keys, 1.0f, s, keys, a->v, a->C3,
                    0.0f, out + a->out_off + (size_t)i0 * C, C);
    }
}

// Its backward: dout's columns (T, D of C) -> its columns of dqkv (overwritten), its
// dbias row (T) += (if non-NULL)
static void head_backward(const AttHead *a, float *dqkv, float *dbias, const float *dout, const float *lse, int T,
                          int C) {
    const int D = a->D;
    const size_t C3 = a->C3;
    float *p = a->scratch, *dp = p + (size_t)a->nb * T;   // probabilities, then their gradient
    float *dq = dqkv + a->qkv_off, *dk = dq + C, *dv = dq + 2 * C;
    const float *dy = dout + a->out_off;
    float *dbias_bh = dbias ? dbias + a->lse_off : NULL;
    // this task owns the dk, dv columns of head h in batch row b; they
    // are sums over query blocks, so they start from zero
    zero_rows(dk, C3, T, D);
    zero_rows(dv, C3, T, D);
    for (int i0 = 0; i0 < T; i0 += a->nb) {
        int rows = T - i0 < a->nb ? T - i0 : a->nb, keys = i0 + rows;
        att_probs(p, a->q, a->k, C3, a->bias_h, lse + a->lse_off, NULL, i0, rows, keys, D, a->scale);
        // dP (rows, keys) = dY_I (rows, D) V_J^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, 1.0f, dy + (size_t)i0 * C, C,
                    a->v, C3, 0.0f, dp, keys);
        // dS = P * (dP - rowsum(P * dP)), in place in dp
        attention_block_dscores(dp, p, i0, rows, keys, dbias_bh);
        // dQ_I (rows, D) = scale dS K_J  (each query row is in one block: overwrite)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, a->scale, dp, keys, a->k, C3,
                    0.0f, dq + (size_t)i0 * C3, C3);
        // dK_J (keys, D) += scale dS^T Q_I ;  dV_J (keys, D) += P^T dY_I
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, a->scale, dp, keys,
                    a->q + (size_t)i0 * C3, C3, 1.0f, dk, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, 1.0f, p, keys,
                    dy + (size_t)i0 * C, C, 1.0f, dv, C3);
    }
}

// The two passes: one (batch, head) pair a task, its head's attention blocked or fused.
// qkv (B,T,3C), bias (H,T) or NULL -> out (B,T,C), lse (B,H,T)
static void attention_forward(Engine *e, float *out, float *lse, const float *qkv, const float *bias,
                              int B, int T, int C, int H) {
    OpenblasEngine *ob = (OpenblasEngine *)e;
    if (scratch_ready(ob, T) != 0) return;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const AttHead a = att_head(ob, bh, qkv, bias, T, C, H);
        if (ob->fused) attention_fused_head_forward(&a, out, lse, T, C);
        else head_forward(&a, out, lse, T, C);
    }
}

// dout (B,T,C), out (B,T,C) the forward's -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (if non-NULL)
static void attention_backward(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                               const float *out, const float *lse, const float *bias, int B, int T, int C, int H) {
    OpenblasEngine *ob = (OpenblasEngine *)e;
    if (scratch_ready(ob, T) != 0) return;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const AttHead a = att_head(ob, bh, qkv, bias, T, C, H);
        if (ob->fused) attention_fused_head_backward(&a, dqkv, dbias, dout, out, lse, T, C);
        else head_backward(&a, dqkv, dbias, dout, lse, T, C);
    }
}

static size_t bytes(const Engine *e) { return ((const OpenblasEngine *)e)->scratch_bytes; }

size_t engine_openblas_bytes_for(const EngineShapes *s, int fused_attention, int n_threads) {
    return s->B > 0 ? grow_buffer_bytes(scratch_bytes(fused_attention, s->T, n_threads)) : 0;
}

static void engine_free(Engine *e) {
    if (!e) return;
    free(((OpenblasEngine *)e)->scratch);
    free(e);
}

int engine_openblas_create(Engine **out, int fused_attention, char *err, size_t errlen) {
    *out = NULL;
    OpenblasEngine *ob = calloc(1, sizeof *ob);
    if (!ob) { snprintf(err, errlen, "out of memory"); return -1; }
    ob->fused = fused_attention != 0;
    ob->base = (Engine){.linear_forward = linear_forward, .linear_backward = linear_backward,
                        .attention_forward = attention_forward, .attention_backward = attention_backward,
                        .bytes = bytes, .free = engine_free, .attention_reads_out = ob->fused};
    if (ob->fused)
        snprintf(ob->base.describe, sizeof ob->base.describe,
                 "openblas fp32 (cblas_sgemm: linear layers in slices of %d rows, attention fused: blocks of %d "
                 "query rows x %d keys, online softmax)", SLICE_ROWS, ATT_BLOCK, ATT_BLOCK);
    else
        snprintf(ob->base.describe, sizeof ob->base.describe,
                 "openblas fp32 (cblas_sgemm: linear layers in slices of %d rows, attention in blocks of %d query rows)",
                 SLICE_ROWS, ATT_BLOCK);
    *out = &ob->base;
    return 0;
}
