// atomic_file.c: unique temporary file, fsync, rename (see atomic_file.h).
#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// What a file that is not a regular one is, for the message.
static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "another kind of file";
}

int atomic_check_target(const char *path, AtomicMode mode, char *err, size_t errlen) {
    struct stat name_st, st;
    // Nothing there (or a directory that cannot be searched: making the temporary says why).
    if (lstat(path, &name_st) != 0) return 0;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: exists and is a symbolic link to no file (%s); not replaced", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: exists and is not a regular file (%s%s); not replaced", path,
                 S_ISLNK(name_st.st_mode) ? "a symbolic link to " : "", kind_of(st.st_mode));
        return -1;
    }
    if (mode == ATOMIC_NEW) {
        snprintf(err, errlen, "%s: exists; pass --overwrite to replace it", path);
        return -1;
    }
    return 0;
}

static void release(AtomicFile *af) {
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    af->f = NULL;
}

FILE *atomic_open(AtomicFile *af, const char *path, AtomicMode mode, char *err, size_t errlen) {
    memset(af, 0, sizeof *af);
    af->mode = mode;
    size_t n = strlen(path);
    if (n == 0 || n + 12 >= PATH_MAX) {
        snprintf(err, errlen, "%.200s%s: path is empty or longer than %d characters", path, n > 200 ? "..." : "",
                 PATH_MAX - 12);
        return NULL;
    }
    if (atomic_check_target(path, mode, err, errlen) != 0) return NULL;
    af->path = strdup(path);
    af->tmp = malloc(n + 12);
    if (!af->path || !af->tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        release(af);
        return NULL;
    }
    snprintf(af->tmp, n + 12, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(af->tmp);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create %s: %s", path, af->tmp, strerror(errno));
        release(af);
        return NULL;
    }
    mode_t mask = umask(0);   // mkstemp makes 0600; the file gets the usual 0666 & ~umask
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(af->f = fdopen(fd, "wb"))) {
        snprintf(err, errlen, "%s: cannot create %s: %s", path, af->tmp, strerror(errno));
        close(fd);
        unlink(af->tmp);
        release(af);
        return NULL;
    }
    return af->f;
}

// fsync of the directory holding path, so that a rename in it is durable.
static void sync_dir_of(const char *path) {
    char *copy = strdup(path);
    if (!copy) return;
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
    free(copy);
}

// rename(from, to) that fails with EEXIST when `to` exists, atomically. On a
// file system without RENAME_NOREPLACE (EINVAL), link + unlink: link never
// replaces either.
static int rename_noreplace(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}

int atomic_commit(AtomicFile *af, int ok, char *err, size_t errlen) {
    int saved_errno = ok ? 0 : errno, refused = 0;
    if (ok && (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0)) { saved_errno = errno; ok = 0; }
    if (fclose(af->f) != 0 && ok) { saved_errno = errno; ok = 0; }
    af->f = NULL;
    if (ok && af->mode == ATOMIC_REPLACE) {
        // PATH is checked again: it may have become a FIFO or a device since atomic_open.
        refused = atomic_check_target(af->path, ATOMIC_REPLACE, err, errlen) != 0;
        if (!refused && rename(af->tmp, af->path) != 0) { saved_errno = errno; ok = 0; }
    } else if (ok && rename_noreplace(af->tmp, af->path) != 0) {
        saved_errno = errno;
        ok = 0;
        // Something appeared at PATH while the temporary was written: refused as atomic_open would have.
        refused = saved_errno == EEXIST && atomic_check_target(af->path, ATOMIC_NEW, err, errlen) != 0;
    }
    if (!ok || refused) {
        if (!refused)
            snprintf(err, errlen, "%s: write failed: %s", af->path,
                     saved_errno ? strerror(saved_errno) : "short write");
        unlink(af->tmp);
        release(af);
        return -1;
    }
    sync_dir_of(af->path);
    release(af);
    return 0;
}
