// gguf_model.c: a trained model as llama.cpp's GGUF tensors and keys (see
// gguf_model.h for the architecture of each scheme).
//
// Tensors keep our layout: a weight [out, in], row-major, is ggml's
// ne = {in, out}, the shape llama.cpp creates for every linear layer, so
// nothing is transposed. The names are llama.cpp's (llama-arch.cpp).
#include "format/gguf_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/meter.h"
#include "model/layers.h"
#include "model/pos.h"

// Our tensor names and llama.cpp's: a layer's h.{l}.X is blk.{l}.Y.
static const struct { const char *ours, *theirs; } LAYER_NAMES[] = {
    {"ln_1.weight", "attn_norm.weight"},      {"ln_1.bias", "attn_norm.bias"},
    {"attn.c_attn.weight", "attn_qkv.weight"}, {"attn.c_attn.bias", "attn_qkv.bias"},
    {"attn.c_proj.weight", "attn_output.weight"}, {"attn.c_proj.bias", "attn_output.bias"},
    {"ln_2.weight", "ffn_norm.weight"},       {"ln_2.bias", "ffn_norm.bias"},
    {"mlp.c_fc.weight", "ffn_up.weight"},     {"mlp.c_fc.bias", "ffn_up.bias"},
    {"mlp.c_proj.weight", "ffn_down.weight"}, {"mlp.c_proj.bias", "ffn_down.bias"},
};
static const struct { const char *ours, *theirs; } TOP_NAMES[] = {
    {"wte", "token_embd.weight"}, {"wpe", "position_embd.weight"},
    {"ln_f.weight", "output_norm.weight"}, {"ln_f.bias", "output_norm.bias"},
};

// ggml's ALiBi: slopes from max_bias = 8, the same recipe as pos_alibi.c.
#define ALIBI_MAX_BIAS 8.0f

const char *gguf_model_refusal(const GPTConfig *cfg) {
    if (cfg->block == BLOCK_LLAMA)
        return "block=llama is not exported yet: the export writes the gpt2, gptneox and mpt architectures of "
               "block=gpt2 (LayerNorm, GELU, biases) only";
    switch (cfg->pos) {
    case POS_T5:
        return "pos=t5 has no home in llama.cpp: its t5 architecture is the encoder-decoder model, and no "
               "decoder-only architecture there has T5's learned relative-position bias";
    case POS_ROPE:
        if (cfg->rope_scaling == ROPE_SCALING_YARN_PAPER)
            return "rope_scaling=yarn_paper has no home in llama.cpp, whose YaRN ramps over the pair index "
                   "(rope_scaling=yarn); the paper's ramp in turns is ropelab's only";
        if (cfg->rope_scaling == ROPE_SCALING_DYNAMIC)
            return "rope_scaling=dynamic has no home in llama.cpp, which has no dynamic NTK";
        if (cfg->rope_scaling == ROPE_SCALING_YARN &&
            (cfg->rope_yarn_beta_fast != 32.0f || cfg->rope_yarn_beta_slow != 1.0f))
            return "rope_scaling=yarn with rope_yarn_beta_fast/slow other than 32/1: llama.cpp reads no beta "
                   "from a GGUF file and uses 32 and 1";
        return NULL;
    default:
        return NULL;
    }
}

int gguf_neox_source_row(int r, int C, int D, int R) {
    if (r >= 2 * C) return r;          // v
    int within = r % D;                // q and k: the row's place in its head
    if (within >= R) return r;         // not rotated
    int head_start = r - within;
    return head_start + (within < R / 2 ? 2 * within : 2 * (within - R / 2) + 1);
}

static GgufKv *add_kv(GgufModel *m, const char *key, GgufKvKind kind) {
    GgufKv *kv = &m->kv[m->n_kv];
    memset(kv, 0, sizeof *kv);
    if (strncmp(key, "general.", 8) != 0) {   // an architecture key: ARCH.key
        snprintf(m->keys[m->n_kv], sizeof m->keys[0], "%s.%s", m->arch, key);
        key = m->keys[m->n_kv];
    }
    kv->key = key;
    kv->kind = kind;
    m->n_kv++;
    return kv;
}
static void add_u32(GgufModel *m, const char *key, uint32_t v) { add_kv(m, key, GGUF_KV_U32)->u32 = v; }
static void add_f32(GgufModel *m, const char *key, float v) { add_kv(m, key, GGUF_KV_F32)->f32 = v; }
static void add_bool(GgufModel *m, const char *key, int v) { add_kv(m, key, GGUF_KV_BOOL)->boolean = v; }
static void add_str(GgufModel *m, const char *key, const char *v) { add_kv(m, key, GGUF_KV_STRING)->str = v; }

// The tensor of our entry e under llama.cpp's name; 0, or -1 for a name not in the tables.
static int map_tensor(const ParamEntry *e, const float *data, GgufTensor *t) {
    int layer, at = 0;
    t->name[0] = 0;
    if (sscanf(e->name, "h.%d.%n", &layer, &at) == 1 && at > 0) {
        for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
            if (strcmp(e->name + at, LAYER_NAMES[i].ours) == 0)
                snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, LAYER_NAMES[i].theirs);
    } else {
        for (size_t i = 0; i < sizeof TOP_NAMES / sizeof TOP_NAMES[0]; i++)
            if (strcmp(e->name, TOP_NAMES[i].ours) == 0) snprintf(t->name, sizeof t->name, "%s", TOP_NAMES[i].theirs);
    }
    if (!t->name[0]) return -1;
    t->n_dims = e->ndim;
    for (int d = 0; d < e->ndim; d++) t->ne[d] = (uint64_t)e->shape[e->ndim - 1 - d];
    t->data = data;
    return 0;
}

// Made here: the permuted c_attn of each layer (rope), or the position table (sinusoidal, none).
static size_t owned_floats(const GPTConfig *cfg, int n_ctx) {
    size_t C = cfg->d_model;
    return cfg->pos == POS_ROPE ? (size_t)cfg->n_layer * (3 * C * C + 3 * C)
         : cfg->pos == POS_SINUSOIDAL || cfg->pos == POS_NONE ? (size_t)n_ctx * C : 0;
}

size_t gguf_model_bytes(const GPTConfig *cfg, int context_length) {
    return owned_floats(cfg, context_length > 0 ? context_length : cfg->block_size) * sizeof(float);
}

int gguf_model_describe(GPT *model, int context_length, GgufModel *out, Meter *meter, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const GPTConfig *cfg = gpt_config(model);
    const char *why = gguf_model_refusal(cfg);
    if (why) { snprintf(err, errlen, "%s", why); return -1; }
    int C = cfg->d_model, H = cfg->n_head, D = C / H, R = cfg->rope_dims;
    int n_ctx = context_length > 0 ? context_length : cfg->block_size;
    if (cfg->pos == POS_LEARNED && n_ctx != cfg->block_size) {
        snprintf(err, errlen, "pos=learned has block_size = %d rows of wpe: the context length cannot be %d",
                 cfg->block_size, n_ctx);
        return -1;
    }
    int gpt2 = cfg->pos == POS_LEARNED || cfg->pos == POS_SINUSOIDAL || cfg->pos == POS_NONE;
    out->arch = cfg->pos == POS_ROPE ? "gptneox" : cfg->pos == POS_ALIBI ? "mpt" : "gpt2";

    const ParamEntry *entries;
    int n_entries = gpt_param_entries(model, &entries);
    float *params = gpt_params(model);
    size_t owned = owned_floats(cfg, n_ctx);
    out->tensors = calloc((size_t)n_entries + 2, sizeof *out->tensors);
    out->owned = owned ? calloc(owned, sizeof(float)) : NULL;
    if (!out->tensors || (owned && !out->owned)) {
        snprintf(err, errlen, "out of memory for the exported tensors");
        gguf_model_free(out);
        return -2;
    }
    float *next = out->owned;
    for (int i = 0; i < n_entries; i++) {
        const ParamEntry *e = &entries[i];
        GgufTensor *t = &out->tensors[out->n_tensors];
        if (map_tensor(e, params + e->offset, t) != 0) {   // a tensor of a scheme refused above
            snprintf(err, errlen, "tensor %s has no llama.cpp name", e->name);
            gguf_model_free(out);
            return -1;
        }
        out->n_tensors++;
        if (cfg->pos == POS_ROPE && strstr(e->name, ".attn.c_attn.")) {   // NEOX's pairs
            int rows = e->shape[0], cols = e->ndim == 2 ? e->shape[1] : 1;
            const float *src = params + e->offset;
            for (int r = 0; r < rows; r++)
                memcpy(next + (size_t)r * cols, src + (size_t)gguf_neox_source_row(r, C, D, R) * cols,
                       (size_t)cols * sizeof(float));
            t->data = next;
            next += (size_t)rows * cols;
        }
        if (i == 0 && gpt2 && cfg->pos != POS_LEARNED) {   // position_embd right after token_embd
            GgufTensor *pe = &out->tensors[out->n_tensors++];
            snprintf(pe->name, sizeof pe->name, "position_embd.weight");
            pe->n_dims = 2;
            pe->ne[0] = (uint64_t)C;
            pe->ne[1] = (uint64_t)n_ctx;
            for (int t0 = 0; cfg->pos == POS_SINUSOIDAL && t0 < n_ctx; t0 += 4096) {   // a long table: progress
                int t1 = n_ctx - t0 < 4096 ? n_ctx : t0 + 4096;
                sinusoidal_build_rows(next, t0, t1, C, cfg->sinusoidal_scale);
                if (meter) meter_update(meter, "position table", t1, n_ctx, "rows");
            }
            pe->data = next;   // none: zeros (calloc)
            next += (size_t)n_ctx * C;
        }
    }
    if (cfg->pos == POS_ROPE) {   // gptneox always reads an output matrix: the tied head is wte
        GgufTensor *o = &out->tensors[out->n_tensors++];
        *o = out->tensors[0];
        snprintf(o->name, sizeof o->name, "output.weight");
    }

    snprintf(out->name, sizeof out->name, "ropelab pos=%s, %d layers, d_model %d", pos_kind_name(cfg->pos),
             cfg->n_layer, C);
    add_str(out, "general.architecture", out->arch);
    add_str(out, "general.name", out->name);
    add_u32(out, "general.file_type", 0);   // LLAMA_FTYPE_ALL_F32
    add_u32(out, "context_length", (uint32_t)n_ctx);
    add_u32(out, "embedding_length", (uint32_t)C);
    add_u32(out, "block_count", (uint32_t)cfg->n_layer);
    add_u32(out, "feed_forward_length", (uint32_t)(4 * C));
    add_u32(out, "attention.head_count", (uint32_t)H);
    add_f32(out, "attention.layer_norm_epsilon", LN_EPS);
    if (cfg->pos == POS_ALIBI) add_f32(out, "attention.max_alibi_bias", ALIBI_MAX_BIAS);
    if (cfg->pos == POS_ROPE) {
        add_bool(out, "use_parallel_residual", 0);
        add_u32(out, "rope.dimension_count", (uint32_t)R);
        add_f32(out, "rope.freq_base", (float)rope_scaled_base(cfg));   // ntk: the scaled base
        if (cfg->rope_scaling == ROPE_SCALING_LINEAR || cfg->rope_scaling == ROPE_SCALING_YARN) {
            add_str(out, "rope.scaling.type", cfg->rope_scaling == ROPE_SCALING_LINEAR ? "linear" : "yarn");
            add_f32(out, "rope.scaling.factor", cfg->rope_scaling_factor);
            add_u32(out, "rope.scaling.original_context_length",
                    (uint32_t)(cfg->rope_original_length > 0 ? cfg->rope_original_length : cfg->block_size));
        } else {
            add_str(out, "rope.scaling.type", "none");
        }
    }
    return 0;
}

void gguf_model_free(GgufModel *m) {
    free(m->tensors);
    free(m->owned);
    memset(m, 0, sizeof *m);
}
