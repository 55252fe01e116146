// pos_learned.c: learned absolute position embedding (GPT-2's wpe).
//   forward:  x[b,t] += wpe[pos0 + t]
//   backward: dwpe[t] += sum_b dx[b,t]   (split over t: no races)
// Positions are limited to block_size: there is no row for a longer one.
#include "model/pos.h"

// One tensor: wpe [block_size, C], N(0, 0.01) as in OpenAI's GPT-2.
static int learned_params(const GPTConfig *cfg, PosParam out[POS_MAX_PARAMS]) {
    out[0] = (PosParam){"wpe", cfg->block_size, cfg->d_model, 0.01f};
    return 1;
}

static void learned_embed_forward(const PosCtx *p, float *x, int B, int T, int pos0) {
    pos_add_rows(x, p->param[0], B, T, pos0, p->cfg->d_model);
}

static void learned_embed_backward(const PosCtx *p, const float *dx, int B, int T) {
    int C = p->cfg->d_model;
    #pragma omp parallel for
    for (int t = 0; t < T; t++) {
        float *dw = p->dparam[0] + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *g = dx + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) dw[c] += g[c];
        }
    }
}

const PosScheme pos_scheme_learned = {
    .kind = POS_LEARNED,
    .params = learned_params,
    .max_pos_is_block = 1,
    .embed_forward = learned_embed_forward,
    .embed_backward = learned_embed_backward,
};

const PosExports pos_exports_learned = {
    .gguf = {[BLOCK_GPT2] = "gpt2"},
    .gguf_no_home = {[BLOCK_LLAMA] = POS_NO_GGUF_LLAMA_TABLE},
    .hf = {[BLOCK_GPT2] = "GPT2LMHeadModel"},
    .hf_no_home = {[BLOCK_LLAMA] = POS_NO_HF_LLAMA},
};
