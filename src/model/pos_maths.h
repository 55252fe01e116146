// pos_maths.h: the schemes' maths as pure functions of the config: rope's
// angles, scaling and rotation, the sinusoidal table, T5's buckets, ALiBi's
// slopes. Defined in each scheme's own file (rope's scaling in
// rope_scaling.c); declared here for the files that build the same tables
// outside a scheme (the GGUF export) and for the tests and benchmarks that
// check them against their formulas. The model's passes reach them only
// through a scheme's hooks (pos.h): rope_apply makes its rows from
// rope_frequencies_at when dynamic NTK scales past the trained length.
#ifndef ROPELAB_POS_MATHS_H
#define ROPELAB_POS_MATHS_H

#include "model/config.h"

// rope: the angle of each pair i < R/2 after cfg's rope_scaling (theta[R/2]),
// and the factor the tables are multiplied by (yarn's sqrt(1/t), else 1), for
// a sequence of n positions (only dynamic NTK depends on n; n <= L: unscaled).
void rope_frequencies_at(const GPTConfig *cfg, int n, double *theta, double *table_scale);
// The same for the tables (n = 0: dynamic's angles up to L).
void rope_frequencies(const GPTConfig *cfg, double *theta, double *table_scale);
// rope_scaling.c: the trained length L (rope_original_length, or block_size when 0);
// the base of the angles after ntk's scaling (rope_base s^(R/(R-2))), else rope_base;
// the same with dynamic NTK's for n positions; and theta (R/2) rescaled in place by
// linear, yarn or yarn_paper, returning the tables' scale (yarn's sqrt(1/t), else 1).
double rope_trained_length(const GPTConfig *cfg);
double rope_scaled_base(const GPTConfig *cfg);
double rope_scaled_base_at(const GPTConfig *cfg, int n);
double rope_scale_angles(const GPTConfig *cfg, double *theta);
// rope: cos/sin tables for cfg, entry [m*R/2 + i] = table_scale cos(m theta_i) (sin likewise).
void rope_build_tables(float *cos_tab, float *sin_tab, int n_pos, const GPTConfig *cfg);
// rope: rotate the first R dims of one head vector u (D) at table row m.
void rope_rotate(float *u, const float *cos_row, const float *sin_row, int rope_dims);
void rope_rotate_back(float *u, const float *cos_row, const float *sin_row, int rope_dims);
// sinusoidal: PE (n_pos, C).
void sinusoidal_build_table(float *pe, int n_pos, int C, float scale);
void sinusoidal_build_rows(float *pe, int t0, int t1, int C, float scale);   // rows t0..t1-1 of the same
// t5: the causal bucket of distance n >= 0.
int t5_bucket(int n, int num_buckets, int max_distance);
// alibi: slopes m_h (H) as in Press et al. (power-of-two interpolation).
void alibi_slopes(float *slopes, int H);

#endif
