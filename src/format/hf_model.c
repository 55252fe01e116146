// hf_model.c: a trained model as a Hugging Face model directory (see
// hf_model.h for the classes; docs/FORMAT.md has the tables).
//
// The weights: each of Hugging Face's tensors is one of ours (or a block of
// its rows), as it is, transposed, or with its rows permuted, by the tables
// below. The configuration is JSON (cJSON), in the form transformers'
// GPT2Config / LlamaConfig read; the tokenizer's two files are
// hf_tokenizer.c's.
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

// How a tensor of Hugging Face's is made from ours (a [rows, cols] row-major matrix, or a vector):
//   AS_IS       the same bytes
//   TRANSPOSED  [cols, rows]: GPT-2's Conv1D keeps a weight as [in, out]
//   ROWS        rows part*rows/parts .. (part+1)*rows/parts - 1: one of a fused matrix's blocks
//   ROTATE_HALF those rows, then within each head row i < D/2 is our row 2i and row D/2 + i our
//               row 2i + 1: Llama's rotate-half pairs (i, i + D/2) are our adjacent pairs (2i, 2i+1)
typedef enum { AS_IS, TRANSPOSED, ROWS, ROTATE_HALF } Layout;
typedef struct { const char *ours, *theirs; Layout layout; int part, parts; } HfName;

// block=gpt2, pos=learned: GPT2LMHeadModel (transformer.h.{l}.* for a layer's h.{l}.*).
static const HfName GPT2_TOP[] = {
    {"wte", "transformer.wte.weight", AS_IS, 0, 1},           {"wpe", "transformer.wpe.weight", AS_IS, 0, 1},
    {"ln_f.weight", "transformer.ln_f.weight", AS_IS, 0, 1},  {"ln_f.bias", "transformer.ln_f.bias", AS_IS, 0, 1},
};
static const HfName GPT2_LAYER[] = {
    {"ln_1.weight", "ln_1.weight", AS_IS, 0, 1},               {"ln_1.bias", "ln_1.bias", AS_IS, 0, 1},
    {"attn.c_attn.weight", "attn.c_attn.weight", TRANSPOSED, 0, 1},
    {"attn.c_attn.bias", "attn.c_attn.bias", AS_IS, 0, 1},
    {"attn.c_proj.weight", "attn.c_proj.weight", TRANSPOSED, 0, 1},
    {"attn.c_proj.bias", "attn.c_proj.bias", AS_IS, 0, 1},
    {"ln_2.weight", "ln_2.weight", AS_IS, 0, 1},               {"ln_2.bias", "ln_2.bias", AS_IS, 0, 1},
    {"mlp.c_fc.weight", "mlp.c_fc.weight", TRANSPOSED, 0, 1},  {"mlp.c_fc.bias", "mlp.c_fc.bias", AS_IS, 0, 1},
    {"mlp.c_proj.weight", "mlp.c_proj.weight", TRANSPOSED, 0, 1},
    {"mlp.c_proj.bias", "mlp.c_proj.bias", AS_IS, 0, 1},
};
// block=llama, pos=rope: LlamaForCausalLM (model.layers.{l}.*); c_attn's rows are q, k, v,
// c_fc's gate (silu's input), then up.
static const HfName LLAMA_TOP[] = {
    {"wte", "model.embed_tokens.weight", AS_IS, 0, 1}, {"ln_f.weight", "model.norm.weight", AS_IS, 0, 1},
};
static const HfName LLAMA_LAYER[] = {
    {"ln_1.weight", "input_layernorm.weight", AS_IS, 0, 1},
    {"attn.c_attn.weight", "self_attn.q_proj.weight", ROTATE_HALF, 0, 3},
    {"attn.c_attn.weight", "self_attn.k_proj.weight", ROTATE_HALF, 1, 3},
    {"attn.c_attn.weight", "self_attn.v_proj.weight", ROWS, 2, 3},
    {"attn.c_proj.weight", "self_attn.o_proj.weight", AS_IS, 0, 1},
    {"ln_2.weight", "post_attention_layernorm.weight", AS_IS, 0, 1},
    {"mlp.c_fc.weight", "mlp.gate_proj.weight", ROWS, 0, 2},
    {"mlp.c_fc.weight", "mlp.up_proj.weight", ROWS, 1, 2},
    {"mlp.c_proj.weight", "mlp.down_proj.weight", AS_IS, 0, 1},
};
#define MAX_PARTS 3   // the most tensors of theirs one of ours becomes (c_attn: q, k, v)
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

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
                 "rope_scaling is not mapped yet)", scaling);
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

// The tensors of our entry e under Hugging Face's names (into names[], up to
// MAX_PARTS), made into *next where the layout asks; their count, 0 for a name
// not in the tables.
static int map_tensor(const GPTConfig *cfg, const ParamEntry *e, const float *data, StTensorOut *t,
                      char (*names)[96], float **next) {
    int llama = cfg->block == BLOCK_LLAMA, layer, at = 0, n = 0;
    const HfName *table = llama ? LLAMA_TOP : GPT2_TOP;
    size_t n_table = llama ? N_OF(LLAMA_TOP) : N_OF(GPT2_TOP);
    const char *ours = e->name;
    char prefix[48] = "";
    if (sscanf(e->name, "h.%d.%n", &layer, &at) == 1 && at > 0) {
        table = llama ? LLAMA_LAYER : GPT2_LAYER;
        n_table = llama ? N_OF(LLAMA_LAYER) : N_OF(GPT2_LAYER);
        ours = e->name + at;
        snprintf(prefix, sizeof prefix, llama ? "model.layers.%d." : "transformer.h.%d.", layer);
    }
    int C = cfg->d_model, D = C / cfg->n_head;
    for (size_t i = 0; i < n_table && n < MAX_PARTS; i++) {
        const HfName *m = &table[i];
        if (strcmp(ours, m->ours) != 0) continue;
        StTensorOut *o = &t[n];
        snprintf(names[n], sizeof names[n], "%s%s", prefix, m->theirs);
        n++;
        size_t rows = (size_t)e->shape[0] / m->parts, cols = e->ndim == 2 ? (size_t)e->shape[1] : 1;
        const float *src = data + (size_t)m->part * rows * cols;
        o->name = names[n - 1];
        o->dtype = ST_F32;
        o->ndim = e->ndim;
        o->shape[0] = (int64_t)rows;
        o->shape[1] = (int64_t)cols;
        o->data = src;
        if (m->layout == TRANSPOSED) {   // [rows, cols] -> [cols, rows]
            float *dst = *next;
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
            o->shape[0] = (int64_t)cols;
            o->shape[1] = (int64_t)rows;
            o->data = dst;
            *next += rows * cols;
        } else if (m->layout == ROTATE_HALF) {   // q (part 0) or k (part 1): rows part*C .. part*C + C - 1
            float *dst = *next;
            for (size_t r = 0; r < rows; r++) {
                int from = gguf_neox_source_row(m->part * C + (int)r, C, D, D) - m->part * C;
                memcpy(dst + r * cols, src + (size_t)from * cols, cols * sizeof(float));
            }
            o->data = dst;
            *next += rows * cols;
        }
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
    StTensorOut *t = calloc((size_t)n_entries * MAX_PARTS, sizeof *t);
    char (*names)[96] = calloc((size_t)n_entries * MAX_PARTS, sizeof *names);
    float *made = malloc(hf_model_bytes(cfg) ? hf_model_bytes(cfg) : 1), *next = made;
    int n = 0;
    if (!t || !names || !made) {
        snprintf(err, errlen, "out of memory for the exported tensors");
        rc = -2;
        goto done;
    }
    for (int i = 0; i < n_entries; i++) {
        int k = map_tensor(cfg, &entries[i], params + entries[i].offset, t + n, names + n, &next);
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
    free(names);
    free(made);
    return rc;
}
