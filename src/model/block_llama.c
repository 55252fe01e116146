// block_llama.c: the two layers by which block=llama (the LLaMA family's
// block) differs from GPT-2's, each a forward/backward pair as reference.c's
// layers (declared in layers.h): RMSNorm in place of LayerNorm, SwiGLU in
// place of GELU. reference.c's block_norm_* and block_act_* choose between
// the two blocks' layers.
#include <math.h>

#include "engine/kernels.h"
#include "model/layers.h"

/* ---- RMSNorm, over the channel dim (block=llama; eps RMS_EPS) ----
 *
 * Forward: xhat = x * rstd, rstd = 1/sqrt(mean(x^2) + eps), y = w*xhat.
 * Backward (per row, g = dy * w): LayerNorm's without the mean terms,
 *   dx = rstd * (g - xhat * mean(g * xhat)),   dw += dy * xhat. */

// inp (N,C) -> out (N,C), rstd (N)
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float ms;
        LANE_SUM(ms, c, C, x[c] * x[c]);
        float s = 1.0f / sqrtf(ms / C + RMS_EPS);
        for (int c = 0; c < C; c++) y[c] = x[c] * s * weight[c];
        rstd[n] = s;
    }
}

// dinp += ..., dweight += ...
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float s = rstd[n], gx_mean;
        LANE_SUM(gx_mean, c, C, dy[c] * weight[c] * x[c] * s);
        gx_mean /= C;
        for (int c = 0; c < C; c++) dx[c] += s * (dy[c] * weight[c] - x[c] * s * gx_mean);
    }
    enum { BLOCK = 32 };   // the weight gradient: channel blocks, as layernorm_backward
    int n_blocks = (C + BLOCK - 1) / BLOCK;
    #pragma omp parallel for
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        float dw[BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) dw[c - c0] += dy[c] * x[c] * rstd[n];
        }
        for (int c = c0; c < c1; c++) dweight[c] += dw[c - c0];
    }
}

/* ---- SwiGLU (block=llama) ----
 * c_fc's output row holds [a | u]: the gate a (F) and the up projection u (F).
 *   out_j  = silu(a_j) u_j,   silu(a) = a sigma(a),  sigma(a) = 1 / (1 + exp(-a))
 *   da_j   = dout_j u_j silu'(a_j),   silu'(a) = sigma(a) (1 + a (1 - sigma(a)))
 *   du_j   = dout_j silu(a_j) */

// inp (N,2F) -> out (N,F)
void swiglu_forward(float *out, const float *inp, int N, int F) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *a = inp + (size_t)n * 2 * F, *u = a + F;
        float *y = out + (size_t)n * F;
        #pragma omp simd
        for (int j = 0; j < F; j++) y[j] = a[j] / (1.0f + exp_fast(-a[j])) * u[j];
    }
}

// dout (N,F) -> dinp (N,2F) (overwritten)
void swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *a = inp + (size_t)n * 2 * F, *u = a + F, *dy = dout + (size_t)n * F;
        float *da = dinp + (size_t)n * 2 * F, *du = da + F;
        #pragma omp simd
        for (int j = 0; j < F; j++) {
            float sig = 1.0f / (1.0f + exp_fast(-a[j])), silu = a[j] * sig;
            da[j] = dy[j] * u[j] * sig * (1.0f + a[j] * (1.0f - sig));
            du[j] = dy[j] * silu;
        }
    }
}
