// test_model_init.c: configuration checks, the parameter table, and the
// seeded initialisation: same seed -> same weights whatever the thread
// count, shared tensors identical across schemes, GPT-2 statistics.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "model/gpt.h"
#include "util_gradcheck.h"

static GPTConfig base_config(PosKind pos) {
    GPTConfig cfg = {.n_layer = 3, .n_head = 4, .d_model = 32, .vocab_size = 50, .block_size = 16};
    gc_config_defaults(&cfg);
    cfg.pos = pos;
    return cfg;
}

static void test_config(void **s) {
    (void)s;
    char err[256];
    for (int k = 0; k < POS_COUNT; k++) {
        PosKind back;
        assert_int_equal(pos_kind_from_name(pos_kind_name((PosKind)k), &back), 0);
        assert_int_equal(back, k);
    }
    PosKind kind;
    assert_int_equal(pos_kind_from_name("xpos", &kind), -1);
    GPTConfig c = base_config(POS_ROPE);
    assert_int_equal(c.rope_dims, 8);
    assert_int_equal(c.t5_num_buckets, 32);
    assert_int_equal(c.t5_max_distance, 128);
    assert_true(c.rope_base == 10000.0f);
    assert_int_equal(gpt_config_validate(&c, err, sizeof err), 0);
    c.d_model = 30;
    assert_int_equal(gpt_config_validate(&c, err, sizeof err), -1);
    assert_string_equal(err, "d_model (30) is not divisible by n_head (4)");
    c = base_config(POS_ROPE);
    c.rope_dims = 5;
    assert_int_equal(gpt_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "rope_dims (5) must be even"));
    c = base_config(POS_T5);
    c.t5_max_distance = 10;
    assert_int_equal(gpt_config_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "t5_max_distance (10)"));
    c = base_config(POS_NONE);
    c.n_layer = 0;
    GPT *m;
    assert_int_equal(gpt_create(&m, &c, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "n_layer (0)"));
}

// Names, shapes, order, offsets and the weight-decay flags of the contract.
static void test_param_table(void **s) {
    (void)s;
    char err[256];
    for (int k = 0; k < POS_COUNT; k++) {
        GPTConfig c = base_config((PosKind)k);
        GPT *m;
        assert_int_equal(gpt_create(&m, &c, 1, err, sizeof err), 0);
        const ParamEntry *e;
        int n = gpt_param_entries(m, &e);
        size_t C = 32, L = 3, V = 50;
        size_t want = V * C + L * (12 * C * C + 13 * C) + 2 * C;
        if (k == POS_LEARNED) want += 16 * C;
        if (k == POS_T5) want += 32 * 4;
        assert_int_equal(gpt_num_params(m), want);
        assert_int_equal(n, 3 * 12 + 3 + (k == POS_LEARNED || k == POS_T5));
        size_t off = 0;
        for (int i = 0; i < n; i++) {   // contiguous, in order
            assert_int_equal(e[i].offset, off);
            off += e[i].numel;
        }
        assert_string_equal(e[0].name, "wte");
        assert_string_equal(e[n - 1].name, "ln_f.bias");
        const ParamEntry *p = gpt_find_param(m, "h.2.mlp.c_proj.weight");
        assert_non_null(p);
        assert_int_equal(p->shape[0], 32);
        assert_int_equal(p->shape[1], 128);
        assert_int_equal(p->weight_decay, 1);
        p = gpt_find_param(m, "h.1.attn.c_attn.weight");
        assert_int_equal(p->shape[0], 96);
        assert_int_equal(p->weight_decay, 1);
        assert_int_equal(gpt_find_param(m, "wte")->weight_decay, 1);
        assert_int_equal(gpt_find_param(m, "h.0.attn.c_attn.bias")->weight_decay, 0);
        assert_int_equal(gpt_find_param(m, "h.0.ln_2.weight")->weight_decay, 0);
        assert_true((gpt_find_param(m, "wpe") != NULL) == (k == POS_LEARNED));
        assert_true((gpt_find_param(m, "rel_bias") != NULL) == (k == POS_T5));
        if (k == POS_LEARNED) assert_int_equal(gpt_find_param(m, "wpe")->weight_decay, 0);
        if (k == POS_T5) {
            assert_int_equal(gpt_find_param(m, "rel_bias")->shape[0], 32);
            assert_int_equal(gpt_find_param(m, "rel_bias")->shape[1], 4);
        }
        gpt_free(m);
    }
}

static double tensor_std(const float *x, size_t n) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) { s += x[i]; s2 += (double)x[i] * x[i]; }
    return sqrt(s2 / n - (s / n) * (s / n));
}

static void test_init_statistics(void **s) {
    (void)s;
    GPTConfig c = base_config(POS_LEARNED);
    c.d_model = 128;
    c.rope_dims = 32;
    c.vocab_size = 500;
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &c, 42, err, sizeof err), 0);
    float *p = gpt_params(m);
    const ParamEntry *e;
    int n = gpt_param_entries(m, &e);
    double proj = 0.02 / sqrt(2.0 * 3);
    for (int i = 0; i < n; i++) {
        const char *name = e[i].name;
        const float *x = p + e[i].offset;
        size_t len = strlen(name);
        if (strstr(name, "c_proj.weight")) assert_true(fabs(tensor_std(x, e[i].numel) / proj - 1) < 0.05);
        else if (strstr(name, "c_attn.weight") || strstr(name, "c_fc.weight") || !strcmp(name, "wte"))
            assert_true(fabs(tensor_std(x, e[i].numel) / 0.02 - 1) < 0.05);
        else if (!strcmp(name, "wpe")) assert_true(fabs(tensor_std(x, e[i].numel) / 0.01 - 1) < 0.05);
        else {
            float want = (strstr(name, "ln_") && strcmp(name + len - 7, ".weight") == 0) ? 1.0f : 0.0f;
            for (size_t j = 0; j < e[i].numel; j++) assert_true(x[j] == want);
        }
    }
    // layers draw from different streams
    assert_true(memcmp(p + gpt_find_param(m, "h.0.attn.c_attn.weight")->offset,
                       p + gpt_find_param(m, "h.1.attn.c_attn.weight")->offset, 64) != 0);
    gpt_free(m);
}

static float *init_copy(PosKind pos, uint64_t seed, int threads, size_t *n) {
    omp_set_num_threads(threads);
    GPTConfig c = base_config(pos);
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &c, seed, err, sizeof err), 0);
    *n = gpt_num_params(m);
    float *copy = malloc(*n * sizeof(float));
    memcpy(copy, gpt_params(m), *n * sizeof(float));
    gpt_free(m);
    return copy;
}

static void test_seed_and_threads(void **s) {
    (void)s;
    size_t n1, n2, n3;
    float *a = init_copy(POS_T5, 7, 1, &n1), *b = init_copy(POS_T5, 7, 2, &n2), *c = init_copy(POS_T5, 8, 2, &n3);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1 * sizeof(float));
    assert_true(memcmp(a, c, n1 * sizeof(float)) != 0);   // another seed, other weights
    free(a); free(b); free(c);
}

// Every tensor two schemes share starts bit-identical (same seed).
static void test_shared_across_schemes(void **s) {
    (void)s;
    char err[256];
    GPT *m[POS_COUNT];
    for (int k = 0; k < POS_COUNT; k++) {
        GPTConfig c = base_config((PosKind)k);
        assert_int_equal(gpt_create(&m[k], &c, 2024, err, sizeof err), 0);
    }
    for (int a = 0; a < POS_COUNT; a++)
        for (int b = a + 1; b < POS_COUNT; b++) {
            const ParamEntry *ea;
            int na = gpt_param_entries(m[a], &ea), shared = 0;
            for (int i = 0; i < na; i++) {
                const ParamEntry *eb = gpt_find_param(m[b], ea[i].name);
                if (!eb) continue;
                shared++;
                assert_int_equal(ea[i].numel, eb->numel);
                assert_memory_equal(gpt_params(m[a]) + ea[i].offset, gpt_params(m[b]) + eb->offset,
                                    ea[i].numel * sizeof(float));
            }
            assert_int_equal(shared, 3 * 12 + 3);
        }
    for (int k = 0; k < POS_COUNT; k++) gpt_free(m[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),          cmocka_unit_test(test_param_table),
        cmocka_unit_test(test_init_statistics), cmocka_unit_test(test_seed_and_threads),
        cmocka_unit_test(test_shared_across_schemes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
