// pos.h: the interface every positional scheme implements.
//
// A scheme acts in at most three places, each with one hook (NULL = the
// scheme does not act there):
//
//   hook            used by              forward                        backward
//   embedding       learned, sinusoidal  x[b,t] += P[pos0+t]            dwpe[t] += sum_b dx[b,t]
//   q/k rotation    rope                 rotate q, k of every head      rotate dq, dk back
//   distance bias   t5, alibi            fill bias[h][n], n = i - j     fold dbias[b][h][n] into params
//
// The attention kernel only reads the bias table, so it is the same code for
// all six schemes and never calls back into a scheme. `none` has no hooks.
#ifndef ROPELAB_POS_H
#define ROPELAB_POS_H

#include "model/config.h"

// The tensors a scheme learns (wpe, rel_bias): described by the scheme from
// the config, placed by params.c in the one parameter buffer right after wte.
#define POS_MAX_PARAMS 2
typedef struct {
    const char *name;        // the weights file's name ("wpe", "rel_bias")
    int rows, cols;          // shape [rows, cols]
    float init_std;          // initialised N(0, init_std); 0: zeros
} PosParam;

// What a scheme's hooks read and write. The model owns one (tables sized for
// max(T, block_size)); a KV cache owns another (tables for its max_len),
// pointing at the same parameters.
typedef struct {
    const GPTConfig *cfg;
    int n_pos;                           // positions covered by the tables
    float *tables;                       // the scheme's fixed tables, one allocation made by its
                                         // tables_init and freed by pos_ctx_free; NULL if none
    const float *param[POS_MAX_PARAMS];  // its parameter tensors, in the order params() lists them
    float *dparam[POS_MAX_PARAMS];       // their gradients (NULL in a KV cache)
} PosCtx;

typedef struct {
    PosKind kind;
    // The scheme's parameter tensors for cfg, in file order; returns how many
    // (NULL: none).
    int (*params)(const GPTConfig *cfg, PosParam out[POS_MAX_PARAMS]);
    int max_pos_is_block;    // positions are limited to block_size (learned: one row per position)

    // Its fixed tables: their floats for n_pos positions (NULL: none), and
    // the builder of p->tables for positions 0..p->n_pos-1, which allocates
    // that many (pos_tables_bytes) and fills them (NULL: no tables).
    size_t (*tables_floats)(const GPTConfig *cfg, int n_pos);
    int (*tables_init)(PosCtx *p, char *err, size_t errlen);

    // Embedding hook. x (B,T,C); positions pos0..pos0+T-1.
    void (*embed_forward)(const PosCtx *p, float *x, int B, int T, int pos0);
    void (*embed_backward)(const PosCtx *p, const float *dx, int B, int T);

    // q/k hook, in place on the packed qkv (B,T,3C); positions pos0..pos0+T-1.
    void (*qk_forward)(const PosCtx *p, float *qkv, int B, int T, int pos0);
    void (*qk_backward)(const PosCtx *p, float *dqkv, int B, int T);

    // Distance-bias hook. bias (H,T): bias[h*T + n] for distance n = i - j.
    void (*bias_fill)(const PosCtx *p, float *bias, int T);
    // dbias (B,H,T) -> parameter gradients (NULL when the bias has no params).
    void (*bias_backward)(const PosCtx *p, const float *dbias, int B, int T);
} PosScheme;

const PosScheme *pos_scheme(PosKind kind);

// Where a scheme exists outside ropelab, per block (index BLOCK_GPT2,
// BLOCK_LLAMA): the llama.cpp architecture its GGUF file names, and the
// Hugging Face model class of its --format hf directory; NULL where it has
// none, and then the reason, which the export prints when it refuses. Each
// scheme's own file defines its pos_exports_NAME (a scheme in the list
// without one does not link), and every block has an architecture or a
// reason in both formats (tests/test_model_pos.c): the exports
// (format/gguf_model.c, hf_model.c) write only what these name, so a new
// scheme is never written as another by accident.
typedef struct {
    const char *gguf[2], *gguf_no_home[2];
    const char *hf[2], *hf_no_home[2];
} PosExports;
const PosExports *pos_exports(PosKind kind);
// The reasons several schemes share.
#define POS_NO_GGUF_LLAMA_TABLE "block=llama with a position table has no home in llama.cpp: its architectures " \
                                "with a position table (gpt2, starcoder, mpt) have LayerNorm and GELU"
#define POS_NO_HF_GPT2 "Hugging Face's GPT2LMHeadModel, which --format hf writes block=gpt2 as, has a learned " \
                       "position table (docs/FORMAT.md has GPT-NeoX's mapping for rope)"
#define POS_NO_HF_LLAMA "Hugging Face's LlamaForCausalLM, which --format hf writes block=llama as, rotates q " \
                        "and k (rope)"
// Sets up p for scheme s: config, no parameters yet, tables for n_pos positions.
int pos_ctx_init(PosCtx *p, const PosScheme *s, const GPTConfig *cfg, int n_pos, char *err, size_t errlen);
// Rebuilds the tables if they cover fewer than n_pos positions.
int pos_ctx_ensure(PosCtx *p, const PosScheme *s, int n_pos, char *err, size_t errlen);
// The bytes of scheme s's tables for n_pos positions (what tables_init allocates).
size_t pos_tables_bytes(const PosScheme *s, const GPTConfig *cfg, int n_pos);
void pos_ctx_free(PosCtx *p);
// The embedding hook's forward for any table of rows P (n_pos, C):
// x[b,t] += P[pos0 + t] for x (B,T,C). Shared by learned (P = wpe) and sinusoidal.
void pos_add_rows(float *x, const float *table, int B, int T, int pos0, int C);

#define POS_SCHEME_EXTERN_(E, name) extern const PosScheme pos_scheme_##name; \
    extern const PosExports pos_exports_##name;
POS_SCHEME_LIST(POS_SCHEME_EXTERN_)

#endif
