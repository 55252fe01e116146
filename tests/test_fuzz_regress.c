// test_fuzz_regress.c: replays every input that once made a fuzz target fail
// (tests/fuzz/regress/NAME/*), and the hand-made seeds (tests/fuzz/seeds/NAME/*),
// through the harness functions of tests/fuzz/fuzz_NAME.c: the same code
// libFuzzer runs (make fuzz), built here with the normal compiler and without
// libFuzzer. Each input must return normally: no crash, no abort() from a
// harness check (and under a sanitizer build, no memory error), and must not
// take the process above the memory make fuzz allows (-rss_limit_mb=2048):
// an input that makes a loader allocate gigabytes is a finding there too.
// ROPELAB_FUZZ_DIR overrides where tests/fuzz is (default: run from the
// repository root, as make test does).
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#define FUZZ_REPLAY 1
#include "fuzz/fuzz_args.c"
#include "fuzz/fuzz_checkpoint.c"
#include "fuzz/fuzz_ini.c"
#include "fuzz/fuzz_safetensors.c"
#include "fuzz/fuzz_tokenizer.c"
#include "fuzz/fuzz_tokens.c"
#include "fuzz/fuzz_weights.c"

typedef int (*Harness)(const uint8_t *data, size_t size);

#define REPLAY_RSS_LIMIT_MB 2048   // as -rss_limit_mb in tests/fuzz/run_fuzz.sh

static long peak_rss_mb(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024 : 0;   // ru_maxrss is in KiB
}

// The input being replayed, named if it crashes: by the SIGABRT handler (a
// harness check failed: cmocka does not catch abort) or by the teardown (a
// signal cmocka caught, such as SIGSEGV, ended the test early).
static char replaying[2048];

static void name_input(int sig) {
    static const char msg[] = "test_fuzz_regress: failed while replaying ";
    if (replaying[0] && write(2, msg, sizeof msg - 1) > 0 && write(2, replaying, strlen(replaying)) > 0)
        (void)!write(2, "\n", 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int teardown(void **state) {
    if (replaying[0]) print_error("failed while replaying %s\n", replaying);
    replaying[0] = 0;
    return 0;
}

static const char *fuzz_dir(void) {
    const char *d = getenv("ROPELAB_FUZZ_DIR");
    return d && *d ? d : "tests/fuzz";
}

static uint8_t *read_whole(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap *= 2);
            if (!bigger) { free(buf); buf = NULL; }
            buf = bigger;
        }
    }
    fclose(f);
    *size = n;
    return buf;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Runs every regular file of DIR/KIND/TARGET through h, in name order; returns the count.
static int replay_dir(const char *kind, const char *target, Harness h) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s/%s", fuzz_dir(), kind, target);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, (size_t)(n + 1) * sizeof *names);
        assert_non_null(names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    int replayed = 0;
    for (int i = 0; i < n; i++) {
        char path[2048];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        free(names[i]);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        size_t size = 0;
        uint8_t *data = read_whole(path, &size);
        if (!data) fail_msg("cannot read %s", path);
        snprintf(replaying, sizeof replaying, "%s", path);
        long before = peak_rss_mb();
        assert_int_equal(h(data, size), 0);
        long after = peak_rss_mb();
        if (after > before && after > REPLAY_RSS_LIMIT_MB) {
            replaying[0] = 0;
            fail_msg("%s took the process to %ld MB (make fuzz allows %d MB)", path, after, REPLAY_RSS_LIMIT_MB);
        }
        replaying[0] = 0;
        free(data);
        replayed++;
    }
    free(names);
    return replayed;
}

static void replay(const char *target, Harness h) {
    int r = replay_dir("regress", target, h), s = replay_dir("seeds", target, h);
    print_message("fuzz_%s: %d regression inputs, %d seeds replayed\n", target, r, s);
}

static void test_regress_dir_exists(void **state) {
    char dir[1024];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/regress", fuzz_dir());
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        fail_msg("%s not found: run from the repository root or set ROPELAB_FUZZ_DIR", dir);
}

static void test_safetensors(void **state) { replay("safetensors", fuzz_safetensors_one); }
static void test_weights(void **state) { replay("weights", fuzz_weights_one); }
static void test_checkpoint(void **state) { replay("checkpoint", fuzz_checkpoint_one); }
static void test_tokens(void **state) { replay("tokens", fuzz_tokens_one); }
static void test_tokenizer(void **state) { replay("tokenizer", fuzz_tokenizer_one); }
static void test_ini(void **state) { replay("ini", fuzz_ini_one); }
static void test_args(void **state) { replay("args", fuzz_args_one); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regress_dir_exists),
        cmocka_unit_test_teardown(test_safetensors, teardown),
        cmocka_unit_test_teardown(test_weights, teardown),
        cmocka_unit_test_teardown(test_checkpoint, teardown),
        cmocka_unit_test_teardown(test_tokens, teardown),
        cmocka_unit_test_teardown(test_tokenizer, teardown),
        cmocka_unit_test_teardown(test_ini, teardown),
        cmocka_unit_test_teardown(test_args, teardown),
    };
    signal(SIGABRT, name_input);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
