// attention.c: causal multi-head self-attention with an optional
// distance-bias table (t5, alibi), one (batch, head) pair per task.
//
// For query i and key j <= i of head h (D = C/H, scale = 1/sqrt(D)):
//   s_ij = scale * q_i.k_j + bias[h][i-j]
//   p_ij = softmax_j(s_ij) = exp(s_ij - lse_i),  lse_i = log sum_j exp(s_ij)
//   y_i  = sum_j p_ij v_j
// Backward, with dy_i given:
//   dv_j += p_ij dy_i,  dp_ij = dy_i.v_j,  ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij')
//   dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i,  dbias[h][i-j] += ds_ij
//
// As matrices, per (batch, head) and per block of query rows I = i0..i1-1
// (keys J = 0..i1-1, all a causal row of the block can see):
//   forward   S = scale Q_I K_J^T (+ bias),  P = softmax(S) masked,  Y_I = P V_J
//   backward  dP = dY_I V_J^T,  dS = P * (dP - rowsum(P * dP)),
//             dQ_I = scale dS K_J,  dK_J += scale dS^T Q_I,  dV_J += P^T dY_I
// Each product is one cblas_sgemm call with the transposes given as flags,
// so q, k, v are read where c_attn wrote them, without copies: head h of q
// is the (T, D) matrix at qkv + h*D with row stride 3C. The calls run inside
// our parallel loop over (batch, head), so OpenBLAS (its OpenMP build) runs
// each one on the calling thread. The query rows are split into blocks of
// ATT_BLOCK so that only the diagonal blocks compute scores above the
// diagonal (then masked): for T = 256 that is 5/8 of the full T x T square,
// and the per-thread scratch is 2 x ATT_BLOCK x T floats instead of T x T.
//
// Memory: the forward keeps only lse (B,H,T), not the (B,H,T,T)
// probabilities; backward recomputes P from q, k and lse, which are stored
// anyway. That costs one more Q K^T product in backward and saves L*B*H*T*T
// floats.
#include <math.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "model/fastmath.h"
#include "model/layers.h"

#ifndef ATT_BLOCK
#define ATT_BLOCK 64   // query rows per block
#endif

int attention_block_rows(int T) { return T < ATT_BLOCK ? T : ATT_BLOCK; }

size_t attention_scratch_floats(int T) { return 2 * (size_t)attention_block_rows(T) * T; }

// One block of scores s (rows, keys) = scale Q_I K_J^T of query rows
// i0..i0+rows-1, as a product left it, turned into probabilities in place:
// s += bias, then P = exp(s - lse) with zeros above the diagonal. If lse_out
// is set (forward) each row's lse is computed and stored there; otherwise
// (backward) the stored lse_in is used.
void attention_block_probs(float *s, int i0, int rows, int keys, const float *bias_h,
                           const float *lse_in, float *lse_out) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = i + 1;   // keys 0..i are visible
        float *row = s + (size_t)r * keys;
        if (bias_h)
            for (int j = 0; j < n; j++) row[j] += bias_h[i - j];
        if (lse_out) {
            float mx = -INFINITY;
            #pragma omp simd reduction(max : mx)
            for (int j = 0; j < n; j++) mx = row[j] > mx ? row[j] : mx;
            float sum = 0.0f;
            #pragma omp simd reduction(+ : sum)
            for (int j = 0; j < n; j++) { row[j] = exp_fast(row[j] - mx); sum += row[j]; }
            float inv = 1.0f / sum;
            for (int j = 0; j < n; j++) row[j] *= inv;
            lse_out[i] = mx + logf(sum);
        } else {
            float row_lse = lse_in[i];
            for (int j = 0; j < n; j++) row[j] = exp_fast(row[j] - row_lse);
        }
        for (int j = n; j < keys; j++) row[j] = 0.0f;   // causal mask
    }
}

// dS = P * (dP - rowsum(P * dP)), in place in dp (rows, keys), masked;
// dbias_bh[i-j] += dS_ij if dbias_bh is set.
void attention_block_dscores(float *dp, const float *p, int i0, int rows, int keys, float *dbias_bh) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = i + 1;
        const float *pr = p + (size_t)r * keys;
        float *dpr = dp + (size_t)r * keys;
        float sum_pd = 0.0f;
        #pragma omp simd reduction(+ : sum_pd)
        for (int j = 0; j < n; j++) sum_pd += pr[j] * dpr[j];
        for (int j = 0; j < n; j++) dpr[j] = pr[j] * (dpr[j] - sum_pd);
        for (int j = n; j < keys; j++) dpr[j] = 0.0f;
        if (dbias_bh)
            for (int j = 0; j < n; j++) dbias_bh[i - j] += dpr[j];
    }
}

// Scores of query rows i0..i0+rows-1 against keys 0..keys-1 into s (rows, keys);
// q and k are (T, D) head matrices with row stride ld: the product, then
// attention_block_probs.
static void att_probs(float *s, const float *q, const float *k, size_t ld, const float *bias_h,
                      const float *lse_in, float *lse_out, int i0, int rows, int keys, int D,
                      float scale) {
    // S (rows, keys) = scale Q_I K_J^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, scale, q + i0 * ld, ld, k, ld,
                0.0f, s, keys);
    attention_block_probs(s, i0, rows, keys, bias_h, lse_in, lse_out);
}

// qkv (B,T,3C), bias (H,T) or NULL -> out (B,T,C), lse (B,H,T)
// The task of one (batch b, head h) pair: where its head's columns start in
// the packed (B,T,3C) qkv (q there, k at +C, v at +2C, row stride 3C), its
// rows of a (B,T,C) tensor, and this thread's scratch.
typedef struct {
    int b, h, D, nb;
    size_t C3;            // qkv's row stride
    float scale;          // 1/sqrt(D)
    size_t qkv_off;       // head h of batch b in qkv (and dqkv)
    size_t out_off;       // head h of batch b in a (B,T,C) tensor
    float *scratch;       // attention_scratch_floats(T) floats of this thread
} AttTask;

static AttTask att_task(int bh, float *scratch, int T, int C, int H) {
    AttTask a;
    a.b = bh / H;
    a.h = bh % H;
    a.D = C / H;
    a.nb = attention_block_rows(T);
    a.C3 = 3 * (size_t)C;
    a.scale = 1.0f / sqrtf((float)a.D);
    a.qkv_off = (size_t)a.b * T * a.C3 + (size_t)a.h * a.D;
    a.out_off = (size_t)a.b * T * C + (size_t)a.h * a.D;
    a.scratch = scratch + (size_t)omp_get_thread_num() * attention_scratch_floats(T);
    return a;
}

void attention_forward(float *out, float *lse, const float *qkv, const float *bias,
                       float *scratch, int n_threads, int B, int T, int C, int H) {
    #pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const AttTask a = att_task(bh, scratch, T, C, H);
        const int D = a.D, nb = a.nb, h = a.h;
        const size_t C3 = a.C3;
        float *s = a.scratch;
        const float *q = qkv + a.qkv_off, *k = q + C, *v = q + 2 * C;
        const float *bias_h = bias ? bias + (size_t)h * T : NULL;
        for (int i0 = 0; i0 < T; i0 += nb) {
            int rows = T - i0 < nb ? T - i0 : nb, keys = i0 + rows;
            att_probs(s, q, k, C3, bias_h, NULL, lse + (size_t)bh * T, i0, rows, keys, D, a.scale);
            // Y_I (rows, D) = P (rows, keys) V_J (keys, D), written into out's head columns
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, 1.0f, s, keys, v, C3,
                        0.0f, out + a.out_off + (size_t)i0 * C, C);
        }
    }
}

// dout (B,T,C) -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (if non-NULL)
void attention_backward(float *dqkv, float *dbias, const float *dout, const float *qkv,
                        const float *lse, const float *bias, float *scratch, int n_threads,
                        int B, int T, int C, int H) {
    #pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const AttTask a = att_task(bh, scratch, T, C, H);
        const int D = a.D, nb = a.nb, h = a.h;
        const size_t C3 = a.C3;
        const float scale = a.scale;
        float *p = a.scratch, *dp = p + (size_t)nb * T;   // probabilities, then their gradient
        const float *q = qkv + a.qkv_off, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + a.qkv_off, *dk = dq + C, *dv = dq + 2 * C;
        const float *dy = dout + a.out_off;
        const float *bias_h = bias ? bias + (size_t)h * T : NULL;
        float *dbias_bh = dbias ? dbias + (size_t)bh * T : NULL;
        // this task owns the dk, dv columns of head h in batch row b; they
        // are sums over query blocks, so they start from zero
        for (int t = 0; t < T; t++) {
            memset(dk + t * C3, 0, (size_t)D * sizeof(float));
            memset(dv + t * C3, 0, (size_t)D * sizeof(float));
        }
        for (int i0 = 0; i0 < T; i0 += nb) {
            int rows = T - i0 < nb ? T - i0 : nb, keys = i0 + rows;
            att_probs(p, q, k, C3, bias_h, lse + (size_t)bh * T, NULL, i0, rows, keys, D, scale);
            // dP (rows, keys) = dY_I (rows, D) V_J^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, 1.0f, dy + (size_t)i0 * C, C,
                        v, C3, 0.0f, dp, keys);
            // dS = P * (dP - rowsum(P * dP)), in place in dp
            attention_block_dscores(dp, p, i0, rows, keys, dbias_bh);
            // dQ_I (rows, D) = scale dS K_J  (each query row is in one block: overwrite)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, scale, dp, keys, k, C3,
                        0.0f, dq + (size_t)i0 * C3, C3);
            // dK_J (keys, D) += scale dS^T Q_I ;  dV_J (keys, D) += P^T dY_I
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, scale, dp, keys,
                        q + (size_t)i0 * C3, C3, 1.0f, dk, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, 1.0f, p, keys,
                        dy + (size_t)i0 * C, C, 1.0f, dv, C3);
        }
    }
}
