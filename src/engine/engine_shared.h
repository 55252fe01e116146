// engine_shared.h: what the engines share below the seam (engine.h): the
// loops the OpenBLAS and oneDNN engines both run and the buffers every
// engine grows. Internal to the engines (src/engine/), but for attention_row,
// which decoding (kvcache.c) calls too; the model sees only engine.h.
#ifndef ROPELAB_ENGINE_SHARED_H
#define ROPELAB_ENGINE_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

// engine.c.
// Thread t's share [*lo, *hi) of n rows inside a parallel region, in multiples of 16 rows.
void thread_slice(int n, int *lo, int *hi);
// db[o0:o1] += sum_n dout[n, o0:o1], rows added in order n = 0..N-1 (the same
// bits whatever the thread count); dout_bf16 (N,OC) not NULL: its columns o0..o1
// are also set to dout rounded to bf16 (bf16.h), in the same pass over dout.
// Called inside a parallel region with the thread's thread_slice(OC) share.
void bias_grad_columns(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC, int o0, int o1);
// The same for every column, on the pool: db (OC) += sum_n dout[n,:] (and dout_bf16 = dout rounded).
void bias_grad(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC);
// Rows 0..rows-1 of x, row stride ld, set to zero in their first cols columns.
void zero_rows(float *x, size_t ld, int rows, int cols);
// A buffer of at least `bytes`, 64-byte aligned, replacing *buf (contents lost) if smaller. 0 or -1.
int grow_buffer(void **buf, size_t *have, size_t bytes);
// What grow_buffer allocates for `bytes`: rounded up to a multiple of 64.
size_t grow_buffer_bytes(size_t bytes);

// engine_reference.c: one query row's attention, the reference engine's and
// decoding's (kvcache.c). Query q (D) at position i over keys and values
// 0..i (rows ld floats apart), distance bias bias_h[i-j] (NULL: none):
// p (i+1) gets the probabilities, y (D) the output; returns the row's lse.
float attention_row(float *y, float *p, const float *q, const float *k, const float *v, size_t ld,
                    const float *bias_h, int i, int D, float scale);

// engine_openblas.c: the loops of the blocked attention, between its
// products, which the oneDNN engine runs too (onednn_attention.c). Per
// (batch, head) and block of query rows i0..i0+rows-1 against keys
// 0..keys-1 (keys = i0 + rows):
int attention_block_rows(int T);   // query rows per block for sequences of length T
// Floats of one thread's scratch: a block of probabilities and one of their gradients, 2 x rows x T.
size_t attention_scratch_floats(int T);
// s (rows, keys) holds scale Q_I K_J^T: adds bias_h[i-j] (if set), makes P = exp(s - lse)
// in place, zero above the diagonal; lse_out set: computes and stores each row's lse
// (forward), else reads lse_in (backward).
void attention_block_probs(float *s, int i0, int rows, int keys, const float *bias_h, const float *lse_in,
                           float *lse_out);
// dp (rows, keys) holds dY_I V_J^T: dS = P * (dP - rowsum(P * dP)) in place, masked;
// dbias_bh[i-j] += dS_ij if set.
void attention_block_dscores(float *dp, const float *p, int i0, int rows, int keys, float *dbias_bh);

// The fused attention's loops (attention_fused.c): per (batch, head), block
// of query rows i0..i0+rows-1 and block of keys j0..j0+cols-1 (j0 <= i0; the
// diagonal block j0 = i0 is the only one with keys above the diagonal).
// Floats of one thread's scratch: two blocks (rows x cols) and two rows of
// per-row values, 2 nb nb + 2 nb for nb = attention_block_rows(T): no T x T and no nb x T.
size_t attention_fused_scratch_floats(int T);
// The online softmax's step (forward): s (rows, cols) holds scale Q_I K_J^T;
// adds bias_h[i-j] (if set), masks, and with m_i the running max of row i
// (row_max, -inf before the first key block) and l_i its running sum
// (row_sum) makes m_i' = max(m_i, max_j s_ij), P = exp(s - m_i') in place,
// l_i' = l_i exp(m_i - m_i') + rowsum(P), and rescales the output row y_i
// (D floats, row stride ldy; not read for the first key block, j0 = 0) by exp(m_i - m_i').
void attention_online_probs(float *s, int i0, int rows, int j0, int cols, const float *bias_h, float *row_max,
                            float *row_sum, float *y, size_t ldy, int D);
// The online softmax's end: y_i /= l_i (each of the rows), lse_i = m_i + log l_i.
void attention_online_finish(float *y, size_t ldy, int D, int rows, const float *row_max, const float *row_sum,
                             float *lse);
// Backward: rho_i = dY_i . Y_i for the block's rows (dy, y: rows of D floats, row stride ld), which
// is rowsum(P * dP) over all of row i's keys (Y_i = sum_j P_ij V_j), in a fixed order.
void attention_row_dots(float *rho, const float *dy, const float *y, size_t ld, int rows, int D);
// Backward: s (rows, cols) holds scale Q_I K_J^T: P = exp(s + bias - lse) in place, masked
// (engine_openblas.c: the blocked attention's backward runs it too, with j0 = 0).
void attention_key_block_probs(float *s, int i0, int rows, int j0, int cols, const float *bias_h,
                               const float *lse);
// Backward: dp (rows, cols) holds dY_I V_J^T: dS = P * (dP - rho_i) in place, masked, with
// rho_i = rowsum(dY_i * Y_i) given (FlashAttention-2's: = rowsum(P * dP) over all keys);
// dbias_bh[i-j] += dS_ij if set.
void attention_key_block_dscores(float *dp, const float *p, int i0, int rows, int j0, int cols, const float *rho,
                                 float *dbias_bh);

// Keys j0..j0+cols-1 of query row i: how many of them it sees (j <= i); at least 1 when j0 <= i.
static inline int attention_visible_keys(int i, int j0, int cols) { return i - j0 + 1 < cols ? i - j0 + 1 : cols; }
// Row i's keys j0..j0+cols-1, the first n of them visible: dS = P (dP - rho) in place, the rest 0.
static inline void attention_dscores_row(float *dpr, const float *pr, int i, int j0, int n, int cols, float rho,
                                         float *dbias_bh) {
    for (int j = 0; j < n; j++) dpr[j] = pr[j] * (dpr[j] - rho);
    for (int j = n; j < cols; j++) dpr[j] = 0.0f;
    if (dbias_bh)
        for (int j = 0; j < n; j++) dbias_bh[i - j0 - j] += dpr[j];
}

// The OpenBLAS engine's attention (engine_openblas.c, attention_fused.c):
// one (batch b, head h) pair's view of attention's tensors: its head's
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
    float *scratch;           // this thread's scratch (engine_openblas.c's thread_scratch_floats)
} AttHead;
// The fused attention of one (batch, head) pair on OpenBLAS (attention_fused.c):
// q, k, v, bias row -> its columns of out (T, D of C), its lse (T); and the
// backward: dout's columns -> its columns of dqkv (overwritten), its dbias row
// (T) += (if non-NULL), reading the forward's out.
void attention_fused_head_forward(const AttHead *a, float *out, float *lse, int T, int C);
void attention_fused_head_backward(const AttHead *a, float *dqkv, float *dbias, const float *dout, const float *out,
                                   const float *lse, int T, int C);

#endif
