// engine.c: what every engine shares: the first-failure record the model
// reads after each pass, and the loops the OpenBLAS and oneDNN engines both
// run (row slices per thread, the bias gradient, buffer growth).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "engine/bf16.h"
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

// Whole register tiles of the sgemm kernel per thread (16 rows); the last
// share takes the rest.
void thread_slice(int n, int *lo, int *hi) {
    int t = omp_get_thread_num(), n_threads = omp_get_num_threads();
    int per = ((n + n_threads - 1) / n_threads + 15) / 16 * 16;
    *lo = t * per < n ? t * per : n;
    *hi = (t + 1) * per < n ? (t + 1) * per : n;
}

// The rows are added in order n = 0..N-1 whatever the columns' split, so the
// sums do not depend on the thread count. The columns go in blocks of
// BIAS_BLOCK whose running sums stay in registers down all N rows (16
// floats to a 512-bit register: four of them), and the pass reads each
// element of dout once for both uses, sum and rounding. (Adding a whole row
// into db at a time instead loads and stores db once per row and sets up a
// vector loop per row; measured in the bf16 step, that pass took 1.4-4x as
// long, and its time varied 3x from run to run.)
enum { BIAS_BLOCK = 64 };

// Columns c0..c0+width-1 of every row; inlined with width = BIAS_BLOCK for
// whole blocks, where the constant trip count keeps acc in registers.
static inline void bias_block(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC, int c0,
                              int width) {
    float acc[BIAS_BLOCK];
    memcpy(acc, db + c0, (size_t)width * sizeof(float));
    for (int n = 0; n < N; n++) {
        const float *g = dout + (size_t)n * OC + c0;
        #pragma omp simd
        for (int j = 0; j < width; j++) acc[j] += g[j];
        if (dout_bf16) {
            uint16_t *y = dout_bf16 + (size_t)n * OC + c0;
            #pragma omp simd
            for (int j = 0; j < width; j++) y[j] = bf16_round(g[j]);
        }
    }
    memcpy(db + c0, acc, (size_t)width * sizeof(float));
}

void bias_grad_columns(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC, int o0, int o1) {
    int c0 = o0;
    for (; c0 + BIAS_BLOCK <= o1; c0 += BIAS_BLOCK) bias_block(db, dout_bf16, dout, N, OC, c0, BIAS_BLOCK);
    if (c0 < o1) bias_block(db, dout_bf16, dout, N, OC, c0, o1 - c0);
}

// Each thread owns a slice of the columns.
void bias_grad(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC) {
    #pragma omp parallel
    {
        int o0, o1;
        thread_slice(OC, &o0, &o1);
        bias_grad_columns(db, dout_bf16, dout, N, OC, o0, o1);
    }
}

void zero_rows(float *x, size_t ld, int rows, int cols) {
    for (int r = 0; r < rows; r++) memset(x + (size_t)r * ld, 0, (size_t)cols * sizeof(float));
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
