// test_torch_crosscheck.c: the C program against the independent PyTorch
// reference (scripts/torch_model.py), through the contract's files.
//
// For every scheme (and partial rope, and t5 with few buckets so the
// logarithmic buckets and the cap are reached), `./train --debug-state`
// writes one batch's parameters, loss and every gradient; then
// scripts/check_debug_state.py recomputes loss and gradients in float64 in
// PyTorch and fails on any difference beyond float32 rounding (loss rel 1e-5,
// each gradient 1e-3 of its tensor's largest entry). It also runs
// tests/torch_check.sh: the reference against a plain-loop NumPy model and the
// checker's own mutation tests. Skipped (not failed) where python3-torch is
// missing; .ci/run installs it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[128];

static int sh(const char *fmt, const char *a, const char *b) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static int setup(void **state) {
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) return 0;  // tests skip
    snprintf(dir, sizeof dir, "/tmp/ropelab_xcheck_%d", (int)getpid());
    // A small corpus of varied text, tokenised with a 300-token vocabulary.
    if (sh("rm -rf %s && mkdir -p %s", dir, dir)) return -1;
    if (sh("for i in $(seq 1 60); do echo \"line $i: the quick brown fox $((i*7%%13)) jumps over "
           "the lazy dog $((i%%5)), and the cat sat on the mat $((i*3%%11)).\"; done > %s/corpus.txt%s",
           dir, "")) return -1;
    if (sh("./prepare --vocab-size 300 --val-fraction 0.2 --out-dir %s/data %s/corpus.txt >/dev/null 2>&1",
           dir, dir)) return -1;
    return 0;
}

static int teardown(void **state) {
    if (dir[0] && !getenv("KEEP")) sh("rm -rf %s%s", dir, "");
    return 0;
}

static void skip_without_torch(void) {
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "python3-torch is not installed: skipped\n");
        skip();
    }
}

// ./train --debug-state with the given extra flags, then the float64 check.
static void check_scheme(const char *name, const char *flags) {
    char cmd[2048], file[256];
    snprintf(file, sizeof file, "%s/%s.safetensors", dir, name);
    snprintf(cmd, sizeof cmd,
             "./train configs/tiny.ini --quiet --threads=1 --tokenizer=%s/data/tokenizer.bin "
             "--train_file=%s/data/train.bin --val_file=%s/data/val.bin --batch_size=3 "
             "--block_size=24 --n_layer=2 --d_model=32 --n_head=4 %s --debug-state %s",
             dir, dir, dir, flags, file);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/check_debug_state.py %s > %s.check.txt 2>&1", file, file);
    int rc = system(cmd);
    if (rc != 0) {                       // show the per-tensor table of the failure
        snprintf(cmd, sizeof cmd, "cat %s.check.txt", file);
        if (system(cmd)) {}
    }
    assert_int_equal(rc, 0);
}

static void test_rope(void **state)         { skip_without_torch(); check_scheme("rope", "--pos=rope"); }
static void test_rope_partial(void **state) { skip_without_torch(); check_scheme("rope4", "--pos=rope --rope_dims=4 --rope_base=500"); }
static void test_learned(void **state)      { skip_without_torch(); check_scheme("learned", "--pos=learned"); }
static void test_sinusoidal(void **state)   { skip_without_torch(); check_scheme("sinusoidal", "--pos=sinusoidal"); }
static void test_t5(void **state)           { skip_without_torch(); check_scheme("t5", "--pos=t5 --t5_num_buckets=8 --t5_max_distance=16"); }
static void test_alibi(void **state)        { skip_without_torch(); check_scheme("alibi", "--pos=alibi"); }
static void test_alibi_6_heads(void **state){ skip_without_torch(); check_scheme("alibi6", "--pos=alibi --n_head=6 --d_model=36"); }
static void test_none(void **state)         { skip_without_torch(); check_scheme("none", "--pos=none"); }

static void test_reference_self_checks(void **state) {
    skip_without_torch();
    assert_int_equal(system("bash tests/torch_check.sh > /tmp/ropelab_torch_check.log 2>&1 || "
                            "{ cat /tmp/ropelab_torch_check.log; exit 1; }"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope), cmocka_unit_test(test_rope_partial),
        cmocka_unit_test(test_learned), cmocka_unit_test(test_sinusoidal),
        cmocka_unit_test(test_t5), cmocka_unit_test(test_alibi),
        cmocka_unit_test(test_alibi_6_heads), cmocka_unit_test(test_none),
        cmocka_unit_test(test_reference_self_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
