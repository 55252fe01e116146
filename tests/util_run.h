// util_run.h: what the end-to-end tests of ./train share: a shell command
// with its output captured, a temporary directory holding a small corpus
// tokenised by ./prepare. Include after <cmocka.h>; run from the repository
// root with the programs built. (The helpers not every test uses are inline:
// no unused-function warning.)
#ifndef ROPELAB_TESTS_UTIL_RUN_H
#define ROPELAB_TESTS_UTIL_RUN_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/rng.h"
#include "train/options.h"
#include "util_shell.h"

// UNDER_ASAN: 1 in the AddressSanitizer build (make sanitize; GCC's macro
// or clang's feature test), where address-space limits and heap counts
// behave differently.
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

// The test build of ./train (Makefile: FAULT_DIR), for the runs that set a
// ROPELAB_TEST_* fault-injection variable (src/train/fault_inject.h: a crash
// in a save, failing log writes, SIGINT at a step, a perturbed weight): the
// shipped ./train has none of them. A relative path, like ./train: under
// `make sanitize` and `make tsan` the run root links it to their own build
// (tests/sanitize.mk).
#define TRAIN_WITH_FAULTS "./build/test-programs/train"

static char dir[256];        // temporary directory of this test run
static char data_args[1024]; // --tokenizer=... --train_file=... --val_file=...
// data_args and --matmul=ENGINE, the engine options_engine's rule names here
// (the one matmul = auto ran before it measured), for the runs a test compares
// bit for bit with each other: under matmul = auto every start times both
// engines (src/train/matmul_auto.h), and on a busy machine two starts of one
// run can choose differently.
static char pinned_args[1100];
static char out[1 << 16];    // output (stdout and stderr) of the last command

// Runs a shell command, captures stdout and stderr in out, returns the exit
// status. The buffers hold the long-path tests' commands; a longer one fails.
static int run(const char *fmt, ...) {
    static char cmd[16384], full[16500];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Sentences from a small grammar: easy to learn, so the loss must fall fast.
static void write_corpus(const char *path) {
    static const char *subj[] = {"the king", "the people", "his son", "the lord", "a man", "the servant"};
    static const char *verb[] = {"went", "came", "spake", "looked", "fled"};
    static const char *obj[] = {"unto the city", "into the house", "over the river", "before the gate"};
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    Rng r;
    rng_seed(&r, 42);
    for (int i = 0; i < 6000; i++)
        fprintf(f, "%d %s %s %s.\n", i % 10, subj[rng_below(&r, 6)], verb[rng_below(&r, 5)], obj[rng_below(&r, 4)]);
    fclose(f);
}

// Makes dir (/tmp/ropelab_NAME_XXXXXX) with the corpus tokenised into dir/data
// (vocabulary 320, 10% validation) and fills data_args. 0, or -1 with a message.
static inline int make_data_dir(const char *name) {
    snprintf(dir, sizeof dir, "/tmp/ropelab_%s_XXXXXX", name);
    if (!mkdtemp(dir)) return -1;
    char corpus[512];
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    write_corpus(corpus);
    if (run("./prepare --vocab-size 320 --val-fraction 0.1 --out-dir %s/data %s", dir, corpus) != 0) {
        fprintf(stderr, "prepare failed: %s\n", out);
        return -1;
    }
    snprintf(data_args, sizeof data_args, "--tokenizer=%s/data/tokenizer.bin --train_file=%s/data/train.bin "
             "--val_file=%s/data/val.bin", dir, dir, dir);
    GPTMatmul rule;
    GPTPrecision fp32;
    char err[256];
    if (options_engine("auto", "fp32", 0, &rule, &fp32, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    snprintf(pinned_args, sizeof pinned_args, "%s --matmul=%s", data_args, options_matmul_name(rule));
    return 0;
}

static inline int remove_data_dir(void **state) {
    (void)state;
    return run_shell("rm -rf '%s'", dir) == 0 ? 0 : -1;
}

// The rows of RUN/log.csv cut to their first five fields (everything but the
// timings). Every row must be whole: seven fields, ending in a newline.
static inline int read_log(const char *run_dir, char rows[][160], int max_rows) {
    char path[1200], line[512];
    snprintf(path, sizeof path, "%s/log.csv", run_dir);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s\n");
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int commas = 0;
        for (const char *c = line; *c; c++) commas += *c == ',';
        size_t len = strlen(line);
        if (commas != 6 || line[len - 1] != '\n') fail_msg("%s: row %d is not a whole row: '%s'", path, n, line);
        if (n >= max_rows) fail_msg("%s: more than %d rows", path, max_rows);
        char *c = line;
        for (commas = 0; *c && commas < 5; c++) commas += *c == ',';
        c[-1] = 0;
        snprintf(rows[n++], 160, "%.159s", line);
    }
    fclose(f);
    return n;
}

static inline void assert_same_rows(char a[][160], int na, char b[][160], int nb) {
    if (na != nb) fail_msg("%d rows, want %d", nb, na);
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0) fail_msg("row %d differs:\n  %s\n  %s", i, a[i], b[i]);
}

// Whether two files have the same bytes.
static inline int files_equal(const char *a, const char *b) {
    return run("cmp -s '%s' '%s'", a, b) == 0;
}

// Writes text into dir/name.
static inline void put(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#endif
