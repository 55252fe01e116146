// attention.c: causal multi-head self-attention with an optional
// distance-bias table (t5, alibi), one (batch, head) pair per task.
//
// For query i and key j <= i of head h (D = C/H, scale = 1/sqrt(D)):
//   s_ij = scale * q_i.k_j + bias[h][i-j]
//   p_ij = softmax_j(s_ij) = exp(s_ij - lse_i),  lse_i = log sum_j exp(s_ij)
//   y_i  = sum_j p_ij v_j
// Backward, with dy_i given:
//   dv_j += p_ij dy_i,  dp_ij = dy_i.v_j,  ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij')
//   dq_i += scale ds_ij k_j,  dk_j += scale ds_ij q_i,  dbias[h][i-j] += ds_ij
//
// Memory: the forward keeps only lse (B,H,T), not the (B,H,T,T)
// probabilities; backward recomputes p_ij from q, k and lse, which are
// stored anyway. That costs one more q.k product per pair in backward and
// saves L*B*H*T*T floats. Each thread uses two rows of T floats of scratch.
#include <math.h>
#include <string.h>

#include <omp.h>

#include "model/layers.h"

void attention_forward(float *out, float *lse, const float *qkv, const float *bias,
                       float *scratch, int n_threads, int B, int T, int C, int H) {
    int D = C / H;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)D);
    #pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        float *s = scratch + (size_t)omp_get_thread_num() * 2 * T;
        const float *base = qkv + (size_t)b * T * C3;
        for (int i = 0; i < T; i++) {
            const float *q = base + i * C3 + h * D;
            float mx = -INFINITY;
            for (int j = 0; j <= i; j++) {
                const float *k = base + j * C3 + C + h * D;
                float dot = 0.0f;
                for (int d = 0; d < D; d++) dot += q[d] * k[d];
                s[j] = dot * scale + (bias ? bias[h * T + (i - j)] : 0.0f);
                if (s[j] > mx) mx = s[j];
            }
            float sum = 0.0f;
            for (int j = 0; j <= i; j++) { s[j] = expf(s[j] - mx); sum += s[j]; }
            float inv = 1.0f / sum;
            float *y = out + ((size_t)b * T + i) * C + h * D;
            memset(y, 0, (size_t)D * sizeof(float));
            for (int j = 0; j <= i; j++) {
                const float *v = base + j * C3 + 2 * C + h * D;
                float p = s[j] * inv;
                for (int d = 0; d < D; d++) y[d] += p * v[d];
            }
            lse[(size_t)bh * T + i] = mx + logf(sum);
        }
    }
}

void attention_backward(float *dqkv, float *dbias, const float *dout, const float *qkv,
                        const float *lse, const float *bias, float *scratch, int n_threads,
                        int B, int T, int C, int H) {
    int D = C / H;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)D);
    #pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        float *p = scratch + (size_t)omp_get_thread_num() * 2 * T;
        float *dp = p + T;
        const float *base = qkv + (size_t)b * T * C3;
        float *dbase = dqkv + (size_t)b * T * C3;
        // this task owns the q, k, v columns of head h in batch row b
        for (int t = 0; t < T; t++)
            for (int part = 0; part < 3; part++)
                memset(dbase + t * C3 + part * C + h * D, 0, (size_t)D * sizeof(float));
        for (int i = 0; i < T; i++) {
            const float *q = base + i * C3 + h * D;
            const float *dy = dout + ((size_t)b * T + i) * C + h * D;
            float *dq = dbase + i * C3 + h * D;
            float row_lse = lse[(size_t)bh * T + i];
            float sum_pd = 0.0f;
            for (int j = 0; j <= i; j++) {
                const float *k = base + j * C3 + C + h * D;
                const float *v = base + j * C3 + 2 * C + h * D;
                float dot = 0.0f, dpj = 0.0f;
                for (int d = 0; d < D; d++) { dot += q[d] * k[d]; dpj += dy[d] * v[d]; }
                float sij = dot * scale + (bias ? bias[h * T + (i - j)] : 0.0f);
                p[j] = expf(sij - row_lse);
                dp[j] = dpj;
                sum_pd += p[j] * dpj;
            }
            for (int j = 0; j <= i; j++) {
                const float *k = base + j * C3 + C + h * D;
                float *dk = dbase + j * C3 + C + h * D;
                float *dv = dbase + j * C3 + 2 * C + h * D;
                float ds = p[j] * (dp[j] - sum_pd);
                float dss = ds * scale;
                for (int d = 0; d < D; d++) {
                    dv[d] += p[j] * dy[d];
                    dq[d] += dss * k[d];
                    dk[d] += dss * q[d];
                }
                if (dbias) dbias[(size_t)bh * T + (i - j)] += ds;
            }
        }
    }
}
