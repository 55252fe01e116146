// kernels.h: the loops every engine runs between its products, and the
// float arithmetic they and the model's layers share: exp and tanh that
// vectorise, sums in a fixed order, the bias gradient, and attention's
// softmax blocks (probabilities, their gradient, the online softmax). All
// static inline: each is a few lines of maths that the compiler specialises
// where it is used. The engines' files hold only their products and the
// loops around them; the model's layers (reference.c) use exp_fast,
// tanh_fast and LANE_SUM.
#ifndef ROPELAB_ENGINE_KERNELS_H
#define ROPELAB_ENGINE_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "engine/bf16.h"

/* ---- exp and tanh that vectorise ----
 *
 * Why: glibc's expf/tanhf are scalar calls (its vector versions, libmvec,
 * are only used under -ffast-math), so a loop calling them runs one element
 * at a time. The softmaxes (attention, cross-entropy) and GELU call them on
 * every element of large tensors: tens of millions of calls per step. These
 * versions are plain arithmetic on floats and their bits, with no calls, so
 * `-O3 -march=native` turns a loop over them into AVX code. Their clamps are
 * comparisons, which a compiler that must keep floating-point traps (GCC's
 * default -ftrapping-math) leaves as branches, and a loop with branches does
 * not vectorise: hence the Makefile's -fno-trapping-math.
 *
 * exp_fast(x): x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2 (the
 * Cody-Waite split of ln2 keeps r exact), exp(r) by the degree-6 minimax
 * polynomial of Cephes' expf, and 2^n put straight into the exponent bits.
 * Relative error <= 2e-7 (about 2 ulp) for x in [-87, 88]; x is clamped to
 * that range (exp(-87) ~ 1.6e-38, exp(88) ~ 1.7e38). NaN in gives NaN out.
 */

static inline float exp_fast(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    // n = round(x log2(e)) by the 1.5 * 2^23 trick: the sum's low mantissa
    // bits hold n as an integer (no float->int conversion of a possible NaN).
    const float shifter = 12582912.0f;
    float t = x * 1.44269504088896341f + shifter;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    float n = t - shifter;
    float r = x - n * 0.693359375f;          // ln2 = 0.693359375 - 2.12194440e-4 (hi part exact)
    r = r + n * 2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    uint32_t eb = (tb - 0x4B400000u + 127u) << 23;   // (n + 127) << 23 = the float 2^n
    float scale;
    memcpy(&scale, &eb, sizeof scale);
    return p * scale;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): exact limits +-1 for large |u|, absolute
// error about 2e-7 (relative error grows only where tanh(u) ~ u is tiny,
// which GELU multiplies by x and adds to 1).
static inline float tanh_fast(float u) {
    return 1.0f - 2.0f / (exp_fast(2.0f * u) + 1.0f);
}

/* ---- float sums whose rounding is the same on every x86-64 CPU ----
 *
 * Why: a float sum's rounding depends on the order of its additions. An
 * `omp simd reduction(+ : s)` lets the compiler keep one partial sum per
 * vector lane, so the order follows the machine's vector width: 4 lanes
 * with SSE, 8 with AVX2, 16 with AVX-512 (and -march=native picks the
 * width of the CPU the program is built on). A log written on one CPU then
 * differs from the same run's log on another in the last bits, and training
 * amplifies that within a few dozen steps.
 *
 * LANE_SUM fixes the order in the source instead: term i is added into lane
 * i % SUM_LANES, lanes in index order, and the 16 lanes are added in one
 * fixed tree (lane_total). The inner loop over the 16 lanes is independent
 * element-wise work that any vector width computes with the same bits: two
 * AVX2 registers, one AVX-512 register or four SSE ones. The Makefile adds
 * -ffp-contract=off, so no build fuses a multiply and an add into an FMA on
 * its own.
 *
 *   float s;
 *   LANE_SUM(s, c, C, x[c] * x[c]);   // s = sum over c = 0..C-1 of x[c]^2
 */

#define SUM_LANES 16

// (l0 + l8) + (l4 + l12) ... : halves added pairwise, 16 -> 8 -> 4 -> 2 -> 1.
static inline float lane_total(const float lane[SUM_LANES]) {
    float t[SUM_LANES / 2];
    for (int l = 0; l < 8; l++) t[l] = lane[l] + lane[l + 8];
    for (int l = 0; l < 4; l++) t[l] = t[l] + t[l + 4];
    for (int l = 0; l < 2; l++) t[l] = t[l] + t[l + 2];
    return t[0] + t[1];
}

// sum = the sum over INDEX = 0..n-1 of TERM (an expression of INDEX, an int
// declared here), in SUM_LANES lanes: whole blocks of 16 first, then the
// remaining n % 16 terms into lanes 0.. in order.
#define LANE_SUM(sum, INDEX, n, TERM)                                                \
    do {                                                                             \
        float lane_[SUM_LANES] = {0};                                                \
        int base_ = 0;                                                               \
        for (; base_ + SUM_LANES <= (n); base_ += SUM_LANES)                         \
            for (int l_ = 0; l_ < SUM_LANES; l_++) {                                 \
                int INDEX = base_ + l_;                                              \
                lane_[l_] += (TERM);                                                 \
            }                                                                        \
        for (int l_ = 0; base_ + l_ < (n); l_++) {                                   \
            int INDEX = base_ + l_;                                                  \
            lane_[l_] += (TERM);                                                     \
        }                                                                            \
        (sum) = lane_total(lane_);                                                   \
    } while (0)

/* ---- row slices and the bias gradient ---- */

// Thread t's share [*lo, *hi) of n rows inside a parallel region: whole
// register tiles of the sgemm kernel per thread (16 rows); the last share
// takes the rest.
static inline void thread_slice(int n, int *lo, int *hi) {
    int t = omp_get_thread_num(), n_threads = omp_get_num_threads();
    int per = ((n + n_threads - 1) / n_threads + 15) / 16 * 16;
    *lo = t * per < n ? t * per : n;
    *hi = (t + 1) * per < n ? (t + 1) * per : n;
}

// The rows are added in order n = 0..N-1 whatever the columns' split, so the
// sums do not depend on the thread count. The columns go in blocks of
// BIAS_BLOCK whose running sums stay in registers down all N rows (16
// floats to a 512-bit register: four of them), and the pass reads each
// element of dout once for both uses, sum and rounding. (Adding a whole row
// into db at a time instead loads and stores db once per row and sets up a
// vector loop per row; measured in the bf16 step, that pass took 1.4-4x as
// long, and its time varied 3x from run to run.)
enum { BIAS_BLOCK = 64 };

// Columns c0..c0+width-1 of every row; inlined with width = BIAS_BLOCK for
// whole blocks, where the constant trip count keeps acc in registers.
static inline void bias_block(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC, int c0,
                              int width) {
    float acc[BIAS_BLOCK];
    memcpy(acc, db + c0, (size_t)width * sizeof(float));
    for (int n = 0; n < N; n++) {
        const float *g = dout + (size_t)n * OC + c0;
        #pragma omp simd
        for (int j = 0; j < width; j++) acc[j] += g[j];
        if (dout_bf16) {
            uint16_t *y = dout_bf16 + (size_t)n * OC + c0;
            #pragma omp simd
            for (int j = 0; j < width; j++) y[j] = bf16_round(g[j]);
        }
    }
    memcpy(db + c0, acc, (size_t)width * sizeof(float));
}

// db[o0:o1] += sum_n dout[n, o0:o1], rows added in order n = 0..N-1 (the same
// bits whatever the thread count); dout_bf16 (N,OC) not NULL: its columns o0..o1
// are also set to dout rounded to bf16 (bf16.h), in the same pass over dout.
// Called by one thread for any columns o0..o1: bias_grad's thread_slice share,
// or the OpenBLAS engine's slice of output rows (SLICE_ROWS of them).
static inline void bias_grad_columns(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC, int o0,
                                     int o1) {
    int c0 = o0;
    for (; c0 + BIAS_BLOCK <= o1; c0 += BIAS_BLOCK) bias_block(db, dout_bf16, dout, N, OC, c0, BIAS_BLOCK);
    if (c0 < o1) bias_block(db, dout_bf16, dout, N, OC, c0, o1 - c0);
}

// The same for every column, on the pool: db (OC) += sum_n dout[n,:] (and dout_bf16 = dout rounded).
static inline void bias_grad(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC) {
    #pragma omp parallel
    {
        int o0, o1;
        thread_slice(OC, &o0, &o1);
        bias_grad_columns(db, dout_bf16, dout, N, OC, o0, o1);
    }
}

// Rows 0..rows-1 of x, row stride ld, set to zero in their first cols columns.
static inline void zero_rows(float *x, size_t ld, int rows, int cols) {
    for (int r = 0; r < rows; r++) memset(x + (size_t)r * ld, 0, (size_t)cols * sizeof(float));
}

/* ---- attention's softmax blocks ----
 *
 * Per (batch, head) and block of query rows i0..i0+rows-1 (nb =
 * attention_block_rows(T) of them) against keys 0..keys-1 (blocked: keys =
 * i0 + rows), or against a block of keys j0..j0+cols-1 (fused: j0 <= i0; the
 * diagonal block j0 = i0 is the only one with keys above the diagonal). */

#ifndef ATT_BLOCK
#define ATT_BLOCK 64   // query rows (and, fused, keys) per block
#endif

// Query rows per block for sequences of length T.
static inline int attention_block_rows(int T) { return T < ATT_BLOCK ? T : ATT_BLOCK; }

// Floats of one thread's blocked scratch: a block of probabilities and one of their gradients, 2 x nb x T.
static inline size_t attention_scratch_floats(int T) { return 2 * (size_t)attention_block_rows(T) * T; }

// Floats of one thread's fused scratch: two blocks (nb x nb) and two rows of
// per-row values, 2 nb nb + 2 nb: no T x T and no nb x T.
static inline size_t attention_fused_scratch_floats(int T) {
    size_t nb = (size_t)attention_block_rows(T);
    return 2 * nb * nb + 2 * nb;
}

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

// Backward: s (rows, cols) holds scale Q_I K_J^T: P = exp(s + bias - lse) in place, masked
// (the blocked attention's backward runs it too, with j0 = 0).
static inline void attention_key_block_probs(float *s, int i0, int rows, int j0, int cols, const float *bias_h,
                                             const float *lse) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = attention_visible_keys(i, j0, cols);
        float *row = s + (size_t)r * cols, row_lse = lse[i];
        if (bias_h)
            for (int j = 0; j < n; j++) row[j] += bias_h[i - j0 - j];
        for (int j = 0; j < n; j++) row[j] = exp_fast(row[j] - row_lse);
        for (int j = n; j < cols; j++) row[j] = 0.0f;   // causal mask
    }
}

// s (rows, keys) holds scale Q_I K_J^T: adds bias_h[i-j] (if set), makes P = exp(s - lse)
// in place, zero above the diagonal; lse_out set: computes and stores each row's lse
// (forward), else reads lse_in (backward).
static inline void attention_block_probs(float *s, int i0, int rows, int keys, const float *bias_h,
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
        LANE_SUM(sum, j, n, row[j]);   // fixed order on every CPU (LANE_SUM)
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++) row[j] *= inv;
        lse_out[i] = mx + logf(sum);
        for (int j = n; j < keys; j++) row[j] = 0.0f;   // causal mask
    }
}

// dp (rows, keys) holds dY_I V_J^T: dS = P * (dP - rowsum(P * dP)) in place, masked;
// dbias_bh[i-j] += dS_ij if set.
static inline void attention_block_dscores(float *dp, const float *p, int i0, int rows, int keys, float *dbias_bh) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r, n = i + 1;
        const float *pr = p + (size_t)r * keys;
        float *dpr = dp + (size_t)r * keys;
        float sum_pd;
        LANE_SUM(sum_pd, j, n, pr[j] * dpr[j]);
        attention_dscores_row(dpr, pr, i, 0, n, keys, sum_pd, dbias_bh);
    }
}

// Backward: rho_i = dY_i . Y_i for the block's rows (dy, y: rows of D floats, row stride ld), which
// is rowsum(P * dP) over all of row i's keys (Y_i = sum_j P_ij V_j), in a fixed order.
static inline void attention_row_dots(float *rho, const float *dy, const float *y, size_t ld, int rows, int D) {
    for (int r = 0; r < rows; r++) LANE_SUM(rho[r], d, D, dy[(size_t)r * ld + d] * y[(size_t)r * ld + d]);
}

// Online softmax (Milakov and Gimelshein 2018; FlashAttention): after key
// blocks 1..k, row i holds m_i = max_j s_ij, l_i = sum_j exp(s_ij - m_i) and
// y_i = sum_j exp(s_ij - m_i) v_j over their keys. A new block with max m'
// >= m_i scales the three sums' earlier terms by exp(m_i - m') (exactly 1,
// and skipped, when the max did not move) and adds its own. At the end y_i / l_i
// is the softmax's output and m_i + log l_i its lse.
//   s (rows, cols) holds scale Q_I K_J^T; adds bias_h[i-j] (if set), masks,
//   and with m_i the running max of row i (row_max, -inf before the first key
//   block) and l_i its running sum (row_sum) makes m_i' = max(m_i, max_j s_ij),
//   P = exp(s - m_i') in place, l_i' = l_i exp(m_i - m_i') + rowsum(P), and
//   rescales the output row y_i (D floats, row stride ldy; not read for the
//   first key block, j0 = 0) by exp(m_i - m_i').
static inline void attention_online_probs(float *s, int i0, int rows, int j0, int cols, const float *bias_h,
                                          float *row_max, float *row_sum, float *y, size_t ldy, int D) {
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
        LANE_SUM(sum, j, n, row[j]);   // fixed order on every CPU (LANE_SUM)
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

// The online softmax's end: y_i /= l_i (each of the rows), lse_i = m_i + log l_i.
static inline void attention_online_finish(float *y, size_t ldy, int D, int rows, const float *row_max,
                                           const float *row_sum, float *lse) {
    for (int r = 0; r < rows; r++) {
        float inv = 1.0f / row_sum[r], *yr = y + (size_t)r * ldy;
        for (int d = 0; d < D; d++) yr[d] *= inv;
        lse[r] = row_max[r] + logf(row_sum[r]);
    }
}

// Backward: dp (rows, cols) holds dY_I V_J^T: dS = P * (dP - rho_i) in place, masked, with
// rho_i = rowsum(dY_i * Y_i) given (FlashAttention-2's: = rowsum(P * dP) over all keys);
// dbias_bh[i-j] += dS_ij if set.
static inline void attention_key_block_dscores(float *dp, const float *p, int i0, int rows, int j0, int cols,
                                               const float *rho, float *dbias_bh) {
    for (int r = 0; r < rows; r++) {
        int i = i0 + r;
        attention_dscores_row(dp + (size_t)r * cols, p + (size_t)r * cols, i, j0, attention_visible_keys(i, j0, cols),
                              cols, rho[r], dbias_bh);
    }
}

#endif
