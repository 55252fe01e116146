// encoder.c: the token embedding lookup and its backward (scatter-add).
#include <string.h>

#include "model/layers.h"

// inp (N) token ids, wte (V,C) -> out (N,C)
void encoder_forward(float *out, const int *inp, const float *wte, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)inp[n] * C, (size_t)C * sizeof(float));
}

// dwte[inp[n], c] += dout[n, c]. Two positions with the same token write the
// same row, so the loop is split over channel blocks instead of positions:
// each thread owns its columns and adds positions in order 0..N-1.
void encoder_backward(float *dwte, const float *dout, const int *inp, int N, int C) {
    enum { BLOCK = 32 };
    int n_blocks = (C + BLOCK - 1) / BLOCK;
    #pragma omp parallel for
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        for (int n = 0; n < N; n++) {
            float *drow = dwte + (size_t)inp[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) drow[c] += g[c];
        }
    }
}
