// crossentropy.c: fused softmax + cross-entropy over the logits.
//   loss_n = lse_n - logits[n, target_n],  lse_n = log sum_v exp(logits[n,v])
//   d loss_n / d logits[n,v] = softmax(logits[n])_v - [v == target_n]
// Forward keeps lse (N); backward rebuilds the softmax from it in place, so
// no separate probability tensor is stored.
#include <math.h>

#include "model/layers.h"

double crossentropy_forward(float *losses, float *lse, const float *logits,
                            const int *targets, int N, int V) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += expf(z[v] - mx);
        lse[n] = mx + (float)log(sum);
        losses[n] = lse[n] - z[targets[n]];
    }
    double total = 0.0;   // in a fixed order, in double
    for (int n = 0; n < N; n++) total += losses[n];
    return total / N;
}

void crossentropy_backward(float *logits, const float *lse, const int *targets,
                           int N, int V, float scale) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
        for (int v = 0; v < V; v++) z[v] = scale * expf(z[v] - lse[n]);
        z[targets[n]] -= scale;
    }
}
