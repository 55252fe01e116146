// adamw.h: the AdamW optimizer (Loshchilov & Hutter), gradient norm and clipping.
//
// Per parameter p with gradient g, at update t = 1, 2, ... (PyTorch's AdamW):
//   p <- p - lr * weight_decay * p            (only tensors marked weight_decay)
//   m <- beta1 m + (1 - beta1) g
//   v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// The decay is decoupled: it shrinks the weight directly instead of being
// added to g, so it is not rescaled by the adaptive denominator.
// m and v have the layout of the flat parameter buffer.
#ifndef ROPELAB_TRAIN_ADAMW_H
#define ROPELAB_TRAIN_ADAMW_H

#include <stddef.h>

#include "model/gpt.h"

typedef struct {
    float beta1, beta2, eps, weight_decay;
} AdamWConfig;

typedef struct {
    AdamWConfig cfg;
    size_t n;
    float *m, *v;
} AdamW;

// Allocates zeroed moments for n parameters; refuses (mem_check, with the
// figure in err) moments larger than the memory this machine has available.
int adamw_init(AdamW *opt, const AdamWConfig *cfg, size_t n, char *err, size_t errlen);
size_t adamw_bytes(size_t n);   // what adamw_init(n) allocates
void adamw_free(AdamW *opt);

// One update of n consecutive parameters at step t (1-based), decaying them if decay.
void adamw_update(const AdamWConfig *cfg, float *param, const float *grad, float *m, float *v,
                  size_t n, float lr, int t, int decay);

// One update of every tensor listed in entries (decay as entry.weight_decay says).
void adamw_step(AdamW *opt, float *params, const float *grads, const ParamEntry *entries,
                int n_entries, float lr, int t);

// L2 norm of n gradients, summed in double in fixed-size chunks so the result
// does not depend on the number of threads.
double grad_global_norm(const float *grads, size_t n);

// If max_norm > 0 and norm > max_norm, scales the gradients by max_norm / norm.
// Returns the scale applied (1 when nothing was done).
float grad_clip(float *grads, size_t n, double norm, float max_norm);

#endif
