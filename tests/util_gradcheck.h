// util_gradcheck.h: the finite-difference helper shared by the layer tests
// and the whole-model gradient check, and the small model helpers the model
// tests share (gc_forward, gc_logits, gc_config_defaults, ...).
//
// A backward pass is checked against central differences of a scalar loss:
//   D(h) = (loss(x + h e_i) - loss(x - h e_i)) / (2 h)
//   numeric_i = (4 D(eps) - D(2 eps)) / 3     (Richardson: error O(eps^4))
// For a layer, loss = sum(out * r) with a fixed random r (so backward is
// run with dout = r). The error of one entry is
//   |analytic - numeric| / max(|analytic|, |numeric|, floor)
// where the floor keeps near-zero gradients from turning float noise into
// huge relative errors.
#ifndef ROPELAB_UTIL_GRADCHECK_H
#define ROPELAB_UTIL_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt.h"

typedef double (*gc_loss_fn)(void *ctx);   // the scalar loss at the current inputs

typedef struct {
    double max_rel;            // worst relative error
    size_t worst_index;
    double worst_analytic, worst_numeric;
    int n_checked;
} GcResult;

// Checks grad (n floats) = d loss / d x on up to n_check entries of x (all
// when n_check <= 0 or >= n; otherwise a seeded random sample). x is
// perturbed in place and restored exactly.
GcResult gc_check(gc_loss_fn loss, void *ctx, float *x, const float *grad, size_t n,
                  int n_check, float eps, double floor, uint64_t seed);

// The same check along one random unit direction u over the whole tensor:
// (loss(x + eps u) - loss(x - eps u)) / (2 eps) against grad . u. Its signal
// is the norm of the whole gradient, so float noise matters far less than
// for single entries and the tolerance can be much tighter.
GcResult gc_check_direction(gc_loss_fn loss, void *ctx, float *x, const float *grad, size_t n,
                            float eps, double floor, uint64_t seed);

double gc_rel_err(double analytic, double numeric, double floor);
double gc_dot(const float *a, const float *b, size_t n);          // sum a*b in double
void gc_fill_normal(float *x, size_t n, double mean, double std, uint64_t seed);
double gc_max_abs_diff(const float *a, const float *b, size_t n);

// Redraws every parameter with O(1)-scale values (matrices N(0, 0.3),
// LayerNorm gains 1 + N(0, 0.2), biases N(0, 0.2), wte/wpe N(0, 0.5),
// rel_bias N(0, 1)) so that every path of the model carries signal: with
// the 0.02 init, attention is near uniform and many gradients are ~0.
void gc_randomize_params(GPT *model, uint64_t seed);

// gpt_forward / gpt_backward for tests: abort the test with the model's
// message on failure; gc_forward returns the loss (0 without targets).
float gc_forward(GPT *model, const int *inputs, const int *targets, int B, int T);
void gc_backward(GPT *model, float loss_scale);
// The logits (B,T,V) of the last forward (dlogits after gpt_backward).
const float *gc_logits(const GPT *model);
// The schemes' own keys (rope_base ... sinusoidal_scale, rope scaling) at
// their defaults from the key table (gpt_model_keys, as ./train reads them),
// resolved against the sizes already set; the sizes, pos and vocab_size are
// left as given.
void gc_config_defaults(GPTConfig *cfg);

#endif
