// util_engine.c: engines by name and the rounding bounds of util_engine.h.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <oneapi/dnnl/dnnl.h>

#include "common/rng.h"
#include "engine/engine_create.h"
#include "engine/engine_shared.h"
#include "engine/kernels.h"
#include "util_engine.h"

double ue_gamma(double n) { return n * U32 / (1.0 - n * U32); }

const EngineCfg ue_engines[] = {
    {"openblas fp32", 0, 0, WEIGHTS_DEFAULT, 0, 0},
    {"onednn fp32 plain", 1, 0, WEIGHTS_PLAIN, 0, 0},
    {"onednn fp32 packed", 1, 0, WEIGHTS_PACKED, 2, 0},
    {"onednn bf16 packed", 1, 1, WEIGHTS_PACKED, 2, 0},
    {"onednn bf16 plain", 1, 1, WEIGHTS_PLAIN, 1, 0},
};
const int ue_n_engines = sizeof ue_engines / sizeof ue_engines[0];
const EngineCfg ue_fused[] = {
    {"openblas fp32 fused", 0, 0, WEIGHTS_DEFAULT, 0, 1},
    {"onednn fp32 fused", 1, 0, WEIGHTS_PLAIN, 0, 1},
    {"onednn bf16 fused", 1, 1, WEIGHTS_PACKED, 2, 1},
};
const int ue_n_fused = sizeof ue_fused / sizeof ue_fused[0];

// oneDNN computes bf16 products on AVX-512 cores: natively with
// avx512_core_bf16 or amx, emulated on a plain avx512_core.
int ue_bf16_available(void) {
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

void ue_skip_without_bf16(void) {
    if (ue_bf16_available()) return;
    printf("  skipped: this CPU has no bf16 matmuls (oneDNN needs avx512_core at least)\n");
    skip();
}

Engine *ue_engine(const EngineCfg *cfg) {
    Engine *e = NULL;
    char err[256] = "";
    int rc = cfg->onednn ? engine_onednn_create_with_layout(&e, cfg->bf16, cfg->fused, cfg->layout, err,
                                                            sizeof err)
                         : engine_openblas_create(&e, cfg->fused, err, sizeof err);
    if (cfg->bf16 && !ue_bf16_available()) {
        assert_int_equal(rc, -1);
        printf("  %s: skipped (%s)\n", cfg->name, err);
        return NULL;
    }
    if (rc != 0) fail_msg("%s: %s", cfg->name, err);
    return e;
}

Engine *ue_reference(void) {
    Engine *e = NULL;
    char err[256] = "";
    if (engine_reference_create(&e, err, sizeof err) != 0) fail_msg("%s", err);
    return e;
}

void ue_check(Engine *e, const char *what) {
    char err[256];
    if (engine_failed(e, err, sizeof err) != 0) fail_msg("%s: %s", what, err);
}

float ue_bf16(float x) {
    if (x == 0 || !isfinite(x)) return x;
    int ex;
    double m = frexp(x, &ex);   // x = m 2^ex, 0.5 <= |m| < 1
    return (float)ldexp(rint(ldexp(m, 8)), ex - 8);
}

static float *alloc_floats(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(x);
    return x;
}

float *ue_bf16_copy(const float *x, size_t n) {
    float *y = alloc_floats(n);
    for (size_t i = 0; i < n; i++) y[i] = ue_bf16(x[i]);
    return y;
}

float *ue_abs_copy(const float *x, size_t n) {
    float *y = alloc_floats(n);
    for (size_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
    return y;
}

float *ue_randn(size_t n, double std, uint64_t seed) {
    float *x = alloc_floats(n);
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * rng_normal(&r));
    return x;
}

float *ue_nans(size_t n) {
    float *x = alloc_floats(n);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

float *ue_copy(const float *x, size_t n) {
    float *y = alloc_floats(n);
    memcpy(y, x, n * sizeof(float));
    return y;
}

void ue_tally(UeTally *t, const float *x, const float *ref, const double *bound, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)x[i] - ref[i]);
        t->n++;
        if (!(err <= bound[i])) t->bad++;
        double ratio = bound[i] > 0 ? err / bound[i] : (err > 0 ? INFINITY : 0);
        if (!(ratio <= t->worst)) t->worst = ratio;
    }
}

/* ---- attention ----
 *
 * One float evaluation of engine_reference.c's attention maths (any blocking, any
 * order of the sums), per batch row b, head h and query i, D = C/H, scale =
 * 1/sqrt(D), against the exact values. Row magnitudes (Cauchy-Schwarz bounds
 * every dot product): ||q_i||, K = max_{j<=i} ||k_j||, V = max ||v_j||, Bm =
 * max |bias|, ||dy_i||.
 *   s_ij = scale q_i.k_j + b     |ds| <= es = g(D+2) (scale ||q_i|| K + Bm);  |s| <= S = scale ||q_i|| K + Bm
 *   lse_i                        |dlse| <= e_lse = es + g(T+2) + EXP + u (|lse| + 1)
 *   p_ij = exp(s - lse)          |dp| / p <= e = es + e_lse + u (S + |lse| + 2) + EXP + 2u
 *   y_i = sum_j p_ij v_j         |dy| <= (e + g(T+2)) sum_j p_ij |v_j|
 * and backward, dy given:
 *   dP_ij = dy_i.v_j             |dP| <= M = ||dy_i|| V,  |ddP| <= g(D+2) M
 *   rho_i = sum_j p_ij dP_ij     |drho| <= (e + g(T+2)) M + g(D+2) M
 *   dS_ij = p_ij (dP_ij - rho_i) |ddS| <= p_ij E,  E = 2 e M + g(D+2) M + |drho| + 4u M
 *   dq_i = scale sum_j dS_ij k_j        |d dq| <= scale (E + 2 g(T+2) M) sum_j p_ij |k_j| + u |dq|
 *   dk_j = scale sum_i dS_ij q_i        |d dk| <= scale sum_i p_ij (E_i + 2 g(T+2) M_i) |q_i|
 *   dv_j = sum_i p_ij dy_i              |d dv| <= sum_i p_ij (e_i + g(T+2)) |dy_i|
 *   dbias[i-j] += dS_ij                 |d dbias_n| <= sum_{i-j=n} (E_i + 2 g(T+2) M_i)   (p <= 1)
 * The sums over p_ij are attentions themselves, so the reference engine
 * gives them: sum_j p_ij |v_j| is its forward with v replaced by |v|, sum_j
 * p_ij |k_j| with v replaced by |k|, sum_i p_ij c_i |q_i| is the dv of its
 * backward with dout_i = c_i |q_i|. (Their own float error is a relative
 * g(T+2), covered by a factor 1 + g(T+2).)
 * bf16 (the oneDNN bf16 engine, compared with the reference on inputs
 * rounded to bf16): P and dS are rounded where they enter a product, a
 * relative u_b on each term: + u_b sum_j p_ij |v_j| on y, + u_b sum_i p_ij
 * |dy_i| on dv, + scale u_b 2 M sum_j p_ij |k_j| on dq, + scale u_b sum_i
 * p_ij 2 M_i |q_i| on dk (lse, dP, rho, dS and dbias use fp32 P).
 * bf16 = 2, the same engine against the exact values (its q, k, v rounded
 * too; forward bounds only): each score carries (2 u_b + u_b^2) scale
 * ||q_i|| K more, and y u_b sum_j p_ij |v_j| more (v rounded).
 *
 * fused = 1 (the OpenBLAS engine's fused attention: keys in n_K <= ceil(T/nb)
 * blocks, an online softmax; engine_openblas.c) evaluates differently:
 *   w_ij = exp(s_ij - m_k) times the rescales exp(m_k' - m_k'+1) of the later
 *     blocks, each an exp, a subtraction of two maxima (|dm| <= 2S summed over
 *     them) and a product: |dw| / w <= e_w = es + 4u S + n_K EXP + (n_K - 1) u
 *     (the shift m cancels: any m gives the same softmax and lse)
 *   l_i = sum_j w_ij, T + n_K additions: |dl| / l <= e_w + g(T + n_K + 2)
 *   lse_i = m_i + log l_i                 |dlse| <= e_lse = e_w + g(T + n_K + 2) + u (2 |lse| + S + 1)
 *   y_i = (sum_j w_ij v_j) / l_i; w's error enters the sum and l alike, so
 *     |dy| <= e_y sum_j p_ij |v_j|,  e_y = 2 e_w + 2 g(T + n_K + 2) + 2u
 * and backward with that lse (p's e as above) and rho_i = dy_i.y_i
 * (FlashAttention-2's; y the engine's own output, |y_d| <= sum_j p_ij |v_jd|,
 * whose norm is <= V):
 *   |drho| <= g(D+2) M + e_y M
 * and every sum over keys or queries has up to n_K more additions (the
 * blocks' products added into their accumulators): g(T + 2) -> g(T + n_K + 2).
 * bf16 and fused (oneDNN's fused attention in bf16): the bf16 terms above,
 * and rho = dy_i.y_i from the unrounded dy and the engine's y (whose P was
 * rounded where it entered PV), against the reference's dy_b.y on the
 * rounded inputs: |dy - dy_b| ||y|| <= u_b M and ||dy|| u_b sum_j p_ij |v_j|
 * <= u_b M more, |drho| <= g(D+2) M + e_y M + 2 u_b M. */

typedef struct { double es, e, e_lse, ey, M, E; } RowBound;   // ey: y's relative bound (of sum_j p_ij |v_j|)

static double norm(const float *x, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)x[d] * x[d];
    return sqrt(s);
}

void ue_attention_bounds(AttBounds *bnd, Engine *ref, const float *qkv, const float *dout, const float *bias,
                         int B, int T, int C, int H, int bf16, int fused) {
    const int D = C / H, nb = attention_block_rows(T);
    const double n_K = fused ? (T + nb - 1) / nb : 0;   // key blocks of the longest row
    const size_t n_out = (size_t)B * T * C, n_qkv = 3 * n_out, n_lse = (size_t)B * H * T, C3 = 3 * (size_t)C;
    const double scale = 1.0 / sqrt((double)D), gD = ue_gamma(D + 2.0), gT = ue_gamma(T + 2.0 + n_K);
    const double f = 1 + 2 * gT;   // the magnitudes' own float error
    const double ub = bf16 ? U16 : 0, ub_in = bf16 == 2 ? 2 * U16 + U16 * U16 : 0;   // P and dS; q.k
    float *out = alloc_floats(n_out), *lse = alloc_floats(n_lse), *dqkv = alloc_floats(n_qkv);
    float *dbias = calloc(n_lse, sizeof(float));
    // the reference's own results: lse (for e_lse) and dq (for u |dq|)
    ref->attention_forward(ref, out, lse, qkv, bias, B, T, C, H);
    ref->attention_backward(ref, dqkv, NULL, dout, qkv, out, lse, bias, B, T, C, H);
    RowBound *rb = malloc(n_lse * sizeof *rb);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            double Km = 0, Vm = 0, Bm = 0;
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * C3 + h * D;
                Km = fmax(Km, norm(q + C, D));
                Vm = fmax(Vm, norm(q + 2 * C, D));
                if (bias) Bm = fmax(Bm, fabs(bias[h * T + i]));
                double l = fabs(lse[((size_t)b * H + h) * T + i]), S = scale * norm(q, D) * Km + Bm;
                RowBound r;
                r.es = gD * S + ub_in * (S - Bm);
                double e_w = r.es + 4 * U32 * S + n_K * EXP_ERR + (n_K - 1) * U32;   // fused only
                r.e_lse = fused ? e_w + gT + U32 * (2 * l + S + 1) : r.es + gT + EXP_ERR + U32 * (l + 1);
                r.e = r.es + r.e_lse + U32 * (S + l + 2) + EXP_ERR + 2 * U32;
                r.ey = fused ? 2 * e_w + 2 * gT + 2 * U32 : r.e + gT;
                r.M = norm(dout + ((size_t)b * T + i) * C + h * D, D) * Vm;
                // bf16 fused: rho = dy.y takes the unrounded dy and the engine's y, made from P
                // rounded: against the reference on rounded inputs, u_b M for each
                double drho = fused ? (gD + r.ey * f + 2 * ub) * r.M : (r.e + gT) * r.M + gD * r.M;
                r.E = 2 * r.e * r.M + gD * r.M + drho + 4 * U32 * r.M;
                rb[((size_t)b * H + h) * T + i] = r;
            }
        }
    // the sums over p from the reference: v -> |v| and v -> |k| (forward), dout -> c_i |q_i| and c_i |dy_i| (dv)
    float *qkv2 = ue_copy(qkv, n_qkv), *y_v = alloc_floats(n_out), *y_k = alloc_floats(n_out);
    float *d_q = alloc_floats(n_out), *d_y = alloc_floats(n_out), *dv_q = alloc_floats(n_qkv), *dv_y = alloc_floats(n_qkv);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int c = 0; c < C; c++) qkv2[r * C3 + 2 * C + c] = fabsf(qkv[r * C3 + 2 * C + c]);
    ref->attention_forward(ref, y_v, lse, qkv2, bias, B, T, C, H);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int c = 0; c < C; c++) qkv2[r * C3 + 2 * C + c] = fabsf(qkv[r * C3 + C + c]);
    ref->attention_forward(ref, y_k, lse, qkv2, bias, B, T, C, H);
    ref->attention_forward(ref, out, lse, qkv, bias, B, T, C, H);   // lse again, for the backward runs
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int h = 0; h < H; h++) {
                const RowBound *r = &rb[((size_t)b * H + h) * T + i];
                size_t o = ((size_t)b * T + i) * C + h * D, q = ((size_t)b * T + i) * C3 + h * D;
                for (int d = 0; d < D; d++) {
                    d_q[o + d] = (float)((r->E + 2 * gT * r->M + ub * 2 * r->M) * fabs(qkv[q + d]));
                    d_y[o + d] = (float)((r->e + gT + ub) * fabs(dout[o + d]));
                }
            }
    ref->attention_backward(ref, dv_q, NULL, d_q, qkv, out, lse, bias, B, T, C, H);
    ref->attention_backward(ref, dv_y, NULL, d_y, qkv, out, lse, bias, B, T, C, H);
    ue_check(ref, "reference attention (bounds)");
    bnd->out = calloc(n_out, sizeof(double));
    bnd->lse = calloc(n_lse, sizeof(double));
    bnd->dqkv = calloc(n_qkv, sizeof(double));
    bnd->dbias = calloc(n_lse, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                size_t row = ((size_t)b * H + h) * T + i, o = ((size_t)b * T + i) * C + h * D;
                size_t q = ((size_t)b * T + i) * C3 + h * D;
                const RowBound *r = &rb[row];
                bnd->lse[row] = r->e_lse;
                for (int d = 0; d < D; d++) {
                    bnd->out[o + d] = (r->ey + ub + ub_in / 2) * f * y_v[o + d];
                    bnd->dqkv[q + d] = scale * (r->E + 2 * gT * r->M + ub * 2 * r->M) * f * y_k[o + d] +
                                       U32 * fabs(dqkv[q + d]);
                    bnd->dqkv[q + C + d] = scale * f * dv_q[q + 2 * C + d];
                    bnd->dqkv[q + 2 * C + d] = f * dv_y[q + 2 * C + d];
                }
                for (int n = 0; n <= i; n++)   // the pair (i, j = i - n)
                    bnd->dbias[((size_t)b * H + h) * T + n] += r->E + 2 * gT * r->M;
            }
    free(out); free(lse); free(dqkv); free(dbias); free(rb); free(qkv2); free(y_v); free(y_k);
    free(d_q); free(d_y); free(dv_q); free(dv_y);
}

void ue_attention_bounds_free(AttBounds *bnd) {
    free(bnd->out); free(bnd->lse); free(bnd->dqkv); free(bnd->dbias);
    memset(bnd, 0, sizeof *bnd);
}
