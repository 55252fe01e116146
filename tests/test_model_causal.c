// test_model_causal.c: causality for every scheme and block on every engine (changing
// tokens after position t leaves the logits at positions <= t unchanged,
// bit for bit), and KV-cache decoding equal to the full forward, including
// beyond block_size for the schemes that allow it: on the reference engine
// bit for bit (decoding is the forward for the newest position, and the
// reference's products and attention compute each row alone: the same loops
// on the same numbers), on OpenBLAS and oneDNN fp32 within float rounding
// (their products are blocked differently for one row and for T). Causality
// also with the fused attention (OpenBLAS, oneDNN fp32).
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

static const struct {
    GPTMatmul matmul;
    GPTPrecision precision;
    GPTAttention attention;
    const char *name;
} engines[] = {
    {GPT_MATMUL_REFERENCE, GPT_FP32, GPT_ATTENTION_BLOCKED, "reference"},
    {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_BLOCKED, "openblas"},
    {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_FUSED, "openblas fused"},
    {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_BLOCKED, "onednn fp32"},
    {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_FUSED, "onednn fp32 fused"},
    {GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, "onednn bf16"},
};
enum { N_ENGINES = sizeof engines / sizeof engines[0] };

static GPT *make_model(PosKind pos, int block_size, BlockKind block) {
    GPTConfig cfg = {.n_layer = 2, .n_head = 2, .d_model = 16, .vocab_size = 32, .block_size = block_size,
                     .block = block};
    gc_config_defaults(&cfg);
    cfg.pos = pos;
    if (pos == POS_ROPE) cfg.rope_dims = 6;   // partial rotary on the way
    if (pos == POS_T5) { cfg.t5_num_buckets = 8; cfg.t5_max_distance = 10; }  // several log buckets within T
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 77, err, sizeof err), 0);
    gc_randomize_params(m, 78);   // O(1) weights: position effects are large
    return m;
}

static void causal_case(PosKind pos, int engine, BlockKind block) {
    enum { B = 2, T = 8, V = 32 };
    GPT *m = make_model(pos, T, block);
    char err[256];
    if (gpt_set_matmul(m, engines[engine].matmul, engines[engine].precision, engines[engine].attention, err,
                       sizeof err) != 0) {
        printf("  causal %s: skipped (%s)\n", engines[engine].name, err);   // bf16 without AVX-512
        gpt_free(m);
        return;
    }
    assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), 0);
    int tok[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 11 + 3) % V;
    float *ref = malloc(sizeof(float) * B * T * V);
    gc_forward(m, tok, NULL, B, T);
    memcpy(ref, gc_logits(m), sizeof(float) * B * T * V);
    for (int t = 0; t < T - 1; t++) {
        int changed[B * T];
        memcpy(changed, tok, sizeof tok);
        for (int b = 0; b < B; b++)
            for (int u = t + 1; u < T; u++) changed[b * T + u] = (changed[b * T + u] + 5 + u) % V;
        gc_forward(m, changed, NULL, B, T);
        const float *z = gc_logits(m);
        double later = 0;
        for (int b = 0; b < B; b++)
            for (int u = 0; u < T; u++) {
                double d = gc_max_abs_diff(z + (size_t)(b * T + u) * V, ref + (size_t)(b * T + u) * V, V);
                if (u <= t) assert_true(d == 0.0);   // bitwise: later tokens never enter
                else later = fmax(later, d);
            }
        assert_true(later > 1e-3);   // and the change did reach the later positions
    }
    free(ref);
    gpt_free(m);
}

static void test_causal_all(void **s) {
    (void)s;
    for (int e = 0; e < N_ENGINES; e++)
        for (int k = 0; k < POS_COUNT; k++) {
            causal_case((PosKind)k, e, BLOCK_GPT2);
            causal_case((PosKind)k, e, BLOCK_LLAMA);
        }
}

// Decoding token by token with the cache gives the logits of the full
// forward: on the reference engine bit for bit, on OpenBLAS and oneDNN fp32
// within 1e-5 of the largest |logit| (absolute 1e-5 when they are below 1).
static void kv_case(PosKind pos, int block_size, int T, GPTMatmul matmul, BlockKind block) {
    enum { V = 32 };
    GPT *m = make_model(pos, block_size, block);
    char err[256];
    assert_int_equal(gpt_set_matmul(m, matmul, GPT_FP32, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    const double tol = matmul == GPT_MATMUL_REFERENCE ? 0.0 : 1e-5;
    assert_int_equal(gpt_alloc_activations(m, 1, T, err, sizeof err), 0);
    int *tok = malloc(sizeof(int) * T);
    for (int i = 0; i < T; i++) tok[i] = (i * 7 + 1) % V;
    gc_forward(m, tok, NULL, 1, T);
    const float *full = gc_logits(m);
    KVCache *kv;
    assert_int_equal(kv_cache_create(&kv, m, T, err, sizeof err), 0);
    float logits[V];
    double worst = 0, scale = 0;
    for (int t = 0; t < T; t++) {
        assert_int_equal(kv_cache_len(kv), t);
        assert_int_equal(gpt_decode_step(m, kv, tok[t], logits, err, sizeof err), 0);
        worst = fmax(worst, gc_max_abs_diff(logits, full + (size_t)t * V, V));
        for (int v = 0; v < V; v++) scale = fmax(scale, fabs(full[(size_t)t * V + v]));
    }
    printf("  kv-cache %-9s %-5s pos=%-10s T=%2d (block_size %d): max |diff| %.2e (logits up to %.1f)\n",
           matmul == GPT_MATMUL_REFERENCE ? "reference" : matmul == GPT_MATMUL_OPENBLAS ? "openblas" : "onednn",
           block == BLOCK_LLAMA ? "llama" : "gpt2",
           pos_kind_name(pos), T, block_size, worst, scale);
    assert_true(worst <= tol * fmax(1.0, scale));
    assert_int_equal(gpt_decode_step(m, kv, tok[0], logits, err, sizeof err), -1);   // full
    // a second cache on the same model starts from position 0: a cache holds all of decoding's state
    KVCache *kv2;
    assert_int_equal(kv_cache_create(&kv2, m, T, err, sizeof err), 0);
    assert_int_equal(gpt_decode_step(m, kv2, tok[0], logits, err, sizeof err), 0);
    assert_true(gc_max_abs_diff(logits, full, V) <= tol * fmax(1.0, scale));
    kv_cache_free(kv2);
    kv_cache_free(kv);
    free(tok);
    gpt_free(m);
}

static void test_kvcache_all(void **s) {
    (void)s;
    GPTMatmul matmuls[] = {GPT_MATMUL_REFERENCE, GPT_MATMUL_OPENBLAS, GPT_MATMUL_ONEDNN};
    for (int e = 0; e < 3; e++)
        for (int k = 0; k < POS_COUNT; k++)
            for (int block = BLOCK_GPT2; block <= BLOCK_LLAMA; block++) {
                kv_case((PosKind)k, 8, 8, matmuls[e], (BlockKind)block);
                if (k != POS_LEARNED) kv_case((PosKind)k, 8, 20, matmuls[e], (BlockKind)block);   // beyond block_size
            }
    // learned cannot go beyond block_size: a clear error, not a crash
    GPT *m = make_model(POS_LEARNED, 8, BLOCK_GPT2);
    KVCache *kv;
    char err[256];
    assert_int_equal(kv_cache_create(&kv, m, 9, err, sizeof err), -1);
    assert_non_null(strstr(err, "block_size"));
    assert_int_equal(gpt_alloc_activations(m, 1, 9, err, sizeof err), -1);
    assert_non_null(strstr(err, "pos=learned cannot run sequences of 9 tokens"));
    gpt_free(m);
}

int main(void) {
    omp_set_num_threads(1);   // tiny model; threaded paths: test_model_threads
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal_all),
        cmocka_unit_test(test_kvcache_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
