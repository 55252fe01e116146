// hf_model.c: a trained model as a Hugging Face model directory (see
// hf_model.h for the classes; docs/FORMAT.md has the tables).
//
// The weights: each of Hugging Face's tensors is one of ours (or a block of
// its rows), as it is, transposed, or with its rows permuted, by the tables
// below, which format/hf_read.c reads by too (hf_parts, hf_our_index). The
// configuration is JSON (cJSON), in the form transformers' GPT2Config /
// LlamaConfig read; the tokenizer's two files are hf_tokenizer.c's.
#include "format/hf_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_dir.h"
#include "common/atomic_file.h"
#include "format/gguf_model.h"
#include "format/hf_tokenizer.h"
#include "format/safetensors.h"
#include "model/layers.h"
#include "model/pos.h"

const char *const HF_FILES[HF_N_FILES] = {"config.json", "model.safetensors", "tokenizer.json",
                                          "tokenizer_config.json"};

// Each of Hugging Face's tensors is one of ours or a block of its rows (part of parts;
// HfLayout in hf_model.h), named without the base model's prefix (hf_base_prefix) and, in
// a layer, without the layer's ("h.{l}." or "layers.{l}.").
typedef struct { const char *ours, *theirs; HfLayout layout; int part, parts; } HfName;

// block=gpt2, pos=learned: GPT2LMHeadModel (transformer.h.{l}.* for a layer's h.{l}.*).
static const HfName GPT2_TOP[] = {
    {"wte", "wte.weight", HF_ROWS, 0, 1},                  {"wpe", "wpe.weight", HF_ROWS, 0, 1},
    {"ln_f.weight", "ln_f.weight", HF_ROWS, 0, 1},         {"ln_f.bias", "ln_f.bias", HF_ROWS, 0, 1},
};
static const HfName GPT2_LAYER[] = {
    {"ln_1.weight", "ln_1.weight", HF_ROWS, 0, 1},         {"ln_1.bias", "ln_1.bias", HF_ROWS, 0, 1},
    {"attn.c_attn.weight", "attn.c_attn.weight", HF_TRANSPOSED, 0, 1},
    {"attn.c_attn.bias", "attn.c_attn.bias", HF_ROWS, 0, 1},
    {"attn.c_proj.weight", "attn.c_proj.weight", HF_TRANSPOSED, 0, 1},
    {"attn.c_proj.bias", "attn.c_proj.bias", HF_ROWS, 0, 1},
    {"ln_2.weight", "ln_2.weight", HF_ROWS, 0, 1},         {"ln_2.bias", "ln_2.bias", HF_ROWS, 0, 1},
    {"mlp.c_fc.weight", "mlp.c_fc.weight", HF_TRANSPOSED, 0, 1},
    {"mlp.c_fc.bias", "mlp.c_fc.bias", HF_ROWS, 0, 1},
    {"mlp.c_proj.weight", "mlp.c_proj.weight", HF_TRANSPOSED, 0, 1},
    {"mlp.c_proj.bias", "mlp.c_proj.bias", HF_ROWS, 0, 1},
};
// block=llama, pos=rope: LlamaForCausalLM (model.layers.{l}.*); c_attn's rows are q, k, v,
// c_fc's gate (silu's input), then up.
static const HfName LLAMA_TOP[] = {
    {"wte", "embed_tokens.weight", HF_ROWS, 0, 1}, {"ln_f.weight", "norm.weight", HF_ROWS, 0, 1},
};
static const HfName LLAMA_LAYER[] = {
    {"ln_1.weight", "input_layernorm.weight", HF_ROWS, 0, 1},
    {"attn.c_attn.weight", "self_attn.q_proj.weight", HF_ROTATE_HALF, 0, 3},
    {"attn.c_attn.weight", "self_attn.k_proj.weight", HF_ROTATE_HALF, 1, 3},
    {"attn.c_attn.weight", "self_attn.v_proj.weight", HF_ROWS, 2, 3},
    {"attn.c_proj.weight", "self_attn.o_proj.weight", HF_ROWS, 0, 1},
    {"ln_2.weight", "post_attention_layernorm.weight", HF_ROWS, 0, 1},
    {"mlp.c_fc.weight", "mlp.gate_proj.weight", HF_ROWS, 0, 2},
    {"mlp.c_fc.weight", "mlp.up_proj.weight", HF_ROWS, 1, 2},
    {"mlp.c_proj.weight", "mlp.down_proj.weight", HF_ROWS, 0, 1},
};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

const char *hf_base_prefix(const GPTConfig *cfg) { return cfg->block == BLOCK_LLAMA ? "model." : "transformer."; }

int hf_parts(const GPTConfig *cfg, const ParamEntry *e, HfPart parts[HF_MAX_PARTS]) {
    int llama = cfg->block == BLOCK_LLAMA, layer, at = 0, n = 0;
    const HfName *table = llama ? LLAMA_TOP : GPT2_TOP;
    size_t n_table = llama ? N_OF(LLAMA_TOP) : N_OF(GPT2_TOP);
    const char *ours = e->name;
    char layer_prefix[32] = "";
    if (sscanf(e->name, "h.%d.%n", &layer, &at) == 1 && at > 0) {
        table = llama ? LLAMA_LAYER : GPT2_LAYER;
        n_table = llama ? N_OF(LLAMA_LAYER) : N_OF(GPT2_LAYER);
        ours = e->name + at;
        snprintf(layer_prefix, sizeof layer_prefix, llama ? "layers.%d." : "h.%d.", layer);
    }
    for (size_t i = 0; i < n_table && n < HF_MAX_PARTS; i++) {
        const HfName *m = &table[i];
        if (strcmp(ours, m->ours) != 0) continue;
        HfPart *p = &parts[n++];
        snprintf(p->name, sizeof p->name, "%s%s%s", hf_base_prefix(cfg), layer_prefix, m->theirs);
        p->layout = m->layout;
        p->part = m->part;
        p->parts = m->parts;
        int64_t rows = e->shape[0] / m->parts, cols = e->ndim == 2 ? e->shape[1] : 1;
        p->ndim = e->ndim;
        p->shape[0] = m->layout == HF_TRANSPOSED ? cols : rows;
        p->shape[1] = m->layout == HF_TRANSPOSED ? rows : cols;
        p->numel = (size_t)rows * (size_t)cols;
    }
    return n;
}

size_t hf_our_index(const GPTConfig *cfg, const ParamEntry *e, const HfPart *p, size_t k) {
    size_t rows = (size_t)e->shape[0] / (size_t)p->parts, cols = e->ndim == 2 ? (size_t)e->shape[1] : 1, r, c;
    if (p->layout == HF_TRANSPOSED) {   // theirs is [cols, rows]: element k is (k / rows, k % rows)
        r = k % rows;
        c = k / rows;
    } else {
        r = k / cols;
        c = k % cols;
    }
    if (p->layout == HF_ROTATE_HALF) {   // q (part 0) or k (part 1): rows part*C .. part*C + C - 1 of c_attn
        int C = cfg->d_model, D = C / cfg->n_head;
        r = (size_t)(gguf_neox_source_row(p->part * C + (int)r, C, D, D) - p->part * C);
    }
    return ((size_t)p->part * rows + r) * cols + c;
}

int hf_model_refusal(const GPTConfig *cfg, char *why, size_t n) {
    const PosExports *x = pos_exports(cfg->pos);
    int D = cfg->d_model / cfg->n_head;
    if (!x->hf[cfg->block])
        snprintf(why, n, "--format hf: pos=%s with block=%s has no home there: %s", pos_kind_name(cfg->pos),
                 cfg->block == BLOCK_LLAMA ? "llama" : "gpt2", x->hf_no_home[cfg->block]);
    else if (cfg->pos == POS_ROPE && cfg->rope_dims != D)
        snprintf(why, n, "--format hf: %s rotates every dim of a head: rope_dims = %d of head_dim %d has no home "
                 "there", x->hf[cfg->block], cfg->rope_dims, D);
    else if (cfg->pos == POS_ROPE && cfg->rope_scaling != ROPE_SCALING_NONE) {
        char scaling[32];   // the choice's name, from the model's key table
        gpt_config_get(cfg, gpt_model_key_find("rope_scaling"), scaling, sizeof scaling);
        snprintf(why, n, "--format hf writes the unscaled model: rope_scaling=%s is not written (Hugging Face's "
                 "rope_scaling is not written yet)", scaling);
    } else
        return 0;
    return 1;
}

// The floats made here: GPT-2's four transposed matrices per layer, Llama's permuted q and k.
static size_t made_floats(const GPTConfig *cfg) {
    size_t C = cfg->d_model, L = cfg->n_layer;
    return cfg->block == BLOCK_LLAMA ? L * 2 * C * C : L * 12 * C * C;
}

size_t hf_model_bytes(const GPTConfig *cfg) { return made_floats(cfg) * sizeof(float); }

// The tensors of our entry e (data) under Hugging Face's names (parts[], up to HF_MAX_PARTS),
// those whose layout moves elements made into *next; their count, 0 for a name not in the tables.
static int map_tensor(const GPTConfig *cfg, const ParamEntry *e, const float *data, StTensorOut *t,
                      HfPart *parts, float **next) {
    int n = hf_parts(cfg, e, parts);
    for (int i = 0; i < n; i++) {
        const HfPart *p = &parts[i];
        t[i] = (StTensorOut){.name = p->name, .dtype = ST_F32, .ndim = p->ndim, .shape = {p->shape[0], p->shape[1]},
                             .data = data + (size_t)p->part * p->numel};
        if (p->layout == HF_ROWS) continue;   // the rows as they are
        float *dst = *next;
        for (size_t k = 0; k < p->numel; k++) dst[k] = data[hf_our_index(cfg, e, p, k)];
        t[i].data = dst;
        *next += p->numel;
    }
    return n;
}

static int path_in(char *path, size_t n, const char *dir, const char *name, char *err, size_t errlen) {
    if ((size_t)snprintf(path, n, "%s/%s", dir, name) >= n) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return 0;
}

// root printed into dir/name, atomically; frees root.
static int write_json(const char *dir, const char *name, cJSON *root, int formatted, char *err, size_t errlen) {
    char path[4096];
    char *text = root ? (formatted ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    if (!text) {
        snprintf(err, errlen, "out of memory for %s", name);
        return -2;
    }
    int rc = path_in(path, sizeof path, dir, name, err, errlen);
    AtomicFile af;
    FILE *f = rc == 0 ? atomic_open(&af, path, ATOMIC_NEW, err, errlen) : NULL;
    if (f) {
        size_t len = strlen(text);
        int ok = fwrite(text, 1, len, f) == len && fputc('\n', f) != EOF;
        rc = atomic_commit(&af, ok, err, errlen);
    } else {
        rc = -1;
    }
    cJSON_free(text);
    return rc;
}

// config.json: GPT2Config or LlamaConfig.
// The shortest decimal that reads back as the float x (1e-05 for 1e-5f, not
// 9.99999975e-06): the eps as a config.json carries it.
static double shortest_decimal(float x) {
    char text[32];
    for (int digits = 1; digits < 9; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, (double)x);
        if ((float)strtod(text, NULL) == x) break;
    }
    return strtod(text, NULL);
}

static cJSON *config_json(const GPTConfig *cfg, int eot) {
    cJSON *c = cJSON_CreateObject();
    int C = cfg->d_model, H = cfg->n_head;
    if (cfg->block == BLOCK_LLAMA) {
        cJSON_AddItemToObject(c, "architectures", cJSON_CreateStringArray((const char *[]){"LlamaForCausalLM"}, 1));
        cJSON_AddStringToObject(c, "model_type", "llama");
        cJSON_AddNumberToObject(c, "vocab_size", cfg->vocab_size);
        cJSON_AddNumberToObject(c, "hidden_size", C);
        cJSON_AddNumberToObject(c, "intermediate_size", gpt_mlp_hidden(cfg));
        cJSON_AddNumberToObject(c, "num_hidden_layers", cfg->n_layer);
        cJSON_AddNumberToObject(c, "num_attention_heads", H);
        cJSON_AddNumberToObject(c, "num_key_value_heads", H);
        cJSON_AddNumberToObject(c, "head_dim", C / H);
        cJSON_AddStringToObject(c, "hidden_act", "silu");
        cJSON_AddNumberToObject(c, "max_position_embeddings", cfg->block_size);
        cJSON_AddNumberToObject(c, "rms_norm_eps", shortest_decimal(RMS_EPS));
        cJSON_AddNumberToObject(c, "rope_theta", cfg->rope_base);
        cJSON_AddNullToObject(c, "rope_scaling");
        cJSON_AddFalseToObject(c, "attention_bias");
        cJSON_AddFalseToObject(c, "mlp_bias");
        cJSON_AddNumberToObject(c, "attention_dropout", 0.0);
        cJSON_AddNumberToObject(c, "pretraining_tp", 1);
    } else {
        cJSON_AddItemToObject(c, "architectures", cJSON_CreateStringArray((const char *[]){"GPT2LMHeadModel"}, 1));
        cJSON_AddStringToObject(c, "model_type", "gpt2");
        cJSON_AddNumberToObject(c, "vocab_size", cfg->vocab_size);
        cJSON_AddNumberToObject(c, "n_positions", cfg->block_size);
        cJSON_AddNumberToObject(c, "n_embd", C);
        cJSON_AddNumberToObject(c, "n_layer", cfg->n_layer);
        cJSON_AddNumberToObject(c, "n_head", H);
        cJSON_AddNullToObject(c, "n_inner");   // 4 n_embd
        cJSON_AddStringToObject(c, "activation_function", "gelu_new");   // the tanh GELU
        cJSON_AddNumberToObject(c, "layer_norm_epsilon", shortest_decimal(LN_EPS));
        cJSON_AddNumberToObject(c, "resid_pdrop", 0.0);
        cJSON_AddNumberToObject(c, "embd_pdrop", 0.0);
        cJSON_AddNumberToObject(c, "attn_pdrop", 0.0);
        cJSON_AddTrueToObject(c, "scale_attn_weights");   // 1/sqrt(D)
        cJSON_AddFalseToObject(c, "scale_attn_by_inverse_layer_idx");
        cJSON_AddFalseToObject(c, "reorder_and_upcast_attn");
    }
    cJSON_AddNumberToObject(c, "initializer_range", 0.02);
    cJSON_AddNumberToObject(c, "bos_token_id", eot);
    cJSON_AddNumberToObject(c, "eos_token_id", eot);
    cJSON_AddTrueToObject(c, "tie_word_embeddings");
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
    cJSON_AddTrueToObject(c, "use_cache");
    return c;
}

int hf_model_check_target(const char *dir, int replace, char *err, size_t errlen) {
    return atomic_dir_check_target(dir, HF_FILES, HF_N_FILES, replace, err, errlen);
}

// The four files into the temporary directory.
static int write_files(const GPTConfig *cfg, const Tokenizer *tok, cJSON *tok_json, const StTensorOut *t, int n,
                       const char *dir, char *err, size_t errlen) {
    char path[4096];
    const StMeta meta[] = {{"format", "pt"}};
    int rc = write_json(dir, HF_FILES[0], config_json(cfg, tok->eot_id), 1, err, errlen);
    if (rc == 0 && (rc = path_in(path, sizeof path, dir, HF_FILES[1], err, errlen)) == 0)
        rc = st_write(path, t, n, meta, 1, ATOMIC_NEW, err, errlen);
    if (rc == 0) rc = write_json(dir, HF_FILES[2], tok_json, 0, err, errlen);
    else cJSON_Delete(tok_json);
    if (rc == 0) rc = write_json(dir, HF_FILES[3], hf_tokenizer_config_json(tok, cfg->block_size), 1, err, errlen);
    return rc;
}

int hf_model_write(GPT *model, const Tokenizer *tok, const char *dir, int replace, char *err, size_t errlen) {
    const GPTConfig *cfg = gpt_config(model);
    if (hf_model_refusal(cfg, err, errlen)) return -1;
    cJSON *tok_json;
    int rc = hf_tokenizer_json(tok, &tok_json, err, errlen);
    if (rc != 0) return rc;

    const ParamEntry *entries;
    int n_entries = gpt_param_entries(model, &entries);
    const float *params = gpt_params(model);
    StTensorOut *t = calloc((size_t)n_entries * HF_MAX_PARTS, sizeof *t);
    HfPart *parts = calloc((size_t)n_entries * HF_MAX_PARTS, sizeof *parts);
    float *made = malloc(hf_model_bytes(cfg) ? hf_model_bytes(cfg) : 1), *next = made;
    int n = 0;
    if (!t || !parts || !made) {
        snprintf(err, errlen, "out of memory for the exported tensors");
        rc = -2;
        goto done;
    }
    for (int i = 0; i < n_entries; i++) {
        int k = map_tensor(cfg, &entries[i], params + entries[i].offset, t + n, parts + n, &next);
        if (k == 0) {
            snprintf(err, errlen, "tensor %s has no Hugging Face name", entries[i].name);
            rc = -1;
            goto done;
        }
        n += k;
    }
    AtomicDir ad;
    if (atomic_dir_open(&ad, dir, HF_FILES, HF_N_FILES, replace, err, errlen) != 0) {
        rc = -1;
        goto done;
    }
    int ok = write_files(cfg, tok, tok_json, t, n, ad.tmp, err, errlen) == 0;
    tok_json = NULL;   // write_files freed it
    rc = atomic_dir_commit(&ad, ok, err, errlen);
done:
    cJSON_Delete(tok_json);
    free(t);
    free(parts);
    free(made);
    return rc;
}
