// test_train_hardening.c: the failures an outside audit found (fixed in
// 8047ff8), each kept fixed by one test that runs the real programs:
//   - the run-directory lock: a second ./train on a running directory is
//     refused naming the first's pid, and the first finishes untouched;
//   - long paths: a ~200-character out_dir trains and resumes; ./prepare
//     writes into a ~1,010-character --out-dir, refuses one over PATH_MAX;
//   - checkpoint metadata out of range (step, data_rng, elapsed_s) refused
//     naming the key;
//   - a failing write of log.csv (ROPELAB_TEST_LOG_FAIL): no row lost, none
//     spliced, no checkpoint past the log's last row, an exact resume;
//   - a run killed before its first checkpoint restarts from step 0;
//   - a kill between the checkpoint and the model: --resume writes the
//     model again from the checkpoint (mid-run and at the last step);
//   - a finished run pruned to its model is never started again without
//     --overwrite, and --resume of a finished run says so;
//   - a weights file with missing or invalid metadata: exit 1 from ./eval,
//     ./sample, ./export and ./train --init-from alike (2 for --init-from
//     of a valid file of another model);
//   - a model records its tokenizer: ./sample, ./export, ./eval and ./train
//     refuse another one of the same size; files without the record still
//     work (--resume gives the same model, --init-from starts);
//   - bad inputs: directories, devices and named pipes as files, NUL bytes,
//     NaN weights, control characters in tensor names, oversized batches and
//     models, a metadata-only weights file (refused before allocating), a
//     4 GiB weights file without metadata (refused from its header);
//   - the files ./train writes that the command line names: --debug-state
//     FILE replaced only with --overwrite, never an input nor a FIFO or
//     device; --init-from never the run directory's own model;
//   - the shipped ./train carries no fault injection: no ROPELAB_TEST_* name
//     in its bytes; the test build (TRAIN_WITH_FAULTS) has them.
// Run from the repository root with ./train, ./prepare, ./eval, ./sample and
// the test build of ./train built (`make test`; `make sanitize` runs it
// against the sanitizer build).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/rng.h"
#include "data/bpe.h"
#include "format/safetensors.h"
#include "util_run.h"

// The reference run: t5 (its shared bias table makes a resume's exactness
// depend on every tensor), 40 steps, evaluations and saves every 10.
#define RUN_ARGS "configs/tiny.ini %s --threads=1 --pos=t5 --steps=40 --eval_every=10 --save_every=10"

// The output of the last command is exactly one line holding want.
static void expect_one_line(const char *want) {
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    if (lines != 1 || out[strlen(out) - 1] != '\n' || !strstr(out, want))
        fail_msg("want one line holding \"%s\", got %d lines:\n%s", want, lines, out);
}

static void expect_output(const char *want) {
    if (!strstr(out, want)) fail_msg("want \"%s\" in the output:\n%s", want, out);
}

static int setup(void **state) {
    return make_data_dir("hardening");
}

// The log of RUN_DIR equals the reference run's (every step once, same values).
static void assert_log_is_reference(const char *run_dir);

static long long checkpoint_step(const char *run_dir) {
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    StFile *f;
    if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    const char *s = st_meta(f, "step");
    assert_non_null(s);
    long long step = atoll(s);
    st_close(f);
    return step;
}

static int exists(const char *fmt, const char *a, const char *b) {
    char path[1200];
    snprintf(path, sizeof path, fmt, a, b);
    return access(path, F_OK) == 0;
}

// The reference: RUN_ARGS straight through, once.
static const char *reference_dir(void) {
    static char run_dir[512];
    if (!run_dir[0]) {
        snprintf(run_dir, sizeof run_dir, "%s/reference", dir);
        if (run("./train " RUN_ARGS " --out_dir=%s --quiet", pinned_args, run_dir) != 0) fail_msg("%s", out);
    }
    return run_dir;
}

static void assert_log_is_reference(const char *run_dir) {
    static char ref[100][160], got[100][160];
    int n_ref = read_log(reference_dir(), ref, 100);
    assert_int_equal(n_ref, 41);
    assert_same_rows(ref, n_ref, got, read_log(run_dir, got, 100));
}

// ---- safetensors header surgery (the header is JSON, data offsets are
// relative to its end, so a rewritten header of another length is valid)

typedef struct {
    unsigned char *bytes;
    size_t len, hlen;        // whole file; header length (after the 8-byte size)
    cJSON *header;
} StRaw;

static void raw_read(StRaw *r, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    r->len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    r->bytes = malloc(r->len);
    assert_non_null(r->bytes);
    assert_int_equal(fread(r->bytes, 1, r->len, f), r->len);
    fclose(f);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = h << 8 | r->bytes[i];
    assert_true(h + 8 <= r->len);
    r->hlen = (size_t)h;
    r->header = cJSON_ParseWithLength((const char *)r->bytes + 8, r->hlen);
    assert_non_null(r->header);
}

// Writes the (edited) header, padded to 8 bytes, and the original data.
static void raw_write(StRaw *r, const char *path) {
    char *json = cJSON_PrintUnformatted(r->header);
    assert_non_null(json);
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    for (int i = 0; i < 8; i++) fputc((int)((uint64_t)padded >> (8 * i) & 0xff), f);
    fwrite(json, 1, n, f);
    for (size_t i = n; i < padded; i++) fputc(' ', f);
    fwrite(r->bytes + 8 + r->hlen, 1, r->len - 8 - r->hlen, f);
    assert_int_equal(fclose(f), 0);
    free(json);
}

static void raw_free(StRaw *r) {
    cJSON_Delete(r->header);
    free(r->bytes);
}

// Copies src to dst with __metadata__[key] set to value (NULL: removed).
static void set_meta(const char *src, const char *dst, const char *key, const char *value) {
    StRaw r;
    raw_read(&r, src);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(r.header, "__metadata__");
    assert_non_null(meta);
    cJSON_DeleteItemFromObjectCaseSensitive(meta, key);
    if (value) assert_non_null(cJSON_AddStringToObject(meta, key, value));
    raw_write(&r, dst);
    raw_free(&r);
}

// Copies src to dst with tensor `from` renamed `to`.
static void rename_tensor(const char *src, const char *dst, const char *from, const char *to) {
    StRaw r;
    raw_read(&r, src);
    cJSON *t = cJSON_DetachItemFromObjectCaseSensitive(r.header, from);
    assert_non_null(t);
    cJSON_AddItemToObject(r.header, to, t);
    raw_write(&r, dst);
    raw_free(&r);
}

// Copies src to dst with element `index` of F32 tensor `name` set to v.
static void poke_f32(const char *src, const char *dst, const char *name, size_t index, float v) {
    StRaw r;
    raw_read(&r, src);
    cJSON *t = cJSON_GetObjectItemCaseSensitive(r.header, name);
    assert_non_null(t);
    cJSON *offsets = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    size_t begin = (size_t)cJSON_GetArrayItem(offsets, 0)->valuedouble;
    size_t end = (size_t)cJSON_GetArrayItem(offsets, 1)->valuedouble;
    assert_true(begin + 4 * (index + 1) <= end);
    memcpy(r.bytes + 8 + r.hlen + begin + 4 * index, &v, 4);
    raw_write(&r, dst);
    raw_free(&r);
}

// ---- the lock on the run directory

static void test_lock_refuses_second_train(void **state) {
    static char rows[300][160];
    char run_dir[512], lock[600], cmd[4096], first_out[600];
    snprintf(run_dir, sizeof run_dir, "%s/locked", dir);
    snprintf(lock, sizeof lock, "%s/train.lock", run_dir);
    snprintf(first_out, sizeof first_out, "%s/first.txt", dir);
    // The first run saves every step, so a second one that got in would
    // collide with it on every file.
    snprintf(cmd, sizeof cmd, "exec ./train configs/tiny.ini %s --threads=1 --steps=200 --save_every=1 --eval_every=50 "
             "--out_dir=%s --quiet >%s 2>&1", data_args, run_dir, first_out);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    // Wait until it holds the lock (its pid in the file) and has written config.ini and log.csv.
    int holder = 0;
    for (int i = 0; i < 6000 && holder == 0; i++) {
        FILE *f = fopen(lock, "r");
        if (f) {
            if (fscanf(f, "%d", &holder) != 1) holder = 0;
            fclose(f);
        }
        if (holder && !(exists("%s/%s", run_dir, "config.ini") && exists("%s/%s", run_dir, "log.csv"))) holder = 0;
        if (!holder) usleep(10000);
    }
    if (holder == 0) { kill(pid, SIGKILL); waitpid(pid, NULL, 0); fail_msg("the first ./train never took the lock"); }
    assert_int_equal(holder, pid);

    char want[700];
    snprintf(want, sizeof want, "%s: in use by another ./train (pid %d)", run_dir, (int)pid);
    int rc = run("./train --resume %s --quiet", run_dir);
    int st, first_running = waitpid(pid, &st, WNOHANG) == 0;
    if (!first_running) fail_msg("the first ./train ended before the second was tried: %s", out);
    assert_int_not_equal(rc, 0);
    expect_one_line(want);
    // --overwrite would remove the checkpoint: refused before it touches anything.
    rc = run("./train configs/tiny.ini %s --threads=1 --out_dir=%s --overwrite --quiet", data_args, run_dir);
    assert_int_not_equal(rc, 0);
    expect_one_line(want);
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0);   // still running after both attempts

    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        FILE *f = fopen(first_out, "r");
        size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
        out[n] = 0;
        if (f) fclose(f);
        fail_msg("the first ./train failed (status %d): %s", st, out);
    }
    int n = read_log(run_dir, rows, 300);
    assert_int_equal(n, 201);                             // every step exactly once
    for (int i = 0; i < n; i++) assert_int_equal(atoi(rows[i]), i);
    assert_int_equal(checkpoint_step(run_dir), 200);
}

// ---- long paths

// base + "/" + components of `width` characters until the path is >= target long.
static void long_path(char *buf, size_t cap, const char *base, int width, size_t target) {
    snprintf(buf, cap, "%s", base);
    for (char c = 'a'; strlen(buf) < target; c++) {
        size_t n = strlen(buf);
        assert_true(n + 1 + width + 1 < cap);
        buf[n] = '/';
        memset(buf + n + 1, c, (size_t)width);
        buf[n + 1 + width] = 0;
    }
}

// config.ini holds out_dir on one line of ~210 characters; a resume reads it
// back ("config.ini:72: syntax error" before the fix).
static void test_long_out_dir_trains_and_resumes(void **state) {
    char run_dir[600];
    long_path(run_dir, sizeof run_dir, dir, 60, 200);
    assert_true(strlen(run_dir) >= 200 && strlen(run_dir) < 300);
    int rc = run("ROPELAB_TEST_SIGINT_AT_STEP=15 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s --quiet",
                 pinned_args, run_dir);
    if (rc != 130) fail_msg("exit %d, want 130: %s", rc, out);
    assert_int_equal(checkpoint_step(run_dir), 15);
    rc = run("./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume of a %zu-character out_dir: exit %d: %s", strlen(run_dir), rc, out);
    assert_log_is_reference(run_dir);
    assert_int_equal(checkpoint_step(run_dir), 40);
}

static void assert_same_file(const char *a_dir, const char *b_dir, const char *name) {
    if (run("cmp '%s/%s' '%s/%s'", a_dir, name, b_dir, name) != 0) fail_msg("%s: %s", name, out);
}

static void test_prepare_long_out_dir(void **state) {
    static char long_dir[8192], too_long[8192];
    long_path(long_dir, sizeof long_dir, dir, 200, 1010);
    assert_true(strlen(long_dir) >= 1010 && strlen(long_dir) < 1300);
    int rc = run("./prepare --vocab-size 320 --val-fraction 0.1 --out-dir %s %s/corpus.txt", long_dir, dir);
    if (rc != 0) fail_msg("./prepare into a %zu-character --out-dir: exit %d: %s", strlen(long_dir), rc, out);
    // The same three files as setup's ./prepare of the same corpus, their data record, and nothing else.
    char data_dir[512];
    snprintf(data_dir, sizeof data_dir, "%s/data", dir);
    assert_same_file(data_dir, long_dir, "tokenizer.bin");
    assert_same_file(data_dir, long_dir, "train.bin");
    assert_same_file(data_dir, long_dir, "val.bin");
    DIR *d = opendir(long_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            n++;
            if (strcmp(e->d_name, "tokenizer.bin") && strcmp(e->d_name, "train.bin") && strcmp(e->d_name, "val.bin") &&
                strcmp(e->d_name, "data.txt"))
                fail_msg("unexpected file %s in the --out-dir", e->d_name);
        }
    closedir(d);
    assert_int_equal(n, 4);
    // Longer than PATH_MAX: one line, exit 2, nothing written.
    long_path(too_long, sizeof too_long, long_dir, 200, PATH_MAX + 100);
    rc = run("./prepare --vocab-size 320 --val-fraction 0.1 --out-dir %s %s/corpus.txt", too_long, dir);
    assert_int_equal(rc, 2);
    expect_one_line("--out-dir");
    char first_extra[2048];
    snprintf(first_extra, sizeof first_extra, "%.*s", (int)strlen(long_dir) + 201, too_long);
    assert_int_equal(access(first_extra, F_OK), -1);
}

// ---- checkpoint metadata out of range

static void test_checkpoint_step_and_rng_range(void **state) {
    static const struct { const char *key, *value; } bad[] = {
        {"step", "4294967297"}, {"step", "-1"}, {"step", "0"}, {"step", "12abc"}, {"step", ""},
        {"step", "1000000001"}, {"step", NULL},
        {"data_rng", "0 0 0 0"}, {"data_rng", "1 2 3"}, {"data_rng", "1 2 3 x"}, {"data_rng", "1 2 3 4 5"},
        {"data_rng", "-1 2 3 4"}, {"data_rng", "18446744073709551616 1 1 1"}, {"data_rng", NULL},
        {"elapsed_s", "-1"}, {"elapsed_s", "nan"}, {"elapsed_s", "1e999"}, {"elapsed_s", "12abc"},
        // one rule for numbers as text (src/common/numtext.h): no space, '+', leading zero or hexadecimal
        {"step", " 40"}, {"step", "40 "}, {"step", "+40"}, {"step", "040"}, {"world_size", "01"},
        {"data_rng", "01 2 3 4"}, {"data_rng", "1 2 3 +4"}, {"data_rng", "1  2 3 4"},
        {"elapsed_s", " 1"}, {"elapsed_s", "1 "}, {"elapsed_s", "+1"}, {"elapsed_s", "0x10"}, {"elapsed_s", ".5"},
    };
    const char *ref = reference_dir();
    char src[600], copy[600], dst[700];
    snprintf(src, sizeof src, "%s/checkpoint.safetensors", ref);
    snprintf(copy, sizeof copy, "%s/badckpt", dir);
    snprintf(dst, sizeof dst, "%s/checkpoint.safetensors", copy);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(run("rm -rf '%s' && cp -r '%s' '%s'", copy, ref, copy), 0);
        set_meta(src, dst, bad[i].key, bad[i].value);
        int rc = run("./train --resume %s --steps=50 --quiet", copy);
        char want[64];
        snprintf(want, sizeof want, "metadata '%s'", bad[i].key);
        if (rc != 1 || !strstr(out, want))
            fail_msg("%s = \"%s\": exit %d, want 1 and a message naming '%s': %s", bad[i].key,
                     bad[i].value ? bad[i].value : "(absent)", rc, bad[i].key, out);
        expect_one_line(want);
    }
    // The same surgery with the values the file holds: the resume goes on (so
    // the refusals above are the values', not the rewriting's).
    assert_int_equal(run("rm -rf '%s' && cp -r '%s' '%s'", copy, ref, copy), 0);
    set_meta(src, dst, "step", "40");
    int rc = run("./train --resume %s --steps=50 --quiet", copy);
    if (rc != 0) fail_msg("rewritten but unchanged checkpoint: exit %d: %s", rc, out);
    assert_int_equal(checkpoint_step(copy), 50);
}

// ---- a failing write of log.csv

// A failure between two saves: the held rows are written when the disk
// recovers; the log is the reference's, whole rows, no splice.
static void test_log_write_failure_between_saves(void **state) {
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/logfail-a", dir);
    int rc = run("ROPELAB_TEST_LOG_FAIL=5-8 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s", pinned_args, run_dir);
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    expect_output("log.csv: write failed");
    assert_log_is_reference(run_dir);
    assert_int_equal(checkpoint_step(run_dir), 40);
}

// A failure over a save point: the run stops rather than save a checkpoint
// past the log's last row; the checkpoint is the one before the window, and a
// resume gives the reference's log.
static void test_log_write_failure_over_save(void **state) {
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/logfail-b", dir);
    int rc = run("ROPELAB_TEST_LOG_FAIL=12-25 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s", pinned_args, run_dir);
    if (rc != 1) fail_msg("exit %d, want 1: %s", rc, out);
    expect_output("log.csv: write failed");
    expect_output("no checkpoint is saved past the log's last row");
    assert_int_equal(checkpoint_step(run_dir), 10);
    rc = run("./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    assert_log_is_reference(run_dir);
    assert_int_equal(checkpoint_step(run_dir), 40);

    // A window over the first save point: no checkpoint at all; the resume starts from step 0.
    snprintf(run_dir, sizeof run_dir, "%s/logfail-c", dir);
    rc = run("ROPELAB_TEST_LOG_FAIL=8-25 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s", pinned_args, run_dir);
    if (rc != 1) fail_msg("exit %d, want 1: %s", rc, out);
    assert_false(exists("%s/%s", run_dir, "checkpoint.safetensors"));
    rc = run("./train --resume %s", run_dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    expect_output("no checkpoint yet");
    assert_log_is_reference(run_dir);
}

// ---- a run that ended before its first checkpoint

static void test_dead_end_restart(void **state) {
    char d1[512], d2[512], d3[512];
    snprintf(d1, sizeof d1, "%s/deadend-1", dir);
    snprintf(d2, sizeof d2, "%s/deadend-2", dir);
    snprintf(d3, sizeof d3, "%s/deadend-3", dir);
    // Killed while writing its first checkpoint: config.ini, a log up to step 10, no checkpoint.
    for (int k = 0; k < 2; k++) {
        const char *d = k ? d2 : d1;
        int rc = run("ROPELAB_TEST_CRASH_IN_SAVE=10 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s --quiet",
                     pinned_args, d);
        assert_int_equal(rc, 1);
        assert_true(exists("%s/%s", d, "config.ini") && exists("%s/%s", d, "log.csv"));
        assert_false(exists("%s/%s", d, "checkpoint.safetensors"));
    }
    int rc = run("./train " RUN_ARGS " --out_dir=%s", pinned_args, d1);
    if (rc != 0) fail_msg("./train CONFIG --out_dir=DIR: exit %d: %s", rc, out);
    expect_output("holds a log but no checkpoint");
    expect_output("starting again from step 0");
    assert_log_is_reference(d1);
    rc = run("./train --resume %s", d2);
    if (rc != 0) fail_msg("./train --resume DIR: exit %d: %s", rc, out);
    expect_output("no checkpoint yet");
    expect_output("starting from step 0");
    assert_log_is_reference(d2);
    // A whole log but no checkpoint (copied config.ini and log.csv): not 41 + 41 rows.
    assert_int_equal(run("mkdir -p '%s' && cp '%s/config.ini' '%s/log.csv' '%s/'", d3, reference_dir(),
                         reference_dir(), d3), 0);
    rc = run("./train --resume %s", d3);
    if (rc != 0) fail_msg("./train --resume DIR: exit %d: %s", rc, out);
    expect_output("no checkpoint yet");
    assert_log_is_reference(d3);
}

// ---- a finished run whose checkpoint was removed

// A copy of the reference run without checkpoint.safetensors (finished runs
// pruned to save space) holds trained weights and nothing to resume from:
// neither --resume nor a new run over it may start again from step 0.
static void test_finished_model_is_never_replaced(void **state) {
    char d[512];
    snprintf(d, sizeof d, "%s/pruned", dir);
    assert_int_equal(run("rm -rf '%s' && cp -r '%s' '%s' && rm '%s/checkpoint.safetensors'", d, reference_dir(), d, d), 0);
    assert_int_equal(run("md5sum < '%s/model.safetensors'", d), 0);
    char model_md5[64];
    snprintf(model_md5, sizeof model_md5, "%.60s", out);
    for (int k = 0; k < 3; k++) {
        int rc = k == 0 ? run("./train --resume %s --steps=5 --quiet", d)
               : k == 1 ? run("./train --resume %s", d)
                        : run("./train " RUN_ARGS " --out_dir=%s --quiet", pinned_args, d);
        assert_int_equal(rc, 2);
        expect_one_line("holds a trained model.safetensors but no checkpoint.safetensors");
        assert_log_is_reference(d);
        assert_int_equal(run("md5sum < '%s/model.safetensors'", d), 0);
        assert_int_equal(strncmp(out, model_md5, strlen(model_md5)), 0);
    }
    // --overwrite is the way to start over.
    int rc = run("./train " RUN_ARGS " --out_dir=%s --overwrite --quiet", pinned_args, d);
    if (rc != 0) fail_msg("--overwrite: exit %d: %s", rc, out);
    assert_log_is_reference(d);
    // A finished run with its checkpoint: --resume says it is finished, exit 0, log untouched.
    rc = run("./train --resume %s --quiet", d);
    if (rc != 0) fail_msg("--resume of a finished run: exit %d: %s", rc, out);
    expect_one_line("the run is finished (step 40 of 40)");
    assert_log_is_reference(d);
}

// ---- a kill between the checkpoint and the model

// Killed after writing the checkpoint of step K and before the model (in the
// middle of the run, and at its last step, where --resume has nothing left to
// train): model.safetensors is one save behind; --resume writes it again, so
// it ends equal to the uninterrupted run's, byte for byte.
static void test_kill_between_checkpoint_and_model(void **state) {
    static const int kill_steps[] = {20, 40};
    for (int k = 0; k < 2; k++) {
        char d[512];
        snprintf(d, sizeof d, "%s/between-saves-%d", dir, kill_steps[k]);
        int rc = run("ROPELAB_TEST_CRASH_BETWEEN_SAVES=%d " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s --quiet",
                     kill_steps[k], pinned_args, d);
        assert_int_equal(rc, 1);
        expect_output("dying after the checkpoint");
        assert_int_not_equal(run("cmp '%s/model.safetensors' '%s/model.safetensors'", d, reference_dir()), 0);
        rc = run("./train --resume %s", d);
        if (rc != 0) fail_msg("./train --resume DIR: exit %d: %s", rc, out);
        expect_output("written again from the checkpoint");
        if (kill_steps[k] == 40) expect_output("the run is finished (step 40 of 40)");
        assert_log_is_reference(d);
        rc = run("cmp '%s/model.safetensors' '%s/model.safetensors'", d, reference_dir());
        if (rc != 0) fail_msg("model.safetensors after --resume differs from the uninterrupted run's: %s", out);
        // A second resume finds the two in agreement and writes nothing.
        rc = run("./train --resume %s", d);
        assert_int_equal(rc, 0);
        assert_null(strstr(out, "written again"));
    }
}

// A log whose rows do not match the checkpoint (a row out of order): one
// line naming the row found, and the run directory is left as it was.
static void test_log_out_of_order_row(void **state) {
    char d[512];
    snprintf(d, sizeof d, "%s/misordered", dir);
    assert_int_equal(run("rm -rf '%s' && cp -r '%s' '%s' && sed -i '7s/.*/7,1.0/' '%s/log.csv'", d, reference_dir(),
                         d, d), 0);
    int rc = run("./train --resume %s --steps=41 --quiet", d);
    assert_int_equal(rc, 1);
    expect_one_line("row for step 5 expected, found '7,1.0' (the log does not match the checkpoint at step 40)");
}

// A config.ini edited to a much larger model: --resume refuses it against
// the run's record in the checkpoint, naming the key, before that model is
// built (under a 2 GB address space limit, so building the 1.6e9-parameter
// model first would fail another way).
static void test_resume_edited_config_refused_before_building(void **state) {
    char d[512];
    snprintf(d, sizeof d, "%s/edited", dir);
    assert_int_equal(run("rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/^d_model = .*/d_model = 8192/' '%s/config.ini'",
                         d, reference_dir(), d, d), 0);
    int rc = run("%s ./train --resume %s --steps=41 --quiet", UNDER_ASAN ? "" : "ulimit -v 2000000;", d);
    assert_int_equal(rc, 2);   // the run's record in its checkpoint names the edited key (options_check_record)
    expect_one_line("d_model = 8192 differs from the run's record");
    assert_log_is_reference(d);
}

// ---- bad inputs

static void test_bad_config_files(void **state) {
    char path[600], run_dir[600];
    snprintf(run_dir, sizeof run_dir, "%s/never", dir);
    // A directory, and a device that never ends: refused at once, one line, exit 2.
    assert_int_equal(run("timeout 60 ./train %s %s --out_dir=%s --quiet", dir, data_args, run_dir), 2);
    expect_one_line("not a regular file");
    assert_int_equal(run("timeout 60 ./train /dev/zero %s --out_dir=%s --quiet", data_args, run_dir), 2);
    expect_one_line("not a regular file");
    // A NUL byte on line 3: named, with the line.
    snprintf(path, sizeof path, "%s/nul.ini", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    static const char text[] = "[model]\nn_layer = 2\nd_model = 3\0" "2\n[run]\nsteps = 5\n";
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    assert_int_equal(run("./train %s %s --out_dir=%s --quiet", path, data_args, run_dir), 2);
    char want[700];
    snprintf(want, sizeof want, "%s:3: NUL byte", path);
    expect_one_line(want);
    assert_int_equal(access(run_dir, F_OK), -1);          // nothing was created
}

static void test_bad_weights_and_tokenizer_files(void **state) {
    const char *ref = reference_dir();
    char w[600], tok[600], val[600], bad[600];
    snprintf(w, sizeof w, "%s/model.safetensors", ref);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    // Directories as files; as weights, a directory is read as a Hugging Face
    // model directory (format/hf_read.h), which this one is not.
    assert_int_equal(run("./eval --weights %s --data %s --threads 1", dir, val), 1);
    expect_one_line("a directory without config.json: not a Hugging Face model directory");
    assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1", dir, tok), 1);
    expect_one_line("a directory without config.json: not a Hugging Face model directory");
    assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1", w, dir), 1);
    expect_one_line("holds no tokenizer.json, nor GPT-2's encoder.json (or vocab.json) with vocab.bpe");
    assert_int_equal(run("./eval --weights %s --data %s --threads 1", w, dir), 1);
    expect_one_line("not a regular file");

    // The header surgery alone changes nothing: the copy is accepted.
    snprintf(bad, sizeof bad, "%s/same.safetensors", dir);
    set_meta(w, bad, "format", "pt");
    if (run("./eval --weights %s --data %s --threads 1 --batches 1", bad, val) != 0) fail_msg("%s", out);

    // NaN in one tensor: refused by both programs, naming the tensor.
    snprintf(bad, sizeof bad, "%s/nan.safetensors", dir);
    poke_f32(w, bad, "h.1.mlp.c_fc.weight", 7, NAN);
    assert_int_equal(run("./eval --weights %s --data %s --threads 1", bad, val), 1);
    expect_one_line("tensor h.1.mlp.c_fc.weight holds NaN");
    assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1", bad, tok), 1);
    expect_one_line("tensor h.1.mlp.c_fc.weight holds NaN");
    poke_f32(w, bad, "ln_f.weight", 0, INFINITY);
    assert_int_equal(run("./eval --weights %s --data %s --threads 1", bad, val), 1);
    expect_one_line("tensor ln_f.weight holds an infinity");

    // A tensor name with a newline: one line (the name is not printed raw).
    snprintf(bad, sizeof bad, "%s/newline.safetensors", dir);
    rename_tensor(w, bad, "ln_f.bias", "ln_f.bi\nas");
    assert_int_equal(run("./eval --weights %s --data %s --threads 1", bad, val), 1);
    expect_one_line("control character");
    assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1", bad, tok), 1);
    expect_one_line("control character");
}

// A weights file whose metadata is missing or invalid is a bad file: exit 1
// from every program that reads one, --init-from included; a valid file of
// another model is a configuration error for --init-from (exit 2), as README
// documents. Nothing is created for a refused --init-from.
static void test_init_from_bad_metadata_exit_codes(void **state) {
    const char *ref = reference_dir();
    char w[600], tok[600], val[600], bad[600], run_dir[600], gguf[600];
    snprintf(w, sizeof w, "%s/model.safetensors", ref);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    snprintf(bad, sizeof bad, "%s/badmeta.safetensors", dir);
    snprintf(run_dir, sizeof run_dir, "%s/never-init", dir);
    snprintf(gguf, sizeof gguf, "%s/never.gguf", dir);
    static const struct { const char *key, *value, *want; } cases[] = {
        {"n_layer", NULL, "metadata lacks key n_layer"},
        {"n_layer", "2x", "metadata n_layer: '2x' is not an integer"},
        {"d_model", "31", "bad model metadata: d_model (31) is not divisible by n_head (2)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_meta(w, bad, cases[i].key, cases[i].value);
        int rc = run("./train configs/tiny.ini %s --threads=1 --pos=t5 --steps=2 --init-from %s --out_dir=%s --quiet",
                     data_args, bad, run_dir);
        if (rc != 1) fail_msg("--init-from with %s=%s: exit %d, want 1: %s", cases[i].key,
                              cases[i].value ? cases[i].value : "(absent)", rc, out);
        expect_one_line(cases[i].want);
        assert_int_equal(access(run_dir, F_OK), -1);
        assert_int_equal(run("./eval --weights %s --data %s --threads 1", bad, val), 1);
        expect_one_line(cases[i].want);
        assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1", bad, tok), 1);
        expect_one_line(cases[i].want);
        assert_int_equal(run("./export --weights %s --tokenizer %s --out %s", bad, tok, gguf), 1);
        expect_one_line(cases[i].want);
        assert_int_equal(access(gguf, F_OK), -1);
    }
    // The reference is a t5 model: a valid file, of another model than a rope run.
    assert_int_equal(run("./train configs/tiny.ini %s --threads=1 --pos=rope --steps=2 --init-from %s --out_dir=%s "
                         "--quiet", data_args, w, run_dir), 2);
    expect_one_line("pos is t5 in the file but rope in this run");
    assert_int_equal(access(run_dir, F_OK), -1);
}

// Copies src to dst with one more F32 tensor `name` of shape [1] after the data.
static void add_tensor(const char *src, const char *dst, const char *name) {
    StRaw r;
    raw_read(&r, src);
    double end = (double)(r.len - 8 - r.hlen);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "dtype", "F32");
    cJSON_AddItemToObject(t, "shape", cJSON_CreateIntArray((const int[]){1}, 1));
    cJSON_AddItemToObject(t, "data_offsets", cJSON_CreateDoubleArray((const double[]){end, end + 4}, 2));
    cJSON_AddItemToObject(r.header, name, t);
    r.bytes = realloc(r.bytes, r.len + 4);
    assert_non_null(r.bytes);
    memset(r.bytes + r.len, 0, 4);
    r.len += 4;
    raw_write(&r, dst);
    raw_free(&r);
}

// --init-from takes a model or a training checkpoint (its AdamW moments are
// the only extra tensors it takes) and nothing else: an extra tensor, a
// moment of no parameter, an empty tensor name are a bad file, one line
// naming it and the tensor, exit 1, nothing created; ./eval, ./sample and
// ./export refuse them alike.
static void test_init_from_extra_tensors(void **state) {
    const char *ref = reference_dir();
    char w[600], ckpt[600], tok[600], val[600], bad[600], run_dir[600], want[800];
    snprintf(w, sizeof w, "%s/model.safetensors", ref);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", ref);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    snprintf(bad, sizeof bad, "%s/extra.safetensors", dir);
    snprintf(run_dir, sizeof run_dir, "%s/never-extra", dir);
    static const struct { const char *src, *name, *want; } cases[] = {
        {"model", "junk", "unexpected tensor junk (not a parameter of pos=t5"},   // --init-from: ", nor an AdamW moment"
        {"checkpoint", "adamw.m.junk", "unexpected tensor adamw.m.junk (not a parameter of pos=t5, nor an AdamW "
                                       "moment of one)"},
        {"model", "", "the header holds a tensor with an empty name (\"\")"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        add_tensor(strcmp(cases[i].src, "model") ? ckpt : w, bad, cases[i].name);
        snprintf(want, sizeof want, "%s: %s", bad, cases[i].want);
        int rc = run("./train configs/tiny.ini %s --threads=1 --pos=t5 --steps=2 --init-from %s --out_dir=%s --quiet",
                     data_args, bad, run_dir);
        if (rc != 1) fail_msg("--init-from with tensor '%s': exit %d, want 1: %s", cases[i].name, rc, out);
        expect_one_line(want);
        assert_int_equal(access(run_dir, F_OK), -1);
        if (!strcmp(cases[i].src, "checkpoint")) continue;   // a checkpoint is no model file for the others
        assert_int_equal(run("./eval --weights %s --data %s --threads 1", bad, val), 1);
        expect_one_line(want);
        assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1", bad, tok), 1);
        expect_one_line(want);
        assert_int_equal(run("./export --weights %s --tokenizer %s --out %s/never.gguf", bad, tok, dir), 1);
        expect_one_line(want);
    }
    // the checkpoint itself: its moments are taken (and not used)
    if (run("./train configs/tiny.ini %s --threads=1 --pos=t5 --steps=2 --init-from %s --out_dir=%s --quiet",
            data_args, ckpt, run_dir) != 0)
        fail_msg("--init-from a checkpoint: %s", out);
}

// The metadata value key of a safetensors file (header only), into buf.
static const char *file_meta(const char *path, const char *key, char *buf, size_t n) {
    char err[1024];
    StFile *f;
    if (st_open_header(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    const char *v = st_meta(f, key);
    snprintf(buf, n, "%s", v ? v : "(absent)");
    st_close(f);
    return buf;
}

// A trained model records its tokenizer (tokenizer_checksum, bpe_checksum of
// tokenizer.bin), and so does its checkpoint; ./sample, ./export and ./eval
// refuse another tokenizer of the same size (here 320) in one line naming
// both files, ./train token files made with another one. A model or
// checkpoint without the key (written before it existed) still works:
// --resume gives the very model a resume of the file with the key gives, and
// --init-from starts from it; --init-from of a model of another tokenizer is
// a model of another configuration (exit 2).
static void test_tokenizer_recorded(void **state) {
    const char *ref = reference_dir();
    char w[600], ckpt[600], tok[600], other[600], corpus[600], buf[128], want[128], err[512];
    snprintf(w, sizeof w, "%s/model.safetensors", ref);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", ref);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    snprintf(corpus, sizeof corpus, "%s/other.txt", dir);
    Tokenizer t;
    if (bpe_load(&t, tok, err, sizeof err) != 0) fail_msg("%s", err);
    snprintf(want, sizeof want, "%016llx", (unsigned long long)bpe_checksum(&t));
    bpe_free(&t);
    assert_string_equal(file_meta(w, "tokenizer_checksum", buf, sizeof buf), want);
    assert_string_equal(file_meta(ckpt, "tokenizer_checksum", buf, sizeof buf), want);

    // Another tokenizer of the same size, with its token files.
    assert_int_equal(run("cat README.md docs/TRAINING.md > %s && ./prepare --vocab-size 320 --val-fraction 0.1 "
                         "--out-dir %s %s", corpus, other, corpus), 0);
    char other_tok[700], other_train[700], other_val[700], data_val[700], run_dir[700];
    snprintf(other_tok, sizeof other_tok, "%s/tokenizer.bin", other);
    snprintf(other_train, sizeof other_train, "%s/train.bin", other);
    snprintf(other_val, sizeof other_val, "%s/val.bin", other);
    snprintf(data_val, sizeof data_val, "%s/data/val.bin", dir);
    snprintf(run_dir, sizeof run_dir, "%s/never-tok", dir);
    if (bpe_load(&t, other_tok, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(t.vocab_size, 320);
    bpe_free(&t);
    char both[1500];
    snprintf(both, sizeof both, "%s and %s are of different tokenizers", w, other_tok);
    assert_int_equal(run("./sample --weights %s --tokenizer %s --threads 1 --tokens 5", w, other_tok), 1);
    expect_one_line(both);
    assert_int_equal(run("./export --weights %s --tokenizer %s --out %s/never.gguf", w, other_tok, dir), 1);
    expect_one_line(both);
    snprintf(both, sizeof both, "%s and %s are of different tokenizers", w, other_val);
    assert_int_equal(run("./eval --weights %s --data %s --threads 1 --batches 1", w, other_val), 1);
    expect_one_line(both);
    snprintf(both, sizeof both, "%s and %s are of different tokenizers", other_train, tok);
    assert_int_equal(run("./train configs/tiny.ini --tokenizer=%s --train_file=%s --val_file=%s --threads=1 "
                         "--steps=2 --out_dir=%s --quiet", tok, other_train, data_val, run_dir), 1);
    expect_one_line(both);
    assert_int_equal(access(run_dir, F_OK), -1);

    // A model without the key: any tokenizer of its size, as before.
    char old[700];
    snprintf(old, sizeof old, "%s/old-model.safetensors", dir);
    set_meta(w, old, "tokenizer_checksum", NULL);
    if (run("./sample --weights %s --tokenizer %s --threads 1 --tokens 5", old, other_tok) != 0) fail_msg("%s", out);
    if (run("./eval --weights %s --data %s --threads 1 --batches 1", old, other_val) != 0) fail_msg("%s", out);

    // --resume of a checkpoint without the key: the model of a resume with it, bit for bit, and the key again.
    char with[700], without[700], a[800], b[800];
    snprintf(with, sizeof with, "%s/resume-with", dir);
    snprintf(without, sizeof without, "%s/resume-without", dir);
    assert_int_equal(run("rm -rf '%s' '%s' && cp -r '%s' '%s' && cp -r '%s' '%s'", with, without, ref, with, ref,
                         without), 0);
    snprintf(a, sizeof a, "%s/checkpoint.safetensors", without);
    set_meta(ckpt, a, "tokenizer_checksum", NULL);
    snprintf(a, sizeof a, "%s/model.safetensors", without);
    set_meta(w, a, "tokenizer_checksum", NULL);
    if (run("./train --resume %s --steps=50 --quiet", with) != 0) fail_msg("%s", out);
    if (run("./train --resume %s --steps=50 --quiet", without) != 0) fail_msg("%s", out);
    snprintf(a, sizeof a, "%s/model.safetensors", with);
    snprintf(b, sizeof b, "%s/model.safetensors", without);
    assert_true(files_equal(a, b));
    assert_string_equal(file_meta(b, "tokenizer_checksum", buf, sizeof buf), want);
    snprintf(b, sizeof b, "%s/checkpoint.safetensors", without);
    assert_string_equal(file_meta(b, "tokenizer_checksum", buf, sizeof buf), want);
    static char rows_a[64][160], rows_b[64][160];
    assert_same_rows(rows_a, read_log(with, rows_a, 64), rows_b, read_log(without, rows_b, 64));

    // --init-from a model without the key starts; its run records the key.
    if (run("./train configs/tiny.ini %s --threads=1 --pos=t5 --steps=2 --init-from %s --out_dir=%s/init-old "
            "--quiet", data_args, old, dir) != 0) fail_msg("%s", out);
    snprintf(b, sizeof b, "%s/init-old/model.safetensors", dir);
    assert_string_equal(file_meta(b, "tokenizer_checksum", buf, sizeof buf), want);
    // ... and of a model of another tokenizer is refused as another model's.
    set_meta(w, old, "tokenizer_checksum", "0123456789abcdef");
    assert_int_equal(run("./train configs/tiny.ini %s --threads=1 --pos=t5 --steps=2 --init-from %s --out_dir=%s "
                         "--quiet", data_args, old, run_dir), 2);
    snprintf(both, sizeof both, "tokenizer_checksum is 0123456789abcdef in the file but %s in this run", want);
    expect_one_line(both);
    assert_int_equal(access(run_dir, F_OK), -1);
}

// A named pipe is not a regular file either: refused at once, not waited on
// (open(2) of a FIFO for reading blocks until a writer opens it).
static void test_fifo_inputs_refused(void **state) {
    char fifo[600], run_dir[600], w[600], val[600], tok[600];
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    snprintf(run_dir, sizeof run_dir, "%s/never-fifo", dir);
    snprintf(w, sizeof w, "%s/model.safetensors", reference_dir());
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    int rc = run("timeout 5 ./train %s %s --out_dir=%s --quiet", fifo, data_args, run_dir);
    if (rc != 2) fail_msg("a FIFO as the config file: exit %d (124: still waiting after 5 s): %s", rc, out);
    expect_one_line("not a regular file");
    rc = run("timeout 5 ./eval --weights %s --data %s --threads 1", fifo, val);
    if (rc != 1) fail_msg("a FIFO as --weights: exit %d (124: still waiting after 5 s): %s", rc, out);
    expect_one_line("not a regular file");
    rc = run("timeout 5 ./sample --weights %s --tokenizer %s --threads 1", w, fifo);
    if (rc != 1) fail_msg("a FIFO as --tokenizer: exit %d (124: still waiting after 5 s): %s", rc, out);
    expect_one_line("not a regular file");
    rc = run("timeout 5 ./eval --weights %s --data %s --threads 1", w, fifo);
    if (rc != 1) fail_msg("a FIFO as --data: exit %d (124: still waiting after 5 s): %s", rc, out);
    expect_one_line("not a regular file");
    unlink(fifo);
}

// --debug-state FILE: an existing FILE only with --overwrite; never one of
// the run's inputs (the config file, the tokenizer, a token file: compared as
// files) nor a FIFO or a device, even with --overwrite. --init-from: never the
// run directory's model.safetensors, which the run's first save would
// replace. Each refused in one line, exit 2, before anything is built.
static void test_output_files_refused(void **state) {
    char ds[600], copy[600], ini[600], tok[600], fifo[600], run_dir[600], cmd[2048];
    snprintf(ds, sizeof ds, "%s/debug.safetensors", dir);
    snprintf(copy, sizeof copy, "%s/debug.copy", dir);
    snprintf(ini, sizeof ini, "%s/tiny-copy.ini", dir);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(fifo, sizeof fifo, "%s/debug.fifo", dir);
    snprintf(run_dir, sizeof run_dir, "%s/own-init", dir);
    assert_int_equal(run("cp configs/tiny.ini %s && cp %s %s/tokenizer.copy && rm -f %s && mkfifo %s",
                         ini, tok, dir, fifo, fifo), 0);
#define DEBUG_STATE(target, flags) \
    run("./train %s %s --threads=1 --quiet --debug-state %s %s", ini, data_args, target, flags)
    if (DEBUG_STATE(ds, "") != 0) fail_msg("%s", out);
    assert_int_equal(run("cp %s %s", ds, copy), 0);
    assert_int_equal(DEBUG_STATE(ds, "--seed=2"), 2);
    snprintf(cmd, sizeof cmd, "%s: exists; pass --overwrite to replace it", ds);
    expect_one_line(cmd);
    assert_true(files_equal(ds, copy));
    assert_int_equal(DEBUG_STATE(ds, "--seed=2 --overwrite"), 0);
    assert_false(files_equal(ds, copy));
    snprintf(cmd, sizeof cmd, "%s/data/../data/tokenizer.bin", dir);
    assert_int_equal(DEBUG_STATE(cmd, "--overwrite"), 2);
    expect_one_line("the same file as the input");
    assert_int_equal(DEBUG_STATE(ini, "--overwrite"), 2);
    expect_one_line("the same file as the input");
    snprintf(cmd, sizeof cmd, "%s/tokenizer.copy", dir);
    assert_true(files_equal(tok, cmd));
    assert_int_equal(run("cmp -s %s configs/tiny.ini", ini), 0);
    assert_int_equal(DEBUG_STATE(fifo, "--overwrite"), 2);
    expect_one_line("exists and is not a regular file (a FIFO)");
    assert_int_equal(run("test -p %s", fifo), 0);
    if (geteuid() == 0) {   // the device node (mknod needs root)
        snprintf(cmd, sizeof cmd, "%s/debug.null", dir);
        assert_int_equal(run("rm -f %s && mknod %s c 1 3", cmd, cmd), 0);
        assert_int_equal(DEBUG_STATE(cmd, "--overwrite"), 2);
        expect_one_line("exists and is not a regular file (a character device)");
        assert_int_equal(run("test -c %s", cmd), 0);
    }
#undef DEBUG_STATE
    if (run("./train %s %s --threads=1 --quiet --steps=2 --eval_every=0 --out_dir=%s", ini, data_args, run_dir) != 0)
        fail_msg("%s", out);
    assert_int_equal(run("cp %s/model.safetensors %s", run_dir, copy), 0);
    assert_int_equal(run("./train %s %s --threads=1 --quiet --steps=2 --eval_every=0 --out_dir=%s --overwrite "
                         "--init-from=%s/./model.safetensors", ini, data_args, run_dir, run_dir), 2);
    expect_one_line("which this run's first save replaces");
    snprintf(cmd, sizeof cmd, "%s/model.safetensors", run_dir);
    assert_true(files_equal(cmd, copy));
}

// A weights file of metadata only (248 bytes) describing a 13-billion-parameter
// model: refused for its missing tensors before anything is allocated. Under a
// 2 GB address-space limit (ASan reserves terabytes of shadow, so there the
// limit is ASan's largest allocation instead).
static void test_metadata_only_weights(void **state) {
    char path[600], val[600], tok[600], limit[1024];
    snprintf(path, sizeof path, "%s/metadata-only.safetensors", dir);
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    const char *header = "{\"__metadata__\":{\"format\":\"pt\",\"pos\":\"rope\",\"n_layer\":\"256\",\"n_head\":\"16\","
                         "\"d_model\":\"2048\",\"vocab_size\":\"65536\",\"block_size\":\"65536\",\"rope_base\":\"10000\","
                         "\"rope_dims\":\"0\",\"t5_num_buckets\":\"32\",\"t5_max_distance\":\"128\","
                         "\"sinusoidal_scale\":\"1\"}}";
    size_t n = strlen(header), padded = (n + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8; i++) fputc((int)((uint64_t)padded >> (8 * i) & 0xff), f);
    fputs(header, f);
    for (size_t i = n; i < padded; i++) fputc(' ', f);
    fclose(f);
    assert_int_equal(8 + padded, 248);
    if (UNDER_ASAN) {
        const char *asan = getenv("ASAN_OPTIONS");
        snprintf(limit, sizeof limit, "ASAN_OPTIONS='%s:max_allocation_size_mb=2000:allocator_may_return_null=0'",
                 asan ? asan : "");
    } else {
        snprintf(limit, sizeof limit, "ulimit -v 2000000;");
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(run("%s timeout 60 ./eval --weights %s --data %s --threads 1", limit, path, val), 1);
    expect_one_line("missing tensor wte");
    assert_int_equal(run("%s timeout 60 ./sample --weights %s --tokenizer %s --threads 1", limit, path, tok), 1);
    expect_one_line("missing tensor wte");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("  metadata-only file refused twice in %.2f s\n", s);
    assert_true(s < 30);
}

// A 4 GiB file (sparse: a valid header, then a hole) holding one tensor and
// no metadata: every program that reads weights refuses it from its header,
// in one line naming the first missing key, under a 2 GB address-space limit
// (ASan: its largest allocation) and well within a second on an idle
// machine. Reading the data section first would need the 4 GiB.
static void test_huge_weights_refused_from_header(void **state) {
    char path[600], val[600], tok[600], run_dir[600], gguf[600], limit[1024];
    snprintf(path, sizeof path, "%s/huge.safetensors", dir);
    snprintf(val, sizeof val, "%s/data/val.bin", dir);
    snprintf(tok, sizeof tok, "%s/data/tokenizer.bin", dir);
    snprintf(run_dir, sizeof run_dir, "%s/never-huge", dir);
    snprintf(gguf, sizeof gguf, "%s/never-huge.gguf", dir);
    const long long size = 4LL << 30;
    // 8 + 80 header bytes, then one F32 tensor over the rest: (2^32 - 88) / 4 floats
    long long numel = (size - 88) / 4;
    char header[81];
    int n = snprintf(header, sizeof header, "{\"wte\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[0,%lld]}}",
                     numel, 4 * numel);
    assert_true(n > 0 && n <= 80);
    memset(header + n, ' ', (size_t)(80 - n));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8; i++) fputc(i == 0 ? 80 : 0, f);
    fwrite(header, 1, 80, f);
    fclose(f);
    assert_int_equal(truncate(path, (off_t)size), 0);
    if (UNDER_ASAN) {
        const char *asan = getenv("ASAN_OPTIONS");
        snprintf(limit, sizeof limit, "ASAN_OPTIONS='%s:max_allocation_size_mb=2000:allocator_may_return_null=0'",
                 asan ? asan : "");
    } else {
        snprintf(limit, sizeof limit, "ulimit -v 2000000;");
    }
    static const char *const programs[] = {"eval", "sample", "export", "train"};
    for (int p = 0; p < 4; p++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc;
        if (p == 0) rc = run("%s timeout 60 ./eval --weights %s --data %s --threads 1", limit, path, val);
        else if (p == 1) rc = run("%s timeout 60 ./sample --weights %s --tokenizer %s --threads 1", limit, path, tok);
        else if (p == 2) rc = run("%s timeout 60 ./export --weights %s --tokenizer %s --out %s", limit, path, tok, gguf);
        else rc = run("%s timeout 60 ./train configs/tiny.ini %s --threads=1 --steps=2 --init-from %s --out_dir=%s "
                      "--quiet", limit, data_args, path, run_dir);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("  ./%s refused the 4 GiB file in %.2f s\n", programs[p], s);
        if (rc != 1) fail_msg("./%s: exit %d, want 1: %s", programs[p], rc, out);
        expect_one_line("metadata lacks key n_layer");
        assert_true(s < 10);   // a loaded machine's margin over the idle 0.05 s
    }
    assert_int_equal(access(run_dir, F_OK), -1);
    assert_int_equal(access(gguf, F_OK), -1);
    unlink(path);
}

static void test_oversized_batch_and_model(void **state) {
    char run_dir[600], path[600], want[700];
    snprintf(run_dir, sizeof run_dir, "%s/too-big", dir);
    // B*T beyond the activation buffers: a configuration error naming the key, before anything is written.
    assert_int_equal(run("./train configs/tiny.ini %s --batch_size=65536 --block_size=65536 --out_dir=%s --quiet",
                         data_args, run_dir), 2);
    expect_one_line("too large");
    if (strncmp(out, "--batch_size:", 13) != 0 && strncmp(out, "--block_size:", 13) != 0)
        fail_msg("want the message to start with --batch_size: or --block_size:, got %s", out);
    // The same from a config file: named by file and line.
    snprintf(path, sizeof path, "%s/bigbatch.ini", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[model]\nblock_size = 65536\n[optim]\nbatch_size = 65536\n", f);
    fclose(f);
    assert_int_equal(run("./train %s %s --out_dir=%s --quiet", path, data_args, run_dir), 2);
    snprintf(want, sizeof want, "%s:", path);
    expect_one_line(want);
    // A model over 2^34 parameters: named by the command-line key that made it so.
    assert_int_equal(run("./train configs/tiny.ini %s --n_layer=256 --d_model=16384 --n_head=16 --out_dir=%s --quiet",
                         data_args, run_dir), 2);
    expect_one_line("model too large");
    if (strncmp(out, "--n_layer:", 10) != 0 && strncmp(out, "--d_model:", 10) != 0)
        fail_msg("want the message to start with --n_layer: or --d_model:, got %s", out);
    assert_int_equal(access(run_dir, F_OK), -1);          // nothing was created
}

// The fault injection of src/train/fault_inject.h is compiled into the test
// build of ./train only: the shipped ./train holds no ROPELAB_TEST_* variable
// name (so it reads none), the test build holds every one the tests set.
static void test_shipped_train_has_no_fault_hooks(void **state) {
    (void)state;
    assert_int_equal(run("LC_ALL=C grep -a -c -F ROPELAB_TEST_ ./train"), 1);   // 1: no line matched
    static const char *hooks[] = {"ROPELAB_TEST_CRASH_IN_SAVE", "ROPELAB_TEST_LOG_FAIL",
                                  "ROPELAB_TEST_SIGINT_AT_STEP", "ROPELAB_TEST_PERTURB_AT_STEP",
                                  "ROPELAB_TEST_AUTO_ISA", "ROPELAB_TEST_AUTO_MS"};
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        if (run("LC_ALL=C grep -a -q -F %s " TRAIN_WITH_FAULTS, hooks[i]) != 0)
            fail_msg("%s: no %s in it", TRAIN_WITH_FAULTS, hooks[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_train_has_no_fault_hooks),
        cmocka_unit_test(test_lock_refuses_second_train),
        cmocka_unit_test(test_long_out_dir_trains_and_resumes),
        cmocka_unit_test(test_prepare_long_out_dir),
        cmocka_unit_test(test_checkpoint_step_and_rng_range),
        cmocka_unit_test(test_log_write_failure_between_saves),
        cmocka_unit_test(test_log_write_failure_over_save),
        cmocka_unit_test(test_dead_end_restart),
        cmocka_unit_test(test_finished_model_is_never_replaced),
        cmocka_unit_test(test_kill_between_checkpoint_and_model),
        cmocka_unit_test(test_log_out_of_order_row),
        cmocka_unit_test(test_resume_edited_config_refused_before_building),
        cmocka_unit_test(test_bad_config_files),
        cmocka_unit_test(test_bad_weights_and_tokenizer_files),
        cmocka_unit_test(test_init_from_bad_metadata_exit_codes),
        cmocka_unit_test(test_init_from_extra_tensors),
        cmocka_unit_test(test_tokenizer_recorded),
        cmocka_unit_test(test_fifo_inputs_refused),
        cmocka_unit_test(test_output_files_refused),
        cmocka_unit_test(test_metadata_only_weights),
        cmocka_unit_test(test_huge_weights_refused_from_header),
        cmocka_unit_test(test_oversized_batch_and_model),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
