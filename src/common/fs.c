// fs.c: mkdir -p (see fs.h).
#include "common/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
