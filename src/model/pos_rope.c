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
// Beyond the training length (rope_scaling, factor s; docs/POSITIONS.md has
// the formulas and where each comes from), only the tables change. L is the
// trained length: rope_original_length, or block_size when 0.
//   linear (position interpolation, Chen et al. 2023): theta_i / s, i.e. position m reads as m/s
//   ntk    (NTK-aware): base' = base s^(R/(R-2)), so the slowest pair is interpolated by s
//          and the fastest keeps its angle
//   yarn   (YaRN as Hugging Face's _compute_yarn_parameters and llama.cpp's rope_yarn compute it,
//          from the paper's released code): the ramp is linear in the pair index i between
//          the indices where a pair turns beta_fast and beta_slow times over L,
//            d(beta) = R ln(L / (2 pi beta)) / (2 ln base)      (r_i = beta solved for i)
//            lo = max(floor(d(beta_fast)), 0),  hi = min(ceil(d(beta_slow)), R - 1)
//            g_i = 1 - clamp((i - lo) / max(hi - lo, 0.001), 0, 1)      (1: keep, 0: interpolate)
//            theta_i' = (1 - g_i) theta_i / s + g_i theta_i
//          and cos, sin multiplied by sqrt(1/t) = 0.1 ln(s) + 1, which multiplies the rotated
//          dims' share of every q.k score by 1/t (q and k are both rotated).
//   yarn_paper (the ramp gamma(r) as the paper defines it for "NTK-by-parts"): linear in the
//          number of turns r_i = L theta_i / (2 pi) instead,
//            g_i = clamp((r_i - beta_slow) / (beta_fast - beta_slow), 0, 1), and the same temperature.
//   dynamic (Hugging Face's dynamic NTK): for a sequence of n > L positions (n = the last
//          position + 1 of the forward pass) base' = base (s n / L - (s - 1))^(R/(R-2)); up to L the
//          unscaled angles. A decode step at position p uses n = p + 1 and the keys already
//          cached keep the angles they were rotated with, as Hugging Face's generate does.
// Rotating by (c, s) = mscale (cos, sin) is mscale R_m, whose transpose is
// mscale R_m^T: backward uses the same tables, unchanged.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/pos.h"

static double trained_length(const GPTConfig *cfg) {
    return cfg->rope_original_length > 0 ? cfg->rope_original_length : cfg->block_size;
}

// yarn's pair index at which a pair turns `turns` times over L (real-valued).
static double yarn_corr_dim(double R, double L, double base, double turns) {
    return R * log(L / (turns * 2.0 * M_PI)) / (2.0 * log(base));
}

double rope_scaled_base(const GPTConfig *cfg) {
    double s = cfg->rope_scaling_factor, R = cfg->rope_dims;
    return cfg->rope_scaling == ROPE_SCALING_NTK ? cfg->rope_base * pow(s, R / (R - 2)) : cfg->rope_base;
}

void rope_frequencies_at(const GPTConfig *cfg, int n, double *theta, double *table_scale) {
    int R = cfg->rope_dims;
    double s = cfg->rope_scaling_factor, base = rope_scaled_base(cfg), L = trained_length(cfg);
    if (cfg->rope_scaling == ROPE_SCALING_DYNAMIC && n > L) base *= pow(s * n / L - (s - 1.0), (double)R / (R - 2));
    double lo = 0.0, hi = 0.0;
    if (cfg->rope_scaling == ROPE_SCALING_YARN) {
        lo = fmax(floor(yarn_corr_dim(R, L, cfg->rope_base, cfg->rope_yarn_beta_fast)), 0.0);
        hi = fmin(ceil(yarn_corr_dim(R, L, cfg->rope_base, cfg->rope_yarn_beta_slow)), R - 1.0);
    }
    *table_scale = 1.0;
    for (int i = 0; i < R / 2; i++) {
        theta[i] = pow(base, -2.0 * i / R);
        if (cfg->rope_scaling == ROPE_SCALING_LINEAR) theta[i] /= s;
        double g = -1.0;   // the share of the angle kept, for the two YaRNs
        if (cfg->rope_scaling == ROPE_SCALING_YARN) {
            double y = (i - lo) / fmax(hi - lo, 0.001);
            g = 1.0 - (y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y);
        }
        if (cfg->rope_scaling == ROPE_SCALING_YARN_PAPER) {
            double r = L * theta[i] / (2.0 * M_PI), lo_r = cfg->rope_yarn_beta_slow, hi_r = cfg->rope_yarn_beta_fast;
            g = r < lo_r ? 0.0 : r > hi_r ? 1.0 : (r - lo_r) / (hi_r - lo_r);
        }
        // (1 - g) theta / s + g theta, written so that s = 1 gives theta exactly
        if (g >= 0.0) theta[i] = theta[i] / s + g * (theta[i] - theta[i] / s);
    }
    if ((cfg->rope_scaling == ROPE_SCALING_YARN || cfg->rope_scaling == ROPE_SCALING_YARN_PAPER) && s > 1.0)
        *table_scale = 0.1 * log(s) + 1.0;
}

void rope_frequencies(const GPTConfig *cfg, double *theta, double *table_scale) {
    rope_frequencies_at(cfg, 0, theta, table_scale);
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

// qkv (B,T,3C): rotates q (cols 0..C-1) and k (cols C..2C-1) of every head.
// Positions pos0..pos0+T-1 read the tables, except under dynamic NTK beyond L,
// where the angles depend on n = pos0 + T and each row's cos and sin are
// computed here (as the tables would be: in double, then float).
static void rope_apply(const PosCtx *p, float *qkv, int B, int T, int pos0, int backward) {
    const GPTConfig *cfg = p->cfg;
    int C = cfg->d_model, H = cfg->n_head, D = C / H, R = cfg->rope_dims, n = pos0 + T;
    int dynamic = cfg->rope_scaling == ROPE_SCALING_DYNAMIC && n > trained_length(cfg);
    double theta[8192], scale;   // rope_dims <= 16384 (the key's range)
    if (dynamic) rope_frequencies_at(cfg, n, theta, &scale);
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        int m = pos0 + bt % T;
        float c_row[dynamic ? R / 2 : 1], s_row[dynamic ? R / 2 : 1];
        const float *c = rope_cos(p) + (size_t)m * (R / 2), *s = rope_sin(p) + (size_t)m * (R / 2);
        if (dynamic) {
            for (int i = 0; i < R / 2; i++) {
                c_row[i] = (float)(scale * cos(m * theta[i]));
                s_row[i] = (float)(scale * sin(m * theta[i]));
            }
            c = c_row;
            s = s_row;
        }
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
