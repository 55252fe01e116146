// numtext.h: numbers as text in messages.
#ifndef ROPELAB_COMMON_NUMTEXT_H
#define ROPELAB_COMMON_NUMTEXT_H

#include <stdio.h>
#include <stdlib.h>

// Shortest decimal text that reads back as the same double: exact, so a
// value just outside a range never prints as its bound (%g writes 1e+06 for
// both 1000001 and 1000000).
static inline void format_double(char *buf, size_t n, double v) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

#endif
