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
// attention_row_dots) are shared with the oneDNN engine, which runs them
// between its primitives (onednn_attention.c); the kernels at the end run the
// products on OpenBLAS (engine_openblas.c's engine).
#include <math.h>
#include <stddef.h>

#include <cblas.h>

#include "engine/engine_shared.h"
#include "model/fastmath.h"
#include "model/lane_sum.h"

void attention_row_dots(float *rho, const float *dy, const float *y, size_t ld, int rows, int D) {
    for (int r = 0; r < rows; r++) LANE_SUM(rho[r], d, D, dy[(size_t)r * ld + d] * y[(size_t)r * ld + d]);
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
        int i = i0 + r, n = attention_visible_keys(i, j0, cols);
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

void attention_key_block_dscores(float *dp, const float *p, int i0, int rows, int j0, int cols, const float *rho,
                                 float *dbias_bh) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r;
        attention_dscores_row(dp + (size_t)r * cols, p + (size_t)r * cols, i, j0, attention_visible_keys(i, j0, cols),
                              cols, rho[r], dbias_bh);
    }
}

size_t attention_fused_scratch_floats(int T) {
    size_t nb = (size_t)attention_block_rows(T);
    return 2 * nb * nb + 2 * nb;
}

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
