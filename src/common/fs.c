// fs.c: mkdir -p, opening an input only if it is a regular file, and which
// paths name files (see fs.h).
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int make_dirs(const char *path, char *err, size_t errlen) {
    char *buf = strdup(path);
    if (!buf) { snprintf(err, errlen, "%s: out of memory", path); return -1; }
    int rc = 0;
    for (char *p = buf + 1; *buf; p++) {   // each prefix ending at a '/', then the whole path
        if (*p != '/' && *p != 0) continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "%s: cannot create directory: %s", buf, strerror(errno));
            rc = -1;
            break;
        }
        *p = c;
        if (!c) break;
    }
    free(buf);
    return rc;
}

int fs_check_writable_dir(const char *dir, char *err, size_t errlen) {
    char *p = strdup(dir);
    if (!p) { snprintf(err, errlen, "%s: out of memory", dir); return -1; }
    struct stat st;
    int rc = -1;
    while (stat(p, &st) != 0) {   // up to the nearest ancestor that exists
        char *slash = strrchr(p, '/');
        if (errno != ENOENT || strcmp(p, ".") == 0) { snprintf(err, errlen, "%s: %s", p, strerror(errno)); goto done; }
        if (!slash) strcpy(p, ".");              // "a": the current directory
        else if (slash == p) p[1] = 0;           // "/a": the root
        else *slash = 0;
    }
    int exists = strcmp(p, dir) == 0;
    if (!S_ISDIR(st.st_mode) && exists)
        snprintf(err, errlen, "%s: not a directory", dir);
    else if (!S_ISDIR(st.st_mode))
        snprintf(err, errlen, "%s: cannot create directory: %s is not a directory", dir, p);
    else if (access(p, W_OK | X_OK) != 0 && exists)
        snprintf(err, errlen, "%s: cannot write in this directory: %s", dir, strerror(errno));
    else if (access(p, W_OK | X_OK) != 0)
        snprintf(err, errlen, "%s: cannot create directory: cannot write in %s: %s", dir, p, strerror(errno));
    else
        rc = 0;
done:
    free(p);
    return rc;
}

int open_regular_file(const char *path, long long *size, char *err, size_t errlen) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (size) *size = (long long)st.st_size;
    return fd;
}

FILE *fopen_regular_file(const char *path, long long *size, char *err, size_t errlen) {
    int fd = open_regular_file(path, size, err, errlen);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int fs_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
