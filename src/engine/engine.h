// engine.h: the seam between the model and the code that runs its heavy
// products. The model (reference.c) makes every linear layer's and every
// attention's products through an Engine; everything else (LayerNorm, GELU,
// residuals, embedding, cross-entropy, the positional hooks) is the model's
// own code, the same whatever the engine. Three engines:
//
//   reference  engine_reference.c  plain loops: a naive triple-loop matmul, per-head causal
//                                  attention one query row at a time (fp32)
//   openblas   engine_openblas.c   every product a cblas_sgemm: linear layers one slice per
//                                  thread, attention in blocks of 64 query rows against all
//                                  their keys, or fused: 64 x 64 (query x key) blocks with an
//                                  online softmax (fp32)
//   onednn     engine_onednn.c     the same products on oneDNN matmul primitives, fp32 or bf16
//              onednn_attention.c  (bf16: each product's inputs rounded to bf16, fp32 sums);
//                                  fp32 also fused, on the OpenBLAS engine's loops
//
// gpt_set_matmul (gpt.c) is the one place an engine is chosen, by the
// constructors of engine_create.h. What the engines share below this seam:
// the loops between their products and the float arithmetic of the model's
// layers in kernels.h, the rest in engine_shared.h; what only the tests and
// benchmarks reach (the oneDNN engine's layouts, counters) in
// engine_testing.h.
//
// Weights are passed by pointer: W is a parameter inside the model's flat
// buffer, whose address never moves. An engine may keep copies of a weight
// (oneDNN bf16: rounded and in its own layout), made at first use; after
// the parameters are written it must be told, by weights_changed, and then
// re-makes each copy once, at its next use. The model tells it: every write
// to the parameters goes through gpt_params() (gpt.c), which calls it.
//
// Errors: the operations return nothing. An engine that fails (oneDNN: a
// primitive it cannot create; any engine: memory for its scratch) records
// the first message in err and leaves its outputs unspecified; the model
// reads err once at the end of each pass (engine_failed).
//
// Threads: call from outside any OpenMP parallel region; each engine runs
// on the program's OpenMP pool (omp_get_max_threads() threads). Scratch is
// the engine's own, made at the first call of a longer sequence (or of more
// threads): a pass of the shape of the last allocates nothing.
#ifndef ROPELAB_ENGINE_H
#define ROPELAB_ENGINE_H

#include <stddef.h>

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
    // dout (B,T,C) -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (NULL: skipped); qkv, bias
    // the forward's inputs, out and lse its outputs. Only the fused attention reads out
    // (rowsum(dY * Y), FlashAttention-2's: attention_reads_out, below).
    void (*attention_backward)(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                               const float *out, const float *lse, const float *bias, int B, int T, int C, int H);
    // The parameters were written: weight copies are re-made at their next use. NULL: no copies.
    void (*weights_changed)(Engine *e);
    // Memory the engine holds besides parameters and activations (copies, scratch), in bytes.
    size_t (*bytes)(const Engine *e);
    void (*free)(Engine *e);
    // 1: linear_backward never reads inp (above), so the model need not keep each layer's
    // linear inputs until backward: one layer's buffers serve every layer (gpt.c's
    // gpt_alloc_activations). 0: the model keeps them all.
    int keeps_inputs;
    // 1: attention_backward reads the forward's out (the fused attention), so the model
    // keeps every layer's attention output, even where keeps_inputs lets one layer's
    // buffers serve the other linear inputs. 0: out is not read.
    int attention_reads_out;
    char describe[320];   // one line: the engine, its precision, where its products run
    char err[256];        // the first failure since the model last looked; "" while fine
};

// 0, or -1 with the engine's first failure in err (and the engine cleared for the next pass).
int engine_failed(Engine *e, char *err, size_t errlen);
// Records a failure (the first one wins), with printf-style formatting.
void engine_fail(Engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
