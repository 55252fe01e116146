// linear.h: a matmul engine for the linear layers (PyTorch nn.Linear: weight
// W (OC,C), out = inp W^T + b), with two backends:
//
//   MATMUL_OPENBLAS  fp32 only: matmul.c (cblas_sgemm, one slice per thread),
//                    so its results are exactly matmul_forward/_backward's.
//   MATMUL_ONEDNN    oneDNN's matmul primitive, fp32 or bf16. bf16: inputs
//                    rounded to bf16, products accumulated in fp32, fp32
//                    outputs; the fp32 master weights stay the truth.
//
// The model registers each weight matrix once (its address inside the flat
// parameter buffer never moves) and then calls forward/backward by id:
//
//   forward:  out (N,OC)  = inp (N,C) . W^T (C,OC) + b
//   backward: dinp (N,C)  = dout (N,OC) . W (OC,C)          (overwritten)
//             dW (OC,C)  += dout^T (OC,N) . inp (N,C)       (accumulated)
//             db (OC)    += sum_n dout[n,:]                 (accumulated)
//
// Weight copies. oneDNN reads W from a copy in its own blocked layout (bf16:
// always; fp32: only with WEIGHTS_PACKED). Forward needs W^T as its B operand
// and dinp needs W, so a weight has up to two copies. A copy is made from the
// fp32 master at its first use and re-made at its next use after
// linear_engine_weights_changed() (call it after every optimizer step):
// never per call. Between an update of the master and that call, the copies,
// and therefore the results, are stale.
//
// Errors: functions return 0 (ids: >= 0) or -1. Creation and registration
// write a one-line message into err; forward/backward (which the model calls
// where it has no err buffer) keep it for linear_engine_error().
//
// Threads: call from outside any OpenMP parallel region. Every backend runs
// on the program's OpenMP pool (omp_set_num_threads); oneDNN primitives are
// cached per thread count, see linear.c.
#ifndef ROPELAB_LINEAR_H
#define ROPELAB_LINEAR_H

#include <stddef.h>

typedef enum { MATMUL_OPENBLAS, MATMUL_ONEDNN } MatmulBackend;
typedef enum { PRECISION_FP32, PRECISION_BF16 } Precision;

// Where oneDNN reads the weights from (ignored by OpenBLAS):
//   WEIGHTS_DEFAULT  fp32: PLAIN; bf16: PACKED
//   WEIGHTS_PACKED   two copies per weight (W^T for forward, W for dinp) in the
//                    blocked layout oneDNN chooses (memory format `any`)
//   WEIGHTS_PLAIN    fp32: the master itself, no copy (oneDNN packs blocks of
//                    it inside each call); bf16: one row-major bf16 copy of W,
//                    read as W^T by forward (oneDNN packs inside each call)
typedef enum { WEIGHTS_DEFAULT, WEIGHTS_PACKED, WEIGHTS_PLAIN } WeightLayout;

typedef struct LinearEngine LinearEngine;

// OPENBLAS: FP32 only. ONEDNN: FP32, or BF16 on an AVX-512 core (native bf16
// dot products with ISA avx512_core_bf16 or avx512_core_amx; emulated, as
// slow as fp32 or slower, on plain avx512_core); otherwise -1.
int linear_engine_create(LinearEngine **e, MatmulBackend backend, Precision precision,
                         char *err, size_t errlen);
void linear_engine_free(LinearEngine *e);

// Chooses the weights' layout (before the first linear_engine_add_weight).
int linear_engine_set_weight_layout(LinearEngine *e, WeightLayout layout, char *err, size_t errlen);

// Registers W (OC,C), row-major, at a fixed address. Returns its id >= 0.
int linear_engine_add_weight(LinearEngine *e, const float *W, int OC, int C, char *err, size_t errlen);

// The master (fp32) weights changed: every copy is re-made once, at its next use.
void linear_engine_weights_changed(LinearEngine *e);

// Brings every copy of weight wid up to date now (creates, or re-makes stale
// ones). Optional: forward/backward do it on use. For benchmarks, and for
// moving the cost out of the first forward after an update.
int linear_engine_prepack(LinearEngine *e, int wid);

// out (N,OC) = inp (N,C) W^T + bias (bias NULL: none)
int linear_forward(LinearEngine *e, int wid, float *out, const float *inp, const float *bias, int N);

// dinp (N,C) = dout W (overwritten; NULL skips), dW (OC,C) += dout^T inp
// (NULL skips), dbias (OC) += sum_n dout (NULL skips)
int linear_backward(LinearEngine *e, int wid, float *dinp, float *dweight, float *dbias,
                    const float *dout, const float *inp, int N);

// The message of the last failed call.
const char *linear_engine_error(const LinearEngine *e);

// One line: backend, precision, the ISA oneDNN dispatches to, weight layout.
const char *linear_engine_describe(const LinearEngine *e);

typedef struct {
    long repacks;              // weight copies made from the master so far
    int primitives;            // oneDNN matmul primitives created (one per op, shape, thread count)
    size_t weight_copy_bytes;  // memory held by weight copies
    size_t scratch_bytes;      // activations in bf16 + oneDNN's scratchpad
} LinearEngineStats;
void linear_engine_stats(const LinearEngine *e, LinearEngineStats *stats);

const char *matmul_backend_name(MatmulBackend backend);   // "openblas", "onednn"
const char *precision_name(Precision precision);          // "fp32", "bf16"

#endif
