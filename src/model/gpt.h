// gpt.h: the public interface of the model (src/model/): the configuration
// and its key table (config.h), creating a model, its parameters, the
// engine, forward and backward, the KV cache; no file format. Code outside src/model/ that runs a model needs only this header.
// Code that writes or reads a weights file (training and its checkpoints,
// ./eval, ./sample, ./export, their tests) also includes weights_file.h, and
// safetensors.h for raw file access; ./export adds gguf_model.h, white-box
// tests the model's inner headers (gpt_internal.h, layers.h, pos.h, ...).
//
// Shapes: B batch, T sequence length, C = d_model, H = n_head, D = C/H,
// V = vocab_size, L = n_layer. All floats are float32, row-major.
// Functions that can fail return 0 on success and -1 on failure, with a
// one-line message in err ("path: problem" where a file is involved).
#ifndef ROPELAB_GPT_H
#define ROPELAB_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

typedef struct GPT GPT;   // opaque; fields in gpt_internal.h for src/model/ only

// Allocates parameters and gradients (one buffer each) and initialises the
// parameters from seed (each tensor from its own stream named after it).
int gpt_create(GPT **model, const GPTConfig *cfg, uint64_t seed, char *err, size_t errlen);
void gpt_free(GPT *model);
const GPTConfig *gpt_config(const GPT *model);

size_t gpt_num_params(const GPT *model);
// The flat parameter buffer (gpt_num_params floats), to read or to write:
// every write to the parameters goes through a pointer from here (an
// optimizer step, a broadcast, a load), so the call tells the engine that
// they may change, and an engine that keeps copies (bf16) re-makes them at
// its next use. Take the pointer again after a forward before writing.
float *gpt_params(GPT *model);
float *gpt_grads(GPT *model);        // same layout; NULL for a model read by gpt_load
int gpt_param_entries(const GPT *model, const ParamEntry **entries); // returns count
const ParamEntry *gpt_find_param(const GPT *model, const char *name); // NULL if absent

// Whether batches of (B, T) fit this configuration: T within the scheme's
// positions, B*T rows within the activations' index range (no allocation).
int gpt_check_batch(const GPTConfig *cfg, int B, int T, char *err, size_t errlen);
// The engine of the model's matrix products (the linear layers, the tied
// head, attention; src/engine/engine.h): matmul "openblas" (fp32, the
// default), "onednn" (fp32 or bf16) or "reference" (fp32: engine_reference.c's
// plain loops, slow, the one the others are checked against). bf16: each
// product's inputs are rounded to bf16 and accumulated in fp32; weights,
// gradients and everything else stay fp32. Fails with a message where oneDNN
// has no bf16 products (below AVX-512), or for bf16 on another engine.
// Activations already sized are sized again, and lose their contents, when
// the new engine needs another layout (bf16 keeps fewer: gpt_alloc_activations).
// attention: GPT_ATTENTION_BLOCKED (blocks of query rows against all their
// keys: the softmax row whole, scratch ~ T) or GPT_ATTENTION_FUSED (blocks of
// keys too, an online softmax: scratch independent of T; openblas in fp32,
// onednn in fp32 or bf16). The reference engine has only its own plain
// attention (the oracle) and takes BLOCKED to mean it.
typedef enum { GPT_MATMUL_OPENBLAS, GPT_MATMUL_ONEDNN, GPT_MATMUL_REFERENCE } GPTMatmul;
typedef enum { GPT_FP32, GPT_BF16 } GPTPrecision;
typedef enum { GPT_ATTENTION_BLOCKED, GPT_ATTENTION_FUSED } GPTAttention;
int gpt_set_matmul(GPT *model, GPTMatmul matmul, GPTPrecision precision, GPTAttention attention, char *err,
                   size_t errlen);
// One line naming the engine in use (backend, precision, the ISA it dispatches to,
// where attention's products run).
const char *gpt_matmul_describe(const GPT *model);
// Two engines running one model in turn, each keeping what it made (scratch,
// oneDNN's primitives), so that they can be timed against each other
// (matmul = auto's trial, src/train/matmul_auto.c): gpt_engine_make makes
// gpt_set_matmul's engine aside, the model's untouched; gpt_engine_swap makes
// *e the model's engine and hands the model's back in *e. The two must lay
// the activations out alike (any two fp32 engines with one attention), else
// -1. An engine set aside is not told of writes to the parameters: swap or
// free it before they change.
typedef struct Engine GPTEngine;
int gpt_engine_make(GPTMatmul matmul, GPTPrecision precision, GPTAttention attention, GPTEngine **e, char *err,
                    size_t errlen);
int gpt_engine_swap(GPT *model, GPTEngine **e, char *err, size_t errlen);
void gpt_engine_free(GPTEngine *e);

// Sizes the activation buffers for batches of (B, T). T may exceed block_size
// (length extrapolation) for every scheme except learned, which fails.
// Called once before training; no allocation happens inside forward/backward.
// Their size depends on the engine: one that keeps its own copy of the linear
// layers' inputs (bf16) lets the model keep those for one layer, not L. A
// model without gradients (gpt_load's) keeps one layer's buffers in all and
// none of the backward's: forward passes only.
int gpt_alloc_activations(GPT *model, int B, int T, char *err, size_t errlen);
// The positions whose logits the tied head and the loss hold at once, for the
// next gpt_alloc_activations: 0 (the default) all B*T of them where their
// B*T*V floats fit 64 MB, else slices of 64 positions that do (a vocabulary
// of 50,257 tokens at B*T = 8,192: 320 positions, not 1.6 GB of logits); n > 0:
// n positions (at most B*T). More than one chunk costs one more product of
// the head per backward (each chunk's logits are made again); a forward
// without targets then leaves only the last chunk's logits.
void gpt_set_logits_rows(GPT *model, int n);
// The longest sequence (positions 0..n-1) the model can run: block_size for a
// scheme with one learned row per position (learned), else INT_MAX.
int gpt_max_positions(const GPT *model);
int gpt_config_max_positions(const GPTConfig *cfg);   // the same for a configuration

// Forward pass on inputs (B,T) with B,T <= the allocated sizes. If targets
// is non-NULL, *loss gets the mean cross-entropy loss (loss may be NULL) and
// backward is prepared; otherwise only the logits are computed (which the
// white-box tests read). -1 when the
// batch does not fit the activations or holds a token outside the vocabulary.
int gpt_forward(GPT *model, const int *inputs, const int *targets, int B, int T, float *loss,
                char *err, size_t errlen);
const float *gpt_losses(const GPT *model);   // (B,T) per-position losses of the last forward with targets

// Sets every gradient to zero (none: nothing).
void gpt_zero_grad(GPT *model);
// Backward pass of the last forward (which had targets); ADDS into the
// gradients (so gradient accumulation is zero_grad, then k x forward+backward).
// The loss being differentiated is the mean over the B*T positions of that
// forward, scaled by loss_scale (1/grad_accum for accumulation). -1 when the
// last forward had no targets or was already backpropagated, or the model
// has no gradients (gpt_load's).
int gpt_backward(GPT *model, float loss_scale, char *err, size_t errlen);

// Changes a model's length keys (block_size, rope scaling) to cfg's; every
// other key must be equal (else -1 naming it). The scheme's tables are rebuilt;
// a KV cache made before must be made again. block_size of a scheme with one
// learned row per position (learned) cannot change.
int gpt_reconfigure(GPT *model, const GPTConfig *cfg, char *err, size_t errlen);

// Inference with a KV cache: one position's work per new token.
// max_len is the longest sequence the cache holds (learned: <= block_size).
typedef struct KVCache KVCache;
int kv_cache_create(KVCache **cache, const GPT *model, int max_len, char *err, size_t errlen);
void kv_cache_free(KVCache *cache);
int kv_cache_len(const KVCache *cache);       // positions filled so far
// Feeds one token at position kv_cache_len(cache): the model's forward for that one
// position, attending to the positions before it through the cache (the same layers
// as gpt_forward's); writes the V logits of that position.
// -1 with a message if the cache is full, belongs to another model, or the
// token is outside the vocabulary.
int gpt_decode_step(GPT *model, KVCache *cache, int token, float *logits, char *err, size_t errlen);

// Memory, from a configuration alone, before anything is allocated: the
// bytes each of the model's allocations will take, computed by the
// functions those allocations size themselves with (so the figures cannot
// drift from them; a program adds up its own need from these,
// src/train/footprint.h), for the work a GPTWorkload describes. 0, or -1
// with a message for a configuration or batch the model refuses.
typedef struct {
    size_t n_params;
    size_t params, grads;   // one buffer each (gpt_create)
    size_t pos_tables;      // the scheme's tables for max(T, block_size) positions
    size_t activations;     // gpt_alloc_activations(B, T), laid out for the engine
    size_t engine;          // the engine's buffers (engine.h: all but what oneDNN sizes itself)
} GPTMemory;
// The work a model's memory is sized for, besides its configuration.
typedef struct {
    GPTMatmul matmul;            // the engine (gpt_set_matmul's)
    GPTPrecision precision;
    GPTAttention attention;
    int B, T;                    // activations for batches of (B, T); B = 0: none (decoding only)
    int backward;                // 1: training (gradients and the backward's buffers); 0: a model read
                                 // to run (gpt_load: no gradients, one layer's activations)
    int n_threads;               // the engine's scratch is per thread
    int logits_rows;             // gpt_set_logits_rows's (0: as many as fit)
} GPTWorkload;
int gpt_memory(const GPTConfig *cfg, const GPTWorkload *w, GPTMemory *mem, char *err, size_t errlen);

// kv_cache_create(max_len)'s allocations, the scheme's tables included.
size_t kv_cache_bytes(const GPTConfig *cfg, int max_len);

#endif
