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

static void release(AtomicFile *af) {
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    af->f = NULL;
}

FILE *atomic_open(AtomicFile *af, const char *path, char *err, size_t errlen) {
    memset(af, 0, sizeof *af);
    size_t n = strlen(path);
    if (n == 0 || n + 12 >= PATH_MAX) {
        snprintf(err, errlen, "%.200s%s: path is empty or longer than %d characters", path, n > 200 ? "..." : "",
                 PATH_MAX - 12);
        return NULL;
    }
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

int atomic_commit(AtomicFile *af, int ok, char *err, size_t errlen) {
    int saved_errno = ok ? 0 : errno;
    if (ok && (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0)) { saved_errno = errno; ok = 0; }
    if (fclose(af->f) != 0 && ok) { saved_errno = errno; ok = 0; }
    af->f = NULL;
    if (ok && rename(af->tmp, af->path) != 0) { saved_errno = errno; ok = 0; }
    if (!ok) {
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
