// test_train_bf16.c: ./train with precision=bf16 and matmul=onednn end to
// end on the tests' small corpus (util_run.h): bf16 learns, an interrupted bf16 run
// resumes exactly (same log rows, bit-identical weights), a run may switch
// precision on --resume, and a CPU without bf16 dot products is refused in
// one line with exit 2 (that last test runs on any CPU; the others skip on
// a CPU without AVX-512, where bf16 is refused). Run from the repository root
// with ./train and its test build (TRAIN_WITH_FAULTS, for the interruptions) built.
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_engine.h"
#include "util_run.h"

static int setup(void **state) { return make_data_dir("bf16"); }

// The first five fields of every row of RUN/log.csv (the timings differ), one string.
static void log_rows(const char *run_dir, char *rows, size_t cap) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cut -d, -f1-5 %s/log.csv", run_dir);
    assert_int_equal(run("%s", cmd), 0);
    snprintf(rows, cap, "%s", out);
}

#define RUN_ARGS "configs/tiny.ini %s --threads=2 --pos=rope --steps=30 --eval_every=10 --save_every=10"

static void test_bf16_learns_and_resumes_exactly(void **state) {
    ue_skip_without_bf16();
    static char straight[sizeof out], resumed[sizeof out];
    int rc = run("./train " RUN_ARGS " --precision=bf16 --out_dir=%s/straight --quiet", data_args, dir);
    if (rc != 0) fail_msg("bf16 run: exit %d: %s", rc, out);
    char path[300];
    snprintf(path, sizeof path, "%s/straight", dir);
    log_rows(path, straight, sizeof straight);
    // learns: the validation loss of step 30 is well below step 0's
    double v0 = 0, v30 = 0;
    assert_int_equal(sscanf(strchr(straight, '\n') + 1, "0,,%lf", &v0), 1);
    const char *last = strstr(straight, "\n30,");
    assert_non_null(last);
    assert_int_equal(sscanf(last + 1, "30,%*[^,],%lf", &v30), 1);
    printf("  bf16 val loss %.4f -> %.4f\n", v0, v30);
    assert_true(v30 < 0.8 * v0);
    // interrupted at step 15 (not a save step), resumed: the same rows, the same weights
    rc = run("ROPELAB_TEST_SIGINT_AT_STEP=15 " TRAIN_WITH_FAULTS " " RUN_ARGS
             " --precision=bf16 --out_dir=%s/cut --quiet", data_args, dir);
    assert_int_equal(rc, 130);
    rc = run("./train --resume %s/cut --quiet", dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    snprintf(path, sizeof path, "%s/cut", dir);
    log_rows(path, resumed, sizeof resumed);
    assert_string_equal(straight, resumed);
    assert_int_equal(run("cmp %s/straight/model.safetensors %s/cut/model.safetensors", dir, dir), 0);
}

// A run may change precision (and engine) on --resume: the checkpoint is fp32
// master weights and moments, so it continues; from the switch on, its steps
// are the new precision's (not bit-identical to a straight run of either).
static void test_switch_precision_on_resume(void **state) {
    ue_skip_without_bf16();
    int rc = run("ROPELAB_TEST_SIGINT_AT_STEP=15 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s/switch --quiet",
                 data_args, dir);
    assert_int_equal(rc, 130);
    rc = run("./train --resume %s/switch --precision=bf16 --quiet", dir);
    if (rc != 0) fail_msg("resume in bf16: exit %d: %s", rc, out);
    assert_int_equal(run("tail -1 %s/switch/log.csv | cut -d, -f1", dir), 0);
    assert_int_equal(atoi(out), 30);
    assert_int_equal(run("grep -c '^precision = bf16' %s/switch/config.ini", dir), 0);   // the override sticks
}

// Where oneDNN has no bf16 products at all (here: told to use at most AVX2),
// --precision=bf16 is refused in one line, exit 2.
static void test_bf16_refused_without_cpu_support(void **state) {
    int rc = run("DNNL_MAX_CPU_ISA=AVX2 ./train configs/tiny.ini %s --precision=bf16 --out_dir=%s/nobf16 "
                 "--quiet", data_args, dir);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "bf16"));
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    if (lines != 1) fail_msg("expected one line, got: %s", out);
    char path[300];
    snprintf(path, sizeof path, "%s/nobf16/checkpoint.safetensors", dir);
    assert_int_equal(access(path, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_learns_and_resumes_exactly),
        cmocka_unit_test(test_switch_precision_on_resume),
        cmocka_unit_test(test_bf16_refused_without_cpu_support),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
