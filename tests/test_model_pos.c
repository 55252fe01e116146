// test_model_pos.c: the fixed tables and buckets of the positional schemes
// against their formulas, computed independently here: t5 buckets (worked
// by hand), sinusoidal PE, ALiBi slopes (incl. the non-power-of-two recipe).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/pos.h"
#include "model/pos_maths.h"
#include "util_gradcheck.h"
#include "util_shell.h"

// Defaults nb = 32, md = 128, so e = 16 exact buckets, nb - e = 16 log
// buckets, log(md/e) = log 8. For n >= 16:
//   bucket = 16 + floor(log(n/16) / log 8 * 16) = 16 + floor(16/3 * log2(n/16))
//   n = 0, 1, 15  -> n itself (n < 16)
//   n = 16:  log2(1)      = 0       -> 0        -> 16
//   n = 17:  log2(1.0625) = 0.08746 -> 0.466    -> 16
//   n = 19:  log2(1.1875) = 0.24793 -> 1.322    -> 17
//   n = 24:  log2(1.5)    = 0.58496 -> 3.120    -> 19
//   n = 31:  log2(1.9375) = 0.95420 -> 5.089    -> 21
//   n = 40:  log2(2.5)    = 1.32193 -> 7.050    -> 23
//   n = 52:  log2(3.25)   = 1.70044 -> 9.069    -> 25
//   n = 67:  log2(4.1875) = 2.06609 -> 11.019   -> 27
//   n = 87:  log2(5.4375) = 2.44294 -> 13.029   -> 29
//   n = 99:  log2(6.1875) = 2.62936 -> 14.023   -> 30
//   n = 112: log2(7)      = 2.80735 -> 14.973   -> 30
//   n = 113: log2(7.0625) = 2.82018 -> 15.041   -> 31
//   n = 128: log2(8)      = 3       -> 16       -> 32, capped at 31
//   n = 1000: beyond max_distance   -> capped at 31
static void test_t5_buckets_default(void **s) {
    (void)s;
    const int n[] = {0, 1, 15, 16, 17, 19, 24, 31, 40, 52, 67, 87, 99, 112, 113, 128, 1000};
    const int want[] = {0, 1, 15, 16, 16, 17, 19, 21, 23, 25, 27, 29, 30, 30, 31, 31, 31};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) assert_int_equal(t5_bucket(n[i], 32, 128), want[i]);
}

// nb = 8, md = 20: e = 4, bucket = 4 + floor(log(n/4) / log 5 * 4)
//   n = 3 -> 3; n = 4 -> 4; n = 6: log(1.5)/log5*4 = 1.008 -> 5;
//   n = 5: log(1.25)/log5*4 = 0.555 -> 4; n = 9: log(2.25)/log5*4 = 2.016 -> 6;
//   n = 13: log(3.25)/log5*4 = 2.930 -> 6; n = 14: 3.114 -> 7; n = 20: 4 -> 8 -> 7
static void test_t5_buckets_custom(void **s) {
    (void)s;
    const int n[] = {3, 4, 5, 6, 9, 13, 14, 20, 500};
    const int want[] = {3, 4, 4, 5, 6, 6, 7, 7, 7};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) assert_int_equal(t5_bucket(n[i], 8, 20), want[i]);
}

static void test_t5_bias_table(void **s) {
    (void)s;
    GPTConfig cfg = {.n_layer = 1, .n_head = 3, .d_model = 6, .vocab_size = 4, .block_size = 8, .pos = POS_T5};
    gc_config_defaults(&cfg);
    float rel[32 * 3], bias[3 * 40];
    for (int i = 0; i < 96; i++) rel[i] = (float)i;
    PosCtx pc = {.cfg = &cfg, .param = {rel}};
    pos_scheme_t5.bias_fill(&pc, bias, 40);
    // bias[h][n] = rel_bias[bucket(n), h]: n = 24 is bucket 19, n = 31 bucket 21
    assert_true(bias[1 * 40 + 24] == rel[19 * 3 + 1]);
    assert_true(bias[2 * 40 + 31] == rel[21 * 3 + 2]);
    assert_true(bias[0 * 40 + 7] == rel[7 * 3 + 0]);
}

static void test_sinusoidal(void **s) {
    (void)s;
    enum { N = 50, C = 10 };
    float pe[N * C];
    const float scales[] = {1.0f, 0.125f};   // unit amplitude, and scaled
    for (int k = 0; k < 2; k++) {
        double s = scales[k];
        sinusoidal_build_table(pe, N, C, scales[k]);
        for (int t = 0; t < N; t++)
            for (int i = 0; i < C / 2; i++) {
                double w = exp(-log(10000.0) * (2.0 * i) / C);   // 1 / 10000^(2i/C)
                assert_true(fabs(pe[t * C + 2 * i] - s * sin(t * w)) < 1e-6);
                assert_true(fabs(pe[t * C + 2 * i + 1] - s * cos(t * w)) < 1e-6);
            }
    }
}

static void test_alibi(void **s) {
    (void)s;
    float m[16];
    alibi_slopes(m, 8);   // 2^-1, 2^-2, ..., 2^-8
    for (int h = 0; h < 8; h++) assert_true(fabs(m[h] - ldexp(1.0, -(h + 1))) < 1e-7);
    alibi_slopes(m, 4);   // 2^-2, 2^-4, 2^-6, 2^-8
    for (int h = 0; h < 4; h++) assert_true(fabs(m[h] - ldexp(1.0, -2 * (h + 1))) < 1e-7);
    // H = 6 (paper's recipe): the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then
    // the 8-head slopes at indices 0, 2: 2^-1, 2^-3
    alibi_slopes(m, 6);
    const double want6[] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (int h = 0; h < 6; h++) assert_true(fabs(m[h] - want6[h]) < 1e-7);
    // and the table: bias[h][n] = -m_h n
    GPTConfig cfg = {.n_layer = 1, .n_head = 4, .d_model = 8, .vocab_size = 4, .block_size = 8, .pos = POS_ALIBI};
    gc_config_defaults(&cfg);
    float bias[4 * 10];
    PosCtx pc = {.cfg = &cfg};
    pos_scheme_alibi.bias_fill(&pc, bias, 10);
    for (int h = 0; h < 4; h++)
        for (int n = 0; n < 10; n++) assert_true(fabs(bias[h * 10 + n] + ldexp(1.0, -2 * (h + 1)) * n) < 1e-6);
}

// Every scheme says, per block, where it exists outside ropelab: for GGUF and
// for --format hf, an architecture or the reason it has none, never both,
// never neither (model/pos.h's PosExports; the exports write only these).
static void test_every_scheme_says_how_it_exports(void **s) {
    for (int k = 0; k < POS_COUNT; k++) {
        const PosExports *x = pos_exports((PosKind)k);
        assert_non_null(x);
        for (int b = BLOCK_GPT2; b <= BLOCK_LLAMA; b++) {
            if (!x->gguf[b] == !x->gguf_no_home[b])
                fail_msg("pos=%s, block %d: GGUF needs an architecture or a reason, not %s", pos_kind_name(k), b,
                         x->gguf[b] ? "both" : "neither");
            if (!x->hf[b] == !x->hf_no_home[b])
                fail_msg("pos=%s, block %d: --format hf needs a class or a reason, not %s", pos_kind_name(k), b,
                         x->hf[b] ? "both" : "neither");
        }
    }
}

// A scheme added to the list (model/config.h's POS_SCHEME_LIST) whose file
// defines no pos_exports_NAME does not build: pos_list.c, compiled from a copy of
// the headers with a scheme `fake` added, links only once pos_fake.c defines
// its exports as well as its scheme.
static void test_a_scheme_without_exports_does_not_build(void **s) {
    if (access("build/libropelab.a", R_OK) != 0) {   // a sanitizer run root (tests/sanitize.mk) has no build/
        fprintf(stderr, "no build/libropelab.a here (make sanitize's run root): the link is make test's\n");
        skip();
    }
    char tmp[] = "/tmp/ropelab_fake_scheme_XXXXXX";
    assert_non_null(mkdtemp(tmp));
    assert_int_equal(run_shell("mkdir -p %s/src && cp -r src/model src/engine src/common %s/src/ && "
                               "sed -i 's/X(NONE, none)/X(NONE, none) X(FAKE, fake)/' %s/src/model/config.h && "
                               "grep -q 'X(FAKE, fake)' %s/src/model/config.h && "
                               "printf '#include \"model/pos.h\"\\nconst PosScheme pos_scheme_fake = {.kind = POS_FAKE};\\n"
                               "int main(void) { return pos_exports(POS_FAKE) == 0; }\\n' > %s/fake.c",
                               tmp, tmp, tmp, tmp, tmp), 0);
    const char *link = "cc -std=c11 -D_GNU_SOURCE -fopenmp -I%s/src %s/src/model/pos_list.c %s/fake.c build/libropelab.a "
                       "-lopenblas -ldnnl -lcjson -linih -lm -o %s/fake > %s/link.txt 2>&1";
    if (run_shell(link, tmp, tmp, tmp, tmp, tmp) == 0) fail_msg("a scheme without pos_exports_fake linked");
    if (run_shell("grep -q 'pos_exports_fake' %s/link.txt", tmp) != 0) fail_msg("the link failed for another reason");
    // with its exports it builds: the missing definition was the only reason
    assert_int_equal(run_shell("echo 'const PosExports pos_exports_fake = {.gguf_no_home = {\"x\", \"x\"}, "
                               ".hf_no_home = {\"x\", \"x\"}};' >> %s/fake.c", tmp), 0);
    if (run_shell(link, tmp, tmp, tmp, tmp, tmp) != 0) {
        run_shell("cat %s/link.txt", tmp);
        fail_msg("the fake scheme with its exports did not build");
    }
    assert_int_equal(run_shell("rm -rf %s", tmp), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t5_buckets_default), cmocka_unit_test(test_t5_buckets_custom),
        cmocka_unit_test(test_t5_bias_table),      cmocka_unit_test(test_sinusoidal),
        cmocka_unit_test(test_alibi),
        cmocka_unit_test(test_every_scheme_says_how_it_exports),
        cmocka_unit_test(test_a_scheme_without_exports_does_not_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
