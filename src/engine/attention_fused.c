// attention_fused.c: the fused attention (the key attention = fused):
// engine_openblas.c's blocked attention with the keys cut into blocks too,
// and FlashAttention's online softmax. Per query block I and key block
// J <= I (nb = attention_block_rows(T) of each; only J = I, the diagonal
// block, has keys above the diagonal), every product is (nb x nb) x (nb x D), and a thread's
// scratch is two nb x nb blocks and two rows, whatever T.
//   forward   S = scale Q_I K_J^T (+ bias), the online softmax's step
//             (attention_online_probs: running max m, running sum l, Y_I
//             rescaled), Y_I += P V_J; at the end Y_I /= l, lse = m + log l
//   backward  rho_i = dY_i . Y_i once per query row (FlashAttention-2: equal
//             to rowsum(P * dP) over all keys, which no key block sees whole);
//             per key block P = exp(S - lse), dP = dY_I V_J^T,
//             dS = P * (dP - rho), dQ_I += scale dS K_J,
//             dK_J += scale dS^T Q_I, dV_J += P^T dY_I
// Y_I's sums are kept in out itself (its rows belong to this task), dQ_I in
// dqkv. The order of every sum is fixed by the loops, and one thread owns a
// (batch, head) pair: the bits do not depend on the thread count.
// The loops between the products (attention_online_*, attention_key_block_*,
// attention_row_dots) are engine/kernels.h's, which the oneDNN engine runs
// between its primitives too (onednn_attention.c); this file runs the
// products on OpenBLAS, for engine_openblas.c's engine.
#include <math.h>
#include <stddef.h>

#include <cblas.h>

#include "engine/engine_shared.h"
#include "engine/kernels.h"

void attention_fused_head_forward(const AttHead *a, float *out, float *lse, int T, int C) {
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

// The backward reads the forward's output out: rho = rowsum(dY * Y).
void attention_fused_head_backward(const AttHead *a, float *dqkv, float *dbias, const float *dout, const float *out,
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
