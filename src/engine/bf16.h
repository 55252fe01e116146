// bf16.h: rounding fp32 to bf16, for the oneDNN bf16 engine: its copies of
// the products' inputs (engine_onednn.c, onednn_attention.c) and the bias
// gradient that rounds the output gradient in the same pass (engine.c).
#ifndef ROPELAB_BF16_H
#define ROPELAB_BF16_H

#include <stdint.h>
#include <string.h>

// fp32 -> bf16 (the top 16 bits), rounded to nearest, ties to even: add
// 0x7FFF plus the lowest kept bit, then truncate. A NaN stays a quiet NaN
// (adding could carry it into infinity).
static inline uint16_t bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

// x (n) -> y (n), on the calling thread (a row or a block that is in cache).
static inline void bf16_round_n(uint16_t *y, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bf16_round(x[i]);
}

#endif
