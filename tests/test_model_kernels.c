// test_model_kernels.c: the vectorised maths of the model's own layers
// (reference.c) against the double-precision definitions: exp_fast /
// tanh_fast accuracy, and GELU and cross-entropy, which use them. (The
// engines' products, attention's blocks included, are checked against the
// reference engine in test_model_linear.c and test_model_attention.c.)
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/rng.h"
#include "engine/bf16.h"
#include "engine/kernels.h"
#include "model/layers.h"

static float *randn(size_t n, double std, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * rng_normal(&r));
    return x;
}

static void test_exp_tanh(void **s) {
    (void)s;
    double worst_exp = 0, worst_tanh = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.000731f) {
        double e = exp((double)x), r = fabs(exp_fast(x) - e) / e;
        worst_exp = r > worst_exp ? r : worst_exp;
    }
    for (float u = -30.0f; u < 30.0f; u += 0.0001f) {
        double d = fabs(tanh_fast(u) - tanh((double)u));
        worst_tanh = d > worst_tanh ? d : worst_tanh;
    }
    print_message("exp_fast worst relative error %.2e, tanh_fast worst absolute error %.2e\n",
                  worst_exp, worst_tanh);
    assert_true(worst_exp < 3e-7);
    assert_true(worst_tanh < 3e-7);
    assert_true(exp_fast(-1000.0f) < 1e-37f && exp_fast(-1000.0f) >= 0.0f);
    assert_true(isnan(exp_fast(NAN)));
    assert_true(tanh_fast(100.0f) == 1.0f && tanh_fast(-100.0f) == -1.0f);
}

static void test_gelu(void **s) {
    (void)s;
    enum { N = 10007 };
    float *x = randn(N, 3.0, 61), *y = malloc(N * sizeof(float)), *dy = randn(N, 1.0, 62),
          *dx = malloc(N * sizeof(float));
    gelu_forward(y, x, N);
    gelu_backward(dx, x, dy, N);
    double err_y = 0, err_dx = 0, k = sqrt(2.0 / M_PI);
    for (int i = 0; i < N; i++) {
        double v = x[i], th = tanh(k * (v + 0.044715 * v * v * v));
        double g = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * 0.044715 * v * v);
        err_y = fmax(err_y, fabs(0.5 * v * (1 + th) - y[i]) / fmax(1.0, fabs(v)));
        err_dx = fmax(err_dx, fabs(g * dy[i] - dx[i]) / fmax(1.0, fabs(dy[i])));
    }
    print_message("gelu: max error forward %.2e, backward %.2e\n", err_y, err_dx);
    assert_true(err_y < 1e-6);
    assert_true(err_dx < 5e-6);
    free(x); free(y); free(dy); free(dx);
}

// Tolerances of test_crossentropy, from the float arithmetic of
// crossentropy.c. u = 2^-24 (float's unit roundoff); eta = 3e-7, exp_fast's
// relative error as test_exp_tanh asserts it. Per row: m = max_v z_v (exact),
// S = sum_v exp(z_v - m) in [1, V], L = m + log S, p_v = exp(z_v - L).
// Forward, lse = fl(m + logf(float sum of exp_fast(fl(z_v - m)))):
//   fl(z_v - m): exp moves by a factor 1 + u|z_v - m|; on S, weighted by p_v,
//     u * sum_v p_v (m - z_v) = u (m - L + H(p)) <= u log V;
//   exp_fast: eta on every term, so eta on S;
//   the float sum of V positive terms in whatever order the build's vector
//     lanes give (one lane where the loop is not vectorised, e.g. make OPT=-O3
//     without -march=native; 4, 8 or 16 lanes otherwise, then the lanes): no
//     term goes through more than V + 16 additions, so (V + 16) u relative;
//   a relative error r of S is an absolute error r of log S;
//   logf: <= 1 ulp = 2u |log S| <= 2u log V;  fl(m + log S): u |L|.
//   => |lse - L| <= u (|L| + 3 log V + V + 16) + eta             (tol_lse)
//   loss = fl(lse - z_target): + u |loss|                         (tol_loss)
// Backward, g = fl(s * exp_fast(fl(z_v - lse))), then g_target = fl(g - s),
// against s (exp(z_v - lse) - [v = target]) with the kernel's own lse:
//   a = fl(z_v - lse): p u|a|, and p|a| = p |log p| <= 1/e;  exp_fast: p eta;
//   the product: p u;  the target's subtraction (|g - s| <= s): u
//   => s (eta + (2 + 1/e) u)                                       (tol_g)
// End to end, against the double lse: + s p_max tol_lse (exp(x + d) = exp(x)(1 + d)).
// All first order (the second-order terms are below 1e-12 here). The sum's
// (V + 16) u dominates for V = 1000: measured, an AVX-512 build is at 13 u on
// lse, the unvectorised order at 56 u; the bound holds for any order. (Summing
// in double in the kernel would make that term V 2^-53 and tol_lse ~ 3e-6.)
static void test_crossentropy(void **s) {
    (void)s;
    enum { N = 37, V = 1000 };
    const double u = 0x1p-24, eta = 3e-7, scale = 0.5;
    float *z = randn((size_t)N * V, 4.0, 71), losses[N], lse[N];
    int targets[N];
    for (int n = 0; n < N; n++) targets[n] = (n * 97) % V;
    double mean = crossentropy_forward(losses, lse, z, targets, N, V) / N, ref_mean = 0, err = 0, err_lse = 0;
    double ref_lse[N], max_L = 0, max_loss = 0, max_p = 0;
    for (int n = 0; n < N; n++) {
        double mx = -1e300, sum = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, z[n * V + v]);
        for (int v = 0; v < V; v++) sum += exp(z[n * V + v] - mx);
        ref_lse[n] = mx + log(sum);
        double loss = ref_lse[n] - z[n * V + targets[n]];
        ref_mean += loss / N;
        err = fmax(err, fabs(loss - losses[n]));
        err_lse = fmax(err_lse, fabs(ref_lse[n] - lse[n]));
        max_L = fmax(max_L, fabs(ref_lse[n]));
        max_loss = fmax(max_loss, fabs(loss));
        for (int v = 0; v < V; v++) max_p = fmax(max_p, exp(z[n * V + v] - ref_lse[n]));
    }
    const double tol_lse = u * (max_L + 3 * log((double)V) + V + 16) + eta;
    const double tol_loss = tol_lse + u * max_loss;
    const double tol_g = scale * (eta + (2 + 1 / M_E) * u);
    const double tol_g_end = tol_g + scale * max_p * tol_lse;
    float *g = malloc(sizeof(float) * N * V);
    memcpy(g, z, sizeof(float) * N * V);
    crossentropy_backward(g, lse, targets, N, V, (float)scale);
    double err_g = 0, err_g_own = 0;
    for (int n = 0; n < N; n++)
        for (int v = 0; v < V; v++) {
            double want = scale * (exp(z[n * V + v] - ref_lse[n]) - (v == targets[n]));
            double want_own = scale * (exp(z[n * V + v] - (double)lse[n]) - (v == targets[n]));
            err_g = fmax(err_g, fabs(want - g[n * V + v]));
            err_g_own = fmax(err_g_own, fabs(want_own - g[n * V + v]));
        }
    print_message("crossentropy: lse error %.2e (%.0f u, bound %.2e), loss %.2e, mean %.2e (bound %.2e); "
                  "dlogits %.2e (bound %.2e), given the kernel's lse %.2e (bound %.2e)\n",
                  err_lse, err_lse / u, tol_lse, err, fabs(mean - ref_mean), tol_loss, err_g, tol_g_end,
                  err_g_own, tol_g);
    assert_true(err_lse <= tol_lse);
    assert_true(err <= tol_loss && fabs(mean - ref_mean) <= tol_loss);
    assert_true(err_g_own <= tol_g);
    assert_true(err_g <= tol_g_end);
    free(z); free(g);
}

// bf16 rounding, from its definition: of the two bf16 values around x (x's
// top 16 bits, and the next one away from zero), the nearer, a tie to the one
// whose last bit is 0; past the largest finite bf16 the next one is 2^128
// (which rounds to infinity); a NaN keeps its sign and top payload bits,
// made quiet. Computed in double, apart from bf16_round's integer trick.
static uint16_t bf16_by_definition(float x) {
    uint32_t u, down, up;
    memcpy(&u, &x, sizeof u);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x0040u);
    down = u & 0xFFFF0000u;
    up = down + 0x10000u;
    float f_down, f_up;
    memcpy(&f_down, &down, sizeof f_down);
    memcpy(&f_up, &up, sizeof f_up);
    double d_down = f_down, d_up = isinf(f_up) && !isinf(f_down) ? copysign(0x1p128, x) : (double)f_up;
    double to_down = fabs((double)x - d_down), to_up = fabs(d_up - (double)x);
    int pick_up = to_up < to_down || (to_up == to_down && ((down >> 16) & 1u));
    return (uint16_t)((pick_up ? up : down) >> 16);
}

// Every sign, exponent and top mantissa (the 65,536 high halves) with the
// low halves where rounding decides (0, 1, just below, at and above the tie,
// all ones, two more): bf16_round, the one rounding of every bf16 product's
// inputs (onednn.h's to_bf16, engine.c's bias_grad_columns, attention's P
// and dS blocks), against the definition: subnormals, infinities, overflow
// to infinity and NaNs included.
static void test_bf16_round(void **s) {
    (void)s;
    static const uint16_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1234, 0xC000};
    enum { N_LOWS = sizeof lows / sizeof lows[0] };
    size_t n = 0, bad = 0;
    for (uint32_t high = 0; high < 65536; high++)
        for (int k = 0; k < N_LOWS; k++, n++) {
            uint32_t u = high << 16 | lows[k];
            float x;
            memcpy(&x, &u, sizeof x);
            bad += bf16_round(x) != bf16_by_definition(x);
        }
    print_message("bf16: %zu values, bf16_round != definition: %zu\n", n, bad);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_tanh),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_bf16_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
