// fuzz_util.h: what the fuzz harnesses share.
//
// Each tests/fuzz/fuzz_NAME.c defines one plain function
//     int fuzz_NAME_one(const uint8_t *data, size_t size);
// that runs one input through the public API and frees everything, then
// ends with FUZZ_TARGET(fuzz_NAME_one). Built for libFuzzer (tests/fuzz/fuzz.mk)
// that macro is the LLVMFuzzerTestOneInput entry point; the replay test
// (tests/test_fuzz_regress.c) defines FUZZ_REPLAY, includes the .c files and
// calls the same functions on the files of tests/fuzz/regress/NAME/.
//
// A harness returns 0 when the code under test behaved (input accepted or
// refused with an error), and calls fuzz_fail() (which aborts, so the fuzzer
// reports the input) when a documented property does not hold.
#ifndef ROPELAB_FUZZ_UTIL_H
#define ROPELAB_FUZZ_UTIL_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef FUZZ_REPLAY
#define FUZZ_TARGET(fn)
#else
#define FUZZ_TARGET(fn)                                                   \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);         \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {        \
        fn(data, size);                                                   \
        return 0;                                                         \
    }
#endif

// A property the API documents does not hold: say which, then abort.
__attribute__((noreturn, unused)) static void fuzz_fail(const char *target, const char *what) {
    fprintf(stderr, "fuzz_%s: %s\n", target, what);
    abort();
}

// The process's scratch file: an in-memory file (memfd) whose path
// /proc/self/fd/N the loaders open like any regular file; nothing is left
// on disk. Falls back to an unlinked-at-exit file in $TMPDIR.
static int fuzz_fd = -1;
static char fuzz_file_path[512];

static void fuzz_remove_scratch(void) { unlink(fuzz_file_path); }

static int fuzz_open_scratch(void) {
    int fd = memfd_create("ropelab-fuzz", 0);
    if (fd >= 0) {
        snprintf(fuzz_file_path, sizeof fuzz_file_path, "/proc/self/fd/%d", fd);
        if (access(fuzz_file_path, R_OK) == 0) return fd;
        close(fd);
    }
    const char *dir = getenv("TMPDIR");
    snprintf(fuzz_file_path, sizeof fuzz_file_path, "%s/ropelab-fuzz.XXXXXX", dir && *dir ? dir : "/tmp");
    fd = mkstemp(fuzz_file_path);
    if (fd >= 0) atexit(fuzz_remove_scratch);
    return fd;
}

// Replaces the scratch file's contents with data; returns its path.
__attribute__((unused)) static const char *fuzz_write_file(const uint8_t *data, size_t size) {
    if (fuzz_fd < 0 && (fuzz_fd = fuzz_open_scratch()) < 0) fuzz_fail("util", "cannot create a scratch file");
    if (ftruncate(fuzz_fd, 0) != 0) fuzz_fail("util", "cannot truncate the scratch file");
    for (size_t done = 0; done < size;) {
        ssize_t k = pwrite(fuzz_fd, data + done, size - done, (off_t)done);
        if (k <= 0) fuzz_fail("util", "cannot write the scratch file");
        done += (size_t)k;
    }
    return fuzz_file_path;
}

#endif
