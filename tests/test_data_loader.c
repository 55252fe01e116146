// test_data_loader.c: training batches (bounds, shift by one, seeds, saved
// and restored Rng state) and evaluation windows (fixed, non-overlapping).
//
// The test file holds token i at position i, so every id read back says where
// in the file it came from.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/loader.h"

static char err[1024];

static void write_positions(const char *path, size_t n) {
    uint32_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)i;
    assert_int_equal(tokens_write(path, t, n, 65536, 0, ATOMIC_REPLACE, err, sizeof err), 0);
    free(t);
}

static void open_loader(DataLoader *dl, const char *path, int B, int T, uint64_t seed) {
    int rc = loader_open(dl, path, B, T, seed, 65536, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
}

static void test_windows_in_bounds_and_shifted(void **state) {
    const char *path = "build/test_loader_a.bin";
    size_t n = 1000;
    write_positions(path, n);
    DataLoader dl;
    int B = 4, T = 16;
    open_loader(&dl, path, B, T, 1);
    for (int step = 0; step < 200; step++) {
        loader_next_batch(&dl);
        for (int b = 0; b < B; b++) {
            int start = dl.inputs[b * T];
            assert_true(start >= 0 && (size_t)start <= n - T - 1);
            for (int t = 0; t < T; t++) {
                assert_int_equal(dl.inputs[b * T + t], start + t);       // consecutive tokens
                assert_int_equal(dl.targets[b * T + t], start + t + 1);  // inputs shifted by one
            }
        }
    }
    loader_close(&dl);
}

// With n = T + 3 there are exactly 3 start offsets, 0, 1, 2: all are drawn.
static void test_every_offset_reachable(void **state) {
    const char *path = "build/test_loader_b.bin";
    int T = 8;
    write_positions(path, T + 3);
    DataLoader dl;
    open_loader(&dl, path, 1, T, 2);
    int seen[3] = {0};
    for (int i = 0; i < 300; i++) {
        loader_next_batch(&dl);
        int start = dl.inputs[0];
        assert_true(start >= 0 && start <= 2);
        seen[start]++;
    }
    for (int k = 0; k < 3; k++) assert_true(seen[k] > 50);   // about 100 each
    loader_close(&dl);
}

static void test_seed_and_rng_state(void **state) {
    const char *path = "build/test_loader_c.bin";
    write_positions(path, 5000);
    int B = 3, T = 10;
    DataLoader a, b, c;
    open_loader(&a, path, B, T, 42);
    open_loader(&b, path, B, T, 42);
    open_loader(&c, path, B, T, 43);
    int differs = 0;
    for (int step = 0; step < 20; step++) {
        loader_next_batch(&a); loader_next_batch(&b); loader_next_batch(&c);
        assert_memory_equal(a.inputs, b.inputs, B * T * sizeof(int));
        differs |= memcmp(a.inputs, c.inputs, B * T * sizeof(int)) != 0;
    }
    assert_true(differs);

    // Save the state, draw 5 batches, restore into a fresh loader: same 5 batches.
    Rng saved = loader_get_rng(&a);
    int *expect = malloc(5 * B * T * sizeof(int));
    for (int k = 0; k < 5; k++) {
        loader_next_batch(&a);
        memcpy(expect + k * B * T, a.inputs, B * T * sizeof(int));
    }
    DataLoader resumed;
    open_loader(&resumed, path, B, T, 999);   // the seed does not matter once restored
    loader_set_rng(&resumed, saved);
    for (int k = 0; k < 5; k++) {
        loader_next_batch(&resumed);
        assert_memory_equal(resumed.inputs, expect + k * B * T, B * T * sizeof(int));
    }
    free(expect);
    loader_close(&a); loader_close(&b); loader_close(&c); loader_close(&resumed);
}

static void test_eval_windows(void **state) {
    const char *path = "build/test_loader_d.bin";
    size_t n = 103;
    int B = 4, T = 10;
    write_positions(path, n);
    DataLoader dl;
    open_loader(&dl, path, B, T, 5);
    size_t nw = loader_num_eval_windows(&dl);
    assert_int_equal(nw, (n - 1) / T);   // 10 windows: the last needs tokens 90..100
    int *covered = calloc(n, sizeof *covered);
    // Batches 0..2 hold windows 0..11; windows 10 and 11 wrap to 0 and 1.
    for (size_t k = 0; k < 3; k++) {
        loader_next_batch(&dl);   // training draws must not disturb evaluation
        loader_eval_batch(&dl, k);
        for (int b = 0; b < B; b++) {
            size_t w = (k * B + b) % nw;
            for (int t = 0; t < T; t++) {
                assert_int_equal(dl.inputs[b * T + t], w * T + t);
                assert_int_equal(dl.targets[b * T + t], w * T + t + 1);
            }
            if (k * B + b < nw)
                for (int t = 0; t < T; t++) covered[dl.inputs[b * T + t]]++;
        }
    }
    // Non-overlapping: each input token of the first nw windows appears once.
    for (size_t i = 0; i < nw * T; i++) assert_int_equal(covered[i], 1);
    // Fixed: the same batch twice gives the same tokens.
    loader_eval_batch(&dl, 1);
    int first = dl.inputs[0];
    loader_next_batch(&dl);
    loader_eval_batch(&dl, 1);
    assert_int_equal(dl.inputs[0], first);
    free(covered);
    loader_close(&dl);
}

static void test_too_short_and_bad_args(void **state) {
    const char *path = "build/test_loader_e.bin";
    write_positions(path, 16);
    DataLoader dl;
    assert_int_equal(loader_open(&dl, path, 2, 16, 1, 65536, err, sizeof err), -1);
    assert_string_equal(err, "build/test_loader_e.bin: 16 tokens is shorter than one window of T+1 = 17 tokens");
    assert_int_equal(loader_open(&dl, path, 2, 15, 1, 65536, err, sizeof err), 0);   // exactly one window
    loader_eval_batch(&dl, 0);
    assert_int_equal(loader_num_eval_windows(&dl), 1);
    assert_int_equal(dl.targets[14], 15);
    loader_close(&dl);
    assert_int_equal(loader_open(&dl, path, 0, 4, 1, 65536, err, sizeof err), -1);
    assert_non_null(strstr(err, "must be at least 1"));
    // Ids beyond the vocabulary are caught when opening.
    assert_int_equal(loader_open(&dl, path, 1, 4, 1, 10, err, sizeof err), -1);
    assert_non_null(strstr(err, "token 10 is 10, beyond the vocabulary of 10"));
    assert_int_equal(loader_open(&dl, "build/no_such_tokens.bin", 1, 4, 1, 10, err, sizeof err), -1);
    assert_non_null(strstr(err, "build/no_such_tokens.bin: No such file"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_in_bounds_and_shifted),
        cmocka_unit_test(test_every_offset_reachable),
        cmocka_unit_test(test_seed_and_rng_state),
        cmocka_unit_test(test_eval_windows),
        cmocka_unit_test(test_too_short_and_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
