// layers.h: the layers of reference.c and block_llama.c, for their tests (and LN_EPS and
// RMS_EPS, for the GGUF and Hugging Face exports), each a forward/backward pair over flat float buffers
// (row-major, N = B*T rows). The linear layers' and attention's products go
// through an engine (engine.h).
//
// Backward: parameter gradients are always added to (+=); input gradients
// are "=" or "+=" as each function says.
#ifndef ROPELAB_LAYERS_H
#define ROPELAB_LAYERS_H

#include <stddef.h>

#include "model/config.h"

// Token embedding: inp (N) ids, wte (V,C) -> out (N,C), out[n,:] = wte[inp[n],:]
void encoder_forward(float *out, const int *inp, const float *wte, int N, int C);
// dwte[inp[n],:] += dout[n,:], deterministic whatever the thread count
void encoder_backward(float *dwte, const float *dout, const int *inp, int N, int C);

// LayerNorm over the last dim, eps LN_EPS, biased variance (PyTorch). The one
// home of eps (the GGUF export writes it for llama.cpp too: gguf_model.c).
#define LN_EPS 1e-5f
// inp (N,C) -> out (N,C); saves mean (N), rstd (N) for backward.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C);
// dinp += dLN/dinp . dout; dweight += sum_n dout*xhat; dbias += sum_n dout.
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

// RMSNorm over the last dim (block=llama): y = x / sqrt(mean(x^2) + RMS_EPS) * w.
// RMS_EPS is 1e-5, LayerNorm's eps too; the exports write it as llama.cpp's
// layer_norm_rms_epsilon and Hugging Face's rms_norm_eps.
#define RMS_EPS 1e-5f
// inp (N,C) -> out (N,C); saves rstd (N) for backward.
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C);
// dinp += dRMS/dinp . dout; dweight += sum_n dout*xhat.
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C);

// out = a + b (its backward is the identity into both inputs).
void residual_forward(float *out, const float *a, const float *b, size_t n);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// inp (n) -> out (n).
void gelu_forward(float *out, const float *inp, size_t n);
// dinp = gelu'(inp) * dout (overwritten; dinp may equal dout).
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

// SwiGLU (block=llama): inp (N,2F) rows [gate a | up u] -> out (N,F) = silu(a) * u.
void swiglu_forward(float *out, const float *inp, int N, int F);
// dout (N,F) -> dinp (N,2F) (overwritten).
void swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F);

// The block's choices (config's block): its norm, LayerNorm or RMSNorm, over C
// channels (mean, bias unused by RMSNorm); its MLP activation, GELU or SwiGLU,
// from c_fc's output (N, gpt_mlp_fc_width) to (N, F = gpt_mlp_hidden, the model's mlp_hidden).
void block_norm_forward(const GPTConfig *c, float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N);
void block_norm_backward(const GPTConfig *c, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, const float *mean, const float *rstd, int N);
void block_act_forward(const GPTConfig *c, float *out, const float *fch, int N, int F);
// dfch (N,FC) = act'(fch) dout (overwritten; gpt2: dfch may be dout)
void block_act_backward(const GPTConfig *c, float *dfch, const float *fch, const float *dout, int N, int F);

// Softmax cross-entropy, fused. logits (N,V), targets (N) -> losses (N),
// lse (N); returns the losses' sum (in double, in order; / N for the mean).
double crossentropy_forward(float *losses, float *lse, const float *logits,
                            const int *targets, int N, int V);
// Overwrites logits with dlogits = scale * (softmax(logits) - onehot(target)),
// where scale is d(loss)/d(each position's loss) (loss_scale / N for a mean).
void crossentropy_backward(float *logits, const float *lse, const int *targets,
                           int N, int V, float scale);

#endif
