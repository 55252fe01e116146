// test_model_rope.c: the elementwise RoPE against the RoFormer paper's
// block-diagonal rotation matrix, its relative-position property, norm
// preservation, partial rotary, and the q/k hook on the packed qkv.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/pos.h"
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

static void rotate_elementwise(float *u, int m, int R) {
    rope_rotate(u, cos_t + m * (R / 2), sin_t + m * (R / 2), R);
}

static void test_matches_matrix_form(void **s) {
    (void)s;
    for (int R = 2; R <= D; R += 2) {
        rope_build_tables(cos_t, sin_t, NPOS, R, 10000.0f);
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
    rope_build_tables(cos_t, sin_t, NPOS, D, 10000.0f);
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
    gpt_config_defaults(&cfg);
    cfg.rope_base = 500.0f;
    char err[128];
    PosCtx pc;
    assert_int_equal(pos_ctx_init(&pc, &pos_scheme_rope, &cfg, 16, err, sizeof err), 0);
    float qkv[B * T * 3 * C], orig[B * T * 3 * C];
    gc_fill_normal(orig, B * T * 3 * C, 0, 1, 9);
    memcpy(qkv, orig, sizeof qkv);
    int pos0 = 5;
    pos_scheme_rope.qk_forward(&pc, qkv, B, T, pos0);
    rope_build_tables(cos_t, sin_t, NPOS, D, 500.0f);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_matrix_form),
        cmocka_unit_test(test_relative_and_norm),
        cmocka_unit_test(test_qk_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
