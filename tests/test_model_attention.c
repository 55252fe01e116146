// test_model_attention.c: causal attention on every engine (OpenBLAS's
// sgemm blocks and oneDNN's primitives, blocked and fused, bf16) against the
// reference engine's plain loops (engine_reference.c), element by element, forward
// (out, lse) and backward (dq, dk, dv, dbias), without the distance-bias
// table (rope, learned, sinusoidal, none: their positions are in q, k or the
// input) and with one like t5's (learned values per distance bucket) and
// like alibi's (-slope_h x distance, down to -slope T: the online softmax's
// running max moves), T below one block of 64 query rows, not a multiple of
// it and several blocks, on 1 and 2 threads; the OpenBLAS engines' results
// are the same bits on both.
//
// Tolerance: both results are float evaluations of the same maths, so each
// element may differ by the sum of the two evaluations' first-order bounds
// (util_engine.c derives them, the fused attention's for its own order of
// operations; the magnitudes come from the reference itself). bf16: the engine rounds q, k, v and dY to bf16 where they enter a
// product, so it is compared with the reference on inputs rounded the same
// way (independently, in the test), and its bound adds the rounding of P
// and dS (bf16 where they enter a product, fp32 everywhere else).
//
// The bounds must be able to fail: the reference without the bias, with the
// bias one distance off, or with another head's keys, is rejected; and bf16
// must really round (outside the fp32 bound against unrounded inputs).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "util_engine.h"

enum { BIAS_NONE, BIAS_T5, BIAS_ALIBI };
typedef struct { int B, T, C, H, bias; } Shape;

// T below one block, not a multiple of the block, whole blocks, several blocks; with and without bias.
static const Shape shapes[] = {
    {2, 24, 32, 4, BIAS_T5},
    {2, 100, 64, 2, BIAS_T5},
    {1, 128, 64, 4, BIAS_NONE},
    {2, 150, 32, 2, BIAS_T5},
    {1, 40, 32, 2, BIAS_ALIBI},
    {1, 200, 32, 2, BIAS_ALIBI},
    {1, 200, 32, 2, BIAS_NONE},
};

// The distance-bias table (H, T) of a shape: t5-like values N(0, 0.5^2), or
// alibi's -slope_h n with slope_h = 2^(-8 (h+1) / H).
static float *bias_table(const Shape *sh, uint64_t seed) {
    float *bias = ue_randn((size_t)sh->H * sh->T, 0.5, seed);
    if (sh->bias == BIAS_ALIBI)
        for (int h = 0; h < sh->H; h++)
            for (int n = 0; n < sh->T; n++) bias[h * sh->T + n] = -exp2f(-8.0f * (h + 1) / sh->H) * n;
    return bias;
}

// One forward + backward on e: out, lse, dqkv (garbage in: must be overwritten), dbias (+= from zero).
typedef struct { float *out, *lse, *dqkv, *dbias; } Result;

static Result run(Engine *e, const Shape *sh, const float *qkv, const float *dout, const float *bias) {
    const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_lse = (size_t)sh->B * sh->H * sh->T;
    Result r = {ue_nans(n_out), ue_nans(n_lse), ue_nans(3 * n_out), calloc(n_lse, sizeof(float))};
    const float *b = sh->bias ? bias : NULL;
    e->attention_forward(e, r.out, r.lse, qkv, b, sh->B, sh->T, sh->C, sh->H);
    e->attention_backward(e, r.dqkv, b ? r.dbias : NULL, dout, qkv, r.out, r.lse, b, sh->B, sh->T, sh->C, sh->H);
    ue_check(e, "attention");
    return r;
}

static void result_free(Result *r) { free(r->out); free(r->lse); free(r->dqkv); free(r->dbias); }

// Elements of got outside want +- (b1 + b2), over out, lse, dqkv and (with bias) dbias.
static long outside(const Shape *sh, const Result *got, const Result *want, const AttBounds *b1, const AttBounds *b2,
                    double *worst) {
    const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_lse = (size_t)sh->B * sh->H * sh->T;
    const float *g[4] = {got->out, got->lse, got->dqkv, got->dbias}, *w[4] = {want->out, want->lse, want->dqkv, want->dbias};
    const double *x1[4] = {b1->out, b1->lse, b1->dqkv, b1->dbias}, *x2[4] = {b2->out, b2->lse, b2->dqkv, b2->dbias};
    const size_t n[4] = {n_out, n_lse, 3 * n_out, sh->bias ? n_lse : 0};
    UeTally t = {0};
    for (int k = 0; k < 4; k++) {
        double *sum = malloc((n[k] ? n[k] : 1) * sizeof *sum);
        for (size_t i = 0; i < n[k]; i++) sum[i] = x1[k][i] + x2[k][i];
        ue_tally(&t, g[k], w[k], sum, n[k]);
        free(sum);
    }
    if (worst) *worst = t.worst;
    return t.bad;
}

// The same bits: out, lse, dqkv and (with bias) dbias.
static int same_bits(const Shape *sh, const Result *a, const Result *b) {
    const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_lse = (size_t)sh->B * sh->H * sh->T;
    return memcmp(a->out, b->out, n_out * sizeof(float)) == 0 && memcmp(a->lse, b->lse, n_lse * sizeof(float)) == 0 &&
           memcmp(a->dqkv, b->dqkv, 3 * n_out * sizeof(float)) == 0 &&
           (!sh->bias || memcmp(a->dbias, b->dbias, n_lse * sizeof(float)) == 0);
}

static const char *const bias_names[] = {"none", "t5", "alibi"};

static void test_against_reference(void **state) {
    Engine *ref = ue_reference();
    // openblas fp32, onednn fp32, onednn bf16, and the fused attention: openblas, onednn fp32 and bf16
    const EngineCfg *engines[] = {&ue_engines[0], &ue_engines[1], &ue_engines[3], &ue_fused[0], &ue_fused[1],
                                  &ue_fused[2]};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const Shape *sh = &shapes[si];
        const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_qkv = 3 * n_out;
        // q, k N(0,1): scores of sd 1 (neither flat nor one-hot softmax); bias O(1), or alibi's
        float *qkv = ue_randn(n_qkv, 1.0, 11 + si), *dout = ue_randn(n_out, 1.0, 21 + si);
        float *bias = bias_table(sh, 31 + si);
        float *qkv_b = ue_bf16_copy(qkv, n_qkv), *dout_b = ue_bf16_copy(dout, n_out);
        Result want = run(ref, sh, qkv, dout, bias), want_b = run(ref, sh, qkv_b, dout_b, bias);
        // fp32 on the inputs; fp32 and bf16's on the rounded inputs; the fused evaluation's, fp32 and bf16
        AttBounds b32, b32_b, b16, b_fused, b16_fused;
        const float *bias_used = sh->bias ? bias : NULL;
        ue_attention_bounds(&b32, ref, qkv, dout, bias_used, sh->B, sh->T, sh->C, sh->H, 0, 0);
        ue_attention_bounds(&b32_b, ref, qkv_b, dout_b, bias_used, sh->B, sh->T, sh->C, sh->H, 0, 0);
        ue_attention_bounds(&b16, ref, qkv_b, dout_b, bias_used, sh->B, sh->T, sh->C, sh->H, 1, 0);
        ue_attention_bounds(&b_fused, ref, qkv, dout, bias_used, sh->B, sh->T, sh->C, sh->H, 0, 1);
        ue_attention_bounds(&b16_fused, ref, qkv_b, dout_b, bias_used, sh->B, sh->T, sh->C, sh->H, 1, 1);
        for (size_t ei = 0; ei < sizeof engines / sizeof engines[0]; ei++) {
            const EngineCfg *cfg = engines[ei];
            Engine *e = ue_engine(cfg);
            if (!e) continue;
            Result one_thread = {0};
            for (int n_threads = 1; n_threads <= 2; n_threads++) {
                omp_set_num_threads(n_threads);
                Result got = run(e, sh, qkv, dout, bias);
                double worst;
                long bad = cfg->bf16    ? outside(sh, &got, &want_b, cfg->fused ? &b16_fused : &b16, &b32_b, &worst)
                           : cfg->fused ? outside(sh, &got, &want, &b_fused, &b32, &worst)
                                        : outside(sh, &got, &want, &b32, &b32, &worst);
                printf("  B=%d T=%d C=%d H=%d bias=%s %s, %d thread(s): %ld outside the bound (worst err/bound "
                       "%.3f)\n", sh->B, sh->T, sh->C, sh->H, bias_names[sh->bias], cfg->name, n_threads, bad, worst);
                assert_int_equal(bad, 0);
                if (cfg->bf16) {   // bf16 really rounds: outside the fp32 bound against the unrounded inputs
                    long beyond = outside(sh, &got, &want, &b32, &b32, NULL);
                    printf("    of which outside the fp32 bound: %ld\n", beyond);
                    assert_true(beyond > 0);
                }
                if (n_threads == 1) {
                    one_thread = got;
                    continue;
                }
                if (!cfg->onednn || cfg->fused) {   // one thread per (batch, head), fixed order: the same bits
                    printf("    the same bits on 1 and 2 threads: %s\n", same_bits(sh, &got, &one_thread) ? "yes" : "NO");
                    assert_true(same_bits(sh, &got, &one_thread));
                }
                result_free(&got);
            }
            result_free(&one_thread);
            e->free(e);
        }
        ue_attention_bounds_free(&b32); ue_attention_bounds_free(&b32_b); ue_attention_bounds_free(&b16);
        ue_attention_bounds_free(&b_fused); ue_attention_bounds_free(&b16_fused);
        result_free(&want); result_free(&want_b);
        free(qkv); free(dout); free(bias); free(qkv_b); free(dout_b);
    }
    omp_set_num_threads(2);
    ref->free(ref);
}

// The bounds reject a wrong result: the OpenBLAS engine's (blocked and
// fused) and oneDNN's fused one against a reference without the bias, with
// the bias one distance off (bias[i-j+1]), and with the keys of the next head.
static void mutations_case(const EngineCfg *cfg) {
    printf("  %s\n", cfg->name);
    Engine *ref = ue_reference(), *e = ue_engine(cfg);
    if (!e) { ref->free(ref); return; }   // bf16 on a CPU without it (ue_engine said so)
    const Shape *sh = &shapes[1];
    const size_t n_out = (size_t)sh->B * sh->T * sh->C, n_qkv = 3 * n_out, D = sh->C / sh->H;
    float *qkv = ue_randn(n_qkv, 1.0, 12), *dout = ue_randn(n_out, 1.0, 22), *bias = ue_randn((size_t)sh->H * sh->T, 0.5, 32);
    Result got = run(e, sh, qkv, dout, bias);
    if (cfg->bf16) {   // the reference, its mutants and the bounds on the inputs bf16 rounds them to
        float *qkv_b = ue_bf16_copy(qkv, n_qkv), *dout_b = ue_bf16_copy(dout, n_out);
        free(qkv); free(dout);
        qkv = qkv_b; dout = dout_b;
    }
    AttBounds bnd;
    ue_attention_bounds(&bnd, ref, qkv, dout, bias, sh->B, sh->T, sh->C, sh->H, cfg->bf16, cfg->fused);
    float *shifted = calloc((size_t)sh->H * sh->T, sizeof(float)), *swapped = ue_copy(qkv, n_qkv);
    for (int h = 0; h < sh->H; h++)
        for (int n = 0; n + 1 < sh->T; n++) shifted[h * sh->T + n] = bias[h * sh->T + n + 1];
    for (size_t r = 0; r < (size_t)sh->B * sh->T; r++)   // k of head h <- k of head h+1
        for (int h = 0; h < sh->H; h++)
            memcpy(swapped + r * 3 * sh->C + sh->C + h * D, qkv + r * 3 * sh->C + sh->C + ((h + 1) % sh->H) * D,
                   D * sizeof(float));
    Shape no_bias = *sh;
    no_bias.bias = 0;
    struct { const char *name; Result want; } mutants[] = {
        {"bias dropped", run(ref, &no_bias, qkv, dout, bias)},
        {"bias one distance off", run(ref, sh, qkv, dout, shifted)},
        {"keys of the next head", run(ref, sh, swapped, dout, bias)},
    };
    for (size_t mi = 0; mi < sizeof mutants / sizeof mutants[0]; mi++) {
        long bad = outside(sh, &got, &mutants[mi].want, &bnd, &bnd, NULL);
        printf("  %s: %ld outside the bound\n", mutants[mi].name, bad);
        assert_true(bad > (long)n_out / 2);
        result_free(&mutants[mi].want);
    }
    ue_attention_bounds_free(&bnd);
    result_free(&got);
    free(qkv); free(dout); free(bias); free(shifted); free(swapped);
    e->free(e);
    ref->free(ref);
}

static void test_bounds_reject_mutations(void **state) {
    mutations_case(&ue_engines[0]);
    for (int i = 0; i < ue_n_fused; i++) mutations_case(&ue_fused[i]);
}

// Many lengths in turn and back: oneDNN's plans (more than it keeps, blocked
// and fused), the fused attention's edges (T = 1, one key block, a last block of 1 row).
static void many_lengths_case(const EngineCfg *cfg) {
    Shape sh = {1, 0, 32, 2, BIAS_T5};
    Engine *ref = ue_reference(), *e = ue_engine(cfg);
    if (!e) { ref->free(ref); return; }   // bf16 on a CPU without it (ue_engine said so)
    const int lengths[] = {8, 64, 65, 130, 7, 16, 33, 200, 129, 1, 8, 64};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        sh.T = lengths[li];
        const size_t n_out = (size_t)sh.T * sh.C;
        float *qkv = ue_randn(3 * n_out, 1.0, 40 + li), *dout = ue_randn(n_out, 1.0, 50 + li);
        float *bias = ue_randn((size_t)sh.H * sh.T, 0.5, 60);
        omp_set_num_threads(1 + (int)(li % 2));
        Result got = run(e, &sh, qkv, dout, bias);
        if (cfg->bf16) {   // the reference and the bounds on the inputs bf16 rounds them to
            float *qkv_b = ue_bf16_copy(qkv, 3 * n_out), *dout_b = ue_bf16_copy(dout, n_out);
            free(qkv); free(dout);
            qkv = qkv_b; dout = dout_b;
        }
        Result want = run(ref, &sh, qkv, dout, bias);
        AttBounds bnd, bnd_e;
        ue_attention_bounds(&bnd, ref, qkv, dout, bias, sh.B, sh.T, sh.C, sh.H, 0, 0);
        ue_attention_bounds(&bnd_e, ref, qkv, dout, bias, sh.B, sh.T, sh.C, sh.H, cfg->bf16, cfg->fused);
        long bad = outside(&sh, &got, &want, &bnd_e, &bnd, NULL);
        printf("  %s T=%d: %ld outside the bound\n", cfg->name, sh.T, bad);
        assert_int_equal(bad, 0);
        ue_attention_bounds_free(&bnd);
        ue_attention_bounds_free(&bnd_e);
        result_free(&want); result_free(&got);
        free(qkv); free(dout); free(bias);
    }
    omp_set_num_threads(2);
    e->free(e);
    ref->free(ref);
}

static void test_many_lengths(void **state) {
    many_lengths_case(&ue_engines[1]);
    for (int i = 0; i < ue_n_fused; i++) many_lengths_case(&ue_fused[i]);
}

// Misuse gets an error, not a race: oneDNN's attention called from inside a parallel region.
static void test_refuses_misuse(void **state) {
    Engine *e = ue_engine(&ue_engines[1]);
    const int T = 8, C = 32, H = 2;
    float *qkv = ue_randn(3 * C * T, 1.0, 70), out[32 * 8], lse[2 * 8];
    char err[256];
    #pragma omp parallel num_threads(2)
    #pragma omp single
    e->attention_forward(e, out, lse, qkv, NULL, 1, T, C, H);
    assert_int_equal(engine_failed(e, err, sizeof err), -1);
    printf("  inside a parallel region: %s\n", err);
    assert_non_null(strstr(err, "parallel region"));
    e->attention_forward(e, out, lse, qkv, NULL, 1, T, C, H);   // outside: fine, and the failure was cleared
    assert_int_equal(engine_failed(e, err, sizeof err), 0);
    free(qkv);
    e->free(e);
}

int main(void) {
    omp_set_num_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_bounds_reject_mutations),
        cmocka_unit_test(test_many_lengths),
        cmocka_unit_test(test_refuses_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
