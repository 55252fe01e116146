// layers.h: the layer kernels of the model, each a forward/backward pair over
// flat float buffers (row-major). N = B*T rows. Internal to src/model/ (and
// its tests): the rest of ropelab goes through gpt.h.
//
// Conventions for backward passes:
//   - parameter gradients (dweight, dbias) are always ADDED to (+=), so
//     gradient accumulation over micro-batches works;
//   - input gradients are documented per function: "+=" where the model
//     accumulates into the residual stream, "=" where a fresh scratch is used.
#ifndef ROPELAB_LAYERS_H
#define ROPELAB_LAYERS_H

#include <stddef.h>

// Token embedding: out[b,t,:] = wte[inp[b,t],:].
// inp (B,T) ints, wte (V,C) -> out (B,T,C)
void encoder_forward(float *out, const int *inp, const float *wte, int N, int C);
// dwte[inp[n],:] += dout[n,:]. Parallel over blocks of channels (each
// thread owns whole columns), so repeated tokens never race and the sum runs
// over n in a fixed order: deterministic whatever the thread count.
void encoder_backward(float *dwte, const float *dout, const int *inp, int N, int C);

// LayerNorm over the last dim, eps 1e-5, biased variance (PyTorch).
// inp (N,C) -> out (N,C); saves mean (N), rstd (N) for backward.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
// dinp += dLN/dinp . dout; dweight += sum_n dout*xhat; dbias += sum_n dout.
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

// Linear layer (nn.Linear): out = inp W^T + b, on cblas_sgemm.
// inp (N,C), weight (OC,C), bias (OC) or NULL -> out (N,OC)
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC);
// dinp = dout W (overwritten; may be NULL to skip), dweight += dout^T inp,
// dbias += sum_n dout (if dbias non-NULL). Both products are sgemm.
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(float *out, const float *inp, size_t n);
// dinp = gelu'(inp) * dout (overwritten; dinp may equal dout).
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

// out = a + b. (Its backward is the identity on both inputs; the model does
// it by accumulating branch gradients into one residual-gradient buffer.)
void residual_forward(float *out, const float *a, const float *b, size_t n);

// Causal multi-head attention over the packed qkv of c_attn.
// qkv (B,T,3C): q = cols 0..C-1, k = C..2C-1, v = 2C..3C-1, head h owns
// cols h*D..h*D+D-1 of each. bias (H,T) or NULL: bias[h*T + n] is added to
// the score of query i and key j = i - n (distance-bias schemes).
// -> out (B,T,C) (heads concatenated), lse (B,H,T) the log-sum-exp of each
// softmax row (the only thing kept besides q,k,v: backward recomputes p).
// scratch: n_threads * attention_scratch_floats(T) floats (each thread's
// score and score-gradient blocks).
void attention_forward(float *out, float *lse, const float *qkv, const float *bias,
                       float *scratch, int n_threads, int B, int T, int C, int H);
// Floats of scratch one thread needs for sequences of length T.
size_t attention_scratch_floats(int T);

// dqkv = d(loss)/d(qkv) (overwritten); dbias (B,H,T) += per-(b,h) bias
// gradients (NULL to skip), summed over b later by the scheme.
void attention_backward(float *dqkv, float *dbias, const float *dout, const float *qkv,
                        const float *lse, const float *bias, float *scratch, int n_threads,
                        int B, int T, int C, int H);

// The pieces of attention between its products, shared by attention.c
// (OpenBLAS) and attention_onednn.c (oneDNN), per (batch, head) and block of
// query rows i0..i0+rows-1 against keys 0..keys-1 (keys = i0 + rows):
// Query rows per block for sequences of length T.
int attention_block_rows(int T);
// s (rows, keys) holds scale Q_I K_J^T: adds bias_h[i-j] (if set), makes
// P = exp(s - lse) in place, zero above the diagonal; lse_out set: computes
// and stores each row's lse (forward), else reads lse_in (backward).
void attention_block_probs(float *s, int i0, int rows, int keys, const float *bias_h,
                           const float *lse_in, float *lse_out);
// dp (rows, keys) holds dY_I V_J^T: dS = P * (dP - rowsum(P * dP)) in place,
// masked; dbias_bh[i-j] += dS_ij if set.
void attention_block_dscores(float *dp, const float *p, int i0, int rows, int keys, float *dbias_bh);

// Softmax cross-entropy, fused. logits (N,V), targets (N) -> losses (N),
// lse (N); returns the mean loss (summed in double).
double crossentropy_forward(float *losses, float *lse, const float *logits,
                            const int *targets, int N, int V);
// Overwrites logits with dlogits = scale * (softmax(logits) - onehot(target)),
// where scale is d(loss)/d(each position's loss) (loss_scale / N for a mean).
void crossentropy_backward(float *logits, const float *lse, const int *targets,
                           int N, int V, float scale);

#endif
