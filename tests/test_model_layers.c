// test_model_layers.c: every layer's backward against central finite
// differences of loss = sum(out * r), r fixed and random, on small random
// inputs: the layers of reference.c and block_llama.c, the linear layer and attention on the
// reference engine (engine_reference.c; the fast engines are checked against it in
// test_model_linear.c and test_model_attention.c), and the positional hooks. Float32 forward, Richardson-extrapolated differences with steps
// 3e-2 and 6e-2 on O(1) inputs (smaller steps only add float noise); tolerance: relative error <= 2e-3 with a
// denominator floor of 1e-2 (gradients here are O(0.1..1)).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "engine/engine_create.h"
#include "model/layers.h"
#include "model/pos.h"
#include "util_gradcheck.h"

#define TOL 2e-3
#define FLOOR 1e-2
#define EPS 3e-2f

static double worst_overall;

static void expect_grad(const char *what, gc_loss_fn f, void *ctx, float *x, const float *g, size_t n) {
    GcResult r = gc_check(f, ctx, x, g, n, 0, EPS, FLOOR, 1);
    printf("  %-28s max rel err %.2e over %d entries\n", what, r.max_rel, r.n_checked);
    if (r.max_rel > worst_overall) worst_overall = r.max_rel;
    assert_true(r.max_rel < TOL);
}

static float *randn(size_t n, double std, uint64_t seed) {
    float *x = malloc(n * sizeof(float));
    gc_fill_normal(x, n, 0.0, std, seed);
    return x;
}

static Engine *ref;   // the reference engine

/* ---- linear ---- */
enum { MN = 6, MC = 5, MO = 7 };
typedef struct { float *inp, *w, *b, *out, *r; } MatCtx;
static double mat_loss(void *p) {
    MatCtx *c = p;
    ref->linear_forward(ref, c->out, c->inp, c->w, c->b, MN, MC, MO);
    return gc_dot(c->out, c->r, MN * MO);
}
static void test_linear(void **s) {
    (void)s;
    MatCtx c = {randn(MN * MC, 1, 1), randn(MO * MC, 1, 2), randn(MO, 1, 3), randn(MN * MO, 1, 4), randn(MN * MO, 1, 5)};
    float *dinp = calloc(MN * MC, 4), *dw = calloc(MO * MC, 4), *db = calloc(MO, 4);
    ref->linear_backward(ref, dinp, dw, db, c.r, c.inp, c.w, MN, MC, MO);
    expect_grad("linear dinp", mat_loss, &c, c.inp, dinp, MN * MC);
    expect_grad("linear dweight", mat_loss, &c, c.w, dw, MO * MC);
    expect_grad("linear dbias", mat_loss, &c, c.b, db, MO);
    // weight/bias gradients accumulate
    ref->linear_backward(ref, dinp, dw, db, c.r, c.inp, c.w, MN, MC, MO);
    float *dw1 = calloc(MO * MC, 4), *db1 = calloc(MO, 4);
    ref->linear_backward(ref, NULL, dw1, db1, c.r, c.inp, c.w, MN, MC, MO);
    for (int i = 0; i < MO * MC; i++) assert_true(fabsf(dw[i] - 2 * dw1[i]) < 1e-5f);
    for (int i = 0; i < MO; i++) assert_true(fabsf(db[i] - 2 * db1[i]) < 1e-5f);
    free(dw1); free(db1); free(dinp); free(dw); free(db);
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.r);
}

/* ---- layernorm ---- */
enum { LN_N = 4, LN_C = 8 };
typedef struct { float *inp, *w, *b, *out, *mean, *rstd, *r; } LnCtx;
static double ln_loss(void *p) {
    LnCtx *c = p;
    layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, LN_N, LN_C);
    return gc_dot(c->out, c->r, LN_N * LN_C);
}
static void test_layernorm(void **s) {
    (void)s;
    LnCtx c = {randn(LN_N * LN_C, 1, 11), randn(LN_C, 1, 12), randn(LN_C, 1, 13), randn(LN_N * LN_C, 1, 0),
               randn(LN_N, 1, 0), randn(LN_N, 1, 0), randn(LN_N * LN_C, 1, 14)};
    ln_loss(&c);
    for (int n = 0; n < LN_N; n++) {   // forward against the definition, in double
        double m = 0, v = 0;
        for (int k = 0; k < LN_C; k++) m += c.inp[n * LN_C + k];
        m /= LN_C;
        for (int k = 0; k < LN_C; k++) v += (c.inp[n * LN_C + k] - m) * (c.inp[n * LN_C + k] - m);
        v /= LN_C;
        for (int k = 0; k < LN_C; k++) {
            double ref = (c.inp[n * LN_C + k] - m) / sqrt(v + 1e-5) * c.w[k] + c.b[k];
            assert_true(fabs(ref - c.out[n * LN_C + k]) < 1e-5);
        }
    }
    float *dinp = calloc(LN_N * LN_C, 4), *dw = calloc(LN_C, 4), *db = calloc(LN_C, 4);
    layernorm_backward(dinp, dw, db, c.r, c.inp, c.w, c.mean, c.rstd, LN_N, LN_C);
    expect_grad("layernorm dinp", ln_loss, &c, c.inp, dinp, LN_N * LN_C);
    expect_grad("layernorm dweight", ln_loss, &c, c.w, dw, LN_C);
    expect_grad("layernorm dbias", ln_loss, &c, c.b, db, LN_C);
    free(dinp); free(dw); free(db);
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.mean); free(c.rstd); free(c.r);
}

/* ---- rmsnorm (block=llama) ---- */
typedef struct { float *inp, *w, *out, *rstd, *r; } RmsCtx;
static double rms_loss(void *p) {
    RmsCtx *c = p;
    rmsnorm_forward(c->out, c->rstd, c->inp, c->w, LN_N, LN_C);
    return gc_dot(c->out, c->r, LN_N * LN_C);
}
static void test_rmsnorm(void **s) {
    (void)s;
    RmsCtx c = {randn(LN_N * LN_C, 1, 15), randn(LN_C, 1, 16), randn(LN_N * LN_C, 1, 0), randn(LN_N, 1, 0),
                randn(LN_N * LN_C, 1, 17)};
    rms_loss(&c);
    for (int n = 0; n < LN_N; n++) {   // forward against the definition, in double
        double ms = 0;
        for (int k = 0; k < LN_C; k++) ms += (double)c.inp[n * LN_C + k] * c.inp[n * LN_C + k];
        ms /= LN_C;
        for (int k = 0; k < LN_C; k++) {
            double ref = c.inp[n * LN_C + k] / sqrt(ms + 1e-5) * c.w[k];
            assert_true(fabs(ref - c.out[n * LN_C + k]) < 1e-5);
        }
    }
    float *dinp = calloc(LN_N * LN_C, 4), *dw = calloc(LN_C, 4);
    rmsnorm_backward(dinp, dw, c.r, c.inp, c.w, c.rstd, LN_N, LN_C);
    expect_grad("rmsnorm dinp", rms_loss, &c, c.inp, dinp, LN_N * LN_C);
    expect_grad("rmsnorm dweight", rms_loss, &c, c.w, dw, LN_C);
    free(dinp); free(dw);
    free(c.inp); free(c.w); free(c.out); free(c.rstd); free(c.r);
}

/* ---- gelu ---- */
enum { GN = 40 };
typedef struct { float *inp, *out, *r; } GeluCtx;
static double gelu_loss(void *p) {
    GeluCtx *c = p;
    gelu_forward(c->out, c->inp, GN);
    return gc_dot(c->out, c->r, GN);
}
static void test_gelu(void **s) {
    (void)s;
    GeluCtx c = {randn(GN, 1.5, 21), randn(GN, 1, 0), randn(GN, 1, 22)};
    gelu_loss(&c);
    for (int i = 0; i < GN; i++) {
        double x = c.inp[i], ref = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        assert_true(fabs(ref - c.out[i]) < 1e-6);
    }
    float *dinp = calloc(GN, 4);
    gelu_backward(dinp, c.inp, c.r, GN);
    expect_grad("gelu dinp", gelu_loss, &c, c.inp, dinp, GN);
    free(dinp); free(c.inp); free(c.out); free(c.r);
}

/* ---- swiglu (block=llama) ---- */
enum { SW_N = 4, SW_F = 10 };
typedef struct { float *inp, *out, *r; } SwigluCtx;
static double swiglu_loss(void *p) {
    SwigluCtx *c = p;
    swiglu_forward(c->out, c->inp, SW_N, SW_F);
    return gc_dot(c->out, c->r, SW_N * SW_F);
}
static void test_swiglu(void **s) {
    (void)s;
    SwigluCtx c = {randn(SW_N * 2 * SW_F, 1.5, 23), randn(SW_N * SW_F, 1, 0), randn(SW_N * SW_F, 1, 24)};
    swiglu_loss(&c);
    // forward against the definition in double: exp_fast's relative error (2e-7) and four
    // float roundings (6e-8 each) bound the relative error by 5e-7
    for (int n = 0; n < SW_N; n++)
        for (int j = 0; j < SW_F; j++) {
            double a = c.inp[n * 2 * SW_F + j], u = c.inp[n * 2 * SW_F + SW_F + j];
            double ref = a / (1 + exp(-a)) * u;
            assert_true(fabs(ref - c.out[n * SW_F + j]) <= 5e-7 * fabs(ref) + 1e-12);
        }
    float *dinp = calloc(SW_N * 2 * SW_F, 4);
    swiglu_backward(dinp, c.inp, c.r, SW_N, SW_F);
    expect_grad("swiglu dinp (gate and up)", swiglu_loss, &c, c.inp, dinp, SW_N * 2 * SW_F);
    free(dinp); free(c.inp); free(c.out); free(c.r);
}

/* ---- residual ---- */
static void test_residual(void **s) {
    (void)s;
    float *a = randn(10, 1, 31), *b = randn(10, 1, 32), out[10];
    residual_forward(out, a, b, 10);
    for (int i = 0; i < 10; i++) assert_true(out[i] == a[i] + b[i]);
    free(a); free(b);
}

/* ---- attention ---- */
enum { AB = 2, AT = 5, AC = 8, AH = 2 };
typedef struct { float *qkv, *bias, *out, *lse, *r; int use_bias; } AttCtx;
static double att_loss(void *p) {
    AttCtx *c = p;
    ref->attention_forward(ref, c->out, c->lse, c->qkv, c->use_bias ? c->bias : NULL, AB, AT, AC, AH);
    return gc_dot(c->out, c->r, AB * AT * AC);
}
static void attention_case(int use_bias) {
    AttCtx c = {randn(AB * AT * 3 * AC, 0.7, 41), randn(AH * AT, 1, 42), randn(AB * AT * AC, 1, 0),
                randn(AB * AH * AT, 1, 0), randn(AB * AT * AC, 1, 43), use_bias};
    att_loss(&c);
    float *dqkv = randn(AB * AT * 3 * AC, 1, 0);   // garbage: backward must overwrite it
    float *dbias = calloc(AB * AH * AT, 4), *dbias_sum = calloc(AH * AT, 4);
    ref->attention_backward(ref, dqkv, use_bias ? dbias : NULL, c.r, c.qkv, c.out, c.lse, use_bias ? c.bias : NULL,
                            AB, AT, AC, AH);
    expect_grad(use_bias ? "attention dqkv (with bias)" : "attention dqkv", att_loss, &c, c.qkv, dqkv, AB * AT * 3 * AC);
    if (use_bias) {
        for (int b = 0; b < AB; b++)
            for (int i = 0; i < AH * AT; i++) dbias_sum[i] += dbias[b * AH * AT + i];
        expect_grad("attention dbias", att_loss, &c, c.bias, dbias_sum, AH * AT);
    }
    free(dqkv); free(dbias); free(dbias_sum);
    free(c.qkv); free(c.bias); free(c.out); free(c.lse); free(c.r);
}
static void test_attention(void **s) { (void)s; attention_case(0); attention_case(1); }

/* ---- cross-entropy ---- */
enum { CN = 4, CV = 7 };
typedef struct { float *logits, *losses, *lse; int targets[CN]; } CeCtx;
static double ce_loss(void *p) {
    CeCtx *c = p;
    return crossentropy_forward(c->losses, c->lse, c->logits, c->targets, CN, CV) / CN;   // the mean
}
static void test_crossentropy(void **s) {
    (void)s;
    CeCtx c = {randn(CN * CV, 2, 51), randn(CN, 1, 0), randn(CN, 1, 0), {3, 0, 6, 3}};
    double mean = ce_loss(&c), ref = 0;
    for (int n = 0; n < CN; n++) {
        double sum = 0;
        for (int v = 0; v < CV; v++) sum += exp(c.logits[n * CV + v]);
        ref += (log(sum) - c.logits[n * CV + c.targets[n]]) / CN;
    }
    assert_true(fabs(mean - ref) < 1e-5);
    float *d = malloc(CN * CV * 4);
    memcpy(d, c.logits, CN * CV * 4);
    crossentropy_backward(d, c.lse, c.targets, CN, CV, 1.0f / CN);
    expect_grad("crossentropy dlogits", ce_loss, &c, c.logits, d, CN * CV);
    free(d); free(c.logits); free(c.losses); free(c.lse);
}

/* ---- token embedding ---- */
enum { EV = 6, EC = 4, EN = 7 };
typedef struct { float *wte, *out, *r; int tok[EN]; } EncCtx;
static double enc_loss(void *p) {
    EncCtx *c = p;
    encoder_forward(c->out, c->tok, c->wte, EN, EC);
    return gc_dot(c->out, c->r, EN * EC);
}
static void test_encoder(void **s) {
    (void)s;
    EncCtx c = {randn(EV * EC, 1, 61), randn(EN * EC, 1, 0), randn(EN * EC, 1, 62), {1, 4, 1, 0, 5, 1, 4}};
    float *d = calloc(EV * EC, 4);
    encoder_backward(d, c.r, c.tok, EN, EC);
    expect_grad("embedding dwte (repeats)", enc_loss, &c, c.wte, d, EV * EC);
    free(d); free(c.wte); free(c.out); free(c.r);
}

/* ---- positional hooks ---- */
enum { PB = 2, PT = 5, PC = 8, PH = 2 };
typedef struct { PosCtx pc; const PosScheme *s; float *x, *x0, *r; size_t n; int mode; } PosTest;
static double pos_loss(void *p) {   // mode 0: qk hook on a copy of x0; 1: embedding hook; 2: bias table
    PosTest *t = p;
    if (t->mode == 0) { memcpy(t->x, t->x0, t->n * 4); t->s->qk_forward(&t->pc, t->x, PB, PT, 0); }
    if (t->mode == 1) { memcpy(t->x, t->x0, t->n * 4); t->s->embed_forward(&t->pc, t->x, PB, PT, 0); }
    if (t->mode == 2) t->s->bias_fill(&t->pc, t->x, PT);
    return gc_dot(t->x, t->r, t->n);
}
static GPTConfig pos_cfg(PosKind k) {
    GPTConfig cfg = {.n_layer = 1, .n_head = PH, .d_model = PC, .vocab_size = 8, .block_size = PT};
    gc_config_defaults(&cfg);
    cfg.pos = k;
    return cfg;
}
static void test_rope_hook(void **s) {
    (void)s;
    GPTConfig cfg = pos_cfg(POS_ROPE);
    cfg.rope_dims = 2;   // partial: 2 of the 4 dims of each head
    char err[128];
    PosTest t = {.s = &pos_scheme_rope, .n = PB * PT * 3 * PC, .mode = 0};
    assert_int_equal(pos_ctx_init(&t.pc, t.s, &cfg, PT, err, sizeof err), 0);
    t.x = randn(t.n, 1, 0); t.x0 = randn(t.n, 1, 71); t.r = randn(t.n, 1, 72);
    float *d = malloc(t.n * 4);
    memcpy(d, t.r, t.n * 4);
    t.s->qk_backward(&t.pc, d, PB, PT);
    expect_grad("rope q/k rotation", pos_loss, &t, t.x0, d, t.n);
    pos_ctx_free(&t.pc);
    free(d); free(t.x); free(t.x0); free(t.r);
}
static void test_learned_hook(void **s) {
    (void)s;
    GPTConfig cfg = pos_cfg(POS_LEARNED);
    float *wpe = randn(PT * PC, 1, 81), *dwpe = calloc(PT * PC, 4);
    PosTest t = {.pc = {.cfg = &cfg, .param = {wpe}, .dparam = {dwpe}}, .s = &pos_scheme_learned, .n = PB * PT * PC, .mode = 1};
    t.x = randn(t.n, 1, 0); t.x0 = randn(t.n, 1, 82); t.r = randn(t.n, 1, 83);
    t.s->embed_backward(&t.pc, t.r, PB, PT);
    expect_grad("learned dwpe", pos_loss, &t, wpe, dwpe, PT * PC);
    free(wpe); free(dwpe); free(t.x); free(t.x0); free(t.r);
}
static void test_t5_hook(void **s) {
    (void)s;
    GPTConfig cfg = pos_cfg(POS_T5);
    cfg.t5_num_buckets = 4;      // e = 2: buckets 0, 1 exact, then log-spaced
    cfg.t5_max_distance = 4;
    float *rel = randn(4 * PH, 1, 91), *drel = calloc(4 * PH, 4);
    PosTest t = {.pc = {.cfg = &cfg, .param = {rel}, .dparam = {drel}}, .s = &pos_scheme_t5, .n = PH * PT, .mode = 2};
    t.x = randn(t.n, 1, 0); t.r = randn(t.n, 1, 92);
    // backward takes (B,H,T): spread r over B=2 rows that sum to r
    float *dbias = malloc(2 * t.n * 4);
    for (size_t i = 0; i < t.n; i++) { dbias[i] = 0.25f * t.r[i]; dbias[t.n + i] = 0.75f * t.r[i]; }
    t.s->bias_backward(&t.pc, dbias, 2, PT);
    expect_grad("t5 drel_bias", pos_loss, &t, rel, drel, 4 * PH);
    free(rel); free(drel); free(dbias); free(t.x); free(t.r);
}

static int summary(void **s) {
    (void)s;
    printf("layer gradcheck: worst relative error %.2e (tolerance %.0e)\n", worst_overall, TOL);
    return 0;
}

int main(void) {
    omp_set_num_threads(1);   // tiny sizes; threaded paths: test_model_threads
    char err[256];
    if (engine_reference_create(&ref, err, sizeof err) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),       cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_rmsnorm),      cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_gelu),         cmocka_unit_test(test_residual),
        cmocka_unit_test(test_attention),    cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_encoder),      cmocka_unit_test(test_rope_hook),
        cmocka_unit_test(test_learned_hook), cmocka_unit_test(test_t5_hook),
    };
    int failed = cmocka_run_group_tests(tests, NULL, summary);
    ref->free(ref);
    return failed;
}
