// engine_create.h: the engines' constructors, and what each will hold for a
// model's shapes, for the one place that chooses an engine (gpt_set_matmul,
// gpt.c), the memory check before a run, and the tests and benchmarks. The
// seam the model runs its products through is engine.h.
#ifndef ROPELAB_ENGINE_CREATE_H
#define ROPELAB_ENGINE_CREATE_H

#include "engine/engine.h"

// The engines. reference and openblas cannot fail but for memory.
int engine_reference_create(Engine **e, char *err, size_t errlen);
// fused_attention 0: the blocked attention (blocks of query rows against all their keys, the
// whole softmax row at once); 1: the fused one (blocks of keys too, an online softmax), whose
// scratch does not grow with T. engine_openblas.c has both.
int engine_openblas_create(Engine **e, int fused_attention, char *err, size_t errlen);
// oneDNN, fp32 or bf16 (bf16 needs an AVX-512 core: native bf16 dot products with ISA
// avx512_core_bf16 or amx, emulated on plain avx512_core; otherwise -1 with the reason);
// fused_attention as OpenBLAS's, in fp32 or bf16.
int engine_onednn_create(Engine **e, int bf16, int fused_attention, char *err, size_t errlen);
// 1 if oneDNN runs its AVX-512 kernels on this CPU (its effective ISA, which DNNL_MAX_CPU_ISA
// may lower, is avx512_core or above): where its fp32 products beat OpenBLAS's, so the one
// question options_engine asks of matmul = auto (src/train/options.c).
int engine_onednn_has_avx512(void);

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
    int head_rows;      // the rows of each product of the tied head (B*T, or a chunk of them)
    int backward;
} EngineShapes;
size_t engine_reference_bytes_for(const EngineShapes *s, int n_threads);
size_t engine_openblas_bytes_for(const EngineShapes *s, int fused_attention, int n_threads);
size_t engine_onednn_bytes_for(const EngineShapes *s, int bf16, int fused_attention, int n_threads);

#endif
