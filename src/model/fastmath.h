// fastmath.h: exp and tanh written so the compiler can vectorise them.
//
// Why: glibc's expf/tanhf are scalar calls (its vector versions, libmvec,
// are only used under -ffast-math), so a loop calling them runs one element
// at a time. The softmaxes (attention, cross-entropy) and GELU call them on
// every element of large tensors: tens of millions of calls per step. These
// versions are plain arithmetic on floats and their bits, with no calls, so
// `-O3 -march=native` turns a loop over them into AVX code. Their clamps are
// comparisons, which a compiler that must keep floating-point traps (GCC's
// default -ftrapping-math) leaves as branches, and a loop with branches does
// not vectorise: hence the Makefile's -fno-trapping-math.
//
// exp_fast(x): x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2 (the
// Cody-Waite split of ln2 keeps r exact), exp(r) by the degree-6 minimax
// polynomial of Cephes' expf, and 2^n put straight into the exponent bits.
// Relative error <= 2e-7 (about 2 ulp) for x in [-87, 88]; x is clamped to
// that range (exp(-87) ~ 1.6e-38, exp(88) ~ 1.7e38). NaN in gives NaN out.
#ifndef ROPELAB_FASTMATH_H
#define ROPELAB_FASTMATH_H

#include <stdint.h>
#include <string.h>

static inline float exp_fast(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    // n = round(x log2(e)) by the 1.5 * 2^23 trick: the sum's low mantissa
    // bits hold n as an integer (no float->int conversion of a possible NaN).
    const float shifter = 12582912.0f;
    float t = x * 1.44269504088896341f + shifter;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    float n = t - shifter;
    float r = x - n * 0.693359375f;          // ln2 = 0.693359375 - 2.12194440e-4 (hi part exact)
    r = r + n * 2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    uint32_t eb = (tb - 0x4B400000u + 127u) << 23;   // (n + 127) << 23 = the float 2^n
    float scale;
    memcpy(&scale, &eb, sizeof scale);
    return p * scale;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): exact limits +-1 for large |u|, absolute
// error about 2e-7 (relative error grows only where tanh(u) ~ u is tiny,
// which GELU multiplies by x and adds to 1).
static inline float tanh_fast(float u) {
    return 1.0f - 2.0f / (exp_fast(2.0f * u) + 1.0f);
}

#endif
