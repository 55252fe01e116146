// engine.c: what every engine shares outside its passes: the first-failure
// record the model reads after each pass, and the growth of the buffers an
// engine sizes before the passes run (the loops between the products are
// engine/kernels.h).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/engine_shared.h"

void engine_fail(Engine *e, const char *fmt, ...) {
    if (e->err[0]) return;   // the first failure is the cause; later ones follow from it
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    if (!e->err[0]) snprintf(e->err, sizeof e->err, "engine failure");
}

int engine_failed(Engine *e, char *err, size_t errlen) {
    if (!e->err[0]) return 0;
    snprintf(err, errlen, "%s", e->err);
    e->err[0] = '\0';
    return -1;
}

size_t grow_buffer_bytes(size_t bytes) { return (bytes + 63) / 64 * 64; }

int grow_buffer(void **buf, size_t *have, size_t bytes) {
    if (bytes <= *have) return 0;
    size_t rounded = grow_buffer_bytes(bytes);
    void *p = aligned_alloc(64, rounded);
    if (!p) return -1;
    free(*buf);
    *buf = p;
    *have = rounded;
    return 0;
}
