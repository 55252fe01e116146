// test_model_linear.c: the matmul engine (linear.h) on every backend,
// precision and weight layout, against a double-precision reference.
//
// Tolerances, derived (not tuned). Each checked element is a sum of K
// products plus at most one exact fp32 term t (the bias in forward, the old
// dW or db that backward accumulates into):
//   y = t + sum_k a_k b_k,   P = sum_k |a_k b_k|,   Q = |t|   (in double)
// and K is the inner dimension: C (forward), OC (dinp), N (dW, db).
//
// fp32 (OpenBLAS, oneDNN fp32): every product and every addition is one
// float32 rounding (relative error <= u = 2^-24; an FMA rounds once for
// both). Whatever the summation order or blocking, the standard bound for
// a sum of K products plus one more term, with at most K+1 additions, is
//   |err| <= gamma(K+2) (P + Q),   gamma(k) = k u / (1 - k u)
// (Higham, Accuracy and Stability, 3.1; K+2 leaves room for the bias or
// accumulation step being a separate rounding). This is the worst case,
// not the sqrt(K) typical size: it holds for any order.
//
// bf16 (oneDNN bf16): a and b are rounded to bf16 first (8-bit significand,
// round to nearest: relative error <= u_b = 2^-8 each), so each product
// carries |a b (1+d1)(1+d2) - a b| <= (2 u_b + u_b^2) |a b|. The products of
// two bf16 numbers are exact in fp32 (16 significant bits), and are summed
// in fp32 as above, over magnitudes at most (1 + u_b)^2 |a b|:
//   |err| <= (2 u_b + u_b^2) P + gamma(K+2) ((1 + u_b)^2 P + Q)
// t (bias, old dW) is fp32 and not rounded. db is an fp32 loop in every
// configuration and gets the fp32 bound. (vdpbf16ps flushes denormals to
// zero; these data have none.)
//
// Sharper, for bf16: the same sums computed exactly from the inputs rounded
// to bf16 here in the test (independently of the engine: frexp, rint to 8
// significant bits, ldexp) leave only the fp32 accumulation, so the bf16
// results must meet the fp32 bound gamma(K+2) (P_b + Q) against them, P_b
// the magnitude of the rounded products. That checks that inputs and
// weights are rounded to nearest (not truncated) and accumulated in fp32.
// And bf16 must really run in bf16: nearly every result is closer to the
// rounded-input sums than to the exact ones (fp32 results: nearly none).
//
// The bounds must also be able to fail. With the data used (inp, dout
// N(0,1); W N(0,1/C), so outputs are O(1); bias O(1), the old dW and db the
// size of one batch's gradient), the bf16 bound is about
// 2^-7 * 0.64 sqrt(K) output standard deviations: 0.16 at K = 1024. The
// mutation checks assert that the same bounds reject a missing bias, W^T
// instead of W (square shapes), a neighbouring output column, a dW or db
// that overwrites instead of accumulating. And the tests as a whole were
// run against broken copies of linear.c, each caught by at least one test:
// bias dropped, bf16 by truncation instead of rounding, dW overwritten,
// weights_changed ignored, a re-pack on every use, W read as W^T, a db row
// missing, the thread count missing from the primitive cache key.
//
// Large shapes are checked on a sample of rows (about 40, spread evenly,
// plus both rows around the middle, where 2-thread slices meet); every
// other output element must at least be finite (outputs start as NaN).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include "model/layers.h"
#include "model/linear.h"
#include "util_gradcheck.h"

#define U32 (1.0 / 16777216.0)   // 2^-24: float32 unit roundoff
#define U16 (1.0 / 256.0)        // 2^-8: bf16 unit roundoff

static double gamma_k(double k) { return k * U32 / (1.0 - k * U32); }

// The bound on |computed - exact| for a sum of K products of total size P
// plus an fp32 term of size Q.
static double bound(int bf16, int K, double P, double Q) {
    if (!bf16) return gamma_k(K + 2.0) * (P + Q);
    return (2 * U16 + U16 * U16) * P + gamma_k(K + 2.0) * ((1 + U16) * (1 + U16) * P + Q);
}

typedef struct {
    MatmulBackend backend;
    Precision precision;
    WeightLayout layout;
    const char *name;
    int copies;   // weight copies made from the master per weight (0: read in place)
} Cfg;

static const Cfg cfgs[] = {
    {MATMUL_OPENBLAS, PRECISION_FP32, WEIGHTS_DEFAULT, "openblas fp32", 0},
    {MATMUL_ONEDNN, PRECISION_FP32, WEIGHTS_PLAIN, "onednn fp32 plain", 0},
    {MATMUL_ONEDNN, PRECISION_FP32, WEIGHTS_PACKED, "onednn fp32 packed", 2},
    {MATMUL_ONEDNN, PRECISION_BF16, WEIGHTS_PACKED, "onednn bf16 packed", 2},
    {MATMUL_ONEDNN, PRECISION_BF16, WEIGHTS_PLAIN, "onednn bf16 plain", 1},
};
enum { N_CFGS = sizeof cfgs / sizeof cfgs[0] };

// oneDNN computes bf16 products on AVX-512 cores: natively with
// avx512_core_bf16 or amx, emulated on a plain avx512_core.
static int bf16_available(void) {
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

// An engine for cfg, or NULL when cfg is bf16 and the CPU has no native bf16
// (then creation must fail with a message).
static LinearEngine *engine_for(const Cfg *cfg) {
    LinearEngine *e = NULL;
    char err[256] = "";
    int rc = linear_engine_create(&e, cfg->backend, cfg->precision, err, sizeof err);
    if (cfg->precision == PRECISION_BF16 && !bf16_available()) {
        assert_int_equal(rc, -1);
        printf("  %s: skipped (%s)\n", cfg->name, err);
        return NULL;
    }
    if (rc != 0) fail_msg("%s: %s", cfg->name, err);
    assert_int_equal(linear_engine_set_weight_layout(e, cfg->layout, err, sizeof err), 0);
    return e;
}

static float *randn(size_t n, double std, uint64_t seed) {
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    gc_fill_normal(x, n, 0.0, std, seed);
    return x;
}

static float *nans(size_t n) {
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

static float *copy_of(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    assert_non_null(y);
    memcpy(y, x, n * sizeof(float));
    return y;
}

// Rows to check out of n: all if the product is small, else about 40 spread
// evenly plus the two around the middle. rows has room for max(n, 42).
static int sample_rows(int *rows, int n, int all) {
    if (all || n <= 42) {
        for (int i = 0; i < n; i++) rows[i] = i;
        return n;
    }
    int k = 0;
    for (int i = 0; i < 40; i++) rows[k++] = (int)((long)i * (n - 1) / 39);
    rows[k++] = n / 2 - 1;
    rows[k++] = n / 2;
    return k;
}

/* ---- the reference: exact values and magnitudes of sampled elements ---- */

// Sums of the sampled elements: values and magnitudes P = sum |a_k b_k|.
typedef struct {
    double *out, *out_P;     // (n_rows, OC): out = b + inp W^T
    double *dinp, *dinp_P;   // (n_rows, C): dinp = dout W
    double *dw, *dw_P;       // (n_orows, C): dW = dW0 + dout^T inp
} Sums;

typedef struct {
    int N, C, OC;
    float *inp, *W, *b, *dout, *dW0, *db0;   // inputs (dW0, db0: gradients before the call)
    int *rows, n_rows;                       // sampled rows n of out and dinp
    int *orows, n_orows;                     // sampled rows o of dW
    Sums exact;                              // from the inputs as they are
    Sums rounded;                            // from inp, W, dout rounded to bf16 (b, dW0 not)
    double *out_T;                           // (n_rows, OC): out with W^T for W (C == OC only)
    double *db, *db_P;                       // (OC): db = db0 + sum_n dout
} Ref;

// x rounded to bf16 (8 significant bits, to nearest, ties to even: rint in
// the default rounding mode), computed without looking at bits.
static float bf16_round_ref(float x) {
    if (x == 0 || !isfinite(x)) return x;
    int ex;
    double m = frexp(x, &ex);   // x = m 2^ex, 0.5 <= |m| < 1
    return (float)ldexp(rint(ldexp(m, 8)), ex - 8);
}

static void sums_free(Sums *s) {
    free(s->out); free(s->out_P); free(s->dinp); free(s->dinp_P); free(s->dw); free(s->dw_P);
    memset(s, 0, sizeof *s);
}

// s = the sampled sums of r's shape over the given inputs (bias, dW0: r's).
static void sums_compute(Sums *s, const Ref *r, const float *inp, const float *W, const float *dout) {
    int N = r->N, C = r->C, OC = r->OC;
    sums_free(s);
    s->out = calloc((size_t)r->n_rows * OC, sizeof(double));
    s->out_P = calloc((size_t)r->n_rows * OC, sizeof(double));
    s->dinp = calloc((size_t)r->n_rows * C, sizeof(double));
    s->dinp_P = calloc((size_t)r->n_rows * C, sizeof(double));
    s->dw = calloc((size_t)r->n_orows * C, sizeof(double));
    s->dw_P = calloc((size_t)r->n_orows * C, sizeof(double));
    assert_true(s->out && s->out_P && s->dinp && s->dinp_P && s->dw && s->dw_P);
    for (int i = 0; i < r->n_rows; i++) {
        const float *x = inp + (size_t)r->rows[i] * C, *g = dout + (size_t)r->rows[i] * OC;
        for (int o = 0; o < OC; o++) {   // out[n,o] = b[o] + sum_k inp[n,k] W[o,k]
            double sum = 0, mag = 0;
            for (int k = 0; k < C; k++) {
                double t = (double)x[k] * W[(size_t)o * C + k];
                sum += t;
                mag += fabs(t);
            }
            s->out[(size_t)i * OC + o] = r->b[o] + sum;
            s->out_P[(size_t)i * OC + o] = mag;
        }
        for (int k = 0; k < C; k++) {    // dinp[n,k] = sum_o dout[n,o] W[o,k]
            double sum = 0, mag = 0;
            for (int o = 0; o < OC; o++) {
                double t = (double)g[o] * W[(size_t)o * C + k];
                sum += t;
                mag += fabs(t);
            }
            s->dinp[(size_t)i * C + k] = sum;
            s->dinp_P[(size_t)i * C + k] = mag;
        }
    }
    for (int j = 0; j < r->n_orows; j++) {   // dW[o,k] = dW0[o,k] + sum_n dout[n,o] inp[n,k]
        int o = r->orows[j];
        double *sum = s->dw + (size_t)j * C, *mag = s->dw_P + (size_t)j * C;
        for (int n = 0; n < N; n++) {
            double g = dout[(size_t)n * OC + o];
            const float *x = inp + (size_t)n * C;
            for (int k = 0; k < C; k++) {
                double t = g * x[k];
                sum[k] += t;
                mag[k] += fabs(t);
            }
        }
        for (int k = 0; k < C; k++) sum[k] += r->dW0[(size_t)o * C + k];
    }
}

static float *rounded_copy(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) y[i] = bf16_round_ref(x[i]);
    return y;
}

// Every reference of r from its inputs (again after r->W is replaced).
static void ref_compute(Ref *r) {
    int N = r->N, C = r->C, OC = r->OC;
    sums_compute(&r->exact, r, r->inp, r->W, r->dout);
    float *inp_b = rounded_copy(r->inp, (size_t)N * C), *W_b = rounded_copy(r->W, (size_t)OC * C);
    float *dout_b = rounded_copy(r->dout, (size_t)N * OC);
    sums_compute(&r->rounded, r, inp_b, W_b, dout_b);
    free(inp_b); free(W_b); free(dout_b);
    free(r->out_T);
    r->out_T = NULL;
    if (C == OC) {   // the forward with W^T in place of W
        r->out_T = calloc((size_t)r->n_rows * OC, sizeof(double));
        for (int i = 0; i < r->n_rows; i++) {
            const float *x = r->inp + (size_t)r->rows[i] * C;
            for (int o = 0; o < OC; o++) {
                double sum = 0;
                for (int k = 0; k < C; k++) sum += (double)x[k] * r->W[(size_t)k * C + o];
                r->out_T[(size_t)i * OC + o] = r->b[o] + sum;
            }
        }
    }
    free(r->db); free(r->db_P);
    r->db = calloc(OC, sizeof(double));
    r->db_P = calloc(OC, sizeof(double));
    for (int n = 0; n < N; n++)   // db[o] = db0[o] + sum_n dout[n,o]
        for (int o = 0; o < OC; o++) {
            r->db[o] += r->dout[(size_t)n * OC + o];
            r->db_P[o] += fabs(r->dout[(size_t)n * OC + o]);
        }
    for (int o = 0; o < OC; o++) r->db[o] += r->db0[o];
}

// Seeded inputs of one shape and their reference.
static void ref_make(Ref *r, int N, int C, int OC, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->N = N; r->C = C; r->OC = OC;
    r->inp = randn((size_t)N * C, 1.0, seed + 1);
    r->W = randn((size_t)OC * C, 1.0 / sqrt(C), seed + 2);
    r->b = randn(OC, 1.0, seed + 3);
    r->dout = randn((size_t)N * OC, 1.0, seed + 4);
    r->dW0 = randn((size_t)OC * C, sqrt(N), seed + 5);
    r->db0 = randn(OC, sqrt(N), seed + 6);
    int small = (double)N * C * OC <= 4e6;
    r->rows = malloc((N > 42 ? N : 42) * sizeof(int));
    r->orows = malloc((OC > 42 ? OC : 42) * sizeof(int));
    assert_true(r->rows && r->orows);
    r->n_rows = sample_rows(r->rows, N, small);
    r->n_orows = sample_rows(r->orows, OC, small);
    ref_compute(r);
}

static void ref_free(Ref *r) {
    void *p[] = {r->rows, r->orows, r->inp, r->W, r->b, r->dout, r->dW0, r->db0, r->db, r->db_P, r->out_T};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    sums_free(&r->exact);
    sums_free(&r->rounded);
}

// One engine's results on the reference's inputs.
typedef struct { float *out, *dinp, *dw, *db; } Result;

static void result_free(Result *res) {
    free(res->out); free(res->dinp); free(res->dw); free(res->db);
}

// Runs forward and the full backward of weight W through e.
static void run_engine(LinearEngine *e, const Ref *r, Result *res) {
    int N = r->N, C = r->C, OC = r->OC;
    char err[256];
    int wid = linear_engine_add_weight(e, r->W, OC, C, err, sizeof err);
    if (wid < 0) fail_msg("%s", err);
    res->out = nans((size_t)N * OC);
    res->dinp = nans((size_t)N * C);
    res->dw = copy_of(r->dW0, (size_t)OC * C);
    res->db = copy_of(r->db0, OC);
    if (linear_forward(e, wid, res->out, r->inp, r->b, N) != 0) fail_msg("%s", linear_engine_error(e));
    if (linear_backward(e, wid, res->dinp, res->dw, res->db, r->dout, r->inp, N) != 0)
        fail_msg("%s", linear_engine_error(e));
}

// Counts elements outside the bound, and the worst |err| / bound.
typedef struct { long bad, n; double worst; } Tally;

static void tally(Tally *t, double got, double exact, double bnd) {
    double err = fabs(got - exact);
    t->n++;
    if (!(err <= bnd)) t->bad++;   // NaN is bad
    double ratio = bnd > 0 ? err / bnd : (err > 0 ? INFINITY : 0);
    if (!(ratio <= t->worst)) t->worst = ratio;
}

// Which wrong answer to compare the results with (MUT_NONE: the right one).
enum { MUT_NONE, MUT_NO_BIAS, MUT_TRANSPOSED, MUT_NEXT_COLUMN, MUT_NO_ACCUMULATE };

// The four outputs against the sums S (r->exact or r->rounded), or a
// mutation of them, under the bf16 or the fp32 bound (NULL outputs skipped).
static void compare(const Ref *r, const Result *res, const Sums *S, int bf16, int mut, Tally t[4]) {
    int C = r->C, OC = r->OC;
    memset(t, 0, 4 * sizeof *t);
    for (int i = 0; i < r->n_rows; i++) {
        int n = r->rows[i];
        for (int o = 0; o < OC && res->out; o++) {
            size_t j = (size_t)i * OC + o;
            double exact = S->out[j];
            if (mut == MUT_NO_BIAS) exact -= r->b[o];
            if (mut == MUT_TRANSPOSED) exact = r->out_T[j];
            if (mut == MUT_NEXT_COLUMN) exact = S->out[(size_t)i * OC + (o + 1) % OC];
            tally(&t[0], res->out[(size_t)n * OC + o], exact, bound(bf16, C, S->out_P[j], fabs(r->b[o])));
        }
        for (int k = 0; k < C && res->dinp; k++) {
            size_t j = (size_t)i * C + k;
            double exact = mut == MUT_NEXT_COLUMN ? S->dinp[(size_t)i * C + (k + 1) % C] : S->dinp[j];
            tally(&t[1], res->dinp[(size_t)n * C + k], exact, bound(bf16, OC, S->dinp_P[j], 0));
        }
    }
    for (int i = 0; i < r->n_orows && res->dw; i++) {
        int o = r->orows[i];
        for (int k = 0; k < C; k++) {
            size_t j = (size_t)i * C + k;
            double exact = S->dw[j];
            if (mut == MUT_NO_ACCUMULATE) exact -= r->dW0[(size_t)o * C + k];
            if (mut == MUT_NEXT_COLUMN) exact = S->dw[(size_t)i * C + (k + 1) % C];
            tally(&t[2], res->dw[(size_t)o * C + k], exact,
                  bound(bf16, r->N, S->dw_P[j], fabs(r->dW0[(size_t)o * C + k])));
        }
    }
    for (int o = 0; o < OC && res->db; o++) {   // db: an fp32 loop everywhere, on dout as it is
        double exact = mut == MUT_NO_ACCUMULATE ? r->db[o] - r->db0[o] : r->db[o];
        tally(&t[3], res->db[o], exact, bound(0, r->N, r->db_P[o], fabs(r->db0[o])));
    }
}

// The share of checked out, dinp, dW elements strictly closer to the
// rounded-input sums than to the exact ones.
static double share_closer_to_rounded(const Ref *r, const Result *res) {
    long closer = 0, n = 0;
    int C = r->C, OC = r->OC;
    for (int i = 0; i < r->n_rows; i++) {
        for (int o = 0; o < OC; o++, n++) {
            double got = res->out[(size_t)r->rows[i] * OC + o];
            size_t j = (size_t)i * OC + o;
            closer += fabs(got - r->rounded.out[j]) < fabs(got - r->exact.out[j]);
        }
        for (int k = 0; k < C; k++, n++) {
            double got = res->dinp[(size_t)r->rows[i] * C + k];
            size_t j = (size_t)i * C + k;
            closer += fabs(got - r->rounded.dinp[j]) < fabs(got - r->exact.dinp[j]);
        }
    }
    for (int i = 0; i < r->n_orows; i++)
        for (int k = 0; k < C; k++, n++) {
            double got = res->dw[(size_t)r->orows[i] * C + k];
            size_t j = (size_t)i * C + k;
            closer += fabs(got - r->rounded.dw[j]) < fabs(got - r->exact.dw[j]);
        }
    return (double)closer / n;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* ---- tests ---- */

// Runs first, before this process has touched oneDNN or started OpenMP
// threads: a forked child limits oneDNN to avx512_core (no bf16 dot
// products) through DNNL_MAX_CPU_ISA, read at oneDNN's first ISA query.
// bf16 must then be refused with one line; fp32 must still work.
static void test_bf16_refused_without_native_isa(void **s) {
    (void)s;
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
        LinearEngine *e = NULL;
        char err[256] = "";
        int rc = linear_engine_create(&e, MATMUL_ONEDNN, PRECISION_BF16, err, sizeof err);
        printf("  DNNL_MAX_CPU_ISA=AVX2, bf16: rc %d: %s\n", rc, err);
        int ok = rc == -1 && e == NULL && strstr(err, "AVX-512") && !strchr(err, '\n');
        rc = linear_engine_create(&e, MATMUL_ONEDNN, PRECISION_FP32, err, sizeof err);
        ok = ok && rc == 0;
        linear_engine_free(e);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_errors(void **s) {
    (void)s;
    LinearEngine *e = NULL;
    char err[256] = "";
    assert_int_equal(linear_engine_create(&e, MATMUL_OPENBLAS, PRECISION_BF16, err, sizeof err), -1);
    assert_null(e);
    assert_non_null(strstr(err, "fp32 only"));
    assert_int_equal(linear_engine_create(&e, MATMUL_ONEDNN, PRECISION_FP32, err, sizeof err), 0);
    float W[6] = {0};
    assert_int_equal(linear_engine_add_weight(e, W, 0, 6, err, sizeof err), -1);
    assert_int_equal(linear_engine_add_weight(e, NULL, 2, 3, err, sizeof err), -1);
    assert_int_equal(linear_engine_add_weight(e, W, 2, 3, err, sizeof err), 0);
    assert_int_equal(linear_engine_set_weight_layout(e, WEIGHTS_PACKED, err, sizeof err), -1);   // too late
    assert_non_null(strstr(err, "before"));
    float out[2], inp[3] = {1, 2, 3};
    assert_int_equal(linear_forward(e, 1, out, inp, NULL, 1), -1);
    assert_non_null(strstr(linear_engine_error(e), "no weight with id 1"));
    assert_int_equal(linear_forward(e, 0, out, inp, NULL, -1), -1);
    assert_int_equal(linear_forward(e, 0, out, inp, NULL, 0), 0);   // no rows: nothing to do
    assert_int_equal(linear_forward(e, 0, out, inp, NULL, 1), 0);
    assert_true(out[0] == 0.0f && out[1] == 0.0f);
    printf("  %s\n", linear_engine_describe(e));
    linear_engine_free(e);
}

// Every configuration on the model's shapes and odd ones, against the
// reference; the bounds' power to fail, on the same results.
static void test_shapes(void **s) {
    (void)s;
    static const int shapes[][3] = {
        // N, C, OC
        {7, 36, 13},    {33, 36, 100},   {1, 128, 384},   {5, 256, 4096},               // odd, sampling
        {512, 128, 128}, {512, 128, 384}, {2048, 128, 512}, {1024, 512, 128}, {2048, 128, 2048},  // S
        {2048, 256, 256}, {1024, 256, 768}, {512, 256, 1024}, {2048, 1024, 256}, {1024, 256, 4096}, // M
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int N = shapes[si][0], C = shapes[si][1], OC = shapes[si][2];
        Ref r;
        ref_make(&r, N, C, OC, 100 + 10 * si);
        printf("N=%d C=%d OC=%d (checked rows: %d of N, %d of OC)\n", N, C, OC, r.n_rows, r.n_orows);
        for (int ci = 0; ci < N_CFGS; ci++) {
            const Cfg *cfg = &cfgs[ci];
            LinearEngine *e = engine_for(cfg);
            if (!e) continue;
            int bf16 = cfg->precision == PRECISION_BF16;
            Result res;
            run_engine(e, &r, &res);
            assert_true(all_finite(res.out, (size_t)N * OC));
            assert_true(all_finite(res.dinp, (size_t)N * C));
            assert_true(all_finite(res.dw, (size_t)OC * C));
            Tally t[4], tr[4];
            compare(&r, &res, &r.exact, bf16, MUT_NONE, t);
            compare(&r, &res, &r.rounded, 0, MUT_NONE, tr);   // meaningful for bf16
            double closer = share_closer_to_rounded(&r, &res);
            printf("  %-20s err/bound: out %.3f dinp %.3f dW %.3f db %.3f", cfg->name, t[0].worst, t[1].worst,
                   t[2].worst, t[3].worst);
            if (bf16)
                printf("; vs bf16-input sums, fp32 bound: out %.3f dinp %.3f dW %.3f", tr[0].worst, tr[1].worst,
                       tr[2].worst);
            printf("; closer to bf16-input sums: %.0f%%\n", 100 * closer);
            for (int i = 0; i < 4; i++) assert_int_equal(t[i].bad, 0);
            if (bf16) {
                for (int i = 0; i < 3; i++) assert_int_equal(tr[i].bad, 0);
                assert_true(closer > 0.9);   // bf16 really ran in bf16
            } else {
                assert_true(closer < 0.1);
            }
            // the bounds reject wrong answers (the same results, wrong references)
            Tally m[4];
            compare(&r, &res, &r.exact, bf16, MUT_NO_BIAS, m);
            assert_true(m[0].bad > 0);
            compare(&r, &res, &r.exact, bf16, MUT_NEXT_COLUMN, m);
            if (OC > 1) assert_true(m[0].bad > 0);
            if (C > 1) assert_true(m[1].bad > 0 && m[2].bad > 0);
            compare(&r, &res, &r.exact, bf16, MUT_NO_ACCUMULATE, m);
            assert_true(m[2].bad > 0 && m[3].bad > 0);
            if (r.out_T) {
                compare(&r, &res, &r.exact, bf16, MUT_TRANSPOSED, m);
                assert_true(m[0].bad > 0);
            }
            result_free(&res);
            linear_engine_free(e);
        }
        ref_free(&r);
    }
}

// OpenBLAS: bit for bit matmul.c, and the skips (NULL dinp, dweight, dbias,
// bias) give the same bits as the full calls, on every configuration.
static void test_skips_and_openblas_identity(void **s) {
    (void)s;
    enum { N = 100, C = 72, OC = 200 };
    Ref r;
    ref_make(&r, N, C, OC, 7);
    float *out = nans(N * OC), *dinp = nans(N * C), *dw = copy_of(r.dW0, OC * C), *db = copy_of(r.db0, OC);
    matmul_forward(out, r.inp, r.W, r.b, N, C, OC);
    matmul_backward(dinp, dw, db, r.dout, r.inp, r.W, N, C, OC);
    for (int ci = 0; ci < N_CFGS; ci++) {
        const Cfg *cfg = &cfgs[ci];
        LinearEngine *e = engine_for(cfg);
        if (!e) continue;
        Result full;
        run_engine(e, &r, &full);   // weight id 0
        if (cfg->backend == MATMUL_OPENBLAS) {
            assert_memory_equal(full.out, out, sizeof(float) * N * OC);
            assert_memory_equal(full.dinp, dinp, sizeof(float) * N * C);
            assert_memory_equal(full.dw, dw, sizeof(float) * OC * C);
            assert_memory_equal(full.db, db, sizeof(float) * OC);
        }
        float *x = nans(N * C), *y = copy_of(r.dW0, OC * C), *z = copy_of(r.db0, OC);
        assert_int_equal(linear_backward(e, 0, x, NULL, NULL, r.dout, r.inp, N), 0);   // dinp only
        assert_memory_equal(x, full.dinp, sizeof(float) * N * C);
        assert_int_equal(linear_backward(e, 0, NULL, y, NULL, r.dout, r.inp, N), 0);   // dW only
        assert_memory_equal(y, full.dw, sizeof(float) * OC * C);
        assert_int_equal(linear_backward(e, 0, NULL, NULL, z, r.dout, r.inp, N), 0);   // db only
        assert_memory_equal(z, full.db, sizeof(float) * OC);
        // no bias: the same products, so the reference minus b within the bound
        float *o2 = nans(N * OC);
        assert_int_equal(linear_forward(e, 0, o2, r.inp, NULL, N), 0);
        Result nb = {o2, full.dinp, full.dw, full.db};
        Tally t[4];
        compare(&r, &nb, &r.exact, cfg->precision == PRECISION_BF16, MUT_NO_BIAS, t);
        assert_int_equal(t[0].bad, 0);
        free(x); free(y); free(z); free(o2);
        result_free(&full);
        linear_engine_free(e);
    }
    free(out); free(dinp); free(dw); free(db);
    ref_free(&r);
}

// Weight copies: made at first use, once; stale (the old results, bit for
// bit) after the master changes until linear_engine_weights_changed; then
// re-made once at the next use of each copy, and the results follow.
// Configurations that read the master in place follow at once.
static void test_repack(void **s) {
    (void)s;
    enum { N = 64, C = 48, OC = 80 };
    Ref r1, r2;                 // the same inputs, two different weights
    ref_make(&r1, N, C, OC, 40);
    ref_make(&r2, N, C, OC, 40);
    gc_fill_normal(r2.W, (size_t)OC * C, 0.0, 1.0 / sqrt(C), 99);
    ref_compute(&r2);
    for (int ci = 0; ci < N_CFGS; ci++) {
        const Cfg *cfg = &cfgs[ci];
        LinearEngine *e = engine_for(cfg);
        if (!e) continue;
        int bf16 = cfg->precision == PRECISION_BF16, copies = cfg->copies;
        int fwd_copy = copies > 0, dinp_copy = copies == 2;   // plain bf16: 1 copy serves both
        char err[256];
        float *W = copy_of(r1.W, OC * C);   // the parameter buffer the engine reads
        int wid = linear_engine_add_weight(e, W, OC, C, err, sizeof err);
        assert_true(wid >= 0);
        LinearEngineStats st;
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, 0);
        float *out1 = nans(N * OC), *out = nans(N * OC), *dinp = nans(N * C);
        float *dw = calloc(OC * C, sizeof(float));
        Result res = {out, dinp, NULL, NULL};
        Tally t[4];

        // first uses make the copies, later uses do not
        assert_int_equal(linear_forward(e, wid, out1, r1.inp, r1.b, N), 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, fwd_copy);
        assert_int_equal(linear_forward(e, wid, out, r1.inp, r1.b, N), 0);
        assert_memory_equal(out, out1, sizeof(float) * N * OC);
        assert_int_equal(linear_backward(e, wid, dinp, dw, NULL, r1.dout, r1.inp, N), 0);
        compare(&r1, &res, &r1.exact, bf16, MUT_NONE, t);
        assert_int_equal(t[0].bad + t[1].bad, 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, fwd_copy + dinp_copy);
        long base = st.repacks;
        int prims = st.primitives;

        // the master changes in place (as AdamW does), without the call
        memcpy(W, r2.W, sizeof(float) * OC * C);
        assert_int_equal(linear_forward(e, wid, out, r1.inp, r1.b, N), 0);
        assert_int_equal(linear_backward(e, wid, dinp, dw, NULL, r1.dout, r1.inp, N), 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, base);
        if (copies > 0) {
            assert_memory_equal(out, out1, sizeof(float) * N * OC);   // stale, as documented
            compare(&r2, &res, &r2.exact, bf16, MUT_NONE, t);
            assert_true(t[0].bad > 0 && t[1].bad > 0);   // dinp reads a stale copy too
        } else {
            compare(&r2, &res, &r2.exact, bf16, MUT_NONE, t);   // read in place: follows at once
            assert_int_equal(t[0].bad + t[1].bad, 0);
        }

        // after the call the results follow; each copy is re-made once
        linear_engine_weights_changed(e);
        memset(out, 0xff, sizeof(float) * N * OC);
        memset(dinp, 0xff, sizeof(float) * N * C);
        assert_int_equal(linear_forward(e, wid, out, r1.inp, r1.b, N), 0);
        assert_int_equal(linear_forward(e, wid, out, r1.inp, r1.b, N), 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, base + fwd_copy);
        assert_int_equal(linear_backward(e, wid, dinp, dw, NULL, r1.dout, r1.inp, N), 0);
        assert_int_equal(linear_backward(e, wid, dinp, dw, NULL, r1.dout, r1.inp, N), 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, base + fwd_copy + dinp_copy);
        compare(&r2, &res, &r2.exact, bf16, MUT_NONE, t);
        assert_int_equal(t[0].bad + t[1].bad, 0);
        assert_int_equal(st.primitives, prims);   // same shapes: nothing new created

        // updates without a use cost nothing; prepack makes each copy once
        base = st.repacks;
        linear_engine_weights_changed(e);
        linear_engine_weights_changed(e);
        assert_int_equal(linear_engine_prepack(e, wid), 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, base + copies);
        assert_int_equal(linear_forward(e, wid, out, r1.inp, r1.b, N), 0);
        assert_int_equal(linear_backward(e, wid, dinp, dw, NULL, r1.dout, r1.inp, N), 0);
        linear_engine_stats(e, &st);
        assert_int_equal(st.repacks, base + copies);
        printf("  %-20s copies per weight %d, %ld made, %zu bytes held\n", cfg->name, copies, st.repacks,
               st.weight_copy_bytes);
        free(W); free(out1); free(out); free(dinp); free(dw);
        linear_engine_free(e);
    }
    ref_free(&r1);
    ref_free(&r2);
}

// A thread-count change makes new primitives (one per op) for the new
// count; results stay within the bound at every count; repeated calls at
// one count create nothing.
static void test_threads(void **s) {
    (void)s;
    int threads0 = omp_get_max_threads();
    Ref r;
    ref_make(&r, 300, 64, 96, 3);
    for (int ci = 1; ci < N_CFGS; ci++) {   // the oneDNN configurations
        const Cfg *cfg = &cfgs[ci];
        LinearEngine *e = engine_for(cfg);
        if (!e) continue;
        char err[256];
        int wid = linear_engine_add_weight(e, r.W, r.OC, r.C, err, sizeof err);
        assert_true(wid >= 0);
        int counts[] = {2, 1, 2, 1};
        int prims_seen[3] = {0};
        for (int i = 0; i < 4; i++) {
            omp_set_num_threads(counts[i]);
            Result res = {nans((size_t)r.N * r.OC), nans((size_t)r.N * r.C), copy_of(r.dW0, (size_t)r.OC * r.C),
                          copy_of(r.db0, r.OC)};
            assert_int_equal(linear_forward(e, wid, res.out, r.inp, r.b, r.N), 0);
            assert_int_equal(linear_backward(e, wid, res.dinp, res.dw, res.db, r.dout, r.inp, r.N), 0);
            Tally t[4];
            compare(&r, &res, &r.exact, cfg->precision == PRECISION_BF16, MUT_NONE, t);
            for (int k = 0; k < 4; k++) assert_int_equal(t[k].bad, 0);
            LinearEngineStats st;
            linear_engine_stats(e, &st);
            if (i < 2) prims_seen[i] = st.primitives;
            else assert_int_equal(st.primitives, prims_seen[1]);   // counts seen before: reused
            result_free(&res);
        }
        assert_int_equal(prims_seen[0], 3);       // forward, dinp, dW at 2 threads
        assert_int_equal(prims_seen[1], 6);       // and again at 1 thread
        linear_engine_free(e);
    }
    omp_set_num_threads(threads0);
    ref_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_refused_without_native_isa),   // first: before any oneDNN call
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_skips_and_openblas_identity),
        cmocka_unit_test(test_repack),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
