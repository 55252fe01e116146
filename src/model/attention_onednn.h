// attention_onednn.h: causal attention (attention.c's algorithm and
// interface) with its matrix products on oneDNN's matmul primitive, in fp32
// or bf16. The model uses it when the matmul engine is oneDNN
// (gpt_set_matmul); with OpenBLAS it uses attention.c.
//
// Everything but the products is attention.c's own code (the softmax, lse,
// bias and score-gradient loops: attention_block_probs and
// attention_block_dscores in layers.h), so the two engines differ only in
// how the five products round. In bf16 the products' inputs (q, k, v, dY,
// P, dS) are rounded to bf16 and accumulated in fp32; scores, lse, P, dS and
// every output stay fp32. Nothing positional is rounded: rope has rotated q
// and k in fp32 before, and t5/alibi's bias is added in fp32.
//
// Errors: 0 or -1; the message is kept for attention_engine_error().
// Threads: call from outside any parallel region, like linear.h.
#ifndef ROPELAB_ATTENTION_ONEDNN_H
#define ROPELAB_ATTENTION_ONEDNN_H

#include <stddef.h>

typedef struct AttentionEngine AttentionEngine;

// bf16: 1 for bf16 product inputs, 0 for fp32. C = d_model, H = heads.
int attention_engine_create(AttentionEngine **ae, int bf16, int C, int H, char *err, size_t errlen);
void attention_engine_free(AttentionEngine *ae);
const char *attention_engine_error(const AttentionEngine *ae);
// Bytes of its buffers (bf16 copies of the inputs, per-thread scratch); 0 for NULL.
size_t attention_engine_bytes(const AttentionEngine *ae);

// As attention_forward / attention_backward (layers.h), with n_threads threads.
int attention_engine_forward(AttentionEngine *ae, float *out, float *lse, const float *qkv,
                             const float *bias, int n_threads, int B, int T);
int attention_engine_backward(AttentionEngine *ae, float *dqkv, float *dbias, const float *dout,
                              const float *qkv, const float *lse, const float *bias, int n_threads,
                              int B, int T);

#endif
