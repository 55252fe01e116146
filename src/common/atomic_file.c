// atomic_file.c: temporary file, fsync, rename (see atomic_file.h).
#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <unistd.h>

FILE *atomic_open(AtomicFile *af, const char *path, char *err, size_t errlen) {
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp", path);
    af->f = fopen(af->tmp, "wb");
    if (!af->f) snprintf(err, errlen, "%s: cannot create %s: %s", path, af->tmp, strerror(errno));
    return af->f;
}

// fsync of the directory holding path, so that a rename in it is durable.
static void sync_dir_of(const char *path) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
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
        return -1;
    }
    sync_dir_of(af->path);
    return 0;
}
