// pos_t5.c: T5 relative position bias, causal buckets, one table
// rel_bias [num_buckets, H] shared by all layers.
//
// bucket(n), n = i - j >= 0, nb buckets, max distance md, e = nb/2:
//   n < e:  n  (exact buckets for short distances)
//   else:   min(nb-1, e + floor(log(n/e) / log(md/e) * (nb-e)))  (log-spaced)
// forward:  bias[h][n] = rel_bias[bucket(n), h]
// backward: drel_bias[k, h] += sum over b, and n with bucket(n) = k, of dbias[b][h][n]
//           (every layer's attention gradient was already added into dbias).
//           Split over heads, each sum in a fixed order: deterministic, no races.
#include <math.h>

#include "model/pos.h"
#include "model/pos_maths.h"

int t5_bucket(int n, int num_buckets, int max_distance) {
    int e = num_buckets / 2;
    if (n < e) return n;
    int b = e + (int)floor(log((double)n / e) / log((double)max_distance / e) * (num_buckets - e));
    return b < num_buckets - 1 ? b : num_buckets - 1;
}

// One tensor: rel_bias [num_buckets, H], zeros (t5 starts as the bare causal mask).
static int t5_params(const GPTConfig *cfg, PosParam out[POS_MAX_PARAMS]) {
    out[0] = (PosParam){"rel_bias", cfg->t5_num_buckets, cfg->n_head, 0.0f};
    return 1;
}

static void t5_bias_fill(const PosCtx *p, float *bias, int T) {
    int H = p->cfg->n_head, nb = p->cfg->t5_num_buckets, md = p->cfg->t5_max_distance;
    for (int n = 0; n < T; n++) {
        int k = t5_bucket(n, nb, md);
        for (int h = 0; h < H; h++) bias[h * T + n] = p->param[0][k * H + h];
    }
}

static void t5_bias_backward(const PosCtx *p, const float *dbias, int B, int T) {
    int H = p->cfg->n_head, nb = p->cfg->t5_num_buckets, md = p->cfg->t5_max_distance;
    #pragma omp parallel for
    for (int h = 0; h < H; h++)
        for (int n = 0; n < T; n++) {
            float sum = 0.0f;
            for (int b = 0; b < B; b++) sum += dbias[((size_t)b * H + h) * T + n];
            p->dparam[0][t5_bucket(n, nb, md) * H + h] += sum;
        }
}

const PosScheme pos_scheme_t5 = {
    .kind = POS_T5,
    .params = t5_params,
    .bias_fill = t5_bias_fill,
    .bias_backward = t5_bias_backward,
};

#define NO_GGUF_T5 "pos=t5 has no home in llama.cpp: its t5 architecture is the encoder-decoder model, and no " \
                   "decoder-only architecture there has T5's learned relative-position bias"
const PosExports pos_exports_t5 = {
    .gguf_no_home = {[BLOCK_GPT2] = NO_GGUF_T5, [BLOCK_LLAMA] = NO_GGUF_T5},
    .hf_no_home = {[BLOCK_GPT2] = POS_NO_HF_GPT2, [BLOCK_LLAMA] = POS_NO_HF_LLAMA},
};
