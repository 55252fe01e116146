// gelu.c: GELU, tanh approximation (as GPT-2):
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3*0.044715 x^2)
// tanh is tanh_fast (fastmath.h): glibc's tanhf is a scalar call, and these
// loops run over (B,T,4C) per layer, so a vectorised tanh makes them
// memory-bound instead of call-bound.
#include "model/fastmath.h"
#include "model/layers.h"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)

void gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanh_fast(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = tanh_fast(GELU_SCALE * (x + 0.044715f * x * x * x));
        float d = 0.5f * (1.0f + th) +
                  0.5f * x * (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = d * dout[i];
    }
}
