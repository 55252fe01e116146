// gguf_model.h: a trained model as llama.cpp's GGUF tensors and keys, for
// ./export (the tokenizer's half is format/bpe_gpt2.h). llama.cpp has no
// architecture of its own for ropelab, so each block and scheme goes to the
// one of its architectures that computes exactly that model; docs/FORMAT.md
// has the table:
//
// block=gpt2 (pre-LN LayerNorm with bias, fused qkv with bias, GELU tanh MLP
// with biases, tied head), by scheme:
//   learned, sinusoidal, none  gpt2     position_embd = wpe, the sinusoidal table
//                                       (times sinusoidal_scale), or zeros
//   rope                       gptneox  use_parallel_residual = false, rope.dimension_count = R,
//                                       the q and k rows of each head permuted from our
//                                       interleaved pairs to NEOX's rotate-half pairs,
//                                       output = wte (gptneox has no tied head)
//   alibi                      mpt      attention.max_alibi_bias = 8: ggml's slopes
//                                       2^(-8(h+1)/P), then 2^(-4(2k+1)/P), are ours
// block=llama (RMSNorm, SwiGLU, no biases, tied head):
//   rope, R = head_dim         llama    rope.dimension_count = D; its rope (LLAMA_ROPE_TYPE_NORM)
//                                       rotates adjacent pairs (2i, 2i+1), ours: no permutation;
//                                       c_attn cut into attn_q, attn_k, attn_v and c_fc into
//                                       ffn_gate, ffn_up
//   rope, R < head_dim         chatglm  the same rope over the first R dims (llama refuses
//                                       rope.dimension_count < D); attn_qkv = c_attn and ffn_up =
//                                       c_fc = [gate; up] whole, its SwiGLU's order; output = wte
//   alibi                      refact   ALiBi with max bias 8 (fixed in llama.cpp), as mpt; the
//                                       tensors as llama's
//   learned, sinusoidal, none  refused: no architecture with RMSNorm and SwiGLU has a position
//                              table or no positions
// Either block: t5 refused (llama.cpp's t5 is the encoder-decoder model; no
// decoder of it has a relative-position bias table).
//
// RoPE scalings: linear and yarn as llama.cpp's own (rope.scaling.*), ntk as
// the scaled rope.freq_base; yarn_paper, dynamic, and yarn with betas other
// than 32 and 1 (llama.cpp reads no beta from the file) are refused. A scaled
// model's context_length is s x L (Hugging Face's max_position_embeddings of
// a scaled model), L the original length.
#ifndef ROPELAB_GGUF_MODEL_H
#define ROPELAB_GGUF_MODEL_H

#include "common/meter.h"
#include "format/gguf.h"
#include "model/gpt.h"

#define GGUF_MODEL_MAX_KV 24

typedef struct {
    const char *arch;                         // llama.cpp's architecture name
    GgufKv kv[GGUF_MODEL_MAX_KV];             // general.* and ARCH.* keys
    int n_kv;
    char keys[GGUF_MODEL_MAX_KV][64];         // storage of the ARCH.* key names
    char name[96];                            // general.name
    char note[192];                           // what the caller should say about a choice made
                                              // here (a scaled context_length), or ""
    GgufTensor *tensors;
    int n_tensors;
    float *owned;                             // data made here: permuted c_attn, position table
} GgufModel;

// Why cfg cannot be exported (one line, no file name), or NULL if it can.
const char *gguf_model_refusal(const GPTConfig *cfg);

// Fills out from model. context_length: llama.cpp's context_length (the rows
// of the position table for sinusoidal and none); 0 = block_size, or s x L
// for a scaled rope (said in out->note); learned must use block_size (wpe's rows). The tensors point into the model's
// parameters (and out->owned): keep the model until written. 0; -1 with a
// message for a model gguf_model_refusal refuses or a bad context_length;
// -2 when out of memory. meter (or NULL): progress of a long position table.
int gguf_model_describe(GPT *model, int context_length, GgufModel *out, Meter *meter, char *err, size_t errlen);
// The bytes gguf_model_describe allocates for the data it makes (the permuted
// c_attn of gptneox, the position table of sinusoidal and none), from cfg alone.
size_t gguf_model_bytes(const GPTConfig *cfg, int context_length);
void gguf_model_free(GgufModel *m);

// The c_attn row llama.cpp's gptneox must find at row r: within each head's
// first R rows of q and of k, NEOX pairs row i with row i + R/2 where ours
// pairs 2i with 2i + 1, so row i < R/2 takes our row 2i and row R/2 + i our
// row 2i + 1; every other row (v, dims >= R) stays. C = d_model, D = head_dim.
// (Hugging Face's Llama pairs rows the same way with R = D: hf_model.c.)
int gguf_neox_source_row(int r, int C, int D, int R);

#endif
