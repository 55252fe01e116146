// test_model_threads.c: the threaded paths of the default (OpenBLAS)
// engine. Forward and backward on 2 threads are bit-identical to 1 thread:
// the engine's sgemm calls are the same 64-row slices whatever the thread
// count (OpenBLAS's kernels round a row differently with the row count of
// the call, so per-thread slices would not be), and our reductions run over
// output elements or in fixed lanes, so their order is fixed. Repeated runs
// on 2 threads are bit-identical too.
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

enum { B = 4, T = 32, V = 96 };

static float *run(PosKind pos, int threads, float *loss) {
    omp_set_num_threads(threads);
    GPTConfig cfg = {.n_layer = 2, .n_head = 4, .d_model = 64, .vocab_size = V, .block_size = T};
    gc_config_defaults(&cfg);
    cfg.pos = pos;
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 5, err, sizeof err), 0);
    gc_randomize_params(m, 6);
    assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), 0);
    int inp[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) { inp[i] = (i * 13) % V; tgt[i] = (i * 29 + 1) % V; }
    gpt_zero_grad(m);
    *loss = gc_forward(m, inp, tgt, B, T);
    gc_backward(m, 1.0f);
    size_t n = gpt_num_params(m);
    float *g = malloc(n * sizeof(float));
    memcpy(g, gpt_grads(m), n * sizeof(float));
    gpt_free(m);
    return g;
}

static void test_threads(void **s) {
    (void)s;
    PosKind kinds[] = {POS_ROPE, POS_LEARNED, POS_T5};
    for (int k = 0; k < 3; k++) {
        float l1, l2, l2b;
        float *g1 = run(kinds[k], 1, &l1), *g2 = run(kinds[k], 2, &l2), *g2b = run(kinds[k], 2, &l2b);
        size_t n = (size_t)V * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64;
        if (kinds[k] == POS_LEARNED) n += (size_t)T * 64;
        if (kinds[k] == POS_T5) n += 32 * 4;
        assert_true(l1 == l2);
        assert_memory_equal(g1, g2, n * sizeof(float));
        assert_true(l2 == l2b);
        assert_memory_equal(g2, g2b, n * sizeof(float));
        free(g1); free(g2); free(g2b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
