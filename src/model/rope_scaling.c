// rope_scaling.c: rope beyond the length it was trained at (the key
// rope_scaling): the angles theta_i = base^(-2i/R) of pos_rope.c's tables
// rescaled, and for yarn the tables' scale.
//
// With factor s (docs/POSITIONS.md has the formulas and where each comes
// from), and L the trained length (rope_original_length, or block_size when 0):
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
#include <math.h>

#include "model/pos_maths.h"

double rope_trained_length(const GPTConfig *cfg) {
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

double rope_scaled_base_at(const GPTConfig *cfg, int n) {
    int R = cfg->rope_dims;
    double s = cfg->rope_scaling_factor, base = rope_scaled_base(cfg), L = rope_trained_length(cfg);
    if (cfg->rope_scaling == ROPE_SCALING_DYNAMIC && n > L) base *= pow(s * n / L - (s - 1.0), (double)R / (R - 2));
    return base;
}

double rope_scale_angles(const GPTConfig *cfg, double *theta) {
    int R = cfg->rope_dims;
    double s = cfg->rope_scaling_factor, L = rope_trained_length(cfg);
    double lo = 0.0, hi = 0.0;
    if (cfg->rope_scaling == ROPE_SCALING_YARN) {
        lo = fmax(floor(yarn_corr_dim(R, L, cfg->rope_base, cfg->rope_yarn_beta_fast)), 0.0);
        hi = fmin(ceil(yarn_corr_dim(R, L, cfg->rope_base, cfg->rope_yarn_beta_slow)), R - 1.0);
    }
    for (int i = 0; i < R / 2; i++) {
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
        return 0.1 * log(s) + 1.0;
    return 1.0;
}
