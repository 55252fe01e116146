// test_atomic_file.c: what atomic_open / atomic_commit (src/common/atomic_file.c)
// may write over, the one place every writer of ropelab goes through: an
// existing file only in ATOMIC_REPLACE, never a FIFO, directory, device or a
// link to one, a link to a regular file replaced as a link, the no-replace
// rule kept at the rename too; and a file-size limit (SIGXFSZ ignored by
// cli_start) failing the write like a full disk with no temporary left.
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_shell.h"

#include "common/atomic_file.h"
#include "common/cli.h"

static char dir[256], err[1024];

static const char *at(const char *name) {
    static char paths[8][512];   // a few names alive at once
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

// Writes text to path through atomic_open in mode; the return of atomic_open
// (NULL: refused there) or of atomic_commit.
static int write_text(const char *path, AtomicMode mode, const char *text) {
    AtomicFile af;
    FILE *f = atomic_open(&af, path, mode, err, sizeof err);
    if (!f) return -1;
    return atomic_commit(&af, fputs(text, f) >= 0, err, sizeof err);
}

static void expect_text(const char *path, const char *want) {
    char buf[64] = {0};
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_string_equal(buf, want);
}

static void expect_no_temporary(void) {
    if (run_shell("ls %s | grep -q '\\.tmp\\.'", dir) == 0) fail_msg("a temporary was left in %s", dir);
}

static void expect_refused(const char *path, const char *msg) {
    for (int mode = ATOMIC_NEW; mode <= ATOMIC_REPLACE; mode++) {
        if (write_text(path, (AtomicMode)mode, "new") == 0) fail_msg("%s: written in mode %d", path, mode);
        if (!strstr(err, msg) || !strstr(err, path)) fail_msg("%s: '%s', want '%s'", path, err, msg);
    }
    expect_no_temporary();
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/ropelab_atomic_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    return run_shell("rm -rf '%s'", dir) == 0 ? 0 : -1;
}

// ATOMIC_NEW writes a new file and refuses an existing one; ATOMIC_REPLACE replaces it.
static void test_new_and_replace(void **state) {
    const char *p = at("a.txt");
    assert_int_equal(write_text(p, ATOMIC_NEW, "first"), 0);
    expect_text(p, "first");
    assert_int_equal(write_text(p, ATOMIC_NEW, "second"), -1);
    char want[600];
    snprintf(want, sizeof want, "%s: exists; pass --overwrite to replace it", p);
    assert_string_equal(err, want);
    expect_text(p, "first");
    assert_int_equal(atomic_check_target(p, ATOMIC_NEW, err, sizeof err), -1);
    assert_int_equal(atomic_check_target(p, ATOMIC_REPLACE, err, sizeof err), 0);
    assert_int_equal(write_text(p, ATOMIC_REPLACE, "second"), 0);
    expect_text(p, "second");
    expect_no_temporary();
}

// A FIFO, a directory, a link to either and a link to nothing are refused in
// both modes, and stay what they were.
static void test_not_regular_refused(void **state) {
    const char *fifo = at("fifo"), *d = at("d"), *lf = at("link-to-fifo"), *ld = at("link-to-dir"), *dangling = at("dangling");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(mkdir(d, 0755), 0);
    assert_int_equal(symlink(fifo, lf), 0);
    assert_int_equal(symlink(d, ld), 0);
    assert_int_equal(symlink(at("nothing"), dangling), 0);
    expect_refused(fifo, "exists and is not a regular file (a FIFO)");
    expect_refused(d, "exists and is not a regular file (a directory)");
    expect_refused(lf, "(a symbolic link to a FIFO)");
    expect_refused(ld, "(a symbolic link to a directory)");
    expect_refused(dangling, "a symbolic link to no file");
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(lstat(d, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(lstat(lf, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

// A character device (the issue's /dev/null, made here as mknod c 1 3): needs root.
static void test_device_refused(void **state) {
    if (geteuid() != 0) {
        fprintf(stderr, "not root: no device node can be made; skipped\n");
        skip();
    }
    const char *n = at("null");
    assert_int_equal(mknod(n, S_IFCHR | 0666, makedev(1, 3)), 0);
    expect_refused(n, "exists and is not a regular file (a character device)");
    struct stat st;
    assert_int_equal(lstat(n, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
}

// A link to a regular file is an existing file; replacing it replaces the
// link, and the file it named keeps its bytes.
static void test_link_to_regular_replaced_as_link(void **state) {
    const char *target = at("target.txt"), *link = at("link.txt");
    assert_int_equal(write_text(target, ATOMIC_NEW, "target"), 0);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(write_text(link, ATOMIC_NEW, "new"), -1);
    assert_non_null(strstr(err, "exists; pass --overwrite"));
    assert_int_equal(write_text(link, ATOMIC_REPLACE, "new"), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    expect_text(link, "new");
    expect_text(target, "target");
}

// What appears at PATH while the temporary is written: in ATOMIC_NEW a file
// is kept (the rename never replaces), in ATOMIC_REPLACE a FIFO is kept.
static void test_checked_again_at_the_rename(void **state) {
    AtomicFile af;
    const char *p = at("late.txt");
    FILE *f = atomic_open(&af, p, ATOMIC_NEW, err, sizeof err);
    assert_non_null(f);
    FILE *other = fopen(p, "w");
    fputs("other", other);
    fclose(other);
    fputs("mine", f);
    assert_int_equal(atomic_commit(&af, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "exists; pass --overwrite"));
    expect_text(p, "other");
    expect_no_temporary();

    const char *q = at("late-fifo");
    f = atomic_open(&af, q, ATOMIC_REPLACE, err, sizeof err);
    assert_non_null(f);
    assert_int_equal(mkfifo(q, 0644), 0);
    fputs("mine", f);
    assert_int_equal(atomic_commit(&af, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "(a FIFO)"));
    struct stat st;
    assert_int_equal(lstat(q, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    expect_no_temporary();
}

// Under a file-size limit (ulimit -f) a process that called cli_start sees
// the write fail with EFBIG, as on a full disk: a one-line error, no file,
// no temporary. Without cli_start SIGXFSZ would kill it mid-write.
static void test_file_size_limit_is_a_failed_write(void **state) {
    const char *p = at("big.bin");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cli_start();
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        static char block[1 << 16];
        AtomicFile af;
        FILE *f = atomic_open(&af, p, ATOMIC_NEW, err, sizeof err);
        if (!f) _exit(4);
        int ok = fwrite(block, 1, sizeof block, f) == sizeof block;
        if (atomic_commit(&af, ok, err, sizeof err) == 0) _exit(5);
        fprintf(stderr, "%s\n", err);
        _exit(strstr(err, "write failed: File too large") ? 0 : 6);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status)) fail_msg("the writer died of signal %d", WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_not_equal(access(p, F_OK), 0);
    expect_no_temporary();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_replace),
        cmocka_unit_test(test_not_regular_refused),
        cmocka_unit_test(test_device_refused),
        cmocka_unit_test(test_link_to_regular_replaced_as_link),
        cmocka_unit_test(test_checked_again_at_the_rename),
        cmocka_unit_test(test_file_size_limit_is_a_failed_write),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
