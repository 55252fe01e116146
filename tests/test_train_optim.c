// test_train_optim.c: the learning-rate schedule, AdamW and gradient
// clipping against values worked out by hand or with an independent
// double-precision formula written here.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "train/adamw.h"
#include "train/schedule.h"

static void test_warmup_is_linear(void **state) {
    LrSchedule s = {.lr = 1.0f, .min_lr = 0.1f, .warmup_steps = 10, .steps = 110};
    // hand values: step 0 -> 1/10, step 4 -> 5/10, step 9 -> 10/10
    assert_float_equal(lr_at_step(&s, 0), 0.1f, 1e-7);
    assert_float_equal(lr_at_step(&s, 4), 0.5f, 1e-7);
    assert_float_equal(lr_at_step(&s, 9), 1.0f, 1e-7);
    for (int i = 1; i < 10; i++)   // constant increments
        assert_float_equal(lr_at_step(&s, i) - lr_at_step(&s, i - 1), 0.1f, 1e-6);
}

static void test_cosine_endpoints(void **state) {
    LrSchedule s = {.lr = 1.0f, .min_lr = 0.1f, .warmup_steps = 10, .steps = 110};
    assert_float_equal(lr_at_step(&s, 10), 1.0f, 1e-7);          // decay starts at lr
    assert_float_equal(lr_at_step(&s, 60), 0.55f, 1e-6);          // halfway: (lr + min_lr) / 2
    // a quarter of the way: min + (lr - min) (1 + cos(pi/4)) / 2 = 0.1 + 0.9 * 0.853553
    assert_float_equal(lr_at_step(&s, 35), 0.1f + 0.9f * 0.8535534f, 1e-6);
    float last = lr_at_step(&s, 109);                             // one step short of min_lr
    assert_true(last > 0.1f && last < 0.1003f);
    assert_float_equal(lr_at_step(&s, 110), 0.1f, 1e-7);          // the step after the run: min_lr
    for (int i = 11; i < 110; i++) {                              // falls monotonically, never below min_lr
        assert_true(lr_at_step(&s, i) < lr_at_step(&s, i - 1));
        assert_true(lr_at_step(&s, i) >= 0.1f);
    }
    LrSchedule nw = {.lr = 0.5f, .min_lr = 0.0f, .warmup_steps = 0, .steps = 4};
    assert_float_equal(lr_at_step(&nw, 0), 0.5f, 1e-7);           // no warmup: starts at lr
    assert_float_equal(lr_at_step(&nw, 2), 0.25f, 1e-7);
    LrSchedule all_warm = {.lr = 0.5f, .min_lr = 0.0f, .warmup_steps = 8, .steps = 4};
    assert_float_equal(lr_at_step(&all_warm, 3), 0.25f, 1e-7);   // warmup longer than the run
}

// Two AdamW updates of one parameter, worked out by hand:
// p=1, g1=0.5, g2=-0.25, beta1=0.9, beta2=0.999, eps=1e-8, lr=0.1, wd=0.1.
// t=1: m=0.05, v=0.00025, m_hat=0.5, v_hat=0.25, step 0.1*0.5/0.5 = 0.1
//      decayed: p = 1*(1-0.01) - 0.1 = 0.89;  not decayed: p = 0.9
static void test_adamw_hand_computed(void **state) {
    AdamWConfig cfg = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
    float p[2] = {1.0f, 1.0f}, m[2] = {0}, v[2] = {0};
    float g[2] = {0.5f, 0.5f};
    adamw_update(&cfg, &p[0], &g[0], &m[0], &v[0], 1, 0.1f, 1, 1);
    adamw_update(&cfg, &p[1], &g[1], &m[1], &v[1], 1, 0.1f, 1, 0);
    assert_float_equal(p[0], 0.89f, 1e-6);
    assert_float_equal(p[1], 0.9f, 1e-6);
    assert_float_equal(m[0], 0.05f, 1e-7);
    assert_float_equal(v[0], 0.00025f, 1e-8);   // 1 - 0.999f is 0.00099999 in float
    // t=2 with g=-0.25: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225
    // m_hat = 0.02/0.19 = 0.105263, v_hat = 0.00031225/0.001999 = 0.156203, sqrt = 0.395225
    // decayed: p = 0.89*(1-0.01) - 0.1*0.105263/0.395225 = 0.8811 - 0.0266337 = 0.8544663
    g[0] = -0.25f;
    adamw_update(&cfg, &p[0], &g[0], &m[0], &v[0], 1, 0.1f, 2, 1);
    assert_float_equal(p[0], 0.8544663f, 2e-6);
}

// Many parameters and steps against a double-precision reference, through
// adamw_step with a decay mask taken from ParamEntry.weight_decay.
static void test_adamw_step_matches_reference(void **state) {
    enum { N1 = 300, N2 = 17, N = N1 + N2, STEPS = 5 };
    ParamEntry entries[2];
    memset(entries, 0, sizeof entries);
    strcpy(entries[0].name, "w"); entries[0].ndim = 2; entries[0].shape[0] = 20; entries[0].shape[1] = 15;
    entries[0].offset = 0; entries[0].numel = N1; entries[0].weight_decay = 1;
    strcpy(entries[1].name, "b"); entries[1].ndim = 1; entries[1].shape[0] = N2;
    entries[1].offset = N1; entries[1].numel = N2; entries[1].weight_decay = 0;
    AdamWConfig cfg = {.beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-6f, .weight_decay = 0.3f};
    AdamW opt;
    assert_int_equal(adamw_init(&opt, &cfg, N, NULL, 0), 0);
    float p[N], g[N];
    double rp[N], rm[N] = {0}, rv[N] = {0};
    Rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < N; i++) rp[i] = p[i] = (float)rng_normal(&r);
    for (int t = 1; t <= STEPS; t++) {
        double lr = 0.01 * t;
        for (int i = 0; i < N; i++) g[i] = (float)rng_normal(&r);
        adamw_step(&opt, p, g, entries, 2, (float)lr, t);
        for (int i = 0; i < N; i++) {
            int decay = i < N1;
            rm[i] = 0.8 * rm[i] + 0.2 * g[i];
            rv[i] = 0.95 * rv[i] + 0.05 * (double)g[i] * g[i];
            double mh = rm[i] / (1 - pow(0.8, t)), vh = rv[i] / (1 - pow(0.95, t));
            if (decay) rp[i] -= lr * 0.3 * rp[i];
            rp[i] -= lr * mh / (sqrt(vh) + 1e-6);
        }
    }
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(p[i] - rp[i]));
    assert_true(worst < 1e-5);
    adamw_free(&opt);
}

static void test_grad_norm_and_clip(void **state) {
    size_t n = 1000003;   // several norm chunks and a ragged end
    float *g = malloc(n * sizeof *g);
    Rng r;
    rng_seed(&r, 9);
    double ref = 0;
    for (size_t i = 0; i < n; i++) {
        g[i] = (float)(rng_uniform(&r) - 0.5);
        ref += (double)g[i] * g[i];
    }
    ref = sqrt(ref);
    double norm = grad_global_norm(g, n);
    assert_true(fabs(norm - ref) < 1e-9 * ref);
    assert_float_equal(grad_clip(g, n, norm, 0.0f), 1.0f, 0);          // 0 = off
    assert_float_equal(grad_clip(g, n, norm, (float)(2 * norm)), 1.0f, 0);  // below the limit
    float scale = grad_clip(g, n, norm, 1.0f);
    assert_float_equal(scale, 1.0 / ref, 1e-6 / ref);
    assert_float_equal(grad_global_norm(g, n), 1.0, 1e-5);
    float three_four[2] = {3.0f, 4.0f};                               // 3-4-5 triangle
    assert_float_equal(grad_global_norm(three_four, 2), 5.0, 1e-12);
    free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_is_linear),
        cmocka_unit_test(test_cosine_endpoints),
        cmocka_unit_test(test_adamw_hand_computed),
        cmocka_unit_test(test_adamw_step_matches_reference),
        cmocka_unit_test(test_grad_norm_and_clip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
