// gguf_model.c: a trained model as llama.cpp's GGUF tensors and keys (see
// gguf_model.h for the architecture of each block and scheme).
//
// Tensors keep our layout: a weight [out, in], row-major, is ggml's
// ne = {in, out}, the shape llama.cpp creates for every linear layer, so
// nothing is transposed. A fused matrix of ours that llama.cpp keeps as
// several (block=llama's c_attn = [q; k; v] and c_fc = [gate; up], stacked
// by rows) is cut into its row blocks, each a tensor pointing into our
// parameters. The names are llama.cpp's (llama-arch.cpp).
#include "format/gguf_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/meter.h"
#include "model/layers.h"
#include "model/pos.h"
#include "model/pos_maths.h"

// Our tensor names and llama.cpp's: a layer's h.{l}.OURS is blk.{l}.THEIRS,
// or, for a matrix of `parts` stacked blocks of rows, its block `part` is.
typedef struct { const char *ours, *theirs; int part, parts; } NameMap;
static const NameMap GPT2_LAYER_NAMES[] = {
    {"ln_1.weight", "attn_norm.weight", 0, 1},         {"ln_1.bias", "attn_norm.bias", 0, 1},
    {"attn.c_attn.weight", "attn_qkv.weight", 0, 1},   {"attn.c_attn.bias", "attn_qkv.bias", 0, 1},
    {"attn.c_proj.weight", "attn_output.weight", 0, 1}, {"attn.c_proj.bias", "attn_output.bias", 0, 1},
    {"ln_2.weight", "ffn_norm.weight", 0, 1},          {"ln_2.bias", "ffn_norm.bias", 0, 1},
    {"mlp.c_fc.weight", "ffn_up.weight", 0, 1},        {"mlp.c_fc.bias", "ffn_up.bias", 0, 1},
    {"mlp.c_proj.weight", "ffn_down.weight", 0, 1},    {"mlp.c_proj.bias", "ffn_down.bias", 0, 1},
};
// block=llama: c_attn's rows are q, k, v; c_fc's are gate (silu's input), then up
static const NameMap LLAMA_LAYER_NAMES[] = {
    {"ln_1.weight", "attn_norm.weight", 0, 1},
    {"attn.c_attn.weight", "attn_q.weight", 0, 3}, {"attn.c_attn.weight", "attn_k.weight", 1, 3},
    {"attn.c_attn.weight", "attn_v.weight", 2, 3},
    {"attn.c_proj.weight", "attn_output.weight", 0, 1},
    {"ln_2.weight", "ffn_norm.weight", 0, 1},
    {"mlp.c_fc.weight", "ffn_gate.weight", 0, 2}, {"mlp.c_fc.weight", "ffn_up.weight", 1, 2},
    {"mlp.c_proj.weight", "ffn_down.weight", 0, 1},
};
// block=llama with partial rotary, as chatglm: c_attn and c_fc whole (chatglm's ffn_up is
// [gate; up] stacked, silu's input first, as ours)
static const NameMap CHATGLM_LAYER_NAMES[] = {
    {"ln_1.weight", "attn_norm.weight", 0, 1},         {"attn.c_attn.weight", "attn_qkv.weight", 0, 1},
    {"attn.c_proj.weight", "attn_output.weight", 0, 1}, {"ln_2.weight", "ffn_norm.weight", 0, 1},
    {"mlp.c_fc.weight", "ffn_up.weight", 0, 1},        {"mlp.c_proj.weight", "ffn_down.weight", 0, 1},
};
static const NameMap TOP_NAMES[] = {
    {"wte", "token_embd.weight", 0, 1}, {"wpe", "position_embd.weight", 0, 1},
    {"ln_f.weight", "output_norm.weight", 0, 1}, {"ln_f.bias", "output_norm.bias", 0, 1},
};
// The most tensors of ours one entry becomes (c_attn: q, k, v).
#define MAX_PARTS 3

// ggml's ALiBi: slopes from max_bias = 8, the same recipe as pos_alibi.c.
#define ALIBI_MAX_BIAS 8.0f
// The largest context_length written: ggml reads a uint32, llama.cpp an int in places.
#define MAX_CONTEXT_LENGTH 0x7fffffffLL

const char *gguf_model_refusal(const GPTConfig *cfg) {
    const PosExports *x = pos_exports(cfg->pos);
    if (!x->gguf[cfg->block]) return x->gguf_no_home[cfg->block];
    if (cfg->pos != POS_ROPE) return NULL;
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

// The scheme's architecture (pos_exports), but llama with partial rotary,
// which llama.cpp has as chatglm (the first rope.dimension_count dims rotated).
static const char *architecture(const GPTConfig *cfg) {
    const char *arch = pos_exports(cfg->pos)->gguf[cfg->block];
    if (cfg->block == BLOCK_LLAMA && cfg->pos == POS_ROPE && cfg->rope_dims < cfg->d_model / cfg->n_head)
        return "chatglm";
    return arch;
}

// The tensors of our entry e under llama.cpp's names, in the table's order, into
// t (at most MAX_PARTS); their count, 0 for a name not in the tables.
static int map_tensor(const GPTConfig *cfg, const ParamEntry *e, const float *data, GgufTensor *t) {
    const NameMap *names = TOP_NAMES;
    size_t n_names = sizeof TOP_NAMES / sizeof TOP_NAMES[0];
    const char *ours = e->name;
    char prefix[32] = "";
    int layer, at = 0, n = 0;
    if (sscanf(e->name, "h.%d.%n", &layer, &at) == 1 && at > 0) {
        const char *arch = architecture(cfg);
#define USE(table) (names = table, n_names = sizeof table / sizeof table[0])
        if (cfg->block == BLOCK_GPT2) USE(GPT2_LAYER_NAMES);
        else if (!strcmp(arch, "chatglm")) USE(CHATGLM_LAYER_NAMES);
        else USE(LLAMA_LAYER_NAMES);
#undef USE
        ours = e->name + at;
        snprintf(prefix, sizeof prefix, "blk.%d.", layer);
    }
    for (size_t i = 0; i < n_names && n < MAX_PARTS; i++) {
        if (strcmp(ours, names[i].ours) != 0) continue;
        GgufTensor *p = &t[n++];
        size_t rows = (size_t)e->shape[0] / names[i].parts, cols = e->ndim == 2 ? (size_t)e->shape[1] : 1;
        snprintf(p->name, sizeof p->name, "%s%s", prefix, names[i].theirs);
        p->n_dims = e->ndim;
        p->ne[0] = e->ndim == 2 ? cols : rows;
        if (e->ndim == 2) p->ne[1] = rows;
        p->data = data + (size_t)names[i].part * rows * cols;
    }
    return n;
}

// Made here: the permuted c_attn of each layer (gptneox), or the position table (sinusoidal, none).
static size_t owned_floats(const GPTConfig *cfg, int n_ctx) {
    size_t C = cfg->d_model;
    if (cfg->block == BLOCK_LLAMA) return 0;
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
    int C = cfg->d_model, H = cfg->n_head, D = C / H, R = cfg->rope_dims, llama = cfg->block == BLOCK_LLAMA;
    int scaled = cfg->pos == POS_ROPE && cfg->rope_scaling != ROPE_SCALING_NONE;
    // L: the length the model was trained at (rope_original_length, else block_size)
    int L = cfg->rope_original_length > 0 ? cfg->rope_original_length : cfg->block_size;
    long long n_ctx = context_length > 0 ? context_length : cfg->block_size;
    if (context_length <= 0 && scaled) {   // Hugging Face's max_position_embeddings of a scaled model: s x L
        n_ctx = (long long)((double)cfg->rope_scaling_factor * L);
        if (n_ctx > MAX_CONTEXT_LENGTH) {
            snprintf(err, errlen, "context_length = rope_scaling_factor %g x the original length %d is past "
                     "%lld; --context-length N writes N", cfg->rope_scaling_factor, L, MAX_CONTEXT_LENGTH);
            return -1;
        }
        snprintf(out->note, sizeof out->note, "context_length = %lld, rope_scaling_factor %g x the original "
                 "length %d (Hugging Face's convention; --context-length N writes N)", n_ctx,
                 cfg->rope_scaling_factor, L);
    }
    if (cfg->pos == POS_LEARNED && n_ctx != cfg->block_size) {
        snprintf(err, errlen, "pos=learned has block_size = %d rows of wpe: the context length cannot be %lld",
                 cfg->block_size, n_ctx);
        return -1;
    }
    int table = !llama && (cfg->pos == POS_SINUSOIDAL || cfg->pos == POS_NONE);   // position_embd made here
    int neox = !llama && cfg->pos == POS_ROPE;
    out->arch = architecture(cfg);
    int chatglm = !strcmp(out->arch, "chatglm");

    const ParamEntry *entries;
    int n_entries = gpt_param_entries(model, &entries);
    float *params = gpt_params(model);
    size_t owned = owned_floats(cfg, (int)n_ctx);
    out->tensors = calloc((size_t)n_entries * MAX_PARTS + 2, sizeof *out->tensors);
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
        int n = map_tensor(cfg, e, params + e->offset, t);
        if (n == 0) {   // a tensor of a scheme refused above
            snprintf(err, errlen, "tensor %s has no llama.cpp name", e->name);
            gguf_model_free(out);
            return -1;
        }
        out->n_tensors += n;
        if (neox && strstr(e->name, ".attn.c_attn.")) {   // NEOX's pairs
            int rows = e->shape[0], cols = e->ndim == 2 ? e->shape[1] : 1;
            const float *src = params + e->offset;
            for (int r = 0; r < rows; r++)
                memcpy(next + (size_t)r * cols, src + (size_t)gguf_neox_source_row(r, C, D, R) * cols,
                       (size_t)cols * sizeof(float));
            t->data = next;
            next += (size_t)rows * cols;
        }
        if (i == 0 && table) {   // position_embd right after token_embd
            GgufTensor *pe = &out->tensors[out->n_tensors++];
            snprintf(pe->name, sizeof pe->name, "position_embd.weight");
            pe->n_dims = 2;
            pe->ne[0] = (uint64_t)C;
            pe->ne[1] = (uint64_t)n_ctx;
            for (int t0 = 0; cfg->pos == POS_SINUSOIDAL && t0 < n_ctx; t0 += 4096) {   // a long table: progress
                int t1 = n_ctx - t0 < 4096 ? (int)n_ctx : t0 + 4096;
                sinusoidal_build_rows(next, t0, t1, C, cfg->sinusoidal_scale);
                if (meter) meter_update(meter, "position table", t1, n_ctx, "rows");
            }
            pe->data = next;   // none: zeros (calloc)
            next += (size_t)n_ctx * C;
        }
    }
    if (neox || chatglm) {   // gptneox (and chatglm in early 2025) always read an output matrix: wte
        GgufTensor *o = &out->tensors[out->n_tensors++];
        *o = out->tensors[0];
        snprintf(o->name, sizeof o->name, "output.weight");
    }   // gpt2, mpt, llama and refact use token_embd when output.weight is absent

    if (llama)
        snprintf(out->name, sizeof out->name, "ropelab block=llama pos=%s, %d layers, d_model %d",
                 pos_kind_name(cfg->pos), cfg->n_layer, C);
    else
        snprintf(out->name, sizeof out->name, "ropelab pos=%s, %d layers, d_model %d", pos_kind_name(cfg->pos),
                 cfg->n_layer, C);
    add_str(out, "general.architecture", out->arch);
    add_str(out, "general.name", out->name);
    add_u32(out, "general.file_type", 0);   // LLAMA_FTYPE_ALL_F32
    add_u32(out, "context_length", (uint32_t)n_ctx);
    add_u32(out, "embedding_length", (uint32_t)C);
    add_u32(out, "block_count", (uint32_t)cfg->n_layer);
    add_u32(out, "feed_forward_length", (uint32_t)gpt_mlp_hidden(cfg));
    add_u32(out, "attention.head_count", (uint32_t)H);
    if (llama) add_f32(out, "attention.layer_norm_rms_epsilon", RMS_EPS);
    else add_f32(out, "attention.layer_norm_epsilon", LN_EPS);
    if (cfg->pos == POS_ALIBI) add_f32(out, "attention.max_alibi_bias", ALIBI_MAX_BIAS);
    if (cfg->pos == POS_ROPE) {
        if (neox) add_bool(out, "use_parallel_residual", 0);
        add_u32(out, "rope.dimension_count", (uint32_t)R);
        add_f32(out, "rope.freq_base", (float)rope_scaled_base(cfg));   // ntk: the scaled base
        if (cfg->rope_scaling == ROPE_SCALING_LINEAR || cfg->rope_scaling == ROPE_SCALING_YARN) {
            add_str(out, "rope.scaling.type", cfg->rope_scaling == ROPE_SCALING_LINEAR ? "linear" : "yarn");
            add_f32(out, "rope.scaling.factor", cfg->rope_scaling_factor);
            add_u32(out, "rope.scaling.original_context_length", (uint32_t)L);
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
