// util_bench.h: what the benchmarks (tests/bench_*.c) share: the model
// configurations S and M, the clock and the median.
#ifndef ROPELAB_UTIL_BENCH_H
#define ROPELAB_UTIL_BENCH_H

#include "common/clock.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The benchmark configurations: layers, width, heads, window, batch, vocabulary.
typedef struct { const char *name; int L, C, H, T, B, V; } BenchConfig;
static const BenchConfig CONFIGS[] = {
    {"S", 4, 128, 4, 128, 32, 2048},
    {"M", 6, 256, 8, 256, 8, 4096},
};

// Seconds on a monotonic clock: the program's one clock (common/clock.h).
static inline double now_s(void) { return clock_seconds(); }

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
