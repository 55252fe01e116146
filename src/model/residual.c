// residual.c: the residual add. Backward is the identity into both inputs:
// the model accumulates each branch's input gradient into one residual
// gradient buffer (layernorm_backward adds with +=), so no pass is needed.
#include "model/layers.h"

void residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
