// bf16.h: rounding fp32 to bf16, shared by the oneDNN engine (its inputs'
// copies) and the loops every engine shares (engine.c: the bias gradient
// that rounds the output gradient in the same pass).
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

#endif
