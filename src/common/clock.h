// clock.h: the one wall clock of ropelab (header-only): seconds on a
// monotonic clock, for durations (progress, tokens/s, benchmarks).
#ifndef ROPELAB_CLOCK_H
#define ROPELAB_CLOCK_H

#include <time.h>

static inline double clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
