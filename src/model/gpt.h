// gpt.h: the public interface of the model (src/model/): the positional
// schemes, the configuration and its key table, creating a model, its
// parameters, the engine, forward and backward, the KV cache; no file
// format. Code outside src/model/ that runs a model needs only this header.
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

// The positional schemes, one list: X(ENUM, name) for each. Scheme `name`
// lives in src/model/pos_name.c and defines `const PosScheme pos_scheme_name`
// (pos.h); the enum, the names and the lookup are generated from this list.
#define POS_SCHEME_LIST(X) \
    X(ROPE, rope) X(LEARNED, learned) X(SINUSOIDAL, sinusoidal) X(T5, t5) X(ALIBI, alibi) X(NONE, none)
#define POS_ENUM_ENTRY_(E, name) POS_##E,
typedef enum { POS_SCHEME_LIST(POS_ENUM_ENTRY_) POS_COUNT } PosKind;

const char *pos_kind_name(PosKind kind);             // "rope", "learned", ...
int pos_kind_from_name(const char *name, PosKind *kind); // 0 ok, -1 unknown name
// "rope, learned, sinusoidal, t5, alibi or none" (for help and error texts).
const char *pos_kind_list(void);

// The model configuration. Every field but vocab_size and
// tokenizer_checksum (both the tokenizer's) is a key of the [model] or
// [positions] section of a config file; all of them are written to a weights
// file's metadata. The table in config.c is the one home of
// each key's type, default, range, help text and metadata rule.
typedef struct {
    int n_layer, n_head, d_model, vocab_size, block_size;
    int block;              // BlockKind: the transformer block's architecture
    PosKind pos;
    float rope_base;        // rope: theta_i = rope_base^(-2i/rope_dims)
    int rope_dims;          // rope: rotated dims per head (0 = head_dim, resolved by gpt_config_resolve)
    int t5_num_buckets;     // t5: relative-distance buckets
    int t5_max_distance;    // t5: where the log-spaced buckets end
    float sinusoidal_scale; // sinusoidal: the table is multiplied by it
    // rope beyond the training length (docs/POSITIONS.md): the angle tables rescaled
    int rope_scaling;       // RopeScaling
    float rope_scaling_factor;   // s >= 1 (1: unscaled)
    int rope_original_length;    // yarn, yarn_paper, dynamic: the length L the model was trained at (0: block_size)
    float rope_yarn_beta_fast, rope_yarn_beta_slow;   // yarn, yarn_paper: the ramp's ends, in rotations per L
    uint64_t tokenizer_checksum;   // the tokenizer's bpe_checksum (from it, as vocab_size); 0: not recorded
} GPTConfig;

// The block architectures, in the order of config.c's choices "gpt2|llama" (docs/MODEL.md):
//   gpt2   LayerNorm (weight, bias), MLP C -> 4C -> C with GELU, every linear layer with a bias
//   llama  RMSNorm (weight only), SwiGLU MLP: c_proj(silu(gate) * up), [gate; up] = c_fc(x) of
//          2F rows, F = gpt_mlp_hidden; no biases anywhere
// Both: pre-norm residual blocks, a final norm, the head tied to wte.
typedef enum { BLOCK_GPT2, BLOCK_LLAMA } BlockKind;
// The MLP's hidden width F: 4C for gpt2; for llama 8C/3 (the parameter count of a 4C
// GELU MLP, spread over three matrices) rounded up to a multiple of 8.
int gpt_mlp_hidden(const GPTConfig *cfg);
// The width of c_fc's output: F for gpt2, 2F for llama (gate and up, stacked).
int gpt_mlp_fc_width(const GPTConfig *cfg);

// The order of config.c's choices "none|linear|ntk|yarn|yarn_paper|dynamic" (docs/POSITIONS.md).
typedef enum {
    ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_NTK, ROPE_SCALING_YARN, ROPE_SCALING_YARN_PAPER,
    ROPE_SCALING_DYNAMIC
} RopeScaling;

// MODEL_KEY_CHECKSUM: a uint64_t written as 16 lowercase hex digits, 0 meaning
// "not recorded", which matches any value when two configurations are compared.
typedef enum { MODEL_KEY_INT, MODEL_KEY_FLOAT, MODEL_KEY_SCHEME, MODEL_KEY_CHOICE, MODEL_KEY_CHECKSUM } ModelKeyType;

// One model key. Ranges are inclusive, except that min is excluded when
// min_open is set (rope_base > 1, sinusoidal_scale > 0).
typedef struct {
    const char *name;        // as in config files, --key=value and metadata
    const char *section;     // "model" or "positions"
    ModelKeyType type;
    size_t offset;           // field of GPTConfig
    const char *def;         // default, as text
    double min, max;
    int min_open;
    int in_config;           // 0: not a config key (vocab_size and tokenizer_checksum come from the tokenizer)
    int scheme;              // the scheme (PosKind) whose maths uses it; -1: every scheme
    const char *if_absent;   // value meant by a weights file or run config written before
                             // the key existed; NULL: the key is required
    int length_key;          // may differ between a trained model and a run or evaluation that
                             // loads it (block_size, rope scaling): changes no parameter's value
    const char *choices;     // MODEL_KEY_CHOICE: "a|b|c", stored as the index
    const char *help;
} ModelKey;

// The table, in a fixed order; returns the number of keys.
int gpt_model_keys(const ModelKey **keys);
// Index of a key in the table, or -1.
int gpt_model_key_find(const char *name);
// Parses text into key k of cfg with the key's type and range. err receives
// the bare problem ("'x' is not an integer", "300 is out of range [1, 256]");
// callers say where the value came from.
int gpt_config_set(GPTConfig *cfg, int k, const char *value, char *err, size_t errlen);
// Key k's value as text that gpt_config_set reads back exactly.
void gpt_config_get(const GPTConfig *cfg, int k, char *buf, size_t n);

// rope_dims 0 -> head_dim. The one place defaults that depend on other keys are resolved.
void gpt_config_resolve(GPTConfig *cfg);
// Checks every key's range and the rules between keys (d_model % n_head,
// rope_dims even and <= head_dim for rope, ...); the rules of a scheme's own
// keys apply when that scheme is used. err receives e.g. "d_model (100) is
// not divisible by n_head (3)". If keys is non-NULL, keys[0] and keys[1] get
// the names of the keys the message is about (the same name twice for one key).
int gpt_config_validate(const GPTConfig *cfg, char *err, size_t errlen);
int gpt_config_validate_keys(const GPTConfig *cfg, char *err, size_t errlen, const char *keys[2]);
// 0 if every model key of a and b has the same value (length keys skipped
// if skip_length_keys; a checksum not recorded on either side matches), else
// -1 and *key names the first that differs.
int gpt_config_diff(const GPTConfig *a, const GPTConfig *b, int skip_length_keys, const char **key);

// One entry per tensor of the safetensors contract, in a fixed order
// (wte, the scheme's own tensors (wpe or rel_bias), then h.0.ln_1.weight ...
// h.{L-1}.mlp.c_proj.bias, ln_f.*). Tensors the scheme or the block does not use are
// not listed (block=llama has no biases).
// offset/numel index into the flat params (and grads, and AdamW moments) buffer.
typedef struct {
    char name[64];
    int ndim;
    int shape[2];
    size_t offset, numel;
    int weight_decay;     // 1 for the matrices AdamW decays (see docs), 0 otherwise
    float init_std;       // initialised N(0, init_std) if > 0, else every entry init_value
    float init_value;
} ParamEntry;

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
float *gpt_grads(GPT *model);        // same layout
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
// keys too, an online softmax: scratch independent of T; openblas only, for
// now). The reference engine has only its own plain attention (the oracle)
// and takes BLOCKED to mean it.
typedef enum { GPT_MATMUL_OPENBLAS, GPT_MATMUL_ONEDNN, GPT_MATMUL_REFERENCE } GPTMatmul;
typedef enum { GPT_FP32, GPT_BF16 } GPTPrecision;
typedef enum { GPT_ATTENTION_BLOCKED, GPT_ATTENTION_FUSED } GPTAttention;
int gpt_set_matmul(GPT *model, GPTMatmul matmul, GPTPrecision precision, GPTAttention attention, char *err,
                   size_t errlen);
// One line naming the engine in use (backend, precision, the ISA it dispatches to,
// where attention's products run).
const char *gpt_matmul_describe(const GPT *model);

// Sizes the activation buffers for batches of (B, T). T may exceed block_size
// (length extrapolation) for every scheme except learned, which fails.
// Called once before training; no allocation happens inside forward/backward.
// Their size depends on the engine: one that keeps its own copy of the linear
// layers' inputs (bf16) lets the model keep those for one layer, not L.
int gpt_alloc_activations(GPT *model, int B, int T, char *err, size_t errlen);
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

// Sets every gradient to zero.
void gpt_zero_grad(GPT *model);
// Backward pass of the last forward (which had targets); ADDS into the
// gradients (so gradient accumulation is zero_grad, then k x forward+backward).
// The loss being differentiated is the mean over the B*T positions of that
// forward, scaled by loss_scale (1/grad_accum for accumulation). -1 when the
// last forward had no targets or was already backpropagated.
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
// src/cli/footprint.h). For batches of (B, T) on the engine (matmul,
// precision, attention) with n_threads threads; B = 0: no activations (decoding only);
// backward = 0: forward passes only. 0, or -1 with a message for a
// configuration or batch the model refuses.
typedef struct {
    size_t n_params;
    size_t params, grads;   // one buffer each (gpt_create)
    size_t pos_tables;      // the scheme's tables for max(T, block_size) positions
    size_t activations;     // gpt_alloc_activations(B, T), laid out for the engine
    size_t engine;          // the engine's buffers (engine.h: all but what oneDNN sizes itself)
} GPTMemory;
int gpt_memory(const GPTConfig *cfg, GPTMatmul matmul, GPTPrecision precision, GPTAttention attention, int B, int T,
               int backward, int n_threads, GPTMemory *mem, char *err, size_t errlen);
// gpt_alloc_activations(B, T)'s allocation; keeps_inputs: laid out for an
// engine that keeps its own copies of the linear inputs (bf16; engine.h).
size_t gpt_activations_bytes_for(const GPTConfig *cfg, int B, int T, int keeps_inputs);
// kv_cache_create(max_len)'s allocations, the scheme's tables included.
size_t kv_cache_bytes(const GPTConfig *cfg, int max_len);

#endif
