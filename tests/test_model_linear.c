// test_model_linear.c: the linear layers' products on every engine,
// precision and weight layout (OpenBLAS; oneDNN fp32 with the weights read
// in place or packed; oneDNN bf16 with packed or plain copies), against the
// reference engine's naive loops (engine_reference.c), and the oneDNN engine's
// weight copies, primitives and errors.
//
// Tolerances, derived (not tuned). Each checked element is a sum of K
// products plus at most one exact fp32 term t (the bias in forward, the old
// dW or db that backward accumulates into):
//   y = t + sum_k a_k b_k,   P = sum_k |a_k b_k|,   Q = |t|
// and K is the inner dimension: C (forward), OC (dinp), N (dW, db).
// P is the reference's own product of the absolute values (a relative
// g(K) of float error, covered by a factor 1 + 2 g(K+2)).
//
// fp32: every product and every addition is one float32 rounding (an FMA
// rounds once for both). Whatever the summation order or blocking, a sum of
// K products plus one more term, with at most K+1 additions, is within
//   g(K+2) (P + Q),   g(k) = k u / (1 - k u),  u = 2^-24
// of the exact value (Higham, Accuracy and Stability, 3.1; K+2 leaves room
// for the bias or accumulation step being a separate rounding): the worst
// case, for any order. The engine and the reference (its own order) are both
// within it, so they differ by at most 2 g(K+2) (P + Q).
//
// bf16: a and b are rounded to bf16 first (relative error <= u_b = 2^-8
// each), so each product carries (2 u_b + u_b^2) |a b|; the products of two
// bf16 numbers are exact in fp32 and summed in fp32 as above:
//   |y_e - y| <= (2 u_b + u_b^2) P + g(K+2) ((1 + u_b)^2 P + Q)
// plus the reference's fp32 g(K+2) (P + Q). Sharper: the reference run on
// the inputs rounded to bf16 here in the test (independently of the engine:
// frexp, rint to 8 significant bits, ldexp) leaves only the fp32
// accumulation, so the engine must be within 2 g(K+2) (P_b + Q) of it. That
// checks that inputs and weights are rounded to nearest (not truncated) and
// accumulated in fp32. And bf16 must really run in bf16: nearly every result
// is closer to the reference on rounded inputs than on exact ones (fp32
// results: nearly none). db is an fp32 loop in every engine: the fp32 bound.
//
// The bounds must also be able to fail: they reject a missing bias, W^T
// instead of W (square shapes), a neighbouring output column, a dW or db that
// overwrites instead of accumulating.
//
// Large shapes are checked on a sample of rows (about 40, spread evenly,
// plus both rows around the middle, where 2-thread slices meet), the
// reference computing those rows only; every other output element must at
// least be finite (outputs start as NaN).
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
#include <omp.h>

#include "model/gpt.h"
#include "util_engine.h"
#include "util_gradcheck.h"

// The bound on |engine - reference| for a sum of K products of total size P plus an fp32 term of size Q;
// bf16: the engine's inputs rounded (the reference's are not).
static double bound(int bf16, int K, double P, double Q) {
    double g = ue_gamma(K + 2.0);
    P *= 1 + 2 * g;
    if (!bf16) return 2 * g * (P + Q);
    return (2 * U16 + U16 * U16) * P + g * ((1 + U16) * (1 + U16) * P + Q) + g * (P + Q);
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

/* ---- the reference at the sampled elements ---- */

// Values and magnitudes P of the sampled elements, from the reference engine.
typedef struct {
    float *out, *out_P;     // (n_rows, OC): out = b + inp W^T;  P = |inp| |W|^T
    float *dinp, *dinp_P;   // (n_rows, C): dinp = dout W
    float *dw, *dw_P;       // (n_orows, C): dW = dW0 + dout^T inp (P without dW0)
    float *db, *db_P;       // (OC): db = db0 + sum_n dout
} Sums;

typedef struct {
    int N, C, OC;
    float *inp, *W, *b, *dout, *dW0, *db0;   // inputs (dW0, db0: gradients before the call)
    int *rows, n_rows;                       // sampled rows n of out and dinp
    int *orows, n_orows;                     // sampled rows o of dW
    Sums exact;                              // from the inputs as they are
    Sums rounded;                            // from inp, W, dout rounded to bf16 (b, dW0, db0 not)
    float *out_T;                            // (n_rows, OC): out with W^T for W (C == OC only)
} Ref;

static void sums_free(Sums *s) {
    free(s->out); free(s->out_P); free(s->dinp); free(s->dinp_P); free(s->dw); free(s->dw_P); free(s->db); free(s->db_P);
    memset(s, 0, sizeof *s);
}

// rows of x (n_rows, width) gathered from X (.., width); abs: their absolute values
static float *gather_rows(const float *X, const int *rows, int n_rows, int width, int abs) {
    float *x = malloc((size_t)n_rows * width * sizeof(float));
    for (int i = 0; i < n_rows; i++)
        for (int c = 0; c < width; c++) {
            float v = X[(size_t)rows[i] * width + c];
            x[(size_t)i * width + c] = abs ? fabsf(v) : v;
        }
    return x;
}

// columns cols of X (N, width) -> (N, n_cols); abs: absolute values
static float *gather_cols(const float *X, int N, int width, const int *cols, int n_cols, int abs) {
    float *x = malloc((size_t)N * n_cols * sizeof(float));
    for (int n = 0; n < N; n++)
        for (int j = 0; j < n_cols; j++) {
            float v = X[(size_t)n * width + cols[j]];
            x[(size_t)n * n_cols + j] = abs ? fabsf(v) : v;
        }
    return x;
}

// s = the reference's sampled sums over the given inputs (bias, dW0, db0: r's).
static void sums_compute(Engine *ref, Sums *s, const Ref *r, const float *inp, const float *W, const float *dout) {
    int N = r->N, C = r->C, OC = r->OC, nr = r->n_rows, no = r->n_orows;
    sums_free(s);
    float *x = gather_rows(inp, r->rows, nr, C, 0), *xa = gather_rows(inp, r->rows, nr, C, 1);
    float *g = gather_rows(dout, r->rows, nr, OC, 0), *ga = gather_rows(dout, r->rows, nr, OC, 1);
    float *Wa = ue_abs_copy(W, (size_t)OC * C), *inpa = ue_abs_copy(inp, (size_t)N * C);
    float *go = gather_cols(dout, N, OC, r->orows, no, 0), *goa = gather_cols(dout, N, OC, r->orows, no, 1);
    float *douta = ue_abs_copy(dout, (size_t)N * OC);
    s->out = malloc((size_t)nr * OC * 4); s->out_P = malloc((size_t)nr * OC * 4);
    s->dinp = malloc((size_t)nr * C * 4); s->dinp_P = malloc((size_t)nr * C * 4);
    s->dw = gather_rows(r->dW0, r->orows, no, C, 0); s->dw_P = calloc((size_t)no * C, 4);
    s->db = ue_copy(r->db0, OC); s->db_P = calloc(OC, 4);
    ref->linear_forward(ref, s->out, x, W, r->b, nr, C, OC);
    ref->linear_forward(ref, s->out_P, xa, Wa, NULL, nr, C, OC);
    ref->linear_backward(ref, s->dinp, NULL, NULL, g, x, W, nr, C, OC);
    ref->linear_backward(ref, s->dinp_P, NULL, NULL, ga, xa, Wa, nr, C, OC);
    ref->linear_backward(ref, NULL, s->dw, NULL, go, inp, W, N, C, no);      // W unused for dW
    ref->linear_backward(ref, NULL, s->dw_P, NULL, goa, inpa, Wa, N, C, no);
    ref->linear_backward(ref, NULL, NULL, s->db, dout, inp, W, N, C, OC);
    ref->linear_backward(ref, NULL, NULL, s->db_P, douta, inpa, Wa, N, C, OC);
    ue_check(ref, "reference linear");
    free(x); free(xa); free(g); free(ga); free(Wa); free(inpa); free(go); free(goa); free(douta);
}

// Every reference of r from its inputs (again after r->W is replaced).
static void ref_compute(Engine *ref, Ref *r) {
    int N = r->N, C = r->C, OC = r->OC;
    sums_compute(ref, &r->exact, r, r->inp, r->W, r->dout);
    float *inp_b = ue_bf16_copy(r->inp, (size_t)N * C), *W_b = ue_bf16_copy(r->W, (size_t)OC * C);
    float *dout_b = ue_bf16_copy(r->dout, (size_t)N * OC);
    sums_compute(ref, &r->rounded, r, inp_b, W_b, dout_b);
    free(inp_b); free(W_b); free(dout_b);
    free(r->out_T);
    r->out_T = NULL;
    if (C == OC) {   // the forward with W^T in place of W
        float *WT = malloc((size_t)C * C * 4), *x = gather_rows(r->inp, r->rows, r->n_rows, C, 0);
        for (int o = 0; o < C; o++)
            for (int k = 0; k < C; k++) WT[(size_t)o * C + k] = r->W[(size_t)k * C + o];
        r->out_T = malloc((size_t)r->n_rows * OC * 4);
        ref->linear_forward(ref, r->out_T, x, WT, r->b, r->n_rows, C, OC);
        free(WT); free(x);
    }
}

// Seeded inputs of one shape and their reference.
static void ref_make(Engine *ref, Ref *r, int N, int C, int OC, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->N = N; r->C = C; r->OC = OC;
    r->inp = ue_randn((size_t)N * C, 1.0, seed + 1);
    r->W = ue_randn((size_t)OC * C, 1.0 / sqrt(C), seed + 2);
    r->b = ue_randn(OC, 1.0, seed + 3);
    r->dout = ue_randn((size_t)N * OC, 1.0, seed + 4);
    r->dW0 = ue_randn((size_t)OC * C, sqrt(N), seed + 5);
    r->db0 = ue_randn(OC, sqrt(N), seed + 6);
    int small = (double)N * C * OC <= 4e6;
    r->rows = malloc((N > 42 ? N : 42) * sizeof(int));
    r->orows = malloc((OC > 42 ? OC : 42) * sizeof(int));
    assert_true(r->rows && r->orows);
    r->n_rows = sample_rows(r->rows, N, small);
    r->n_orows = sample_rows(r->orows, OC, small);
    ref_compute(ref, r);
}

static void ref_free(Ref *r) {
    void *p[] = {r->rows, r->orows, r->inp, r->W, r->b, r->dout, r->dW0, r->db0, r->out_T};
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
static void run_engine(Engine *e, const Ref *r, const float *W, Result *res) {
    int N = r->N, C = r->C, OC = r->OC;
    res->out = ue_nans((size_t)N * OC);
    res->dinp = ue_nans((size_t)N * C);
    res->dw = ue_copy(r->dW0, (size_t)OC * C);
    res->db = ue_copy(r->db0, OC);
    e->linear_forward(e, res->out, r->inp, W, r->b, N, C, OC);
    e->linear_backward(e, res->dinp, res->dw, res->db, r->dout, r->inp, W, N, C, OC);
    ue_check(e, "linear");
}

typedef struct { long bad, n; double worst; } Tally;

static void tally(Tally *t, double got, double want, double bnd) {
    double err = fabs(got - want);
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
            double want = S->out[j];
            if (mut == MUT_NO_BIAS) want -= r->b[o];
            if (mut == MUT_TRANSPOSED) want = r->out_T[j];
            if (mut == MUT_NEXT_COLUMN) want = S->out[(size_t)i * OC + (o + 1) % OC];
            tally(&t[0], res->out[(size_t)n * OC + o], want, bound(bf16, C, S->out_P[j], fabs(r->b[o])));
        }
        for (int k = 0; k < C && res->dinp; k++) {
            size_t j = (size_t)i * C + k;
            double want = mut == MUT_NEXT_COLUMN ? S->dinp[(size_t)i * C + (k + 1) % C] : S->dinp[j];
            tally(&t[1], res->dinp[(size_t)n * C + k], want, bound(bf16, OC, S->dinp_P[j], 0));
        }
    }
    for (int i = 0; i < r->n_orows && res->dw; i++) {
        int o = r->orows[i];
        for (int k = 0; k < C; k++) {
            size_t j = (size_t)i * C + k;
            double want = S->dw[j];
            if (mut == MUT_NO_ACCUMULATE) want -= r->dW0[(size_t)o * C + k];
            if (mut == MUT_NEXT_COLUMN) want = S->dw[(size_t)i * C + (k + 1) % C];
            tally(&t[2], res->dw[(size_t)o * C + k], want, bound(bf16, r->N, S->dw_P[j], fabs(r->dW0[(size_t)o * C + k])));
        }
    }
    for (int o = 0; o < OC && res->db; o++) {   // db: an fp32 loop everywhere, on dout as it is
        double want = mut == MUT_NO_ACCUMULATE ? (double)r->exact.db[o] - r->db0[o] : r->exact.db[o];
        tally(&t[3], res->db[o], want, bound(0, r->N, r->exact.db_P[o], fabs(r->db0[o])));
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
// threads: a forked child limits oneDNN to AVX2 (no bf16 products) through
// DNNL_MAX_CPU_ISA, read at oneDNN's first ISA query. bf16 must then be
// refused with one line; fp32 must still work.
static void test_bf16_refused_without_avx512(void **s) {
    (void)s;
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
        Engine *e = NULL;
        char err[256] = "";
        int rc = engine_onednn_create(&e, 1, 0, err, sizeof err);
        printf("  DNNL_MAX_CPU_ISA=AVX2, bf16: rc %d: %s\n", rc, err);
        int ok = rc == -1 && e == NULL && strstr(err, "AVX-512") && !strchr(err, '\n');
        rc = engine_onednn_create(&e, 0, 0, err, sizeof err);
        ok = ok && rc == 0;
        if (e) e->free(e);
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
    Engine *e = NULL;
    char err[256] = "";
    assert_int_equal(engine_onednn_create_with_layout(&e, 0, 0, (WeightLayout)7, err, sizeof err), -1);
    assert_null(e);
    assert_non_null(strstr(err, "layout"));
    // bf16 only on oneDNN: the model refuses it on the other engines
    GPTConfig cfg = {.n_layer = 1, .n_head = 2, .d_model = 8, .vocab_size = 16, .block_size = 4, .pos = POS_ROPE};
    gc_config_defaults(&cfg);
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), 0);
    assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_OPENBLAS, GPT_BF16, GPT_ATTENTION_BLOCKED, err, sizeof err), -1);
    assert_non_null(strstr(err, "fp32 only"));
    assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_REFERENCE, GPT_BF16, GPT_ATTENTION_BLOCKED, err, sizeof err), -1);
    assert_non_null(strstr(err, "fp32 only"));
    printf("  %s\n", err);
    gpt_free(m);
    // no rows: nothing to do, nothing created
    assert_int_equal(engine_onednn_create(&e, 0, 0, err, sizeof err), 0);
    float W[6] = {0}, out[2] = {0}, inp[3] = {1, 2, 3};
    e->linear_forward(e, out, inp, W, NULL, 0, 3, 2);
    OnednnStats st;
    engine_onednn_stats(e, &st);
    assert_int_equal(st.primitives, 0);
    e->linear_forward(e, out, inp, W, NULL, 1, 3, 2);
    ue_check(e, "linear");
    assert_true(out[0] == 0.0f && out[1] == 0.0f);
    printf("  %s\n", e->describe);
    e->free(e);
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
    Engine *ref = ue_reference();
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int N = shapes[si][0], C = shapes[si][1], OC = shapes[si][2];
        Ref r;
        ref_make(ref, &r, N, C, OC, 100 + 10 * si);
        printf("N=%d C=%d OC=%d (checked rows: %d of N, %d of OC)\n", N, C, OC, r.n_rows, r.n_orows);
        for (int ci = 0; ci < ue_n_engines; ci++) {
            const EngineCfg *cfg = &ue_engines[ci];
            Engine *e = ue_engine(cfg);
            if (!e) continue;
            int bf16 = cfg->bf16;
            Result res;
            run_engine(e, &r, r.W, &res);
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
                printf("; vs bf16-input reference, fp32 bound: out %.3f dinp %.3f dW %.3f", tr[0].worst, tr[1].worst,
                       tr[2].worst);
            printf("; closer to the bf16-input reference: %.0f%%\n", 100 * closer);
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
            e->free(e);
        }
        ref_free(&r);
    }
    ref->free(ref);
}

// The skips (NULL dinp, dW, db) give the same bits as the full calls, on
// every configuration, and no bias is the same products without it.
static void test_skips(void **s) {
    (void)s;
    enum { N = 100, C = 72, OC = 200 };
    Engine *ref = ue_reference();
    Ref r;
    ref_make(ref, &r, N, C, OC, 7);
    for (int ci = 0; ci < ue_n_engines; ci++) {
        const EngineCfg *cfg = &ue_engines[ci];
        Engine *e = ue_engine(cfg);
        if (!e) continue;
        Result full;
        run_engine(e, &r, r.W, &full);
        float *x = ue_nans(N * C), *y = ue_copy(r.dW0, OC * C), *z = ue_copy(r.db0, OC);
        e->linear_backward(e, x, NULL, NULL, r.dout, r.inp, r.W, N, C, OC);   // dinp only
        assert_memory_equal(x, full.dinp, sizeof(float) * N * C);
        e->linear_backward(e, NULL, y, NULL, r.dout, r.inp, r.W, N, C, OC);   // dW only
        assert_memory_equal(y, full.dw, sizeof(float) * OC * C);
        e->linear_backward(e, NULL, NULL, z, r.dout, r.inp, r.W, N, C, OC);   // db only
        assert_memory_equal(z, full.db, sizeof(float) * OC);
        float *o2 = ue_nans(N * OC);
        e->linear_forward(e, o2, r.inp, r.W, NULL, N, C, OC);
        ue_check(e, "linear");
        Result nb = {o2, full.dinp, full.dw, full.db};
        Tally t[4];
        compare(&r, &nb, &r.exact, cfg->bf16, MUT_NO_BIAS, t);
        assert_int_equal(t[0].bad, 0);
        free(x); free(y); free(z); free(o2);
        result_free(&full);
        e->free(e);
    }
    ref_free(&r);
    ref->free(ref);
}

// Engine.keeps_inputs (engine.h): a bf16 engine's backward takes dW from
// forward's rounding of inp, kept per weight, and never reads inp itself:
// with inp overwritten (NaN) after the forward, the backward is bit for bit
// the one with inp intact. Where it has no such rounding (another row count,
// a weight never run forward, another input), it fails with a message
// rather than read inp. fp32 engines read inp (keeps_inputs 0).
static void test_keeps_inputs(void **s) {
    (void)s;
    enum { N = 100, C = 72, OC = 200 };
    Engine *ref = ue_reference();
    Ref r;
    ref_make(ref, &r, N, C, OC, 9);
    assert_int_equal(ref->keeps_inputs, 0);
    for (int ci = 0; ci < ue_n_engines; ci++) {
        const EngineCfg *cfg = &ue_engines[ci];
        Engine *e = ue_engine(cfg);
        if (!e) continue;
        assert_int_equal(e->keeps_inputs, cfg->bf16);
        if (!cfg->bf16) {
            e->free(e);
            continue;
        }
        Result full;
        run_engine(e, &r, r.W, &full);   // inp intact
        float *x = ue_copy(r.inp, (size_t)N * C), *out = ue_nans((size_t)N * OC);
        float *dinp = ue_nans((size_t)N * C), *dw = ue_copy(r.dW0, (size_t)OC * C), *db = ue_copy(r.db0, OC);
        e->linear_forward(e, out, x, r.W, r.b, N, C, OC);
        for (size_t i = 0; i < (size_t)N * C; i++) x[i] = NAN;   // the model's buffer, reused by the next layer
        e->linear_backward(e, dinp, dw, db, r.dout, x, r.W, N, C, OC);
        ue_check(e, "linear");
        assert_memory_equal(dinp, full.dinp, sizeof(float) * N * C);
        assert_memory_equal(dw, full.dw, sizeof(float) * OC * C);
        assert_memory_equal(db, full.db, sizeof(float) * OC);
        char err[256];
        float *W2 = ue_copy(r.W, (size_t)OC * C);   // a weight never run forward
        e->linear_backward(e, NULL, dw, NULL, r.dout, x, W2, N, C, OC);
        assert_int_equal(engine_failed(e, err, sizeof err), -1);
        printf("  %s: %s\n", cfg->name, err);
        assert_non_null(strstr(err, "no forward of this weight"));
        e->linear_backward(e, NULL, dw, NULL, r.dout, x, r.W, N - 16, C, OC);   // other rows
        assert_int_equal(engine_failed(e, err, sizeof err), -1);
        e->linear_backward(e, NULL, dw, NULL, r.dout, r.inp, r.W, N, C, OC);   // another input
        assert_int_equal(engine_failed(e, err, sizeof err), -1);
        assert_memory_equal(dw, full.dw, sizeof(float) * OC * C);   // a failed dW adds nothing
        free(x); free(out); free(dinp); free(dw); free(db); free(W2);
        result_free(&full);
        e->free(e);
    }
    ref_free(&r);
    ref->free(ref);
}

// oneDNN's weight copies: made at first use, once; stale (the old results,
// bit for bit) after the parameter changes until weights_changed; then
// re-made once at the next use of each copy, and the results follow.
// Configurations that read the parameter in place follow at once.
static void test_repack(void **s) {
    (void)s;
    enum { N = 64, C = 48, OC = 80 };
    Engine *ref = ue_reference();
    Ref r1, r2;                 // the same inputs, two different weights
    ref_make(ref, &r1, N, C, OC, 40);
    ref_make(ref, &r2, N, C, OC, 40);
    free(r2.W);
    r2.W = ue_randn((size_t)OC * C, 1.0 / sqrt(C), 99);
    ref_compute(ref, &r2);
    for (int ci = 1; ci < ue_n_engines; ci++) {   // the oneDNN configurations
        const EngineCfg *cfg = &ue_engines[ci];
        Engine *e = ue_engine(cfg);
        if (!e) continue;
        int bf16 = cfg->bf16, copies = cfg->copies;
        int fwd_copy = copies > 0, dinp_copy = copies == 2;   // plain bf16: 1 copy serves both
        float *W = ue_copy(r1.W, OC * C);   // the parameter the engine reads
        OnednnStats st;
        float *out1 = ue_nans(N * OC), *out = ue_nans(N * OC), *dinp = ue_nans(N * C);
        float *dw = calloc(OC * C, sizeof(float));
        Result res = {out, dinp, NULL, NULL};
        Tally t[4];

        // first uses make the copies, later uses do not
        e->linear_forward(e, out1, r1.inp, W, r1.b, N, C, OC);
        engine_onednn_stats(e, &st);
        assert_int_equal(st.repacks, fwd_copy);
        e->linear_forward(e, out, r1.inp, W, r1.b, N, C, OC);
        assert_memory_equal(out, out1, sizeof(float) * N * OC);
        e->linear_backward(e, dinp, dw, NULL, r1.dout, r1.inp, W, N, C, OC);
        ue_check(e, "linear");
        compare(&r1, &res, &r1.exact, bf16, MUT_NONE, t);
        assert_int_equal(t[0].bad + t[1].bad, 0);
        engine_onednn_stats(e, &st);
        assert_int_equal(st.repacks, fwd_copy + dinp_copy);
        long base = st.repacks;
        int prims = st.primitives;

        // the parameter changes in place (as AdamW does), without the call
        memcpy(W, r2.W, sizeof(float) * OC * C);
        e->linear_forward(e, out, r1.inp, W, r1.b, N, C, OC);
        e->linear_backward(e, dinp, dw, NULL, r1.dout, r1.inp, W, N, C, OC);
        engine_onednn_stats(e, &st);
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
        e->weights_changed(e);
        memset(out, 0xff, sizeof(float) * N * OC);
        memset(dinp, 0xff, sizeof(float) * N * C);
        e->linear_forward(e, out, r1.inp, W, r1.b, N, C, OC);
        e->linear_forward(e, out, r1.inp, W, r1.b, N, C, OC);
        engine_onednn_stats(e, &st);
        assert_int_equal(st.repacks, base + fwd_copy);
        e->linear_backward(e, dinp, dw, NULL, r1.dout, r1.inp, W, N, C, OC);
        e->linear_backward(e, dinp, dw, NULL, r1.dout, r1.inp, W, N, C, OC);
        engine_onednn_stats(e, &st);
        assert_int_equal(st.repacks, base + fwd_copy + dinp_copy);
        compare(&r2, &res, &r2.exact, bf16, MUT_NONE, t);
        assert_int_equal(t[0].bad + t[1].bad, 0);
        assert_int_equal(st.primitives, prims);   // same shapes: nothing new created

        // updates without a use cost nothing; prepack makes each copy once
        base = st.repacks;
        e->weights_changed(e);
        e->weights_changed(e);
        assert_int_equal(engine_onednn_prepack(e, W, OC, C), 0);
        engine_onednn_stats(e, &st);
        assert_int_equal(st.repacks, base + copies);
        e->linear_forward(e, out, r1.inp, W, r1.b, N, C, OC);
        e->linear_backward(e, dinp, dw, NULL, r1.dout, r1.inp, W, N, C, OC);
        ue_check(e, "linear");
        engine_onednn_stats(e, &st);
        assert_int_equal(st.repacks, base + copies);
        printf("  %-20s copies per weight %d, %ld made, %zu bytes held\n", cfg->name, copies, st.repacks,
               st.weight_copy_bytes);
        free(W); free(out1); free(out); free(dinp); free(dw);
        e->free(e);
    }
    ref_free(&r1);
    ref_free(&r2);
    ref->free(ref);
}

// A thread-count change makes new primitives (one per op) for the new
// count; results stay within the bound at every count; repeated calls at
// one count create nothing.
static void test_threads(void **s) {
    (void)s;
    int threads0 = omp_get_max_threads();
    Engine *ref = ue_reference();
    Ref r;
    ref_make(ref, &r, 300, 64, 96, 3);
    for (int ci = 1; ci < ue_n_engines; ci++) {   // the oneDNN configurations
        const EngineCfg *cfg = &ue_engines[ci];
        Engine *e = ue_engine(cfg);
        if (!e) continue;
        int counts[] = {2, 1, 2, 1};
        int prims_seen[3] = {0};
        for (int i = 0; i < 4; i++) {
            omp_set_num_threads(counts[i]);
            Result res;
            run_engine(e, &r, r.W, &res);
            Tally t[4];
            compare(&r, &res, &r.exact, cfg->bf16, MUT_NONE, t);
            for (int k = 0; k < 4; k++) assert_int_equal(t[k].bad, 0);
            OnednnStats st;
            engine_onednn_stats(e, &st);
            if (i < 2) prims_seen[i] = st.primitives;
            else assert_int_equal(st.primitives, prims_seen[1]);   // counts seen before: reused
            result_free(&res);
        }
        assert_int_equal(prims_seen[0], 3);       // forward, dinp, dW at 2 threads
        assert_int_equal(prims_seen[1], 6);       // and again at 1 thread
        e->free(e);
    }
    omp_set_num_threads(threads0);
    ref_free(&r);
    ref->free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_refused_without_avx512),   // first: before any oneDNN call
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_skips),
        cmocka_unit_test(test_keeps_inputs),
        cmocka_unit_test(test_repack),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
