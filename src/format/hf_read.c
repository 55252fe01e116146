// hf_read.c: a Hugging Face model directory read as a ropelab model (see
// hf_read.h; docs/FORMAT.md has the tables). In order:
//   1. config.json: the class, its sizes as ropelab's keys, and every key of
//      the class's forward pass that ropelab's maths must match (map_gpt2,
//      map_llama, map_rope_scaling);
//   2. the weights files: model.safetensors, or the index and its shards
//      (open_weights), headers only;
//   3. every tensor against the model config.json describes (claim_tensors):
//      each of our parameters' parts (hf_parts, the export's tables) found
//      once, of a float dtype and Hugging Face's shape; lm_head.weight equal
//      to the embedding; nothing left over;
//   4. hf_read_params: each part through one buffer into the model.
#include "format/hf_read.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "format/hf_model.h"
#include "format/safetensors.h"
#include "model/layers.h"
#include "model/params.h"

// The longest config.json or index read, 4 MiB: over eight times the index
// of the largest model ropelab builds (256 layers of 14 names, GPT-2's two
// mask buffers included, at under 128 bytes an entry: 0.5 MB). A longer
// file is refused from its size, unread.
#define HF_MAX_JSON (4u << 20)

// A tensor of the directory and what claimed it.
typedef enum { UNCLAIMED, PARAMETER, HEAD, MASK_BUFFER } Claim;
typedef struct {
    const StFile *file;
    const StTensor *t;
    Claim claim;
} Found;

struct HfDir {
    char path[4096];
    char config[4200];     // PATH/config.json, for messages
    char weights[4200];    // PATH/model.safetensors or PATH/model.safetensors.index.json
    const char *class_name;
    GPTConfig cfg;
    int tied;              // tie_word_embeddings
    StFile **files;
    int n_files;
    Found *found;          // every tensor of every file
    int n_found;
};

const GPTConfig *hf_config(const HfDir *d) { return &d->cfg; }

void hf_close(HfDir *d) {
    if (!d) return;
    for (int i = 0; i < d->n_files; i++) st_close(d->files[i]);
    free(d->files);
    free(d->found);
    free(d);
}

/* ---------------------------------------------------------------- JSON */

// path read whole (at most HF_MAX_JSON bytes) and parsed; NULL with a message.
static cJSON *read_json(const char *path, char *err, size_t errlen) {
    long long size;
    FILE *f = fopen_regular_file(path, &size, err, errlen);
    if (!f) return NULL;
    if (size > HF_MAX_JSON) {
        snprintf(err, errlen, "%s: %lld bytes, more than any configuration or index ropelab reads (at most %u); "
                 "not read", path, size, HF_MAX_JSON);
        fclose(f);
        return NULL;
    }
    char *text = malloc((size_t)size + 1);
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!text || got != (size_t)size) {
        snprintf(err, errlen, "%s: %s", path, text ? "read error" : "out of memory");
        free(text);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(text, (size_t)size);
    free(text);
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "%s: %s", path, root ? "not a JSON object" : "not valid JSON");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

// The first key obj holds twice, or NULL: Python's json (transformers) keeps
// the last value, cJSON finds the first, so a repeated key is refused.
static const char *repeated_key(const cJSON *obj) {
    for (const cJSON *a = obj->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (strcmp(a->string, b->string) == 0) return a->string;
    return NULL;
}

// obj's key, NULL when absent or null (Python's None: the class's default).
static const cJSON *key_of(const cJSON *obj, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    return x && !cJSON_IsNull(x) ? x : NULL;
}

// Key `key` of obj (shown as where + key) as a number: *v, or def when absent
// (required: refused). 0, or -1 with "file: key ..." in err.
static int get_number(const char *file, const cJSON *obj, const char *where, const char *key, int required,
                      double def, double *v, char *err, size_t errlen) {
    const cJSON *x = key_of(obj, key);
    if (!x && required) {
        snprintf(err, errlen, "%s: %s%s is missing", file, where, key);
        return -1;
    }
    if (x && !cJSON_IsNumber(x)) {
        snprintf(err, errlen, "%s: %s%s is not a number", file, where, key);
        return -1;
    }
    *v = x ? x->valuedouble : def;
    return 0;
}

// The same for an integer (an exact one, within int).
static int get_int(const char *file, const cJSON *obj, const char *where, const char *key, int required, int def,
                   int *v, char *err, size_t errlen) {
    double x;
    if (get_number(file, obj, where, key, required, def, &x, err, errlen) != 0) return -1;
    if (!(x >= -2147483648.0 && x <= 2147483647.0) || x != floor(x)) {
        snprintf(err, errlen, "%s: %s%s (%g) is not an integer", file, where, key, x);
        return -1;
    }
    *v = (int)x;
    return 0;
}

// A boolean key: *v, or def when absent.
static int get_bool(const char *file, const cJSON *obj, const char *key, int def, int *v, char *err, size_t errlen) {
    const cJSON *x = key_of(obj, key);
    if (x && !cJSON_IsBool(x)) {
        snprintf(err, errlen, "%s: %s is not true or false", file, key);
        return -1;
    }
    *v = x ? cJSON_IsTrue(x) : def;
    return 0;
}

// A key that must have the value ropelab computes with: the boolean want
// (absent: def), refused with why.
static int expect_bool(const char *file, const cJSON *obj, const char *key, int def, int want, const char *why,
                       char *err, size_t errlen) {
    int v;
    if (get_bool(file, obj, key, def, &v, err, errlen) != 0) return -1;
    if (v == want) return 0;
    snprintf(err, errlen, "%s: %s is %s: %s", file, key, v ? "true" : "false", why);
    return -1;
}

// The string want (absent: want too), refused with why.
static int expect_string(const char *file, const cJSON *obj, const char *key, const char *want, const char *why,
                         char *err, size_t errlen) {
    const cJSON *x = key_of(obj, key);
    if (!x) return 0;
    if (!cJSON_IsString(x)) {
        snprintf(err, errlen, "%s: %s is not a string", file, key);
        return -1;
    }
    if (strcmp(x->valuestring, want) == 0) return 0;
    snprintf(err, errlen, "%s: %s is \"%.60s\": %s", file, key, x->valuestring, why);
    return -1;
}

/* ---------------------------------------------------------------- config.json */

// The value of one of ropelab's keys, from a number of Hugging Face's key theirs.
static int set_key(HfDir *d, const char *ours, const char *theirs, double v, char *err, size_t errlen) {
    char text[64], msg[160];
    snprintf(text, sizeof text, "%.17g", v);
    if (gpt_config_set(&d->cfg, gpt_model_key_find(ours), text, msg, sizeof msg) == 0) return 0;
    snprintf(err, errlen, "%s: %s: %s (ropelab's %s)", d->config, theirs, msg, ours);
    return -1;
}

// The sizes: a required integer of theirs for each of our keys.
typedef struct { const char *theirs, *ours; } KeyName;
static const KeyName GPT2_SIZES[] = {{"vocab_size", "vocab_size"}, {"n_embd", "d_model"}, {"n_layer", "n_layer"},
                                     {"n_head", "n_head"}, {"n_positions", "block_size"}};
static const KeyName LLAMA_SIZES[] = {{"vocab_size", "vocab_size"}, {"hidden_size", "d_model"},
                                      {"num_hidden_layers", "n_layer"}, {"num_attention_heads", "n_head"},
                                      {"max_position_embeddings", "block_size"}};
enum { N_SIZES = 5 };

static int map_sizes(HfDir *d, const cJSON *c, const KeyName *sizes, char *err, size_t errlen) {
    for (int i = 0; i < N_SIZES; i++) {
        int v;
        if (get_int(d->config, c, "", sizes[i].theirs, 1, 0, &v, err, errlen) != 0 ||
            set_key(d, sizes[i].ours, sizes[i].theirs, v, err, errlen) != 0)
            return -1;
    }
    return 0;
}

// An eps of config.json against the model's constant (layers.h): the float
// it reads as must be ropelab's, or the key is refused.
static int check_eps(HfDir *d, const cJSON *c, const char *key, int required, double def, float ours,
                     const char *what, char *err, size_t errlen) {
    double eps;
    if (get_number(d->config, c, "", key, required, def, &eps, err, errlen) != 0) return -1;
    if ((float)eps == ours) return 0;
    snprintf(err, errlen, "%s: %s is %g: ropelab's %s uses eps %g, a constant of the model (layers.h)", d->config,
             key, eps, what, (double)ours);
    return -1;
}

// GPT2LMHeadModel (GPT2Config): learned positions, LayerNorm, a GELU MLP of 4C, biases.
static int map_gpt2(HfDir *d, const cJSON *c, char *err, size_t errlen) {
    if (map_sizes(d, c, GPT2_SIZES, err, errlen) != 0) return -1;
    char msg[160];
    gpt_config_set(&d->cfg, gpt_model_key_find("block"), "gpt2", msg, sizeof msg);
    gpt_config_set(&d->cfg, gpt_model_key_find("pos"), "learned", msg, sizeof msg);
    int inner, C = d->cfg.d_model;
    if (get_int(d->config, c, "", "n_inner", 0, 4 * C, &inner, err, errlen) != 0) return -1;
    if (inner != gpt_mlp_hidden(&d->cfg)) {
        snprintf(err, errlen, "%s: n_inner is %d: ropelab's gpt2 MLP is 4 n_embd = %d wide", d->config, inner, 4 * C);
        return -1;
    }
    if (expect_string(d->config, c, "activation_function", "gelu_new", "only \"gelu_new\" (the tanh GELU, "
                      "ropelab's) is read", err, errlen) != 0 ||
        check_eps(d, c, "layer_norm_epsilon", 0, 1e-5, LN_EPS, "LayerNorm", err, errlen) != 0 ||
        expect_bool(d->config, c, "scale_attn_weights", 1, 1, "ropelab scales every score by 1/sqrt(D)", err,
                    errlen) != 0 ||
        expect_bool(d->config, c, "scale_attn_by_inverse_layer_idx", 0, 0, "ropelab scales every layer's scores "
                    "alike", err, errlen) != 0 ||
        expect_bool(d->config, c, "add_cross_attention", 0, 0, "ropelab's blocks have no cross-attention", err,
                    errlen) != 0)
        return -1;
    return get_bool(d->config, c, "tie_word_embeddings", 1, &d->tied, err, errlen);   // GPT2Config's default: tied
}

// rope_scaling (or transformers 5's rope_parameters) of a Llama: the kinds
// whose maths ropelab computes the same (model/rope_scaling.c), each with its
// trained length L as transformers takes it.
static int map_rope_scaling(HfDir *d, const cJSON *c, char *err, size_t errlen) {
    const char *file = d->config;
    const cJSON *rs = key_of(c, "rope_scaling"), *rp = key_of(c, "rope_parameters");
    const char *where = "rope_scaling.";
    if (rs && rp) {
        snprintf(err, errlen, "%s: holds both rope_scaling and rope_parameters; one is read", file);
        return -1;
    }
    if (!rs) {
        rs = rp;
        where = "rope_parameters.";
    }
    double theta;
    if (get_number(file, c, "", "rope_theta", 0, 10000.0, &theta, err, errlen) != 0) return -1;
    if (rs && cJSON_IsObject(rs) && key_of(rs, "rope_theta")) {   // rope_parameters holds it
        double inner;
        if (get_number(file, rs, where, "rope_theta", 1, 0, &inner, err, errlen) != 0) return -1;
        if (key_of(c, "rope_theta") && inner != theta) {
            snprintf(err, errlen, "%s: rope_theta is %g but %srope_theta %g", file, theta, where, inner);
            return -1;
        }
        theta = inner;
    }
    if (set_key(d, "rope_base", "rope_theta", theta, err, errlen) != 0) return -1;
    if (!rs) return 0;
    if (!cJSON_IsObject(rs) || repeated_key(rs)) {
        snprintf(err, errlen, "%s: %.*s is not an object of distinct keys", file, (int)strlen(where) - 1, where);
        return -1;
    }
    const cJSON *type = key_of(rs, "rope_type"), *old = key_of(rs, "type");   // "type": its older name
    if (!type) type = old;
    if (!cJSON_IsString(type) || (old && (!cJSON_IsString(old) || strcmp(old->valuestring, type->valuestring)))) {
        snprintf(err, errlen, "%s: %srope_type is missing or not one string", file, where);
        return -1;
    }
    // The keys each kind may hold: anything else would change the maths (llama3's
    // low_freq_factor, YaRN's mscale, ...) and is refused by name.
    static const struct { const char *type, *ours, *keys[7]; } KINDS[] = {
        {"default", "none", {NULL}},
        {"linear", "linear", {"factor", NULL}},
        {"dynamic", "dynamic", {"factor", "original_max_position_embeddings", NULL}},
        {"yarn", "yarn", {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "truncate",
                          "attention_factor", NULL}},
    };
    int kind = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(type->valuestring, KINDS[i].type) == 0) kind = i;
    if (kind < 0) {
        snprintf(err, errlen, "%s: %srope_type \"%.40s\" is not one ropelab computes (default, linear, dynamic, "
                 "yarn)", file, where, type->valuestring);
        return -1;
    }
    for (const cJSON *x = rs->child; x; x = x->next) {
        int listed = !strcmp(x->string, "rope_type") || !strcmp(x->string, "type") || !strcmp(x->string, "rope_theta");
        for (int i = 0; KINDS[kind].keys[i]; i++) listed |= !strcmp(x->string, KINDS[kind].keys[i]);
        if (!listed && !cJSON_IsNull(x)) {
            char keys[160] = "";
            for (int i = 0; KINDS[kind].keys[i]; i++)
                snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? ", " : "", KINDS[kind].keys[i]);
            snprintf(err, errlen, "%s: %s%s is refused: ropelab's rope_type %s takes %s", file, where, x->string,
                     KINDS[kind].type, keys[0] ? keys : "no other key");
            return -1;
        }
    }
    char msg[160];
    gpt_config_set(&d->cfg, gpt_model_key_find("rope_scaling"), KINDS[kind].ours, msg, sizeof msg);
    int scaling = d->cfg.rope_scaling;
    if (scaling == ROPE_SCALING_NONE) return 0;
    double factor;
    int max_pos = d->cfg.block_size, original;
    char name[64];
    snprintf(name, sizeof name, "%sfactor", where);
    if (get_number(file, rs, where, "factor", 1, 0, &factor, err, errlen) != 0 ||
        set_key(d, "rope_scaling_factor", name, factor, err, errlen) != 0 ||
        get_int(file, rs, where, "original_max_position_embeddings", 0, max_pos, &original, err, errlen) != 0)
        return -1;
    if (scaling == ROPE_SCALING_DYNAMIC && original != max_pos) {   // transformers' dynamic NTK scales from max_position_embeddings
        snprintf(err, errlen, "%s: %soriginal_max_position_embeddings is %d, not max_position_embeddings %d: "
                 "transformers' dynamic scaling starts from max_position_embeddings", file, where, original, max_pos);
        return -1;
    }
    if (scaling == ROPE_SCALING_YARN) {
        // YaRN's trained length L is original_max_position_embeddings (absent: max_position_embeddings);
        // transformers versions differ on the factor when both it and the lengths' ratio are given, so
        // the two must agree.
        if (key_of(rs, "original_max_position_embeddings") && factor * original != max_pos) {
            snprintf(err, errlen, "%s: %sfactor %g is not max_position_embeddings / "
                     "original_max_position_embeddings = %d / %d (transformers versions take one or the other)",
                     file, where, factor, max_pos, original);
            return -1;
        }
        double beta_fast, beta_slow;
        if (key_of(rs, "attention_factor")) {
            snprintf(err, errlen, "%s: %sattention_factor is given: ropelab's YaRN scales by 0.1 ln(factor) + 1, "
                     "the default", file, where);
            return -1;
        }
        if (expect_bool(file, rs, "truncate", 1, 1, "ropelab's YaRN rounds its ramp's ends (truncate = true)", err,
                        errlen) != 0 ||
            get_number(file, rs, where, "beta_fast", 0, 32.0, &beta_fast, err, errlen) != 0 ||
            get_number(file, rs, where, "beta_slow", 0, 1.0, &beta_slow, err, errlen) != 0 ||
            set_key(d, "rope_yarn_beta_fast", "beta_fast", beta_fast, err, errlen) != 0 ||
            set_key(d, "rope_yarn_beta_slow", "beta_slow", beta_slow, err, errlen) != 0)
            return -1;
    }
    if (scaling == ROPE_SCALING_LINEAR) return 0;   // no trained length in its maths
    return set_key(d, "rope_original_length", "original_max_position_embeddings", original, err, errlen);
}

// LlamaForCausalLM (LlamaConfig): rope, RMSNorm, a SwiGLU MLP, no biases.
static int map_llama(HfDir *d, const cJSON *c, char *err, size_t errlen) {
    const char *file = d->config;
    if (map_sizes(d, c, LLAMA_SIZES, err, errlen) != 0) return -1;
    char msg[160];
    gpt_config_set(&d->cfg, gpt_model_key_find("block"), "llama", msg, sizeof msg);
    gpt_config_set(&d->cfg, gpt_model_key_find("pos"), "rope", msg, sizeof msg);
    int C = d->cfg.d_model, H = d->cfg.n_head, kv_heads, head_dim, inner;
    double partial;
    if (get_int(file, c, "", "num_key_value_heads", 0, H, &kv_heads, err, errlen) != 0 ||
        get_int(file, c, "", "head_dim", 0, C / H, &head_dim, err, errlen) != 0 ||
        get_int(file, c, "", "intermediate_size", 1, 0, &inner, err, errlen) != 0 ||
        get_number(file, c, "", "partial_rotary_factor", 0, 1.0, &partial, err, errlen) != 0)
        return -1;
    if (kv_heads != H) {
        snprintf(err, errlen, "%s: num_key_value_heads is %d, not num_attention_heads %d: grouped-query attention "
                 "is not supported (ropelab's attention has a key and a value head per query head)", file, kv_heads, H);
        return -1;
    }
    if (head_dim * H != C) {
        snprintf(err, errlen, "%s: head_dim is %d: ropelab's heads are hidden_size / num_attention_heads = %d / %d "
                 "wide", file, head_dim, C, H);
        return -1;
    }
    if (inner != gpt_mlp_hidden(&d->cfg)) {
        snprintf(err, errlen, "%s: intermediate_size is %d: ropelab's llama MLP is %d wide for hidden_size %d "
                 "(8 hidden_size / 3 rounded up to a multiple of 8: gpt_mlp_hidden)", file, inner,
                 gpt_mlp_hidden(&d->cfg), C);
        return -1;
    }
    if (partial != 1.0) {
        snprintf(err, errlen, "%s: partial_rotary_factor is %g: Llama's rope rotates every dim of a head", file,
                 partial);
        return -1;
    }
    if (expect_string(file, c, "hidden_act", "silu", "only \"silu\" (SwiGLU, ropelab's) is read", err, errlen) ||
        check_eps(d, c, "rms_norm_eps", 1, 0, RMS_EPS, "RMSNorm", err, errlen) ||
        expect_bool(file, c, "attention_bias", 0, 0, "ropelab's llama block has no biases", err, errlen) ||
        expect_bool(file, c, "mlp_bias", 0, 0, "ropelab's llama block has no biases", err, errlen) ||
        map_rope_scaling(d, c, err, errlen))
        return -1;
    return get_bool(file, c, "tie_word_embeddings", 0, &d->tied, err, errlen);   // LlamaConfig's default: untied
}

// config.json into d->cfg: every key of ropelab's from its default, then the class's.
static int map_config(HfDir *d, const cJSON *c, char *err, size_t errlen) {
    const ModelKey *keys;
    int n_keys = gpt_model_keys(&keys);
    char msg[256];
    memset(&d->cfg, 0, sizeof d->cfg);
    for (int k = 0; k < n_keys; k++)   // vocab_size and tokenizer_checksum (0) are not config keys
        if (keys[k].in_config) gpt_config_set(&d->cfg, k, keys[k].def, msg, sizeof msg);
    const char *twice = repeated_key(c);
    if (twice) {
        snprintf(err, errlen, "%s: key %s is given twice", d->config, twice);
        return -1;
    }
    const cJSON *type = key_of(c, "model_type"), *arch = key_of(c, "architectures");
    if (!cJSON_IsString(type)) {
        snprintf(err, errlen, "%s: model_type is missing or not a string", d->config);
        return -1;
    }
    int llama = strcmp(type->valuestring, "llama") == 0;
    if (!llama && strcmp(type->valuestring, "gpt2") != 0) {
        snprintf(err, errlen, "%s: model_type is \"%.40s\": ropelab reads gpt2 (GPT2LMHeadModel) and llama "
                 "(LlamaForCausalLM)", d->config, type->valuestring);
        return -1;
    }
    d->class_name = llama ? "LlamaForCausalLM" : "GPT2LMHeadModel";
    // Absent, the class is model_type's (transformers' AutoModelForCausalLM); given, it must be that one.
    if (arch && (!cJSON_IsArray(arch) || cJSON_GetArraySize(arch) != 1 ||
                 !cJSON_IsString(cJSON_GetArrayItem(arch, 0)) ||
                 strcmp(cJSON_GetArrayItem(arch, 0)->valuestring, d->class_name) != 0)) {
        const cJSON *first = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
        snprintf(err, errlen, "%s: architectures is not [\"%s\"] (model_type %s)%s%.40s", d->config, d->class_name,
                 type->valuestring, cJSON_IsString(first) ? ": it names " : "",
                 cJSON_IsString(first) ? first->valuestring : "");
        return -1;
    }
    if ((llama ? map_llama : map_gpt2)(d, c, err, errlen) != 0) return -1;
    if (gpt_config_validate(&d->cfg, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: as ropelab's model: %s", d->config, msg);
        return -1;
    }
    gpt_config_resolve(&d->cfg);
    return 0;
}

/* ---------------------------------------------------------------- the weights files */

static int add_file(HfDir *d, const char *path, char *err, size_t errlen) {
    StFile **files = realloc(d->files, (size_t)(d->n_files + 1) * sizeof *files);
    if (!files) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    d->files = files;
    if (st_open_header(&d->files[d->n_files], path, err, errlen) != 0) return -1;
    const char *format = st_meta(d->files[d->n_files], "format");
    d->n_files++;
    if (format && strcmp(format, "pt") != 0) {   // transformers reads pt (PyTorch's layouts) here
        snprintf(err, errlen, "%s: __metadata__ format is \"%.20s\": the layouts read are PyTorch's (\"pt\")", path,
                 format);
        return -1;
    }
    return 0;
}

// The index's file of tensor `name`, NULL if it names none.
static const char *shard_of(const cJSON *map, const char *name) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(map, name);
    return x ? x->valuestring : NULL;
}

// model.safetensors, or model.safetensors.index.json and every shard its weight_map names:
// each a plain file name in the directory, each tensor named once and found in its shard.
static int open_weights(HfDir *d, char *err, size_t errlen) {
    char single[4200], path[4200];
    snprintf(single, sizeof single, "%s/model.safetensors", d->path);
    snprintf(d->weights, sizeof d->weights, "%s/model.safetensors.index.json", d->path);
    int has_single = file_exists(single), has_index = file_exists(d->weights);
    if (has_single && has_index) {
        snprintf(err, errlen, "%s: holds both model.safetensors and model.safetensors.index.json; one is read",
                 d->path);
        return -1;
    }
    if (!has_index) {
        snprintf(d->weights, sizeof d->weights, "%s", single);
        if (!has_single) {
            snprintf(err, errlen, "%s: has no model.safetensors or model.safetensors.index.json (PyTorch's .bin "
                     "files are not read)", d->path);
            return -1;
        }
        return add_file(d, single, err, errlen);
    }
    cJSON *index = read_json(d->weights, err, errlen);
    if (!index) return -1;
    int rc = -1;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    const char *twice = cJSON_IsObject(map) ? repeated_key(map) : NULL;
    if (!cJSON_IsObject(map) || repeated_key(index)) {
        snprintf(err, errlen, "%s: has no weight_map object (or a key given twice)", d->weights);
        goto done;
    }
    if (twice) {
        snprintf(err, errlen, "%s: weight_map names tensor %s twice", d->weights, twice);
        goto done;
    }
    for (const cJSON *x = map->child; x; x = x->next) {   // each shard once, at its first mention
        const char *shard = cJSON_IsString(x) ? x->valuestring : "";
        if (!shard[0] || strchr(shard, '/') || strcmp(shard, ".") == 0 || strcmp(shard, "..") == 0) {
            snprintf(err, errlen, "%s: weight_map's file for %s is not a file name in the directory", d->weights,
                     x->string);
            goto done;
        }
        const cJSON *y = map->child;
        while (y != x && strcmp(y->valuestring, shard) != 0) y = y->next;
        if (y != x) continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", d->path, shard) >= sizeof path) {
            snprintf(err, errlen, "%s: path too long", d->path);
            goto done;
        }
        if (!file_exists(path)) {
            snprintf(err, errlen, "%s: names shard %s (for tensor %s), which is missing", d->weights, shard, x->string);
            goto done;
        }
        if (add_file(d, path, err, errlen) != 0) goto done;
        const StFile *f = d->files[d->n_files - 1];
        for (int i = 0; i < st_num_tensors(f); i++) {   // every tensor of the shard is the index's for it
            const char *name = st_tensor_at(f, i)->name, *named = shard_of(map, name);
            if (!named || strcmp(named, shard) != 0) {
                snprintf(err, errlen, "%s: holds tensor %s, which %s %s%s", path, name, d->weights,
                         named ? "places in " : "does not name", named ? named : "");
                goto done;
            }
        }
    }
    for (const cJSON *x = map->child; x; x = x->next) {   // and every tensor named is in its shard
        int i = 0;
        while (i < d->n_files && strcmp(st_path(d->files[i]) + strlen(d->path) + 1, x->valuestring) != 0) i++;
        if (i == d->n_files || !st_find(d->files[i], x->string)) {
            snprintf(err, errlen, "%s: names tensor %s in %s, which does not hold it", d->weights, x->string,
                     x->valuestring);
            goto done;
        }
    }
    rc = 0;
done:
    cJSON_Delete(index);
    return rc;
}

/* ---------------------------------------------------------------- the tensors */

// The directory's tensor of Hugging Face's name (with the base model's prefix),
// or of the name without it; -1 with a message if neither is there or both are.
static Found *find_tensor(const HfDir *d, const char *name, char *err, size_t errlen) {
    const char *prefix = hf_base_prefix(&d->cfg), *bare = name;
    if (strncmp(name, prefix, strlen(prefix)) == 0) bare = name + strlen(prefix);
    Found *with = NULL, *without = NULL;
    for (int i = 0; i < d->n_found; i++) {
        if (strcmp(d->found[i].t->name, name) == 0) with = &d->found[i];
        else if (bare != name && strcmp(d->found[i].t->name, bare) == 0) without = &d->found[i];
    }
    if (with && without) {
        snprintf(err, errlen, "%s: holds both %s and %s", d->weights, name, bare);
        return NULL;
    }
    if (!with && !without) snprintf(err, errlen, "%s: missing tensor %s", d->weights, name);
    return with ? with : without;
}

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

// Whether tensor f is a float of Hugging Face's shape for part p.
static int check_part(const Found *f, const HfPart *p, char *err, size_t errlen) {
    const StTensor *t = f->t;
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
        snprintf(err, errlen, "%s: tensor %s has dtype %s; F32, F16 and BF16 are read", st_path(f->file), t->name,
                 st_dtype_name(t->dtype));
        return -1;
    }
    if (t->ndim != p->ndim || t->shape[0] != p->shape[0] || (p->ndim == 2 && t->shape[1] != p->shape[1])) {
        char got[96], want[96];
        shape_text(got, sizeof got, t->ndim, t->shape);
        shape_text(want, sizeof want, p->ndim, p->shape);
        snprintf(err, errlen, "%s: tensor %s has shape %s, expected %s from config.json", st_path(f->file), t->name,
                 got, want);
        return -1;
    }
    return 0;
}

// Whether tensors a and b, of n elements each, hold the same floats (compared
// through two buffers of HF_READ_CHUNK): 1, 0, or -1 with a message.
static int same_values(const Found *a, const Found *b, size_t n, char *err, size_t errlen) {
    float *x = malloc(2 * HF_READ_CHUNK * sizeof *x), *y = x + HF_READ_CHUNK;
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int same = 1;
    for (size_t k = 0; same == 1 && k < n; k += HF_READ_CHUNK) {
        size_t m = n - k < HF_READ_CHUNK ? n - k : HF_READ_CHUNK;
        if (st_read_floats(a->file, a->t, k, m, x, err, errlen) != 0 ||
            st_read_floats(b->file, b->t, k, m, y, err, errlen) != 0)
            same = -1;
        else if (memcmp(x, y, m * sizeof *x) != 0)
            same = 0;
    }
    free(x);
    return same;
}

// GPT-2's attention-mask buffers, h.{l}.attn.bias and h.{l}.attn.masked_bias,
// which GPT-2's released file holds and GPT2LMHeadModel ignores on loading
// (they are computed, not learned): the name's layer, or -1.
static int mask_buffer_layer(const HfDir *d, const char *name) {
    const char *prefix = hf_base_prefix(&d->cfg);
    if (d->cfg.block != BLOCK_GPT2) return -1;
    if (strncmp(name, prefix, strlen(prefix)) == 0) name += strlen(prefix);
    int layer, at = 0;
    if (sscanf(name, "h.%d.attn.%n", &layer, &at) != 1 || at == 0) return -1;
    return strcmp(name + at, "bias") == 0 || strcmp(name + at, "masked_bias") == 0 ? layer : -1;
}

// Every tensor of the directory claimed: each part of each parameter once,
// lm_head.weight (equal to the embedding), GPT-2's mask buffers; nothing else.
static int claim_tensors(HfDir *d, char *err, size_t errlen) {
    for (int i = 0; i < d->n_files; i++) d->n_found += st_num_tensors(d->files[i]);
    d->found = calloc((size_t)d->n_found + 1, sizeof *d->found);
    if (!d->found) {
        snprintf(err, errlen, "%s: out of memory", d->path);
        return -1;
    }
    for (int i = 0, n = 0; i < d->n_files; i++)
        for (int k = 0; k < st_num_tensors(d->files[i]); k++)
            d->found[n++] = (Found){.file = d->files[i], .t = st_tensor_at(d->files[i], k), .claim = UNCLAIMED};
    GPT *shell = NULL;   // the parameter table config.json describes, no buffer
    char msg[256];
    if (gpt_describe(&shell, &d->cfg, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: %s", d->config, msg);
        return -1;
    }
    const ParamEntry *entries, *wte = gpt_find_param(shell, "wte");
    int n_entries = gpt_param_entries(shell, &entries), rc = -1;
    Found *embedding = NULL;
    HfPart parts[HF_MAX_PARTS], head = {.name = "lm_head.weight", .layout = HF_ROWS, .parts = 1, .ndim = 2,
                                        .shape = {wte->shape[0], wte->shape[1]}};
    for (int i = 0; i < n_entries; i++) {
        int n = hf_parts(&d->cfg, &entries[i], parts);
        for (int p = 0; p < n; p++) {
            Found *f = find_tensor(d, parts[p].name, err, errlen);
            if (!f || check_part(f, &parts[p], err, errlen) != 0) goto done;
            f->claim = PARAMETER;   // each part's name is its own: no tensor is claimed twice
            if (&entries[i] == wte) embedding = f;
        }
    }
    for (int i = 0; i < d->n_found; i++) {
        Found *f = &d->found[i];
        if (f->claim != UNCLAIMED) continue;
        int layer = mask_buffer_layer(d, f->t->name);
        if (layer >= 0 && layer < d->cfg.n_layer) {
            f->claim = MASK_BUFFER;
        } else if (strcmp(f->t->name, "lm_head.weight") == 0) {
            if (check_part(f, &head, err, errlen) != 0) goto done;
            int same = same_values(f, embedding, (size_t)wte->numel, err, errlen);
            if (same < 0) goto done;
            if (!same) {
                snprintf(err, errlen, "%s: lm_head.weight differs from %s (tie_word_embeddings %s): ropelab's "
                         "head is the embedding, an untied head is not read", st_path(f->file), embedding->t->name,
                         d->tied ? "true" : "false");
                goto done;
            }
            f->claim = HEAD;
        } else {
            snprintf(err, errlen, "%s: tensor %s is not one of %s's as ropelab reads it (pos=%s, block=%s)",
                     st_path(f->file), f->t->name, d->class_name, pos_kind_name(d->cfg.pos),
                     d->cfg.block == BLOCK_LLAMA ? "llama" : "gpt2");
            goto done;
        }
    }
    int has_head = 0;
    for (int i = 0; i < d->n_found; i++) has_head |= d->found[i].claim == HEAD;
    if (!d->tied && !has_head) {
        snprintf(err, errlen, "%s: tie_word_embeddings is false but %s has no lm_head.weight", d->config, d->weights);
        goto done;
    }
    rc = 0;
done:
    gpt_free(shell);
    return rc;
}

int hf_open(HfDir **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    HfDir *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    snprintf(d->path, sizeof d->path, "%s", path);
    snprintf(d->config, sizeof d->config, "%s/config.json", path);
    cJSON *config = NULL;
    if (!file_exists(d->config)) {
        snprintf(err, errlen, "%s: a directory without config.json: not a Hugging Face model directory", path);
        goto fail;
    }
    if (!(config = read_json(d->config, err, errlen)) || map_config(d, config, err, errlen) != 0 ||
        open_weights(d, err, errlen) != 0 || claim_tensors(d, err, errlen) != 0)
        goto fail;
    cJSON_Delete(config);
    *out = d;
    return 0;
fail:
    cJSON_Delete(config);
    hf_close(d);
    return -1;
}

int hf_read_params(const HfDir *d, GPT *model, char *err, size_t errlen) {
    const GPTConfig *cfg = gpt_config(model);
    const ParamEntry *entries;
    int n_entries = gpt_param_entries(model, &entries);
    float *params = gpt_params(model), *buf = malloc(HF_READ_CHUNK * sizeof *buf);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", d->path);
        return -1;
    }
    HfPart parts[HF_MAX_PARTS];
    int rc = -1;
    for (int i = 0; i < n_entries; i++) {
        const ParamEntry *e = &entries[i];
        int n = hf_parts(cfg, e, parts);
        if (n == 0) {
            snprintf(err, errlen, "%s: parameter %s has no Hugging Face name", d->path, e->name);
            goto done;
        }
        for (int p = 0; p < n; p++) {
            const Found *f = find_tensor(d, parts[p].name, err, errlen);
            if (!f || check_part(f, &parts[p], err, errlen) != 0) goto done;
            for (size_t k = 0; k < parts[p].numel; k += HF_READ_CHUNK) {
                size_t m = parts[p].numel - k < HF_READ_CHUNK ? parts[p].numel - k : HF_READ_CHUNK;
                if (st_read_floats(f->file, f->t, k, m, buf, err, errlen) != 0) goto done;
                for (size_t j = 0; j < m; j++) {
                    if (!isfinite(buf[j])) {
                        snprintf(err, errlen, "%s: tensor %s holds %s at index %zu", st_path(f->file), f->t->name,
                                 isnan(buf[j]) ? "NaN" : "an infinity", k + j);
                        goto done;
                    }
                    params[e->offset + hf_our_index(cfg, e, &parts[p], k + j)] = buf[j];
                }
            }
        }
    }
    rc = 0;
done:
    free(buf);
    return rc;
}
