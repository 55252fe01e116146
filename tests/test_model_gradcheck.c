// test_model_gradcheck.c: the whole model's gradient, every parameter
// tensor, every positional scheme (the list in gpt.h: a new scheme is
// checked as soon as it is on it) on both blocks (gpt2, llama), plus partial
// rope, against central finite differences.
//
// Tiny config: L=2, C=16, H=2 (D=8), T=8, V=32, B=4. Parameters are redrawn
// at O(1) scale (gc_randomize_params) so attention is far from uniform and
// every path carries gradient. The loss for the differences is recomputed
// in double from the logits (the same mean cross-entropy), so only the
// float forward pass contributes noise. Up to 24 entries per tensor.
//
// Two checks per tensor: up to 24 single entries, and one random direction
// over the whole tensor (which covers every entry at once).
//
// Tolerance. The forward pass is float32: the loss carries rounding noise of
// a few 1e-7, which a difference quotient divides by the step. Measured:
// gradients that are exactly zero (the k bias: softmax ignores a constant
// shift of a row) come out as |numeric| ~ 2e-5 at step 1e-2, ~5e-6 at 4e-2;
// at 4e-2 the truncation error on LayerNorm gains becomes visible (~1e-5).
// So: Richardson-extrapolated differences (util_gradcheck.c) with steps
// 2e-2 and 4e-2, and relative error <= 1e-2 with a denominator floor of
// 2e-3 (an absolute error of 2e-5 for tiny gradients).
// The tolerance has teeth: scaling one tensor's analytic gradient by 1.05
// must fail it, and the test asserts that it does.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "common/rng.h"
#include "model/gpt.h"
#include "util_gradcheck.h"

#define TOL 1e-2
#define FLOOR 2e-3
#define EPS 2e-2f
#define SAMPLES 24

typedef struct { GPT *m; int *inp, *tgt; int B, T; } Ctx;

// The mean cross-entropy of the current parameters, summed in double.
static double model_loss(void *p) {
    Ctx *c = p;
    gc_forward(c->m, c->inp, NULL, c->B, c->T);
    const float *z = gc_logits(c->m);
    int V = gpt_config(c->m)->vocab_size;
    double total = 0.0;
    for (int n = 0; n < c->B * c->T; n++) {
        const float *row = z + (size_t)n * V;
        double mx = row[0], s = 0.0;
        for (int v = 1; v < V; v++) mx = fmax(mx, row[v]);
        for (int v = 0; v < V; v++) s += exp(row[v] - mx);
        total += mx + log(s) - row[c->tgt[n]];
    }
    return total / (c->B * c->T);
}

static GPTConfig tiny_config(PosKind pos, int rope_dims, BlockKind block) {
    GPTConfig cfg = {.n_layer = 2, .n_head = 2, .d_model = 16, .vocab_size = 32, .block_size = 8, .block = block};
    gc_config_defaults(&cfg);
    cfg.pos = pos;
    if (rope_dims) cfg.rope_dims = rope_dims;
    return cfg;
}

static double results[2 * POS_COUNT + 1], results_dir[2 * POS_COUNT + 1];
static char labels[2 * POS_COUNT + 1][32];
static int n_results;

static void check_scheme(PosKind pos, int rope_dims, BlockKind block, const char *scheme_label) {
    GPTConfig cfg = tiny_config(pos, rope_dims, block);
    char label[32];
    snprintf(label, sizeof label, "%s%s", scheme_label, block == BLOCK_LLAMA ? " llama" : "");
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 1234, err, sizeof err), 0);
    gc_randomize_params(m, 99);
    int B = 4, T = 8;
    assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), 0);
    int inp[32], tgt[32];
    Rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) { inp[i] = (int)rng_below(&r, 32); tgt[i] = (int)rng_below(&r, 32); }
    Ctx ctx = {m, inp, tgt, B, T};

    gpt_zero_grad(m);
    float loss = gc_forward(m, inp, tgt, B, T);
    assert_true(fabs(loss - model_loss(&ctx)) < 1e-5);
    gc_forward(m, inp, tgt, B, T);
    gc_backward(m, 1.0f);

    const ParamEntry *e;
    int n = gpt_param_entries(m, &e);
    float *params = gpt_params(m), *grads = gpt_grads(m);
    double worst = 0.0, worst_dir = 0.0;
    const char *worst_name = "";
    for (int k = 0; k < n; k++) {
        GcResult res = gc_check(model_loss, &ctx, params + e[k].offset, grads + e[k].offset,
                                e[k].numel, SAMPLES, EPS, FLOOR, 1000 + k);
        if (res.max_rel > TOL)
            printf("  pos=%s %s: rel err %.3g at %zu (analytic %.6g, numeric %.6g)\n", label,
                   e[k].name, res.max_rel, res.worst_index, res.worst_analytic, res.worst_numeric);
        if (res.max_rel > worst) { worst = res.max_rel; worst_name = e[k].name; }
        assert_true(res.max_rel < TOL);
        GcResult dir = gc_check_direction(model_loss, &ctx, params + e[k].offset, grads + e[k].offset,
                                          e[k].numel, EPS, FLOOR, 2000 + k);
        if (dir.max_rel > TOL)
            printf("  pos=%s %s: direction rel err %.3g (analytic %.6g, numeric %.6g)\n", label,
                   e[k].name, dir.max_rel, dir.worst_analytic, dir.worst_numeric);
        assert_true(dir.max_rel < TOL);
        if (dir.max_rel > worst_dir) worst_dir = dir.max_rel;
    }
    printf("gradcheck pos=%-12s max relative error: entries %.2e (%s), directions %.2e; %d tensors\n",
           label, worst, worst_name, worst_dir, n);
    results[n_results] = worst;
    results_dir[n_results] = worst_dir;
    snprintf(labels[n_results++], sizeof labels[0], "%s", label);

    // The tolerance has teeth: a gradient 5% off in one tensor fails it.
    const ParamEntry *victim = gpt_find_param(m, "h.0.attn.c_attn.weight");
    float *bad = malloc(victim->numel * sizeof(float));
    for (size_t i = 0; i < victim->numel; i++) bad[i] = 1.05f * grads[victim->offset + i];
    GcResult res = gc_check(model_loss, &ctx, params + victim->offset, bad, victim->numel,
                            SAMPLES, EPS, FLOOR, 7);
    assert_true(res.max_rel > TOL);
    free(bad);
    gpt_free(m);
}

static void test_every_scheme(void **s) {
    (void)s;
    for (int k = 0; k < POS_COUNT; k++) check_scheme((PosKind)k, 0, BLOCK_GPT2, pos_kind_name((PosKind)k));
}
static void test_every_scheme_llama(void **s) {
    (void)s;
    for (int k = 0; k < POS_COUNT; k++) check_scheme((PosKind)k, 0, BLOCK_LLAMA, pos_kind_name((PosKind)k));
}
static void test_rope_partial(void **s) { (void)s; check_scheme(POS_ROPE, 4, BLOCK_GPT2, "rope(dims=4)"); }

// loss_scale scales the gradient; a second backward adds to the first.
static void test_scale_and_accumulation(void **s) {
    (void)s;
    GPTConfig cfg = tiny_config(POS_T5, 0, BLOCK_GPT2);
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 3, err, sizeof err), 0);
    gc_randomize_params(m, 4);
    assert_int_equal(gpt_alloc_activations(m, 2, 8, err, sizeof err), 0);
    int inp[16], tgt[16];
    for (int i = 0; i < 16; i++) { inp[i] = (i * 7) % 32; tgt[i] = (i * 5 + 3) % 32; }
    size_t n = gpt_num_params(m);
    float *g1 = malloc(n * sizeof(float));
    gpt_zero_grad(m);
    gc_forward(m, inp, tgt, 2, 8);
    gc_backward(m, 1.0f);
    memcpy(g1, gpt_grads(m), n * sizeof(float));
    gpt_zero_grad(m);
    gc_forward(m, inp, tgt, 2, 8);
    gc_backward(m, 0.25f);
    gc_forward(m, inp, tgt, 2, 8);
    gc_backward(m, 0.25f);
    const float *g2 = gpt_grads(m);
    for (size_t i = 0; i < n; i++) assert_true(fabsf(g2[i] - 0.5f * g1[i]) <= 1e-6f + 1e-4f * fabsf(g1[i]));
    free(g1);
    gpt_free(m);
}

static int print_summary(void **s) {
    (void)s;
    printf("gradcheck summary, max relative error over all parameter tensors (tolerance %.0e):\n", TOL);
    printf("  %-16s %-10s %s\n", "pos", "entries", "directions");
    for (int i = 0; i < n_results; i++) printf("  %-16s %.2e   %.2e\n", labels[i], results[i], results_dir[i]);
    return 0;
}

int main(void) {
    // The model is tiny: one thread is faster than two (and on a shared
    // machine OpenMP's spinning makes two far slower). test_model_threads
    // covers the threaded paths.
    omp_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_scheme), cmocka_unit_test(test_every_scheme_llama),
        cmocka_unit_test(test_rope_partial),
        cmocka_unit_test(test_scale_and_accumulation),
    };
    return cmocka_run_group_tests(tests, NULL, print_summary);
}
