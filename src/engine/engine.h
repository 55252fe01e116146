// engine.h: the seam between the model and the code that runs its heavy
// products. The model (reference.c) makes every linear layer's and every
// attention's products through an Engine; everything else (LayerNorm, GELU,
// residuals, embedding, cross-entropy, the positional hooks) is the model's
// own code, the same whatever the engine. Three engines:
//
//   reference  reference.c         plain loops: a naive triple-loop matmul, per-head causal
//                                  attention one query row at a time (fp32)
//   openblas   engine_openblas.c   every product a cblas_sgemm: linear layers one slice per
//                                  thread, attention in blocks of 64 query rows (fp32)
//   onednn     engine_onednn.c     the same products on oneDNN matmul primitives, fp32 or bf16
//              onednn_attention.c  (bf16: each product's inputs rounded to bf16, fp32 sums)
//
// gpt_set_matmul (gpt.c) is the one place an engine is chosen.
//
// Weights are passed by pointer: W is a parameter inside the model's flat
// buffer, whose address never moves. An engine may keep copies of a weight
// (oneDNN bf16: rounded and in its own layout), made at first use; after
// the parameters are written it must be told, by weights_changed, and then
// re-makes each copy once, at its next use. The model tells it: every write
// to the parameters goes through gpt_params() (gpt.c), which calls it.
//
// Errors: the operations return nothing. An engine that fails (oneDNN: a
// primitive it cannot create, memory) records the first message in err and
// leaves its outputs unspecified; the model reads err once at the end of
// each pass (engine_failed). The reference and openblas engines never fail.
//
// Threads: call from outside any OpenMP parallel region; each engine runs
// on the program's OpenMP pool (omp_get_max_threads() threads). Scratch is
// the engine's own, sized at the first call of a longer sequence.
#ifndef ROPELAB_ENGINE_H
#define ROPELAB_ENGINE_H

#include <stddef.h>
#include <stdint.h>

typedef struct Engine Engine;
struct Engine {
    // out (N,OC) = inp (N,C) W^T + b;  W (OC,C), b (OC) or NULL
    void (*linear_forward)(Engine *e, float *out, const float *inp, const float *W, const float *b,
                           int N, int C, int OC);
    // dinp (N,C) = dout W (overwritten), dW (OC,C) += dout^T inp, db (OC) += sum_n dout;
    // dout (N,OC). A NULL dinp, dW or db is skipped. inp and N are those of the last
    // linear_forward of W. keeps_inputs 0: inp must still hold what it held then.
    // keeps_inputs 1: dW reads what that forward made of inp, which the engine keeps per
    // W (oneDNN bf16: inp rounded to bf16); inp is not read and may have been overwritten.
    void (*linear_backward)(Engine *e, float *dinp, float *dW, float *db, const float *dout,
                            const float *inp, const float *W, int N, int C, int OC);
    // Causal multi-head attention, D = C/H, scale = 1/sqrt(D):
    // qkv (B,T,3C) (q, k, v; head h at columns h*D..h*D+D-1 of each), bias (H,T) or NULL
    // (bias[h*T + n] is added to the score of query i and key j = i - n)
    // -> out (B,T,C) heads concatenated, lse (B,H,T) each softmax row's log-sum-exp
    void (*attention_forward)(Engine *e, float *out, float *lse, const float *qkv, const float *bias,
                              int B, int T, int C, int H);
    // dout (B,T,C) -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (NULL: skipped)
    void (*attention_backward)(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                               const float *lse, const float *bias, int B, int T, int C, int H);
    // The parameters were written: weight copies are re-made at their next use. NULL: no copies.
    void (*weights_changed)(Engine *e);
    // Memory the engine holds besides parameters and activations (copies, scratch), in bytes.
    size_t (*bytes)(const Engine *e);
    void (*free)(Engine *e);
    // 1: linear_backward never reads inp (above), so the model need not keep each layer's
    // linear inputs until backward: one layer's buffers serve every layer (gpt.c's
    // gpt_alloc_activations). 0: the model keeps them all.
    int keeps_inputs;
    char describe[320];   // one line: the engine, its precision, where its products run
    char err[256];        // the first failure since the model last looked; "" while fine
};

// 0, or -1 with the engine's first failure in err (and the engine cleared for the next pass).
int engine_failed(Engine *e, char *err, size_t errlen);
// Records a failure (the first one wins), with printf-style formatting.
void engine_fail(Engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The engines. reference and openblas cannot fail but for memory.
int engine_reference_create(Engine **e, char *err, size_t errlen);
int engine_openblas_create(Engine **e, char *err, size_t errlen);
// oneDNN, fp32 or bf16 (bf16 needs an AVX-512 core: native bf16 dot products with ISA
// avx512_core_bf16 or amx, emulated on plain avx512_core; otherwise -1 with the reason).
// layout: where the weights are read from (WEIGHTS_DEFAULT: fp32 PLAIN, bf16 PACKED):
//   WEIGHTS_PACKED  two copies per weight (W^T for forward, W for dinp) in the blocked
//                   layout oneDNN chooses (memory format `any`)
//   WEIGHTS_PLAIN   fp32: the parameter itself, no copy (oneDNN packs blocks of it inside
//                   each call); bf16: one row-major bf16 copy of W, read as W^T by forward
typedef enum { WEIGHTS_DEFAULT, WEIGHTS_PACKED, WEIGHTS_PLAIN } WeightLayout;
int engine_onednn_create(Engine **e, int bf16, WeightLayout layout, char *err, size_t errlen);

// What an engine will hold (Engine.bytes) for a model's products, from their
// shapes, before it runs: its scratch and buffers, by the formulas its own
// allocations use. backward 0: forward passes only (./eval); B = 0: no
// batch pass, only rows decoded one at a time (./sample's KV cache). What
// oneDNN decides itself (its primitives, their scratchpads, the padding of
// its blocked weight layouts) is not known beforehand and not counted.
typedef struct {
    int B, T;           // the batch
    int C, H, L, V;     // width, heads, layers, vocabulary
    int F, FC;          // the MLP's hidden width and c_fc's outputs
    int backward;
} EngineShapes;
size_t engine_reference_bytes_for(const EngineShapes *s, int n_threads);
size_t engine_openblas_bytes_for(const EngineShapes *s, int n_threads);
size_t engine_onednn_bytes_for(const EngineShapes *s, int bf16, int n_threads);

// For the oneDNN engine's tests and benchmarks.
typedef struct {
    long repacks;              // weight copies made from the parameters so far
    int primitives;            // linear matmul primitives created (one per op, shape, thread count)
    size_t weight_copy_bytes;  // memory held by weight copies
    size_t scratch_bytes;      // activations in bf16 + oneDNN's scratchpad (linear layers)
} OnednnStats;
void engine_onednn_stats(const Engine *e, OnednnStats *stats);
// Brings both copies of weight W (OC,C) up to date now (forward and backward do it on use).
int engine_onednn_prepack(Engine *e, const float *W, int OC, int C);
// on = 0: attention's products on OpenBLAS (engine_openblas.c) instead of oneDNN, to
// measure the two inside whole steps; 1: back on oneDNN.
void engine_onednn_attention_on_onednn(Engine *e, int on);

// Shared by the OpenBLAS and oneDNN engines (engine.c).
// Thread t's share [*lo, *hi) of n rows inside a parallel region, in multiples of 16 rows.
void thread_slice(int n, int *lo, int *hi);
// db[o0:o1] += sum_n dout[n, o0:o1], rows added in order n = 0..N-1 (the same
// bits whatever the thread count); dout_bf16 (N,OC) not NULL: its columns o0..o1
// are also set to dout rounded to bf16 (bf16.h), in the same pass over dout.
// Called inside a parallel region with the thread's thread_slice(OC) share.
void bias_grad_columns(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC, int o0, int o1);
// The same for every column, on the pool: db (OC) += sum_n dout[n,:] (and dout_bf16 = dout rounded).
void bias_grad(float *db, uint16_t *dout_bf16, const float *dout, int N, int OC);
// A buffer of at least `bytes`, 64-byte aligned, replacing *buf (contents lost) if smaller. 0 or -1.
int grow_buffer(void **buf, size_t *have, size_t bytes);
// What grow_buffer allocates for `bytes`: rounded up to a multiple of 64.
size_t grow_buffer_bytes(size_t bytes);

// The OpenBLAS engine's blocked attention, which the oneDNN engine runs too (engine_openblas.c).
// Blocked attention: per (batch, head) and block of query rows i0..i0+rows-1 against
// keys 0..keys-1 (keys = i0 + rows), between the block's products:
int attention_block_rows(int T);   // query rows per block for sequences of length T
// Floats of one thread's scratch: a block of probabilities and one of their gradients, 2 x rows x T.
size_t attention_scratch_floats(int T);
// s (rows, keys) holds scale Q_I K_J^T: adds bias_h[i-j] (if set), makes P = exp(s - lse)
// in place, zero above the diagonal; lse_out set: computes and stores each row's lse
// (forward), else reads lse_in (backward).
void attention_block_probs(float *s, int i0, int rows, int keys, const float *bias_h, const float *lse_in,
                           float *lse_out);
// dp (rows, keys) holds dY_I V_J^T: dS = P * (dP - rowsum(P * dP)) in place, masked;
// dbias_bh[i-j] += dS_ij if set.
void attention_block_dscores(float *dp, const float *p, int i0, int rows, int keys, float *dbias_bh);
// The OpenBLAS engine's attention, for the oneDNN engine with attention_on_onednn off;
// scratch: omp_get_max_threads() x 2 attention_block_rows(T) T floats.
void openblas_attention_forward(float *out, float *lse, const float *qkv, const float *bias, float *scratch,
                                int B, int T, int C, int H);
void openblas_attention_backward(float *dqkv, float *dbias, const float *dout, const float *qkv,
                                 const float *lse, const float *bias, float *scratch, int B, int T, int C, int H);

#endif
