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
// Attention: reference.c's maths, one (batch, head) pair per task, as
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
// shared with the oneDNN engine. The fused attention (engine_openblas_create's
// fused_attention; "fused attention" below) cuts the keys into blocks too.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "engine/engine.h"
#include "engine/engine_shared.h"
#include "model/fastmath.h"
#include "model/lane_sum.h"

#ifndef SLICE_ROWS
#define SLICE_ROWS 64   // rows (or output rows) per sgemm call of a linear layer
#endif
#ifndef ATT_BLOCK
#define ATT_BLOCK 64   // query rows per block
#endif

typedef struct {
    Engine base;
    int fused;             // attention: 1 fused (key blocks, online softmax), 0 blocked (all keys at once)
    float *scratch;        // attention: per thread, a block of scores and one of their gradients
    size_t scratch_bytes;
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

int attention_block_rows(int T) { return T < ATT_BLOCK ? T : ATT_BLOCK; }

// Keys j0..j0+cols-1 of query row i: how many of them it sees (j <= i); at least 1 when j0 <= i.
static inline int visible_keys(int i, int j0, int cols) { return i - j0 + 1 < cols ? i - j0 + 1 : cols; }

void attention_row_dots(float *rho, const float *dy, const float *y, size_t ld, int rows, int D) {
    for (int r = 0; r < rows; r++) LANE_SUM(rho[r], d, D, dy[(size_t)r * ld + d] * y[(size_t)r * ld + d]);
}

void attention_key_block_probs(float *s, int i0, int rows, int j0, int cols, const float *bias_h,
                               const float *lse) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = visible_keys(i, j0, cols);
        float *row = s + (size_t)r * cols, row_lse = lse[i];
        if (bias_h)
            for (int j = 0; j < n; j++) row[j] += bias_h[i - j0 - j];
        for (int j = 0; j < n; j++) row[j] = exp_fast(row[j] - row_lse);
        for (int j = n; j < cols; j++) row[j] = 0.0f;   // causal mask
    }
}

void attention_block_probs(float *s, int i0, int rows, int keys, const float *bias_h,
                           const float *lse_in, float *lse_out) {
    if (!lse_out) {   // backward: P from the saved lse
        attention_key_block_probs(s, i0, rows, 0, keys, bias_h, lse_in);
        return;
    }
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = i + 1;   // keys 0..i are visible
        float *row = s + (size_t)r * keys;
        if (bias_h)
            for (int j = 0; j < n; j++) row[j] += bias_h[i - j];
        float mx = -INFINITY;
        #pragma omp simd reduction(max : mx)
        for (int j = 0; j < n; j++) mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < n; j++) row[j] = exp_fast(row[j] - mx);
        float sum;
        LANE_SUM(sum, j, n, row[j]);   // fixed order on every CPU (lane_sum.h)
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++) row[j] *= inv;
        lse_out[i] = mx + logf(sum);
        for (int j = n; j < keys; j++) row[j] = 0.0f;   // causal mask
    }
}

// Row i's keys j0..j0+cols-1, the first n of them visible: dS = P (dP - rho) in place, the rest 0.
static inline void dscores_row(float *dpr, const float *pr, int i, int j0, int n, int cols, float rho,
                               float *dbias_bh) {
    for (int j = 0; j < n; j++) dpr[j] = pr[j] * (dpr[j] - rho);
    for (int j = n; j < cols; j++) dpr[j] = 0.0f;
    if (dbias_bh)
        for (int j = 0; j < n; j++) dbias_bh[i - j0 - j] += dpr[j];
}

void attention_block_dscores(float *dp, const float *p, int i0, int rows, int keys, float *dbias_bh) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = i + 1;
        const float *pr = p + (size_t)r * keys;
        float *dpr = dp + (size_t)r * keys;
        float sum_pd;
        LANE_SUM(sum_pd, j, n, pr[j] * dpr[j]);
        dscores_row(dpr, pr, i, 0, n, keys, sum_pd, dbias_bh);
    }
}

void attention_key_block_dscores(float *dp, const float *p, int i0, int rows, int j0, int cols, const float *rho,
                                 float *dbias_bh) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r;
        dscores_row(dp + (size_t)r * cols, p + (size_t)r * cols, i, j0, visible_keys(i, j0, cols), cols, rho[r],
                    dbias_bh);
    }
}

// Online softmax (Milakov and Gimelshein 2018; FlashAttention): after key
// blocks 1..k, row i holds m_i = max_j s_ij, l_i = sum_j exp(s_ij - m_i) and
// y_i = sum_j exp(s_ij - m_i) v_j over their keys. A new block with max m'
// >= m_i scales the three sums' earlier terms by exp(m_i - m') (exactly 1,
// and skipped, when the max did not move) and adds its own. At the end y_i / l_i
// is the softmax's output and m_i + log l_i its lse.
void attention_online_probs(float *s, int i0, int rows, int j0, int cols, const float *bias_h, float *row_max,
                            float *row_sum, float *y, size_t ldy, int D) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = visible_keys(i, j0, cols);
        float *row = s + (size_t)r * cols;
        if (bias_h)
            for (int j = 0; j < n; j++) row[j] += bias_h[i - j0 - j];
        float mx = j0 == 0 ? -INFINITY : row_max[r];
        #pragma omp simd reduction(max : mx)
        for (int j = 0; j < n; j++) mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < n; j++) row[j] = exp_fast(row[j] - mx);
        for (int j = n; j < cols; j++) row[j] = 0.0f;   // causal mask
        float sum;
        LANE_SUM(sum, j, n, row[j]);   // fixed order on every CPU (lane_sum.h)
        if (j0 == 0) {
            row_sum[r] = sum;
        } else if (mx != row_max[r]) {
            float rescale = exp_fast(row_max[r] - mx);
            float *yr = y + (size_t)r * ldy;
            for (int d = 0; d < D; d++) yr[d] *= rescale;
            row_sum[r] = row_sum[r] * rescale + sum;
        } else {
            row_sum[r] += sum;
        }
        row_max[r] = mx;
    }
}

void attention_online_finish(float *y, size_t ldy, int D, int rows, const float *row_max, const float *row_sum,
                             float *lse) {
    for (int r = 0; r < rows; r++) {
        float inv = 1.0f / row_sum[r], *yr = y + (size_t)r * ldy;
        for (int d = 0; d < D; d++) yr[d] *= inv;
        lse[r] = row_max[r] + logf(row_sum[r]);
    }
}

size_t attention_scratch_floats(int T) { return 2 * (size_t)attention_block_rows(T) * T; }

size_t attention_fused_scratch_floats(int T) {
    size_t nb = (size_t)attention_block_rows(T);
    return 2 * nb * nb + 2 * nb;
}

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

// One (batch b, head h) pair's view of attention's tensors: its head's
// columns of the packed (B,T,3C) qkv (q there, k at +C, v at +2C, row stride
// 3C), its row of the distance bias, where its rows start in a (B,T,C) tensor
// and in the (B,H,T) lse, and this thread's scratch.
typedef struct {
    int D, nb;                // head dimension, query rows (and, fused, keys) per block
    size_t C3;                // qkv's row stride
    float scale;              // 1/sqrt(D)
    const float *q, *k, *v;   // (T, D) each, row stride C3
    const float *bias_h;      // (T) or NULL
    size_t qkv_off;           // head h of batch b in qkv (and dqkv)
    size_t out_off;           // head h of batch b in a (B,T,C) tensor
    size_t lse_off;           // (b, h) in a (B,H,T) tensor
    float *scratch;           // thread_scratch_floats floats of this thread
} AttHead;

static AttHead att_head(const OpenblasEngine *ob, int bh, float *scratch, const float *qkv, const float *bias, int T,
                        int C, int H) {
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
    a.scratch = scratch + (size_t)omp_get_thread_num() * thread_scratch_floats(ob->fused, T);
    return a;
}

// This engine's scratch for sequences of length T on the current thread
// count, grown at the first call that needs more; NULL (recorded) if out of memory.
static size_t scratch_bytes(int fused, int T, int n_threads) {
    return (size_t)n_threads * thread_scratch_floats(fused, T) * sizeof(float);
}

static float *scratch_for(OpenblasEngine *ob, int T) {
    size_t bytes = scratch_bytes(ob->fused, T, omp_get_max_threads());
    if (grow_buffer((void **)&ob->scratch, &ob->scratch_bytes, bytes) != 0) {
        engine_fail(&ob->base, "out of memory for the attention scratch (%zu bytes)", bytes);
        return NULL;
    }
    return ob->scratch;
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

/* ---- fused attention ----
 *
 * The same maths with the keys in blocks too: per query block I and key
 * block J <= I (ATT_BLOCK of each; only J = I, the diagonal block, has keys
 * above the diagonal), every product is (nb x nb) x (nb x D), and a thread's
 * scratch is two nb x nb blocks and two rows, whatever T.
 *   forward   S = scale Q_I K_J^T (+ bias), the online softmax's step
 *             (attention_online_probs: running max m, running sum l, Y_I
 *             rescaled), Y_I += P V_J; at the end Y_I /= l, lse = m + log l
 *   backward  rho_i = dY_i . Y_i once per query row (FlashAttention-2: equal
 *             to rowsum(P * dP) over all keys, which no key block sees whole);
 *             per key block P = exp(S - lse), dP = dY_I V_J^T,
 *             dS = P * (dP - rho), dQ_I += scale dS K_J,
 *             dK_J += scale dS^T Q_I, dV_J += P^T dY_I
 * Y_I's sums are kept in out itself (its rows belong to this task), dQ_I in
 * dqkv. The order of every sum is fixed by the loops, and one thread owns a
 * (batch, head) pair: the bits do not depend on the thread count. */

// One (batch, head) pair's fused forward: as head_forward, in query x key blocks
static void head_fused_forward(const AttHead *a, float *out, float *lse, int T, int C) {
    const int D = a->D, nb = a->nb;
    const size_t C3 = a->C3;
    float *s = a->scratch, *row_max = s + (size_t)nb * nb, *row_sum = row_max + nb;
    for (int i0 = 0; i0 < T; i0 += nb) {
        int rows = T - i0 < nb ? T - i0 : nb;
        const float *q_i = a->q + (size_t)i0 * C3;
        float *y = out + a->out_off + (size_t)i0 * C;   // Y_I (rows, D), row stride C
        for (int j0 = 0; j0 <= i0; j0 += nb) {
            int cols = j0 < i0 ? nb : rows;   // the diagonal block is rows x rows
            // S (rows, cols) = scale Q_I K_J^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, D, a->scale, q_i, C3,
                        a->k + (size_t)j0 * C3, C3, 0.0f, s, cols);
            attention_online_probs(s, i0, rows, j0, cols, a->bias_h, row_max, row_sum, y, C, D);
            // Y_I (rows, D) (+)= P (rows, cols) V_J (cols, D)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, cols, 1.0f, s, cols,
                        a->v + (size_t)j0 * C3, C3, j0 == 0 ? 0.0f : 1.0f, y, C);
        }
        attention_online_finish(y, C, D, rows, row_max, row_sum, lse + a->lse_off + i0);
    }
}

// Its backward, which reads the forward's output out (rho = rowsum(dY * Y))
static void head_fused_backward(const AttHead *a, float *dqkv, float *dbias, const float *dout, const float *out,
                                const float *lse, int T, int C) {
    const int D = a->D, nb = a->nb;
    const size_t C3 = a->C3;
    float *p = a->scratch, *dp = p + (size_t)nb * nb, *rho = dp + (size_t)nb * nb;
    float *dq = dqkv + a->qkv_off, *dk = dq + C, *dv = dq + 2 * C;
    float *dbias_bh = dbias ? dbias + a->lse_off : NULL;
    zero_rows(dk, C3, T, D);   // sums over the query blocks
    zero_rows(dv, C3, T, D);
    for (int i0 = 0; i0 < T; i0 += nb) {
        int rows = T - i0 < nb ? T - i0 : nb;
        const float *q_i = a->q + (size_t)i0 * C3;
        const float *dy = dout + a->out_off + (size_t)i0 * C, *y = out + a->out_off + (size_t)i0 * C;
        float *dq_i = dq + (size_t)i0 * C3;
        attention_row_dots(rho, dy, y, C, rows, D);
        for (int j0 = 0; j0 <= i0; j0 += nb) {
            int cols = j0 < i0 ? nb : rows;
            const float *k_j = a->k + (size_t)j0 * C3, *v_j = a->v + (size_t)j0 * C3;
            // S (rows, cols) = scale Q_I K_J^T, then P = exp(S + bias - lse), masked
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, D, a->scale, q_i, C3, k_j, C3,
                        0.0f, p, cols);
            attention_key_block_probs(p, i0, rows, j0, cols, a->bias_h, lse + a->lse_off);
            // dP (rows, cols) = dY_I V_J^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, D, 1.0f, dy, C, v_j, C3, 0.0f,
                        dp, cols);
            // dS = P * (dP - rho), in place in dp
            attention_key_block_dscores(dp, p, i0, rows, j0, cols, rho, dbias_bh);
            // dQ_I (rows, D) (+)= scale dS K_J
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, cols, a->scale, dp, cols, k_j, C3,
                        j0 == 0 ? 0.0f : 1.0f, dq_i, C3);
            // dK_J (cols, D) += scale dS^T Q_I ;  dV_J (cols, D) += P^T dY_I
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, D, rows, a->scale, dp, cols, q_i, C3,
                        1.0f, dk + (size_t)j0 * C3, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, D, rows, 1.0f, p, cols, dy, C, 1.0f,
                        dv + (size_t)j0 * C3, C3);
        }
    }
}

// The two passes: one (batch, head) pair a task, its head's attention blocked or fused.
// qkv (B,T,3C), bias (H,T) or NULL -> out (B,T,C), lse (B,H,T)
static void attention_forward(Engine *e, float *out, float *lse, const float *qkv, const float *bias,
                              int B, int T, int C, int H) {
    OpenblasEngine *ob = (OpenblasEngine *)e;
    float *scratch = scratch_for(ob, T);
    if (!scratch) return;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const AttHead a = att_head(ob, bh, scratch, qkv, bias, T, C, H);
        if (ob->fused) head_fused_forward(&a, out, lse, T, C);
        else head_forward(&a, out, lse, T, C);
    }
}

// dout (B,T,C), out (B,T,C) the forward's -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (if non-NULL)
static void attention_backward(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                               const float *out, const float *lse, const float *bias, int B, int T, int C, int H) {
    OpenblasEngine *ob = (OpenblasEngine *)e;
    float *scratch = scratch_for(ob, T);
    if (!scratch) return;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const AttHead a = att_head(ob, bh, scratch, qkv, bias, T, C, H);
        if (ob->fused) head_fused_backward(&a, dqkv, dbias, dout, out, lse, T, C);
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
                        .bytes = bytes, .free = engine_free};
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
