// util_bench.h: the clock and the median the benchmarks (tests/bench_*.c) share.
#ifndef ROPELAB_UTIL_BENCH_H
#define ROPELAB_UTIL_BENCH_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

// Seconds on a monotonic clock.
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median of x (n >= 1 values); x is left as it was (NaN if out of memory).
static inline double median(const double *x, int n) {
    double *s = malloc(n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

#endif
