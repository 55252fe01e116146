// layernorm.c: LayerNorm over the channel dim (eps 1e-5, biased variance).
//
// Forward: xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps), y = w*xhat + b.
// Backward (per row, g = dy * w):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw += dy * xhat,  db += dy   (summed over rows)
// Only mean and rstd are saved; xhat is recomputed from the input.
// The row sums are `omp simd` reductions: without them the compiler may not
// reorder a float sum, so it would add one element at a time.
#include <math.h>

#include "model/layers.h"

#define LN_EPS 1e-5f

// inp (N,C) -> out (N,C), mean (N), rstd (N)
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float m = 0.0f;
        #pragma omp simd reduction(+ : m)
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float v = 0.0f;
        #pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
        v /= C;
        float s = 1.0f / sqrtf(v + LN_EPS);
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

// dinp += ..., dweight += ..., dbias += ...
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    // 1. input gradient: rows are independent.
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float g_mean = 0.0f, gx_mean = 0.0f;
        #pragma omp simd reduction(+ : g_mean, gx_mean)
        for (int c = 0; c < C; c++) {
            float g = dy[c] * weight[c];
            g_mean += g;
            gx_mean += g * (x[c] - m) * s;
        }
        g_mean /= C;
        gx_mean /= C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            dx[c] += s * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
        }
    }
    // 2. weight and bias gradients: a sum over rows, split over channel
    //    blocks so every thread owns its outputs (no races, fixed order).
    enum { BLOCK = 32 };
    int n_blocks = (C + BLOCK - 1) / BLOCK;
    #pragma omp parallel for
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        float dw[BLOCK] = {0}, db[BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            for (int c = c0; c < c1; c++) {
                dw[c - c0] += dy[c] * (x[c] - m) * s;
                db[c - c0] += dy[c];
            }
        }
        for (int c = c0; c < c1; c++) { dweight[c] += dw[c - c0]; dbias[c] += db[c - c0]; }
    }
}
