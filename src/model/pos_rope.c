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
// Beyond the training length (rope_scaling, factor s; docs/POSITIONS.md),
// only the tables change:
//   linear (position interpolation, Chen et al. 2023): theta_i / s, i.e. position m reads as m/s
//   ntk    (NTK-aware): base' = base s^(R/(R-2)), so the slowest pair is interpolated by s
//          and the fastest keeps its angle
//   yarn   (Peng et al. 2023, "NTK-by-parts" + temperature): with L the trained length,
//          r_i = L theta_i / (2 pi) (turns of pair i over L) and the ramp
//          g_i = clamp((r_i - beta_slow) / (beta_fast - beta_slow), 0, 1):
//            theta_i' = (1 - g_i) theta_i / s + g_i theta_i
//          and cos, sin multiplied by sqrt(1/t) = 0.1 ln(s) + 1, which multiplies every
//          q.k score by 1/t (both q and k are rotated): sharper attention at long range.
// Rotating by (c, s) = mscale (cos, sin) is mscale R_m, whose transpose is
// mscale R_m^T: backward uses the same tables, unchanged.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/pos.h"

void rope_frequencies(const GPTConfig *cfg, double *theta, double *table_scale) {
    int R = cfg->rope_dims;
    double s = cfg->rope_scaling_factor, base = cfg->rope_base;
    if (cfg->rope_scaling == ROPE_SCALING_NTK) base *= pow(s, (double)R / (R - 2));
    *table_scale = 1.0;
    for (int i = 0; i < R / 2; i++) {
        theta[i] = pow(base, -2.0 * i / R);
        if (cfg->rope_scaling == ROPE_SCALING_LINEAR) theta[i] /= s;
        if (cfg->rope_scaling == ROPE_SCALING_YARN) {
            double L = cfg->rope_original_length > 0 ? cfg->rope_original_length : cfg->block_size;
            double r = L * theta[i] / (2.0 * M_PI), lo = cfg->rope_yarn_beta_slow, hi = cfg->rope_yarn_beta_fast;
            double g = r < lo ? 0.0 : r > hi ? 1.0 : (r - lo) / (hi - lo);
            theta[i] = (1.0 - g) * theta[i] / s + g * theta[i];
        }
    }
    if (cfg->rope_scaling == ROPE_SCALING_YARN && s > 1.0) *table_scale = 0.1 * log(s) + 1.0;
}

void rope_build_tables(float *cos_tab, float *sin_tab, int n_pos, const GPTConfig *cfg) {
    int half = cfg->rope_dims / 2;
    double theta[8192], scale;   // rope_dims <= 16384 (the key's range)
    rope_frequencies(cfg, theta, &scale);
    for (int m = 0; m < n_pos; m++)
        for (int i = 0; i < half; i++) {
            cos_tab[(size_t)m * half + i] = (float)(scale * cos(m * theta[i]));
            sin_tab[(size_t)m * half + i] = (float)(scale * sin(m * theta[i]));
        }
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

static int rope_tables_init(PosCtx *p, char *err, size_t errlen) {
    size_t half = (size_t)p->cfg->rope_dims / 2;
    p->tables = malloc(2 * (size_t)p->n_pos * half * sizeof(float));
    if (!p->tables) {
        snprintf(err, errlen, "out of memory for rope tables (%d positions)", p->n_pos);
        return -1;
    }
    rope_build_tables(rope_cos(p), rope_sin(p), p->n_pos, p->cfg);
    return 0;
}

// qkv (B,T,3C): rotates q (cols 0..C-1) and k (cols C..2C-1) of every head.
static void rope_apply(const PosCtx *p, float *qkv, int B, int T, int pos0, int backward) {
    int C = p->cfg->d_model, H = p->cfg->n_head, D = C / H, R = p->cfg->rope_dims;
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        int m = pos0 + bt % T;
        const float *c = rope_cos(p) + (size_t)m * (R / 2), *s = rope_sin(p) + (size_t)m * (R / 2);
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
    .tables_init = rope_tables_init,
    .qk_forward = rope_qk_forward,
    .qk_backward = rope_qk_backward,
};
