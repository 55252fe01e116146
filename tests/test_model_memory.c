// test_model_memory.c: a model or a batch that needs more memory than the
// machine has is refused before anything large is allocated, with a message
// giving the bytes needed and the bytes available.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>
#include <omp.h>

#include "common/memory.h"
#include "model/gpt.h"

// Peak resident memory of this process so far, in bytes (ru_maxrss is in kB on Linux).
static long long peak_rss(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (long long)u.ru_maxrss * 1024;
}

// err must be "WHAT need NEED; this machine has X GB available" with X below NEED.
static void expect_refusal(const char *err, const char *what, const char *need) {
    char want[256];
    snprintf(want, sizeof want, "%s need %s; this machine has ", what, need);
    size_t n = strlen(want);
    if (strncmp(err, want, n) != 0) printf("got:  %s\nwant: %s...\n", err, want);
    assert_memory_equal(err, want, n);
    double have, need_gb;
    char tail[64];
    assert_int_equal(sscanf(err + n, "%lf GB %63s", &have, tail), 2);
    assert_string_equal(tail, "available");
    assert_int_equal(sscanf(need, "%lf", &need_gb), 1);
    assert_true(have < need_gb);
}

static void test_mem_check(void **s) {
    (void)s;
    char err[256];
    size_t have = mem_available_bytes();
    assert_true(have > ((size_t)16 << 20) && have < SIZE_MAX);   // a real figure, not the unknown case
    assert_int_equal(mem_check(0, "nothing", err, sizeof err), 0);
    assert_int_equal(mem_check(have / 2, "half of it", err, sizeof err), 0);
    assert_int_equal(mem_check((size_t)1 << 50, "a pebibyte", err, sizeof err), -1);
    expect_refusal(err, "a pebibyte", "1125899.9 GB");   // 2^50 bytes = 1125899.9 x 10^9
}

// A model near the largest the configuration allows (2^34 parameters):
// L = 5, C = 16384, 1.6e10 parameters, 128.9 GB of parameters and
// gradients (4 bytes each, each buffer rounded up to 64 bytes). gpt_create
// must refuse it with that figure before allocating either buffer.
static void test_huge_model(void **s) {
    (void)s;
    GPTConfig cfg = {.n_layer = 5, .n_head = 128, .d_model = 16384, .vocab_size = 64, .block_size = 128};
    gpt_config_defaults(&cfg);
    cfg.pos = POS_ROPE;
    size_t L = 5, C = 16384, V = 64;
    size_t n_params = V * C + L * (12 * C * C + 13 * C) + 2 * C;
    size_t bytes = 2 * ((n_params * 4 + 63) / 64 * 64);
    if (mem_available_bytes() >= bytes) skip();   // a machine where it fits: nothing to refuse
    char err[256], what[96], need[32];
    snprintf(what, sizeof what, "the model's %zu parameters and their gradients", n_params);
    snprintf(need, sizeof need, "%.1f GB", (double)bytes / 1e9);
    assert_string_equal(need, "128.9 GB");
    long long rss0 = peak_rss();
    GPT *m = (GPT *)&m;   // must be set to NULL
    assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), -1);
    assert_null(m);
    expect_refusal(err, what, need);
    assert_true(peak_rss() - rss0 < (64LL << 20));
}

// A small model (L = 256, C = 16) asked for one sequence of 2^25 tokens:
// the activations hold more than L x 16C floats per token (LayerNorms,
// qkv, attention output, residuals, MLP hidden), about 9 TB. The refusal
// names the batch and the figure, comes before the rope tables grow to
// 2^25 positions (2 GB), and leaves the model able to size a real batch.
static void test_huge_activations(void **s) {
    (void)s;
    GPTConfig cfg = {.n_layer = 256, .n_head = 1, .d_model = 16, .vocab_size = 64, .block_size = 64};
    gpt_config_defaults(&cfg);
    cfg.pos = POS_ROPE;
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 1, err, sizeof err), 0);
    const int B = 1, T = 1 << 25;
    assert_int_equal(gpt_check_batch(&cfg, B, T, err, sizeof err), 0);   // within the index range
    long long rss0 = peak_rss();
    assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), -1);
    const char *what = "activations for batch 1 x 33554432 tokens";
    size_t n = strlen(what);
    double need;
    assert_memory_equal(err, what, n);
    assert_int_equal(sscanf(err + n, " need %lf GB", &need), 1);
    assert_true(need * 1e9 >= (double)B * T * 256 * 16 * 16 * sizeof(float));   // >= 8.7 TB
    char need_s[32];
    snprintf(need_s, sizeof need_s, "%.1f GB", need);
    expect_refusal(err, what, need_s);
    assert_int_equal(gpt_activation_bytes(m), 0);
    assert_true(peak_rss() - rss0 < (64LL << 20));
    // the model is still whole: a batch that fits is sized and runs
    assert_int_equal(gpt_alloc_activations(m, 2, 8, err, sizeof err), 0);
    assert_true(gpt_activation_bytes(m) > 0);
    int tokens[16] = {0};
    float loss;
    assert_int_equal(gpt_forward(m, tokens, tokens, 2, 8, &loss, err, sizeof err), 0);
    gpt_free(m);
}

int main(void) {
    omp_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_check),
        cmocka_unit_test(test_huge_model),
        cmocka_unit_test(test_huge_activations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
