// util_engine.h: what the engine tests share: the engines by name, and the
// rounding model their tolerances are derived from. The one oracle is the
// reference engine (src/engine/engine_reference.c); a fast engine's result y_e and
// the reference's y_r are both float computations of the same exact value
// y, in different orders, so
//   |y_e - y_r| <= |y_e - y| + |y_r - y| <= beta_e + beta_r,
// beta the first-order bound of one float evaluation, computed per element
// from magnitudes that the reference engine itself gives (its products on
// the inputs' absolute values).
//
// u = 2^-24 (fp32's unit roundoff), u_b = 2^-8 (bf16's);
// g(n) = n u / (1 - n u) bounds a sum of n products in any order (Higham,
// Accuracy and Stability, 3.1).
#ifndef ROPELAB_UTIL_ENGINE_H
#define ROPELAB_UTIL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/engine_testing.h"

#define U32 (1.0 / 16777216.0)   // 2^-24
#define U16 (1.0 / 256.0)        // 2^-8
#define EXP_ERR 3e-7             // exp_fast's and expf's relative error (test_model_kernels asserts exp_fast's)

double ue_gamma(double n);

// The engines under test, by configuration.
typedef struct {
    const char *name;
    int onednn, bf16;            // onednn 0: OpenBLAS
    WeightLayout layout;         // oneDNN only
    int copies;                  // weight copies made per weight (0: read in place)
    int fused;                   // 1: the fused attention (key blocks, online softmax)
} EngineCfg;
extern const EngineCfg ue_engines[];   // the linear layers' configurations: OpenBLAS, then oneDNN's
extern const int ue_n_engines;
extern const EngineCfg ue_fused[];     // the fused attention's: OpenBLAS, oneDNN fp32 and bf16 (their linear
extern const int ue_n_fused;           // layers: ue_engines[0]'s, [1]'s, [3]'s)
// A new engine for cfg, or NULL when cfg is bf16 and this CPU has no bf16
// products (oneDNN must then refuse it with a message, which is printed).
Engine *ue_engine(const EngineCfg *cfg);
Engine *ue_reference(void);
int ue_bf16_available(void);
// Skips the calling test, saying why, on a CPU without bf16 matmuls (no
// AVX-512: the programs refuse precision = bf16 there, which
// test_train_bf16's test_bf16_refused_without_cpu_support checks). The
// skip is counted and named in make test's summary line.
void ue_skip_without_bf16(void);
// Fails the test with the engine's message if it recorded a failure.
void ue_check(Engine *e, const char *what);

// x rounded to bf16 (8 significant bits, to nearest, ties to even),
// computed independently of the engines' bit arithmetic (frexp, rint).
float ue_bf16(float x);
float *ue_bf16_copy(const float *x, size_t n);
float *ue_abs_copy(const float *x, size_t n);
float *ue_randn(size_t n, double std, uint64_t seed);
float *ue_nans(size_t n);
float *ue_copy(const float *x, size_t n);

// Counts elements of x outside ref +- bound (NaN is outside); worst |x - ref| / bound.
typedef struct { long bad, n; double worst; } UeTally;
void ue_tally(UeTally *t, const float *x, const float *ref, const double *bound, size_t n);

// The bounds of one attention forward and backward (engine.h's shapes) of a
// float evaluation against the exact values, per element, first order (the
// derivation is in util_engine.c). bf16 = 1: add the bf16 rounding of P and
// dS where they enter the products (the oneDNN bf16 engine's, on inputs
// already rounded to bf16); 2: also the rounding of q, k, v (forward only).
// fused = 1: of the fused attention's evaluation (online softmax over key
// blocks, rowsum(dY * Y) in backward; OpenBLAS, oneDNN fp32 or, with bf16 = 1,
// bf16). Magnitudes come from the reference engine `ref`.
typedef struct { double *out, *lse, *dqkv, *dbias; } AttBounds;
void ue_attention_bounds(AttBounds *bnd, Engine *ref, const float *qkv, const float *dout, const float *bias,
                         int B, int T, int C, int H, int bf16, int fused);
void ue_attention_bounds_free(AttBounds *bnd);

#endif
