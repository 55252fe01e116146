// pos_alibi.c: ALiBi (Press et al.): a fixed linear penalty on distance,
//   bias[h][n] = -m_h * n,   m_h = 2^(-8(h+1)/H) for H a power of two.
// For other H the paper's recipe: with P the largest power of two <= H,
// take the P slopes for P heads, then the slopes of the 2P-head sequence at
// indices 0, 2, 4, ... (2^(-8(2k+1)/(2P)), k = 0, 1, ...) until there are H.
// No parameters, so no backward.
#include <math.h>

#include "model/pos.h"
#include "model/pos_maths.h"

void alibi_slopes(float *slopes, int H) {
    int P = 1;
    while (P * 2 <= H) P *= 2;
    for (int h = 0; h < P; h++) slopes[h] = (float)pow(2.0, -8.0 * (h + 1) / P);
    // slopes of 2P heads are 2^(-8(k+1)/(2P)); take k = 0, 2, 4, ...
    for (int h = P; h < H; h++) slopes[h] = (float)pow(2.0, -8.0 * (2 * (h - P) + 1) / (2.0 * P));
}

static void alibi_bias_fill(const PosCtx *p, float *bias, int T) {
    int H = p->cfg->n_head;
    float slopes[1024];   // n_head <= 1024 (config limit)
    alibi_slopes(slopes, H);
    for (int h = 0; h < H; h++)
        for (int n = 0; n < T; n++) bias[h * T + n] = -slopes[h] * (float)n;
}

const PosScheme pos_scheme_alibi = {
    .kind = POS_ALIBI,
    .bias_fill = alibi_bias_fill,
};

// llama.cpp's ALiBi: mpt (GPT-2's block), refact (LLaMA's).
const PosExports pos_exports_alibi = {
    .gguf = {[BLOCK_GPT2] = "mpt", [BLOCK_LLAMA] = "refact"},
    .hf_no_home = {[BLOCK_GPT2] = POS_NO_HF_GPT2, [BLOCK_LLAMA] = POS_NO_HF_LLAMA},
};
