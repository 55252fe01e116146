// engine_shared.h: what the engines' files share below the seam (engine.h),
// besides the loops of engine/kernels.h: the buffers every engine grows,
// the reference engine's one-row attention (which decoding runs too), and
// the OpenBLAS engine's view of one (batch, head) attention task. Internal
// to the engines (src/engine/) but for attention_row; the model sees
// engine.h.
#ifndef ROPELAB_ENGINE_SHARED_H
#define ROPELAB_ENGINE_SHARED_H

#include <stddef.h>
#include <stdint.h>

// A buffer of at least `bytes`, 64-byte aligned, replacing *buf (contents lost) if smaller. 0 or -1.
int grow_buffer(void **buf, size_t *have, size_t bytes);
// What grow_buffer allocates for `bytes`: rounded up to a multiple of 64.
size_t grow_buffer_bytes(size_t bytes);

// engine_reference.c: one query row's attention, the reference engine's and
// decoding's (kvcache.c). Query q (D) at position i over keys and values
// 0..i (rows ld floats apart), distance bias bias_h[i-j] (NULL: none):
// p (i+1) gets the probabilities, y (D) the output; returns the row's lse.
float attention_row(float *y, float *p, const float *q, const float *k, const float *v, size_t ld,
                    const float *bias_h, int i, int D, float scale);

// The OpenBLAS engine's attention (engine_openblas.c, attention_fused.c):
// one (batch b, head h) pair's view of attention's tensors: its head's
// columns of the packed (B,T,3C) qkv (q there, k at +C, v at +2C, row stride
// 3C), its row of the distance bias, where its rows start in a (B,T,C) tensor
// and in the (B,H,T) lse, and this thread's scratch.
typedef struct {
    int D, nb;                // head dimension, query rows (and, fused, keys) per block
    size_t C3;                // qkv's row stride
    float scale;              // 1/sqrt(D)
    const float *q, *k, *v;   // (T, D) each, row stride C3
    const float *bias_h;      // (T) or NULL
    size_t qkv_off;           // head h of batch b in qkv (and dqkv)
    size_t out_off;           // head h of batch b in a (B,T,C) tensor
    size_t lse_off;           // (b, h) in a (B,H,T) tensor
    float *scratch;           // this thread's scratch (engine_openblas.c's thread_scratch_floats)
} AttHead;
// The fused attention of one (batch, head) pair on OpenBLAS (attention_fused.c):
// q, k, v, bias row -> its columns of out (T, D of C), its lse (T); and the
// backward: dout's columns -> its columns of dqkv (overwritten), its dbias row
// (T) += (if non-NULL), reading the forward's out.
void attention_fused_head_forward(const AttHead *a, float *out, float *lse, int T, int C);
void attention_fused_head_backward(const AttHead *a, float *dqkv, float *dbias, const float *dout, const float *out,
                                   const float *lse, int T, int C);

#endif
