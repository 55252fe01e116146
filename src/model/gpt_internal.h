// gpt_internal.h: the insides of struct GPT, shared by the files of
// src/model/ (and the model's white-box tests). Everything else uses gpt.h.
#ifndef ROPELAB_GPT_INTERNAL_H
#define ROPELAB_GPT_INTERNAL_H

#include "engine/engine.h"
#include "model/config.h"
#include "model/pos.h"

typedef struct GPT GPT;            // (as gpt.h names them: C11 allows the same typedef twice)
typedef struct KVCache KVCache;

// Named pointers into one flat buffer (params, or grads with the same layout).
// F = gpt_mlp_hidden, FC = gpt_mlp_fc_width (gpt2: F = FC = 4C; llama: FC = 2F).
// block=llama has no biases: those pointers are NULL.
typedef struct {
    float *ln_1_w, *ln_1_b;          // (C), (C)
    float *c_attn_w, *c_attn_b;      // (3C,C), (3C)
    float *attn_proj_w, *attn_proj_b;// (C,C), (C)
    float *ln_2_w, *ln_2_b;          // (C), (C)
    float *c_fc_w, *c_fc_b;          // (FC,C), (FC)
    float *mlp_proj_w, *mlp_proj_b;  // (C,F), (C)
} LayerTensors;

typedef struct {
    float *wte;                      // (V,C)
    float *pos[POS_MAX_PARAMS];      // the scheme's tensors (learned: wpe, t5: rel_bias), NULL past its count
    LayerTensors *h;                 // L entries
    float *ln_f_w, *ln_f_b;          // (C), (C); ln_f_b NULL for llama
} ModelTensors;

// One layer's activations in a forward of (B,T) rows: what its backward reads.
typedef struct {
    float *x;                           // (B,T,C)    the layer's input: the embedding (layer 0)
                                        //   or the layer before's res3
    float *ln1, *ln1_mean, *ln1_rstd;   // (B,T,C), (B,T), (B,T)   LN1 output (c_attn's input);
                                        //   LN = LayerNorm or RMSNorm (which keeps rstd only)
    float *qkv;                         // (B,T,3C)   c_attn output, q and k rotated for rope
    float *atty, *att_lse;              // (B,T,C), (B,H,T)   attention output, softmax lse
    float *res2;                        // (B,T,C)    residual stream after attention
    float *ln2, *ln2_mean, *ln2_rstd;   // (B,T,C), (B,T), (B,T)
    float *fch;                         // (B,T,FC)   c_fc output (GELU's input; llama: gate and up)
    float *fch_act;                     // (B,T,F)    the activation's output, GELU or SwiGLU
    float *res3;                        // (B,T,C)    residual stream after the MLP: the layer's output
} LayerActs;

// Activations, sized once for (B_max, T_max) by gpt_alloc_activations. Each
// layer has its own slice of B_max*T_max rows of every LayerActs buffer (a
// smaller batch uses the front of it), except that an engine which keeps
// its own copy of every linear layer's input for backward (Engine.keeps_inputs)
// lets the four linear inputs (ln1, atty, ln2, fch_act), read by nothing
// else in backward, be one slice that every layer writes in turn. (A KV
// cache has Activations of its own: one row's forward buffers, no backward's.)
typedef struct {
    int B_max, T_max;
    LayerActs *layer;  // L entries
    float *encoded;    // (B,T,C)      token (+ position) embedding
    float *lnf;        // (B,T,C)
    float *lnf_mean, *lnf_rstd;      // (B,T)
    float *logits;     // (R,V)        R = logits_rows positions' logits (the last chunk's), dlogits after backward
    int logits_rows;   //              the positions whose logits are held at once (gpt_alloc_activations)
    float *ce_lse;     // (B,T)
    float *losses;     // (B,T)
    float *pos_bias;   // (H,T)        distance-bias table of this forward (decoding: (H, pos0+T));
                       //              NULL for a scheme without one
    // backward scratch, reused by every layer
    float *dres;       // (B,T,C)      gradient of the residual stream
    float *dact;       // (B,T,C)      gradient of the width-C activation being backpropagated
                       //              (a LayerNorm's output, or attention's output)
    float *dqkv;       // (B,T,3C)     gradient of c_attn's output (q, k, v)
    float *dhidden;    // (B,T,FC)     gradient of c_fc's output (gpt2: first of GELU's output, in place)
    float *dact_out;   // (B,T,F)      gradient of the MLP activation's output: llama's own buffer
                       //              (SwiGLU reads it, writes dhidden); gpt2's is dhidden (GELU in place)
    float *dpos_bias;  // (B,H,T)      attention's bias gradients (all layers); NULL without a bias
    float *proj_out;   // (B,T,C)      a block's projection output, before the residual add
    int *tokens, *targets;           // (B,T) copies of the last forward's batch
    size_t bytes;
} Activations;

struct GPT {
    GPTConfig cfg;                   // rope_dims resolved (never 0)
    int mlp_hidden, mlp_fc_width;    // F = gpt_mlp_hidden(&cfg), FC = gpt_mlp_fc_width(&cfg): fixed at creation
    int logits_rows_asked;           // gpt_set_logits_rows's (0: as many as fit, gpt.c)
    const PosScheme *pos;
    PosCtx pos_ctx;                  // the scheme's tables for max(T, block_size) positions
    PosParam pos_params[POS_MAX_PARAMS];  // the scheme's tensors, as it describes them
    int n_pos_params;
    ParamEntry *entries;             // the used tensors, in file order
    int n_entries;
    size_t num_params;
    float *params, *grads;
    ModelTensors p, g;               // named pointers into params and grads
    Activations acts;                // all NULL until gpt_alloc_activations
    // state of the last forward
    int B, T;
    int have_targets;
    Engine *engine;                  // the products of the linear layers, the head and attention (gpt_set_matmul)
};

// A KV cache (kvcache.c): the keys (rotated, for rope) and values of every
// position decoded so far, per layer, and the buffers of the forward that
// decodes the next position.
struct KVCache {
    const GPT *model;
    int max_len, len;      // positions it has room for; positions filled
    PosCtx pos;            // the scheme's tables for max_len positions
    float *k, *v;          // (L, max_len, C): layer l's k and v at l*max_len*C
    float *scores;         // (max_len) one query row's probabilities
    Activations acts;      // one row's forward buffers, the same for every layer (kvcache.c)
    LayerActs layer[];     // (L) acts.layer
};

// reference.c: the model's two passes, the one composition of its layers
// (gpt.c's gpt_forward, gpt_backward and kvcache.c's gpt_decode_step check
// the inputs and run them). Engine failures are left in the engine
// (engine_failed).
// model_forward: tokens (B,T) -> logits (B,T,V) in a->logits (the last
// a->logits_rows positions' where they are not held whole), a the
// activations of kv if set, else the model's; with targets (B,T) also the
// losses (B,T) in a->losses, and the mean loss returned (0 without). kv NULL:
// positions 0..T-1, each attending to itself and the positions before it
// (training, ./eval). kv set (B = 1): positions kv->len..kv->len+T-1,
// attending to the cache's positions before them too; their keys and values
// are appended to the cache (the caller advances len).
double model_forward(GPT *m, const int *tokens, const int *targets, int B, int T, KVCache *kv);
// model_backward: adds the gradient of loss_scale * (the mean loss of the
// model's last forward, on (B,T) tokens and targets held in a->tokens,
// a->targets) into the gradients.
void model_backward(GPT *m, int B, int T, float loss_scale);

#endif
