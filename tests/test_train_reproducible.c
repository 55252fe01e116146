// test_train_reproducible.c: reproducible = 1 (docs/TRAINING.md, "Bit for bit
// on any CPU"): a run's log and model are the same bits whatever OpenBLAS
// would have chosen by itself, whatever OPENBLAS_CORETYPE says and whatever
// the thread count, and they equal a checksum committed here, so a change of
// the machine's kernels, vector width or build target that moves one bit of
// a tiny run fails on the machine that sees it (CI runs the suite under
// OPENBLAS_CORETYPE unset and Haswell).
//
// The checksums are FNV-1a 64 of the log's rows without their timings
// (read_log), joined by newlines. They change with any change of the
// arithmetic (a new rounding, another order of a sum): such a change must
// say so in its commit and set the new values, which the failure prints.
// Run from the repository root with ./train and ./prepare built.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util_run.h"
#include "util_shell.h"

// Each run: 40 steps of tiny.ini on the test corpus (util_run.h), evaluated every 10.
#define RUN_ARGS "configs/tiny.ini %s --steps=40 --eval_every=10 --reproducible=1 --quiet"

static const struct {
    const char *flags;      // the model
    const char *checksum;   // of its log, on every CPU with AVX2 and FMA
} RUNS[] = {
    {"--pos=rope --block=gpt2", "ad3b24f7a396cee5"},
    {"--pos=alibi --block=llama", "41a35cf42ed3be84"},
};

// The settings a run must not depend on: the environment's choice of
// kernels (none, the reproducible set itself, another set that every AVX2
// CPU runs) and the thread count.
static const struct { const char *env; int threads; } SETTINGS[] = {
    {"env -u OPENBLAS_CORETYPE", 1},
    {"env -u OPENBLAS_CORETYPE", 2},
    {"OPENBLAS_CORETYPE=Haswell", 2},
    {"OPENBLAS_CORETYPE=Sandybridge", 1},
};

static uint64_t log_checksum(const char *run_dir) {
    static char rows[64][160];
    int n = read_log(run_dir, rows, 64);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        for (const char *c = rows[i]; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        h = (h ^ '\n') * 1099511628211ull;
    }
    return h;
}

static int setup(void **state) { return make_data_dir("repro"); }

static void test_same_bits_everywhere(void **state) {
    int failed = 0;
    for (size_t r = 0; r < sizeof RUNS / sizeof RUNS[0]; r++) {
        char first[700];
        for (size_t s = 0; s < sizeof SETTINGS / sizeof SETTINGS[0]; s++) {
            char run_dir[620];
            snprintf(run_dir, sizeof run_dir, "%s/run%zu-%zu", dir, r, s);
            int rc = run("%s ./train " RUN_ARGS " %s --threads=%d --out_dir=%s", SETTINGS[s].env, data_args,
                         RUNS[r].flags, SETTINGS[s].threads, run_dir);
            if (rc != 0) fail_msg("%s: exit %d: %s", RUNS[r].flags, rc, out);
            // whatever the environment said, the run used the reproducible kernels and says so
            assert_int_equal(run("grep -x 'openblas_kernels = Haswell' %s/machine.txt", run_dir), 0);
            char got[17];
            snprintf(got, sizeof got, "%016llx", (unsigned long long)log_checksum(run_dir));
            if (strcmp(got, RUNS[r].checksum) != 0) {
                printf("  %s, %s, %d threads: log checksum %s, committed %s\n", RUNS[r].flags, SETTINGS[s].env,
                       SETTINGS[s].threads, got, RUNS[r].checksum);
                failed = 1;
            }
            if (s == 0) snprintf(first, sizeof first, "%s/model.safetensors", run_dir);
            else {
                char model[700];
                snprintf(model, sizeof model, "%s/model.safetensors", run_dir);
                if (!files_equal(first, model)) {
                    printf("  %s, %s, %d threads: model.safetensors differs from the first setting's\n",
                           RUNS[r].flags, SETTINGS[s].env, SETTINGS[s].threads);
                    failed = 1;
                }
            }
        }
    }
    if (failed) fail_msg("a reproducible run's bits depend on the machine's kernels or thread count (above)");
}

// ./eval --reproducible: the first run's model evaluated under every setting
// runs OpenBLAS's Haswell kernels (the last kernel set OpenBLAS names, after
// the re-execution) and prints the same line, and writes the same
// per-position losses.
static void test_eval_same_bits_everywhere(void **state) {
    char first_line[1024] = "", first_pos[700] = "";
    for (size_t s = 0; s < sizeof SETTINGS / sizeof SETTINGS[0]; s++) {
        char pos[700];
        snprintf(pos, sizeof pos, "%s/eval-pos-%zu.csv", dir, s);
        int rc = run("%s OPENBLAS_VERBOSE=2 ./eval --weights %s/run0-0/model.safetensors --data %s/data/val.bin "
                     "--batches 4 --threads %d --per-position %s --reproducible", SETTINGS[s].env, dir, dir,
                     SETTINGS[s].threads, pos);
        if (rc != 0) fail_msg("eval --reproducible, %s: exit %d: %s", SETTINGS[s].env, rc, out);
        const char *core = NULL, *line = strstr(out, "eval: weights=");
        for (const char *c = strstr(out, "Core: "); c; c = strstr(c + 1, "Core: ")) core = c;
        if (!core || strncmp(core, "Core: Haswell", 13) != 0 || !line)
            fail_msg("eval --reproducible, %s: want OpenBLAS's Haswell kernels and a result line: %s",
                     SETTINGS[s].env, out);
        if (s == 0) {
            snprintf(first_line, sizeof first_line, "%.*s", (int)strcspn(line, "\n"), line);
            snprintf(first_pos, sizeof first_pos, "%s", pos);
        } else {
            if (strncmp(line, first_line, strlen(first_line)) != 0)
                fail_msg("eval --reproducible, %s: %s; the first setting printed %s", SETTINGS[s].env, line,
                         first_line);
            assert_true(files_equal(first_pos, pos));
        }
    }
}

// Only OpenBLAS fp32 is reproducible: oneDNN and bf16 are refused in one line.
static void test_other_engines_refused(void **state) {
    static const char *const flags[] = {"--precision=bf16", "--matmul=onednn", "--matmul=reference"};
    for (int i = 0; i < 3; i++) {
        int rc = run("./train " RUN_ARGS " %s --out_dir=%s/refused", data_args, flags[i], dir);
        assert_int_equal(rc, 2);
        if (!strstr(out, "reproducible = 1 runs on OpenBLAS in fp32") || strchr(out, '\n') != strrchr(out, '\n'))
            fail_msg("%s: want one line naming reproducible: %s", flags[i], out);
        rc = run("./eval --weights %s/run0-0/model.safetensors --data %s/data/val.bin --reproducible %s", dir, dir,
                 flags[i]);
        assert_int_equal(rc, 2);
        if (!strstr(out, "--reproducible runs on OpenBLAS in fp32") || strchr(out, '\n') != strrchr(out, '\n'))
            fail_msg("eval %s: want one line naming --reproducible: %s", flags[i], out);
    }
    // and the fused attention: the reproducible mode keeps the blocked attention's bits
    int rc = run("./train " RUN_ARGS " --attention=fused --out_dir=%s/refused", data_args, dir);
    assert_int_equal(rc, 2);
    if (!strstr(out, "runs the blocked attention") || strchr(out, '\n') != strrchr(out, '\n'))
        fail_msg("--attention=fused: want one line naming the blocked attention: %s", out);
    rc = run("./eval --weights %s/run0-0/model.safetensors --data %s/data/val.bin --reproducible --attention fused",
             dir, dir);
    assert_int_equal(rc, 2);
    if (!strstr(out, "runs the blocked attention") || strchr(out, '\n') != strrchr(out, '\n'))
        fail_msg("eval --attention fused: want one line naming the blocked attention: %s", out);
}

// make reproduce of a committed study log (STUDY/logs/VARIANT-sSEED.csv, its
// .machine.txt beside it and the study's config.ini above, as
// publish_results.sh lays them out): the study's config.ini does not hold
// reproducible = 1 (compare.sh passes it on the command line), so the re-run
// must take it from the run's record. Without it, a CPU whose own engine is
// another (matmul = auto: oneDNN with AVX-512) or whose environment names
// other kernels (here Sandybridge's, without FMA) re-runs other bits.
// The temporary directory reproduce.sh said it trains in is gone.
static void expect_temporary_removed(void) {
    const char *at = strstr(out, "training again in ");
    assert_non_null(at);
    char path[300];
    assert_int_equal(sscanf(at, "training again in %299s", path), 1);
    char *run_part = strstr(path, "/run");
    assert_non_null(run_part);
    *run_part = 0;
    if (run_shell("test ! -e '%s'", path) != 0) fail_msg("reproduce.sh left %s behind", path);
}

// A study log (laid out as publish_results.sh lays one out: config.ini and
// data.txt beside logs/) re-runs bit for bit on its recorded data, wherever
// that is: in the directory the record names, or, where that holds data made
// another way, in a directory of its own made from the recipe (the user's
// data left as it was). A prefix (--steps) is a quick answer; a text that is
// not the record's is refused before any training.
static void test_reproduce_a_study_log(void **state) {
    assert_int_equal(run_shell("mkdir -p %s/study/logs && cp %s/run0-0/log.csv %s/study/logs/rope-s1.csv && "
                               "cp %s/run0-0/machine.txt %s/study/logs/rope-s1.machine.txt && "
                               "cp %s/run0-0/data.txt %s/study/data.txt && "
                               "grep -v '^reproducible' %s/run0-0/config.ini > %s/study/config.ini",
                               dir, dir, dir, dir, dir, dir, dir, dir, dir), 0);
    int rc = run("OPENBLAS_CORETYPE=Sandybridge bash scripts/run/reproduce.sh %s/study/logs/rope-s1.csv", dir);
    if (rc != 0 || !strstr(out, "reproduce: bit-identical (41 rows, steps 0..40)"))
        fail_msg("reproduce of a study log made with reproducible = 1: exit %d: %s", rc, out);
    expect_temporary_removed();
    rc = run("bash scripts/run/reproduce.sh %s/study/logs/rope-s1.csv --steps 10", dir);
    if (rc != 0 || !strstr(out, "reproduce: bit-identical (11 rows, steps 0..10, of the logged 41)"))
        fail_msg("reproduce --steps 10: exit %d: %s", rc, out);
    // a logged row that differs: named, and the re-run stopped there
    assert_int_equal(run_shell("cp %s/study/logs/rope-s1.csv %s/logged.csv && "
                               "sed -i 's/^5,[0-9.]*,/5,9.999999,/' %s/study/logs/rope-s1.csv", dir, dir, dir), 0);
    rc = run("bash scripts/run/reproduce.sh %s/study/logs/rope-s1.csv", dir);
    if (rc != 1 || !strstr(out, "first difference at step 5, train_loss: logged 9.999999"))
        fail_msg("reproduce of a log that differs at step 5: exit %d: %s", rc, out);
    expect_temporary_removed();
    assert_int_equal(run_shell("mv %s/logged.csv %s/study/logs/rope-s1.csv", dir, dir), 0);

    // The data directory now holds the same text prepared another way (as data/gcide prepared by
    // ./prepare's defaults held for a study made with byte classes): before the change, reproduce.sh
    // trained on it and reported "first difference at step 0".
    assert_int_equal(run_shell("mv %s/data %s/data.study && ./prepare --vocab-size 320 --val-fraction 0.1 "
                               "--pretokenizer byte-classes --out-dir %s/data %s/corpus.txt >/dev/null && "
                               "md5sum %s/data/* > %s/user-data.md5", dir, dir, dir, dir, dir, dir), 0);
    rc = run("bash scripts/run/reproduce.sh %s/study/logs/rope-s1.csv", dir);
    if (rc != 0 || !strstr(out, "holds other data") || !strstr(out, "reproduce: bit-identical (41 rows, steps 0..40)"))
        fail_msg("reproduce beside data made another way: exit %d: %s", rc, out);
    if (run_shell("md5sum -c --quiet %s/user-data.md5", dir) != 0) fail_msg("the user's data directory was changed");

    // Another text at the recipe's input: refused in one line naming both checksums, nothing trained.
    assert_int_equal(run_shell("cp %s/corpus.txt %s/corpus.orig && echo more >> %s/corpus.txt && rm -rf %s/data-*",
                               dir, dir, dir, dir), 0);
    rc = run("bash scripts/run/reproduce.sh %s/study/logs/rope-s1.csv", dir);
    if (rc == 0 || !strstr(out, "another text") || !strstr(out, "FNV-1a") || strstr(out, "training again"))
        fail_msg("reproduce on another text: exit %d: %s", rc, out);
    assert_int_equal(run_shell("mv %s/corpus.orig %s/corpus.txt && rm -rf %s/data && mv %s/data.study %s/data",
                               dir, dir, dir, dir, dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits_everywhere),
        cmocka_unit_test(test_eval_same_bits_everywhere),
        cmocka_unit_test(test_other_engines_refused),
        cmocka_unit_test(test_reproduce_a_study_log),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
