// test_model_attention_onednn.c: attention with its products on oneDNN
// (attention_onednn.h), fp32 and bf16, and attention.c (OpenBLAS), all
// against one double-precision reference, element by element, with a bound
// computed for each element alongside the reference.
//
// The bound (first order in the unit roundoffs; u = 2^-24 for fp32 sums,
// g(n) = n u / (1 - n u) for a sum of n terms in any order, Higham 3.1):
//   s_j  = scale q.k_j + b_j        |ds_j| <= g(D+2) (scale sum|q k_j| + |b_j|)
//   lse  = log sum exp(s)           |dlse| <= max_j |ds_j| + g(T+2) + EXP + u (|lse| + 1)
//   p_j  = exp(s_j - lse)           |dp_j| / p_j <= e_j = |ds_j| + |dlse| + u (|s_j - lse| + 2)
//                                                        + EXP + 2u
//   y    = sum_j p_j v_j            |dy| <= sum_j p_j |v_j| (e_j + g(T+2))
// (EXP = 2e-7, exp_fast's relative error, fastmath.h) and backward, with dy
// given exactly:
//   dP_j = dy.v_j                   |ddP_j| <= g(D+2) sum |dy v_j|
//   rho  = sum_j p_j dP_j           |drho| <= sum_j p_j (e_j |dP_j| + |ddP_j|) + g(T+2) sum_j p_j |dP_j|
//   dS_j = p_j (dP_j - rho)         |ddS_j| <= p_j (e_j |dP_j - rho| + |ddP_j| + |drho|) + 2u |dS_j|
//   dq   = scale sum_j dS_j k_j     |d dq| <= scale sum_j (|ddS_j| + g(T+2) |dS_j|) |k_j| + u |dq|
//   dk_j, dv_j likewise, summed over the query rows; dbias sums dS.
// (The forward's p = exp(s - max) / sum takes another path to the same p;
// its extra roundings, a division and the max subtraction, are in the 2u.)
// These are worst-case bounds for any summation order, so they hold for
// OpenBLAS's and oneDNN's blockings alike.
//
// bf16: the reference computes what the engine computes, in exact
// arithmetic: q, k, v and dy rounded to bf16 first (the same values the
// engine rounds, so no allowance), P and dS rounded to bf16 where they enter
// a product (the scale after the product, dbias from the unrounded dS). The
// engine rounds its own fp32 P and dS, which lie within the bounds above of
// the exact ones; their roundings may differ from the reference's by one
// bf16 step only where that interval holds a rounding boundary, and the
// bound allows exactly that: per term, the largest |bf16(x +- e) - bf16(x)|.
// So the bf16 bound is as sharp as fp32's, and checks which inputs are
// rounded, how (to nearest even, independently computed here), and where
// the scale and the bias gradient sit.
//
// The bounds must be able to fail: the reference with the bias dropped, or
// with the causal mask one key wider, is rejected; so are bf16 references
// that leave dy unrounded, round dS after the scale, or take dbias from the
// rounded dS. And bf16 must really round (the bf16 engine lies outside the
// fp32 reference's bound).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include "common/rng.h"
#include "model/attention_onednn.h"
#include "model/layers.h"

#define U32 (1.0 / 16777216.0)   // 2^-24
#define U16 (1.0 / 256.0)        // 2^-8
#define EXP_ERR 2e-7             // exp_fast's relative error (fastmath.h)

static double g(double n) { return n * U32 / (1.0 - n * U32); }

typedef struct { int B, T, C, H, bias; } Shape;

typedef struct {
    double *out, *dqkv, *dbias;             // reference values
    double *out_b, *dqkv_b, *dbias_b;       // their bounds
} Ref;

enum { MUT_NONE, MUT_NO_BIAS, MUT_WIDE_MASK, MUT_DY_UNROUNDED, MUT_SCALE_BEFORE_ROUNDING, MUT_DBIAS_ROUNDED };

// x rounded to 8 significant bits, to nearest, ties to even (bf16's
// rounding; no bf16 code of the engine used), or x itself when !bf16.
static double rb(double x, int bf16) {
    if (!bf16 || x == 0.0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e);   // |m| in [0.5, 1): m * 2^8 has 8 bits before the point
    return ldexp(rint(m * 256.0), e - 8);
}

// The most the rounding of a value within x +- err can differ from rb(x).
static double flip(double x, double err, int bf16) {
    if (!bf16) return 0.0;
    double r = rb(x, 1);
    return fmax(fabs(rb(x - err, 1) - r), fabs(rb(x + err, 1) - r));
}

// The reference and its bounds, fp32 products (bf16 = 0) or bf16 products,
// in double. mutation: a deliberately wrong reference (the bounds' power to reject).
static void reference(Ref *R, const Shape *sh, const float *qkv_in, const float *dout_in, const float *bias,
                      int bf16, int mutation) {
    const int B = sh->B, T = sh->T, C = sh->C, H = sh->H, D = C / H;
    const double scale = 1.0 / sqrt((double)D), gD = g(D + 2.0), gT = g(T + 2.0);
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    double *qkv = malloc(n_qkv * sizeof *qkv), *dout = malloc(n_out * sizeof *dout);
    for (size_t i = 0; i < n_qkv; i++) qkv[i] = rb(qkv_in[i], bf16);
    for (size_t i = 0; i < n_out; i++) dout[i] = rb(dout_in[i], bf16 && mutation != MUT_DY_UNROUNDED);
    double *s = malloc(T * sizeof *s), *es = malloc(T * sizeof *es), *p = malloc(T * sizeof *p);
    double *e = malloc(T * sizeof *e), *dP = malloc(T * sizeof *dP), *edP = malloc(T * sizeof *edP);
    double *dS = malloc(T * sizeof *dS), *edS = malloc(T * sizeof *edS);
    double *pr = malloc(T * sizeof *pr), *pf = malloc(T * sizeof *pf);     // P as the products read it, its flip
    double *dsr = malloc(T * sizeof *dsr), *dsf = malloc(T * sizeof *dsf); // dS likewise (scaled for dq, dk)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const double *Q = qkv + (size_t)b * T * 3 * C + h * D, *K = Q + C, *V = Q + 2 * C;
            const double *dY = dout + (size_t)b * T * C + h * D;
            double *dq = R->dqkv + (size_t)b * T * 3 * C + h * D, *dk = dq + C, *dv = dq + 2 * C;
            double *dq_b = R->dqkv_b + (size_t)b * T * 3 * C + h * D, *dk_b = dq_b + C, *dv_b = dq_b + 2 * C;
            double *db = R->dbias + ((size_t)b * H + h) * T, *db_b = R->dbias_b + ((size_t)b * H + h) * T;
            for (int i = 0; i < T; i++) {
                const double *q = Q + (size_t)i * 3 * C;
                int n = mutation == MUT_WIDE_MASK && i + 1 < T ? i + 2 : i + 1;
                double mx = -INFINITY, es_max = 0;
                for (int j = 0; j < n; j++) {
                    const double *k = K + (size_t)j * 3 * C;
                    double dot = 0, mag = 0;
                    for (int d = 0; d < D; d++) { dot += q[d] * k[d]; mag += fabs(q[d] * k[d]); }
                    double bj = sh->bias && mutation != MUT_NO_BIAS && i >= j ? bias[h * T + (i - j)] : 0.0;
                    s[j] = scale * dot + bj;
                    es[j] = gD * (scale * mag + fabs(bj));
                    if (s[j] > mx) mx = s[j];
                    if (es[j] > es_max) es_max = es[j];
                }
                double sum = 0;
                for (int j = 0; j < n; j++) sum += exp(s[j] - mx);
                double lse = mx + log(sum), e_lse = es_max + gT + EXP_ERR + U32 * (fabs(lse) + 1);
                double *y = R->out + ((size_t)b * T + i) * C + h * D, *y_b = R->out_b + ((size_t)b * T + i) * C + h * D;
                for (int j = 0; j < n; j++) {
                    p[j] = exp(s[j] - lse);
                    e[j] = es[j] + e_lse + U32 * (fabs(s[j] - lse) + 2) + EXP_ERR + 2 * U32;
                    pr[j] = rb(p[j], bf16);
                    pf[j] = flip(p[j], e[j] * p[j], bf16);
                }
                for (int d = 0; d < D; d++) {
                    double acc = 0, bnd = 0;
                    for (int j = 0; j < n; j++) {
                        double v = V[(size_t)j * 3 * C + d];
                        acc += pr[j] * v;
                        // fp32: P's own error; bf16: its rounding's possible flip (P's error is rounded away)
                        bnd += (bf16 ? pf[j] : p[j] * e[j]) * fabs(v) + gT * fabs(pr[j] * v);
                    }
                    y[d] = acc;
                    y_b[d] = bnd;
                }
                // backward of row i
                const double *dy = dY + (size_t)i * C;
                double rho = 0, erho = 0, rho_mag = 0;
                for (int j = 0; j < n; j++) {
                    const double *v = V + (size_t)j * 3 * C;
                    double dot = 0, mag = 0;
                    for (int d = 0; d < D; d++) { dot += dy[d] * v[d]; mag += fabs(dy[d] * v[d]); }
                    dP[j] = dot;
                    edP[j] = gD * mag;
                    rho += p[j] * dP[j];
                    erho += p[j] * (e[j] * fabs(dP[j]) + edP[j]);
                    rho_mag += p[j] * fabs(dP[j]);
                }
                erho += gT * rho_mag;
                for (int j = 0; j < n; j++) {
                    dS[j] = p[j] * (dP[j] - rho);
                    edS[j] = p[j] * (e[j] * fabs(dP[j] - rho) + edP[j] + erho) + 2 * U32 * fabs(dS[j]);
                    // the products read scale * bf16(dS) (the scale is the product's output scale)
                    dsr[j] = mutation == MUT_SCALE_BEFORE_ROUNDING ? rb(scale * dS[j], bf16) : scale * rb(dS[j], bf16);
                    dsf[j] = scale * flip(dS[j], edS[j], bf16);
                    double dbias_term = mutation == MUT_DBIAS_ROUNDED ? rb(dS[j], bf16) : dS[j];
                    if (i >= j) { db[i - j] += dbias_term; db_b[i - j] += edS[j] + gT * fabs(dS[j]); }
                }
                for (int d = 0; d < D; d++) {
                    double acc = 0, bnd = 0;
                    for (int j = 0; j < n; j++) {
                        double k = K[(size_t)j * 3 * C + d];
                        acc += dsr[j] * k;
                        bnd += (bf16 ? dsf[j] : scale * edS[j]) * fabs(k) + gT * fabs(dsr[j] * k);
                    }
                    dq[(size_t)i * 3 * C + d] = acc;
                    dq_b[(size_t)i * 3 * C + d] = bnd + U32 * fabs(acc);
                }
                for (int j = 0; j < n; j++)
                    for (int d = 0; d < D; d++) {
                        dk[(size_t)j * 3 * C + d] += dsr[j] * q[d];
                        dk_b[(size_t)j * 3 * C + d] += ((bf16 ? dsf[j] : scale * edS[j]) + gT * fabs(dsr[j])) * fabs(q[d]);
                        dv[(size_t)j * 3 * C + d] += pr[j] * dy[d];
                        dv_b[(size_t)j * 3 * C + d] += ((bf16 ? pf[j] : p[j] * e[j]) + gT * fabs(pr[j])) * fabs(dy[d]);
                    }
            }
        }
    free(qkv); free(dout);
    free(s); free(es); free(p); free(e); free(dP); free(edP); free(dS); free(edS);
    free(pr); free(pf); free(dsr); free(dsf);
}

static Ref ref_alloc(const Shape *sh) {
    size_t n_out = (size_t)sh->B * sh->T * sh->C, n_qkv = 3 * n_out, n_db = (size_t)sh->B * sh->H * sh->T;
    Ref R = {calloc(n_out, 8), calloc(n_qkv, 8), calloc(n_db, 8), calloc(n_out, 8), calloc(n_qkv, 8), calloc(n_db, 8)};
    assert_non_null(R.out_b);
    return R;
}

static void ref_free(Ref *R) {
    free(R->out); free(R->dqkv); free(R->dbias); free(R->out_b); free(R->dqkv_b); free(R->dbias_b);
}

// Elements of x (float) outside ref +- bound; prints the first.
static long outside(const char *what, const char *name, const float *x, const double *ref, const double *bnd,
                    size_t n, int quiet) {
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(x[i] - ref[i]) <= bnd[i])) {
            if (!bad && !quiet)
                printf("  %s %s[%zu]: %.9g, reference %.9g, bound %.3g\n", what, name, i, x[i], ref[i], bnd[i]);
            bad++;
        }
    return bad;
}

static float *randn(size_t n, double std, uint64_t seed) {
    float *x = malloc(n * sizeof *x);
    Rng rng;
    rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * rng_normal(&rng));
    return x;
}

// oneDNN computes bf16 products on AVX-512 cores: natively with
// avx512_core_bf16 or amx, emulated on a plain avx512_core.
static int bf16_available(void) {
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

// One attention forward + backward by `engine` (NULL: attention.c) into out, dqkv, dbias.
static void run(AttentionEngine *engine, const Shape *sh, const float *qkv, const float *dout, const float *bias,
                float *out, float *dqkv, float *dbias, int n_threads) {
    const int B = sh->B, T = sh->T, C = sh->C, H = sh->H;
    float *lse = malloc((size_t)B * H * T * sizeof *lse);
    memset(dbias, 0, (size_t)B * H * T * sizeof *dbias);
    if (!engine) {
        float *scratch = malloc(n_threads * attention_scratch_floats(T) * sizeof *scratch);
        attention_forward(out, lse, qkv, sh->bias ? bias : NULL, scratch, n_threads, B, T, C, H);
        attention_backward(dqkv, sh->bias ? dbias : NULL, dout, qkv, lse, sh->bias ? bias : NULL, scratch,
                           n_threads, B, T, C, H);
        free(scratch);
    } else {
        assert_int_equal(attention_engine_forward(engine, out, lse, qkv, sh->bias ? bias : NULL, n_threads, B, T), 0);
        assert_int_equal(attention_engine_backward(engine, dqkv, sh->bias ? dbias : NULL, dout, qkv, lse,
                                                   sh->bias ? bias : NULL, n_threads, B, T), 0);
    }
    free(lse);
}

// T below one block, T not a multiple of the block, whole blocks; with and without bias.
static const Shape shapes[] = {
    {2, 24, 32, 4, 1},
    {2, 100, 64, 2, 1},
    {1, 128, 64, 4, 0},
};

static void test_against_reference(void **state) {
    const char *names[] = {"attention.c (OpenBLAS)", "oneDNN fp32", "oneDNN bf16"};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const Shape *sh = &shapes[si];
        const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_qkv = 3 * n_out, n_db = (size_t)sh->B * sh->H * sh->T;
        // q, k N(0,1): scores of sd 1 (neither flat nor one-hot softmax); bias O(1)
        float *qkv = randn(n_qkv, 1.0, 11 + si), *dout = randn(n_out, 1.0, 21 + si), *bias = randn(sh->H * sh->T, 0.5, 31 + si);
        float *out = malloc(n_out * 4), *dqkv = malloc(n_qkv * 4), *dbias = malloc(n_db * 4);
        Ref R32 = ref_alloc(sh), R16 = ref_alloc(sh);
        reference(&R32, sh, qkv, dout, bias, 0, MUT_NONE);
        reference(&R16, sh, qkv, dout, bias, 1, MUT_NONE);
        for (int v = 0; v < 3; v++) {
            for (int n_threads = 1; n_threads <= 2; n_threads++) {
                AttentionEngine *ae = NULL;
                char err[256] = "";
                if (v == 2 && !bf16_available()) { printf("  %s: this CPU has no native bf16 (oneDNN refuses it)\n", names[v]); continue; }
                if (v > 0) assert_int_equal(attention_engine_create(&ae, v == 2, sh->C, sh->H, err, sizeof err), 0);
                run(ae, sh, qkv, dout, bias, out, dqkv, dbias, n_threads);
                const Ref *R = v == 2 ? &R16 : &R32;
                long bad = outside(names[v], "out", out, R->out, R->out_b, n_out, 0) +
                           outside(names[v], "dqkv", dqkv, R->dqkv, R->dqkv_b, n_qkv, 0) +
                           (sh->bias ? outside(names[v], "dbias", dbias, R->dbias, R->dbias_b, n_db, 0) : 0);
                printf("  B=%d T=%d C=%d H=%d bias=%d %s, %d thread(s): %ld outside the bound\n", sh->B, sh->T,
                       sh->C, sh->H, sh->bias, names[v], n_threads, bad);
                assert_int_equal(bad, 0);
                if (v == 2) {   // bf16 really rounds: outside the fp32 bound somewhere
                    long beyond = outside(names[v], "out", out, R32.out, R32.out_b, n_out, 1) +
                                  outside(names[v], "dqkv", dqkv, R32.dqkv, R32.dqkv_b, n_qkv, 1);
                    printf("    of which outside the fp32 bound: %ld of %zu\n", beyond, n_out + n_qkv);
                    assert_true(beyond > 0);
                }
                attention_engine_free(ae);
            }
        }
        ref_free(&R32); ref_free(&R16);
        free(qkv); free(dout); free(bias); free(out); free(dqkv); free(dbias);
    }
}

// The bounds reject a wrong result: attention.c against a reference without
// the bias, and against one whose causal mask admits one key too many; the
// bf16 engine against bf16 references that leave dy unrounded, round dS
// after the scale, or take dbias from the rounded dS.
static void test_bounds_reject_mutations(void **state) {
    const Shape *sh = &shapes[1];
    const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_qkv = 3 * n_out, n_db = (size_t)sh->B * sh->H * sh->T;
    float *qkv = randn(n_qkv, 1.0, 12), *dout = randn(n_out, 1.0, 22), *bias = randn(sh->H * sh->T, 0.5, 32);
    float *out = malloc(n_out * 4), *dqkv = malloc(n_qkv * 4), *dbias = malloc(n_db * 4);
    static const struct { int mutation, bf16; const char *name; } mutants[] = {
        {MUT_NO_BIAS, 0, "bias dropped"},
        {MUT_WIDE_MASK, 0, "mask one key wider"},
        {MUT_DY_UNROUNDED, 1, "bf16: dy not rounded"},
        {MUT_SCALE_BEFORE_ROUNDING, 1, "bf16: dS rounded after the scale"},
        {MUT_DBIAS_ROUNDED, 1, "bf16: dbias from the rounded dS"},
    };
    for (size_t mi = 0; mi < sizeof mutants / sizeof mutants[0]; mi++) {
        AttentionEngine *ae = NULL;
        char err[256] = "";
        if (mutants[mi].bf16) {
            if (!bf16_available()) { printf("  %s: this CPU has no native bf16\n", mutants[mi].name); continue; }
            assert_int_equal(attention_engine_create(&ae, 1, sh->C, sh->H, err, sizeof err), 0);
        }
        run(ae, sh, qkv, dout, bias, out, dqkv, dbias, 2);
        Ref R = ref_alloc(sh);
        reference(&R, sh, qkv, dout, bias, mutants[mi].bf16, mutants[mi].mutation);
        long bad_out = outside("mutant", "out", out, R.out, R.out_b, n_out, 1);
        long bad_dqkv = outside("mutant", "dqkv", dqkv, R.dqkv, R.dqkv_b, n_qkv, 1);
        long bad_db = outside("mutant", "dbias", dbias, R.dbias, R.dbias_b, n_db, 1);
        printf("  %s: outside the bound: out %ld of %zu, dqkv %ld of %zu, dbias %ld of %zu\n", mutants[mi].name,
               bad_out, n_out, bad_dqkv, n_qkv, bad_db, n_db);
        // each mutant changes at least one tensor in most of its entries
        assert_true(bad_out > (long)n_out / 2 || bad_dqkv > (long)n_qkv / 2 || bad_db > (long)n_db / 2);
        ref_free(&R);
        attention_engine_free(ae);
    }
    free(qkv); free(dout); free(bias); free(out); free(dqkv); free(dbias);
}

// The plans: many lengths in turn (more than the engine keeps) and back.
static void test_many_lengths(void **state) {
    Shape sh = {1, 0, 32, 2, 1};
    AttentionEngine *ae = NULL;
    char err[256] = "";
    assert_int_equal(attention_engine_create(&ae, 0, sh.C, sh.H, err, sizeof err), 0);
    const int lengths[] = {8, 64, 65, 130, 7, 16, 33, 200, 129, 1, 8, 64};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        sh.T = lengths[li];
        const size_t n_out = (size_t)sh.T * sh.C, n_qkv = 3 * n_out, n_db = (size_t)sh.H * sh.T;
        float *qkv = randn(n_qkv, 1.0, 40 + li), *dout = randn(n_out, 1.0, 50 + li), *bias = randn(sh.H * sh.T, 0.5, 60);
        float *out = malloc(n_out * 4), *dqkv = malloc(n_qkv * 4), *dbias = malloc(n_db * 4);
        Ref R = ref_alloc(&sh);
        reference(&R, &sh, qkv, dout, bias, 0, MUT_NONE);
        run(ae, &sh, qkv, dout, bias, out, dqkv, dbias, 1 + (int)(li % 2));
        long bad = outside("oneDNN fp32", "out", out, R.out, R.out_b, n_out, 0) +
                   outside("oneDNN fp32", "dqkv", dqkv, R.dqkv, R.dqkv_b, n_qkv, 0) +
                   outside("oneDNN fp32", "dbias", dbias, R.dbias, R.dbias_b, n_db, 0);
        assert_int_equal(bad, 0);
        ref_free(&R);
        free(qkv); free(dout); free(bias); free(out); free(dqkv); free(dbias);
    }
    attention_engine_free(ae);
}

// Misuse gets an error, not a race: a call from inside a parallel region,
// or with no threads.
static void test_refuses_misuse(void **state) {
    AttentionEngine *ae = NULL;
    char err[256] = "";
    assert_int_equal(attention_engine_create(&ae, 0, 32, 2, err, sizeof err), 0);
    const int T = 8;
    float *qkv = randn(3 * 32 * T, 1.0, 70), out[32 * T], lse[2 * T];
    int rc_inside = 0;
    #pragma omp parallel num_threads(2)
    #pragma omp single
    rc_inside = attention_engine_forward(ae, out, lse, qkv, NULL, 1, 1, T);
    assert_int_equal(rc_inside, -1);
    printf("  inside a parallel region: %s\n", attention_engine_error(ae));
    assert_non_null(strstr(attention_engine_error(ae), "parallel region"));
    assert_int_equal(attention_engine_forward(ae, out, lse, qkv, NULL, 0, 1, T), -1);
    assert_int_equal(attention_engine_forward(ae, out, lse, qkv, NULL, 1, 1, T), 0);
    free(qkv);
    attention_engine_free(ae);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_bounds_reject_mutations),
        cmocka_unit_test(test_many_lengths),
        cmocka_unit_test(test_refuses_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
