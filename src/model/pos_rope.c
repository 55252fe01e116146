// pos_rope.c: rotary position embedding (RoFormer, interleaved pairs).
//
// For a head vector u at position m, R = rope_dims, theta_i = base^(-2i/R):
//   u'[2i]   = u[2i] cos(m theta_i) - u[2i+1] sin(m theta_i)
//   u'[2i+1] = u[2i] sin(m theta_i) + u[2i+1] cos(m theta_i)      (i < R/2)
// dims >= R pass through. This is the elementwise form of the paper's
// block-diagonal rotation R_m (eq. 34): no matrix product, cos/sin come from
// tables built once. R_m is orthogonal, so backward applies R_m^T = R_{-m}:
// the gradient is rotated back by the same angle.
// Applied to q and k (never v) of every head, after c_attn, in place.
//
// Beyond the training length (the key rope_scaling) only the angles theta_i
// and the tables' scale change: rope_scaling.c. Rotating by (c, s) = mscale
// (cos, sin) is mscale R_m, whose transpose is mscale R_m^T: backward uses
// the same tables, unchanged.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/pos.h"
#include "model/pos_maths.h"

void rope_frequencies_at(const GPTConfig *cfg, int n, double *theta, double *table_scale) {
    int R = cfg->rope_dims;
    double base = rope_scaled_base_at(cfg, n);   // rope_base, or ntk's or dynamic NTK's
    for (int i = 0; i < R / 2; i++) theta[i] = pow(base, -2.0 * i / R);
    *table_scale = rope_scale_angles(cfg, theta);   // linear, yarn: the angles rescaled
}

void rope_frequencies(const GPTConfig *cfg, double *theta, double *table_scale) {
    rope_frequencies_at(cfg, 0, theta, table_scale);
}

// Row m of the tables from the angles theta (half of them) and their scale:
// scale cos(m theta_i), scale sin(m theta_i), in double, then float.
static void rope_table_row(float *cos_row, float *sin_row, const double *theta, double scale, int m, int half) {
    for (int i = 0; i < half; i++) {
        cos_row[i] = (float)(scale * cos(m * theta[i]));
        sin_row[i] = (float)(scale * sin(m * theta[i]));
    }
}

void rope_build_tables(float *cos_tab, float *sin_tab, int n_pos, const GPTConfig *cfg) {
    int half = cfg->rope_dims / 2;
    double theta[8192], scale;   // rope_dims <= 16384 (the key's range)
    rope_frequencies(cfg, theta, &scale);
    for (int m = 0; m < n_pos; m++)
        rope_table_row(cos_tab + (size_t)m * half, sin_tab + (size_t)m * half, theta, scale, m, half);
}

void rope_rotate(float *u, const float *cos_row, const float *sin_row, int rope_dims) {
    for (int i = 0; i < rope_dims / 2; i++) {
        float a = u[2 * i], b = u[2 * i + 1], c = cos_row[i], s = sin_row[i];
        u[2 * i] = a * c - b * s;
        u[2 * i + 1] = a * s + b * c;
    }
}

void rope_rotate_back(float *u, const float *cos_row, const float *sin_row, int rope_dims) {
    for (int i = 0; i < rope_dims / 2; i++) {
        float a = u[2 * i], b = u[2 * i + 1], c = cos_row[i], s = sin_row[i];
        u[2 * i] = a * c + b * s;
        u[2 * i + 1] = -a * s + b * c;
    }
}

// p->tables: cos (n_pos, R/2), then sin (n_pos, R/2).
static float *rope_cos(const PosCtx *p) { return p->tables; }
static float *rope_sin(const PosCtx *p) { return p->tables + (size_t)p->n_pos * (p->cfg->rope_dims / 2); }

static size_t rope_tables_floats(const GPTConfig *cfg, int n_pos) { return 2 * (size_t)n_pos * (cfg->rope_dims / 2); }

static int rope_tables_init(PosCtx *p, char *err, size_t errlen) {
    p->tables = malloc(pos_tables_bytes(&pos_scheme_rope, p->cfg, p->n_pos));
    if (!p->tables) {
        snprintf(err, errlen, "out of memory for rope tables (%d positions)", p->n_pos);
        return -1;
    }
    rope_build_tables(rope_cos(p), rope_sin(p), p->n_pos, p->cfg);
    return 0;
}

// qkv (B,T,3C): rotates q (cols 0..C-1) and k (cols C..2C-1) of every head
// at positions pos0..pos0+T-1 by the tables' rows; under dynamic NTK beyond L
// the angles depend on n = pos0 + T (rope_scaling.c), so each row is made here
// from the angles of n, as the tables' rows are made from theirs.
static void rope_apply(const PosCtx *p, float *qkv, int B, int T, int pos0, int backward) {
    const GPTConfig *cfg = p->cfg;
    int C = cfg->d_model, H = cfg->n_head, D = C / H, R = cfg->rope_dims, n = pos0 + T;
    int dynamic = cfg->rope_scaling == ROPE_SCALING_DYNAMIC && n > rope_trained_length(cfg);
    double theta[dynamic ? R / 2 : 1], scale;
    if (dynamic) rope_frequencies_at(cfg, n, theta, &scale);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        int m = pos0 + bt % T;
        float c_row[dynamic ? R / 2 : 1], s_row[dynamic ? R / 2 : 1];
        if (dynamic) rope_table_row(c_row, s_row, theta, scale, m, R / 2);
        const float *c = dynamic ? c_row : rope_cos(p) + (size_t)m * (R / 2);
        const float *s = dynamic ? s_row : rope_sin(p) + (size_t)m * (R / 2);
        float *row = qkv + (size_t)bt * 3 * C;
        for (int h = 0; h < H; h++)
            for (int part = 0; part < 2; part++) {   // q, then k
                float *u = row + part * C + h * D;
                if (backward) rope_rotate_back(u, c, s, R);
                else rope_rotate(u, c, s, R);
            }
    }
}

static void rope_qk_forward(const PosCtx *p, float *qkv, int B, int T, int pos0) {
    rope_apply(p, qkv, B, T, pos0, 0);
}

static void rope_qk_backward(const PosCtx *p, float *dqkv, int B, int T) {
    rope_apply(p, dqkv, B, T, 0, 1);
}

const PosScheme pos_scheme_rope = {
    .kind = POS_ROPE,
    .tables_floats = rope_tables_floats,
    .tables_init = rope_tables_init,
    .qk_forward = rope_qk_forward,
    .qk_backward = rope_qk_backward,
};

// GPT-NeoX's rotate-half layout (q, k permuted at export), LLaMA's pairs as ours.
const PosExports pos_exports_rope = {
    .gguf = {[BLOCK_GPT2] = "gptneox", [BLOCK_LLAMA] = "llama"},
    .hf = {[BLOCK_LLAMA] = "LlamaForCausalLM"},
    .hf_no_home = {[BLOCK_GPT2] = POS_NO_HF_GPT2},
};
