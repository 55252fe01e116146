// test_model_rope.c: the elementwise RoPE against the RoFormer paper's
// block-diagonal rotation matrix, its relative-position property, norm
// preservation, partial rotary, and the q/k hook on the packed qkv.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/pos.h"
#include "model/pos_maths.h"
#include "util_gradcheck.h"

enum { D = 8, NPOS = 64 };
static float cos_t[NPOS * D / 2], sin_t[NPOS * D / 2];

// R_m x with the D x D block-diagonal matrix of the paper (eq. 13-15),
// theta_i = base^(-2(i-1)/R), i = 1..R/2, built in double from scratch.
static void rotate_by_matrix(double *out, const float *x, int m, int R, double base) {
    double M[D][D] = {{0}};
    for (int k = 0; k < D; k++) M[k][k] = 1.0;
    for (int i = 1; i <= R / 2; i++) {
        double th = pow(base, -2.0 * (i - 1) / R), c = cos(m * th), s = sin(m * th);
        int a = 2 * (i - 1), b = a + 1;
        M[a][a] = c; M[a][b] = -s;
        M[b][a] = s; M[b][b] = c;
    }
    for (int r = 0; r < D; r++) {
        out[r] = 0;
        for (int k = 0; k < D; k++) out[r] += M[r][k] * x[k];
    }
}

// A rope config with rope_dims R and the given base, no scaling.
static GPTConfig rope_cfg(int R, float base) {
    GPTConfig cfg = {.n_layer = 1, .n_head = 1, .d_model = D, .vocab_size = 4, .block_size = NPOS, .pos = POS_ROPE};
    gc_config_defaults(&cfg);
    cfg.rope_dims = R;
    cfg.rope_base = base;
    return cfg;
}

static void build(int R, float base) {
    GPTConfig cfg = rope_cfg(R, base);
    rope_build_tables(cos_t, sin_t, NPOS, &cfg);
}

static void rotate_elementwise(float *u, int m, int R) {
    rope_rotate(u, cos_t + m * (R / 2), sin_t + m * (R / 2), R);
}

static void test_matches_matrix_form(void **s) {
    (void)s;
    for (int R = 2; R <= D; R += 2) {
        build(R, 10000.0f);
        for (int m = 0; m < NPOS; m += 7) {
            float x[D], u[D];
            double ref[D];
            gc_fill_normal(x, D, 0, 1, 100 + m);
            memcpy(u, x, sizeof u);
            rotate_elementwise(u, m, R);
            rotate_by_matrix(ref, x, m, R, 10000.0);
            for (int k = 0; k < D; k++) assert_true(fabs(u[k] - ref[k]) < 1e-5);
            for (int k = R; k < D; k++) assert_true(u[k] == x[k]);   // partial rotary: untouched
        }
    }
}

static double dot(const float *a, const float *b) {
    double s = 0;
    for (int k = 0; k < D; k++) s += (double)a[k] * b[k];
    return s;
}

static void test_relative_and_norm(void **s) {
    (void)s;
    build(D, 10000.0f);
    float q[D], k[D];
    gc_fill_normal(q, D, 0, 1, 1);
    gc_fill_normal(k, D, 0, 1, 2);
    // (R_m q).(R_n k) depends only on m - n: shift both positions
    int pairs[][2] = {{5, 2}, {10, 7}, {3, 0}, {40, 37}, {63, 60}};
    double first = 0;
    for (int p = 0; p < 5; p++) {
        float qr[D], kr[D];
        memcpy(qr, q, sizeof q);
        memcpy(kr, k, sizeof k);
        rotate_elementwise(qr, pairs[p][0], D);
        rotate_elementwise(kr, pairs[p][1], D);
        double d = dot(qr, kr);
        if (p == 0) first = d;
        assert_true(fabs(d - first) < 2e-5);
        // rotations keep norms
        assert_true(fabs(dot(qr, qr) - dot(q, q)) < 1e-5 * dot(q, q));
    }
    // and a different offset gives a different product (the test can fail)
    float qr[D], kr[D];
    memcpy(qr, q, sizeof q);
    memcpy(kr, k, sizeof k);
    rotate_elementwise(qr, 9, D);
    rotate_elementwise(kr, 2, D);
    assert_true(fabs(dot(qr, kr) - first) > 1e-3);
    // rotate_back undoes rotate
    memcpy(qr, q, sizeof q);
    rotate_elementwise(qr, 17, D);
    rope_rotate_back(qr, cos_t + 17 * D / 2, sin_t + 17 * D / 2, D);
    for (int i = 0; i < D; i++) assert_true(fabsf(qr[i] - q[i]) < 1e-5f);
}

// The hook rotates q and k of every head at their positions (pos0 + t), not v.
static void test_qk_hook(void **s) {
    (void)s;
    enum { B = 2, T = 4, H = 2, C = H * D };
    GPTConfig cfg = {.n_layer = 1, .n_head = H, .d_model = C, .vocab_size = 4, .block_size = 16, .pos = POS_ROPE};
    gc_config_defaults(&cfg);
    cfg.rope_base = 500.0f;
    char err[128];
    PosCtx pc;
    assert_int_equal(pos_ctx_init(&pc, &pos_scheme_rope, &cfg, 16, err, sizeof err), 0);
    float qkv[B * T * 3 * C], orig[B * T * 3 * C];
    gc_fill_normal(orig, B * T * 3 * C, 0, 1, 9);
    memcpy(qkv, orig, sizeof qkv);
    int pos0 = 5;
    pos_scheme_rope.qk_forward(&pc, qkv, B, T, pos0);
    build(D, 500.0f);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int part = 0; part < 3; part++)
                for (int h = 0; h < H; h++) {
                    const float *x = orig + (b * T + t) * 3 * C + part * C + h * D;
                    const float *got = qkv + (b * T + t) * 3 * C + part * C + h * D;
                    double ref[D];
                    if (part < 2) rotate_by_matrix(ref, x, pos0 + t, D, 500.0);
                    for (int k = 0; k < D; k++) {
                        if (part < 2) assert_true(fabs(got[k] - ref[k]) < 1e-5);
                        else assert_true(got[k] == x[k]);   // v untouched
                    }
                }
    pos_ctx_free(&pc);
}

// Every scaling at factor 1 gives exactly the unscaled tables (dynamic's tables
// are its angles up to L; beyond L it scales even at factor 1, test below).
static void test_scaling_factor_one_is_identity(void **s) {
    static float c0[NPOS * D / 2], s0[NPOS * D / 2], c1[NPOS * D / 2], s1[NPOS * D / 2];
    GPTConfig cfg = rope_cfg(D, 10000.0f);
    rope_build_tables(c0, s0, NPOS, &cfg);
    for (int mode = ROPE_SCALING_LINEAR; mode <= ROPE_SCALING_DYNAMIC; mode++) {
        cfg.rope_scaling = mode;
        cfg.rope_scaling_factor = 1.0f;
        rope_build_tables(c1, s1, NPOS, &cfg);
        assert_memory_equal(c0, c1, sizeof c0);
        assert_memory_equal(s0, s1, sizeof s0);
    }
}

// Linear scaling (position interpolation) at factor s: position s*m gets the
// table of position m (the same angle; float rounding of the two products only).
static void test_linear_scaling_interpolates_positions(void **s) {
    static float c0[NPOS * D / 2], s0[NPOS * D / 2], c4[NPOS * D / 2], s4[NPOS * D / 2];
    GPTConfig cfg = rope_cfg(D, 10000.0f);
    rope_build_tables(c0, s0, NPOS, &cfg);
    cfg.rope_scaling = ROPE_SCALING_LINEAR;
    cfg.rope_scaling_factor = 4.0f;
    rope_build_tables(c4, s4, NPOS, &cfg);
    for (int m = 0; 4 * m < NPOS; m++)
        for (int i = 0; i < D / 2; i++) {
            assert_true(fabsf(c4[4 * m * (D / 2) + i] - c0[m * (D / 2) + i]) < 2e-7f);
            assert_true(fabsf(s4[4 * m * (D / 2) + i] - s0[m * (D / 2) + i]) < 2e-7f);
        }
    // and NTK-aware: base' = base s^(R/(R-2)); pair 0 keeps its angle, the last is divided by s
    double th[D / 2], th0[D / 2], scale;
    cfg.rope_scaling = ROPE_SCALING_NONE;
    rope_frequencies(&cfg, th0, &scale);
    cfg.rope_scaling = ROPE_SCALING_NTK;
    rope_frequencies(&cfg, th, &scale);
    assert_true(th[0] == th0[0]);
    assert_true(fabs(th[D / 2 - 1] - th0[D / 2 - 1] / 4.0) < 1e-15);
    assert_true(scale == 1.0);
}

// yarn (Hugging Face's and llama.cpp's) by hand for R = 8, base 10000, L = 64, s = 4,
// beta 1..32: the pair index that turns beta times over L is
// d(beta) = 8 ln(64 / (2 pi beta)) / (2 ln 10000): d(32) = -0.4971, d(1) = 1.0080, so
// lo = max(floor(-0.4971), 0) = 0 and hi = min(ceil(1.0080), 7) = 2, and the share of the
// angle kept is g_i = 1 - clamp(i / 2, 0, 1) = 1, 0.5, 0, 0. With theta_i = 1, 0.1, 0.01,
// 0.001: theta' = (1 - g) theta / 4 + g theta = 1, 0.1 (0.125 + 0.5) = 0.0625, 0.0025,
// 0.00025; tables x (0.1 ln 4 + 1) = 1.1386294. (yarn_paper, below: 0.47224 and 0.025045
// for the first two.)
static void test_yarn_by_hand(void **s) {
    GPTConfig cfg = rope_cfg(D, 10000.0f);
    cfg.rope_scaling = ROPE_SCALING_YARN;
    cfg.rope_scaling_factor = 4.0f;
    double th[D / 2], scale;
    rope_frequencies(&cfg, th, &scale);
    const double want[D / 2] = {1.0, 0.0625, 0.0025, 0.00025};
    for (int i = 0; i < D / 2; i++) assert_true(fabs(th[i] - want[i]) < 1e-12 * want[i]);
    assert_true(fabs(scale - 1.1386294) < 1e-7);
    // rope_original_length replaces block_size as L: L = 512 gives d(32) = 0.4059,
    // d(1) = 1.9111: lo = 0, hi = 2 again; L = 4096: d(32) = 1.3090, d(1) = 2.8142:
    // lo = 1, hi = 3, g = 1, 1, 0.5, 0
    cfg.rope_original_length = 4096;
    rope_frequencies(&cfg, th, &scale);
    const double want_4096[D / 2] = {1.0, 0.1, 0.01 * (0.125 + 0.5), 0.00025};
    for (int i = 0; i < D / 2; i++) assert_true(fabs(th[i] - want_4096[i]) < 1e-12 * want_4096[i]);
}

// YaRN's ramp as the paper states it, by hand for R = 8, base 10000, L = 64, s = 4,
// beta 1..32: theta_i = 10000^(-i/4) = 1, 0.1, 0.01, 0.001; turns over L,
// r_i = 64 theta_i / (2 pi) = 10.186, 1.0186, 0.10186, 0.010186; ramp g = (r - 1) / 31
// clamped: 0.29632, 0.000600, 0, 0; theta' = (1 - g) theta / 4 + g theta:
//   i=0: 0.25 + 0.75 * 0.29632 = 0.472240;  i=1: 0.1 (0.25 + 0.75 * 0.000600) = 0.0250450
//   i=2: 0.0025;  i=3: 0.00025;  tables x (0.1 ln 4 + 1) = 1.1386294.
static void test_yarn_paper_ramp_by_hand(void **s) {
    GPTConfig cfg = rope_cfg(D, 10000.0f);
    cfg.rope_scaling = ROPE_SCALING_YARN_PAPER;
    cfg.rope_scaling_factor = 4.0f;
    double th[D / 2], scale;
    rope_frequencies(&cfg, th, &scale);
    const double want[D / 2] = {0.472240, 0.0250450, 0.0025, 0.00025};
    for (int i = 0; i < D / 2; i++) assert_true(fabs(th[i] - want[i]) < 2e-6 * want[i] + 1e-9);
    assert_true(fabs(scale - 1.1386294) < 1e-7);
    // rope_original_length replaces block_size as L
    cfg.rope_original_length = 32;   // r halves: 5.093, 0.509, ...: g_0 = 0.13204, g_1 = 0
    rope_frequencies(&cfg, th, &scale);
    assert_true(fabs(th[0] - (0.25 + 0.75 * (32 / (2 * M_PI) - 1) / 31)) < 1e-12);
    assert_true(fabs(th[1] - 0.025) < 1e-12);
    // and the table is scale * cos(m theta')
    rope_build_tables(cos_t, sin_t, NPOS, &cfg);
    assert_true(fabs(cos_t[5 * (D / 2) + 0] - scale * cos(5 * th[0])) < 1e-6);
}

// dynamic NTK by hand for R = 8, base 10000, L = 64, s = 2: up to n = L the angles are
// unscaled; at n = 128, base' = 10000 (2 * 128 / 64 - 1)^(8/6) = 10000 * 3^(4/3), so
// theta_i = 10000^(-i/4) 3^(-i/3): 1, 0.1 / 3^(1/3), 0.01 / 3^(2/3), 0.001 / 3.
// The q/k hook uses n = pos0 + T: a forward pass over 128 positions, and the decode
// step at position 127 (n = 128), rotate position 127 alike.
static void test_dynamic_by_hand(void **s) {
    GPTConfig cfg = rope_cfg(D, 10000.0f);
    cfg.rope_scaling = ROPE_SCALING_DYNAMIC;
    cfg.rope_scaling_factor = 2.0f;
    double th[D / 2], th0[D / 2], scale;
    rope_frequencies_at(&cfg, 64, th, &scale);
    cfg.rope_scaling = ROPE_SCALING_NONE;
    rope_frequencies(&cfg, th0, &scale);
    for (int i = 0; i < D / 2; i++) assert_true(th[i] == th0[i]);
    cfg.rope_scaling = ROPE_SCALING_DYNAMIC;
    rope_frequencies_at(&cfg, 128, th, &scale);
    for (int i = 0; i < D / 2; i++)
        assert_true(fabs(th[i] - pow(10000.0, -i / 4.0) * pow(3.0, -i / 3.0)) < 1e-14);
    assert_true(scale == 1.0);

    char err[128];
    PosCtx pc;
    assert_int_equal(pos_ctx_init(&pc, &pos_scheme_rope, &cfg, 128, err, sizeof err), 0);
    enum { T = 128 };
    static float qkv[T * 3 * D], one[3 * D];
    gc_fill_normal(qkv, T * 3 * D, 0, 1, 5);
    memcpy(one, qkv + (T - 1) * 3 * D, sizeof one);
    float q[D];
    memcpy(q, one, sizeof q);
    pos_scheme_rope.qk_forward(&pc, qkv, 1, T, 0);       // n = 128
    pos_scheme_rope.qk_forward(&pc, one, 1, 1, T - 1);   // n = 128
    assert_memory_equal(one, qkv + (T - 1) * 3 * D, sizeof one);
    for (int i = 0; i < D / 2; i++) {   // by the scaled angle, not the table's
        double a = (T - 1) * th[i], want = q[2 * i] * cos(a) - q[2 * i + 1] * sin(a);
        assert_true(fabs(one[2 * i] - want) < 1e-5);
    }
    // at factor 1 the base still grows beyond L: (n / L)^(R/(R-2)), Hugging Face's formula
    cfg.rope_scaling_factor = 1.0f;
    rope_frequencies_at(&cfg, 128, th, &scale);
    assert_true(fabs(th[3] - 0.001 / 2.0) < 1e-15);
    pos_ctx_free(&pc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaling_factor_one_is_identity),
        cmocka_unit_test(test_linear_scaling_interpolates_positions),
        cmocka_unit_test(test_yarn_by_hand),
        cmocka_unit_test(test_yarn_paper_ramp_by_hand),
        cmocka_unit_test(test_dynamic_by_hand),
        cmocka_unit_test(test_matches_matrix_form),
        cmocka_unit_test(test_relative_and_norm),
        cmocka_unit_test(test_qk_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
