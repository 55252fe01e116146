// config.h: the model's configuration: the list of positional schemes, the
// configuration struct and its one key table (config.c), the sizes the keys
// determine, and the entries of the parameter table they make. The bottom of
// src/model/: every other file of the model includes it, and it includes
// nothing of the model (gpt.h, the public interface, builds on it).
#ifndef ROPELAB_MODEL_CONFIG_H
#define ROPELAB_MODEL_CONFIG_H

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

#endif
