// crossentropy.c: fused softmax + cross-entropy over the logits.
//   loss_n = lse_n - logits[n, target_n],  lse_n = log sum_v exp(logits[n,v])
//   d loss_n / d logits[n,v] = softmax(logits[n])_v - [v == target_n]
// Forward keeps lse (N); backward rebuilds the softmax from it in place, so
// no separate probability tensor is stored.
//
// Speed: each pass touches every logit once (N x V floats: 32 MB at B*T =
// 4096, V = 2048). The exponentials use exp_fast (fastmath.h) and the row
// max / sum are `omp simd` reductions, so the passes run in AVX lanes
// instead of one scalar expf call per logit. The row sum is float in 8 or 16
// lanes (a short sum of positive terms of at most V / 16 each, then the
// lanes): its rounding error is far below the float rounding of lse itself.
#include <math.h>

#include "model/fastmath.h"
#include "model/layers.h"

double crossentropy_forward(float *losses, float *lse, const float *logits,
                            const int *targets, int N, int V) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float mx = z[0];
        #pragma omp simd reduction(max : mx)
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++) sum += exp_fast(z[v] - mx);
        lse[n] = mx + logf(sum);
        losses[n] = lse[n] - z[targets[n]];
    }
    double total = 0.0;   // in a fixed order, in double
    for (int n = 0; n < N; n++) total += losses[n];
    return total / N;
}

void crossentropy_backward(float *logits, const float *lse, const int *targets,
                           int N, int V, float scale) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
        float row_lse = lse[n];
        #pragma omp simd
        for (int v = 0; v < V; v++) z[v] = scale * exp_fast(z[v] - row_lse);
        z[targets[n]] -= scale;
    }
}
