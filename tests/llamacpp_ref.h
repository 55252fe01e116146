// llamacpp_ref.h: ropelab's model in double precision (either block),
// optionally with the one step where llama.cpp's CPU arithmetic is not
// float32: ggml's GELU, a table lookup in float16 (GGML_GELU_FP16:
// y = f16(gelu(f16(x))) for |x| < 10). block=llama has no GELU: ggml's
// SwiGLU computes silu in float32, so there the two are the same. tests/llamacpp_check.c uses the two to say how far llama.cpp's
// log-probabilities may be from ropelab's (tests/README.md, "make test-llamacpp", derives it).
// The maths is docs/FORMAT.md's "The model", written again from it; the
// positional tables are ropelab's (pos.h), as the model defines them.
// Include after <cmocka.h>.
#ifndef ROPELAB_TESTS_LLAMACPP_REF_H
#define ROPELAB_TESTS_LLAMACPP_REF_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "model/pos_maths.h"

static const float *ref_param(GPT *m, const char *name) {
    const ParamEntry *e = gpt_find_param(m, name);
    if (!e) fail_msg("no tensor %s", name);
    return gpt_params(m) + e->offset;
}

static const float *ref_layer_param(GPT *m, int l, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "h.%d.%s", l, name);
    return ref_param(m, full);
}

// A bias: block=llama has none (NULL).
static const float *ref_layer_bias(GPT *m, int l, const char *name) {
    return gpt_config(m)->block == BLOCK_LLAMA ? NULL : ref_layer_param(m, l, name);
}

// ggml's GELU (ggml-cpu vec.h): the tanh form in float on a float16 input,
// rounded to float16; 0 at x <= -10 and x itself at x >= 10.
static double ref_gelu_ggml(double x) {
    float xf = (float)x;
    if (xf <= -10.0f) return 0.0;
    if (xf >= 10.0f) return xf;
    float h = (float)(_Float16)xf;
    float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return (double)(_Float16)g;
}

static double ref_gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

// The block's norm: LayerNorm (gpt2), or RMSNorm when b is NULL (llama).
static void ref_layernorm(double *out, const double *x, const float *w, const float *b, int C) {
    if (!b) {   // RMSNorm: x / sqrt(mean(x^2) + 1e-5) * w
        double ms = 0;
        for (int c = 0; c < C; c++) ms += x[c] * x[c];
        double rstd = 1.0 / sqrt(ms / C + 1e-5);
        for (int c = 0; c < C; c++) out[c] = x[c] * rstd * w[c];
        return;
    }
    double mu = 0, var = 0;
    for (int c = 0; c < C; c++) mu += x[c];
    mu /= C;
    for (int c = 0; c < C; c++) var += (x[c] - mu) * (x[c] - mu);
    double rstd = 1.0 / sqrt(var / C + 1e-5);
    for (int c = 0; c < C; c++) out[c] = (x[c] - mu) * rstd * w[c] + b[c];
}

// y (rows) = W x + b, W [rows, cols] row-major.
static void ref_linear(double *y, const double *x, const float *W, const float *b, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = b ? b[r] : 0.0;
        for (int c = 0; c < cols; c++) s += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = s;
    }
}

// The log-probabilities of the next token at every position of tok[0..n-1]
// (one pass from position 0), out: n x V. ggml_gelu: llama.cpp's GELU.
static void ref_logprobs(GPT *m, const int *tok, int n, int ggml_gelu, double *out) {
    const GPTConfig *cfg = gpt_config(m);
    int C = cfg->d_model, H = cfg->n_head, D = C / H, V = cfg->vocab_size, L = cfg->n_layer, R = cfg->rope_dims;
    int F = gpt_mlp_hidden(cfg), FC = gpt_mlp_fc_width(cfg), llama = cfg->block == BLOCK_LLAMA;
    double *x = calloc((size_t)n * C, sizeof *x), *a = malloc((size_t)C * sizeof *a);
    double *qkv = malloc((size_t)n * 3 * C * sizeof *qkv), *y = malloc((size_t)n * C * sizeof *y);
    double *h = malloc((size_t)FC * sizeof *h), *o = malloc((size_t)C * sizeof *o), *p = malloc((size_t)n * sizeof *p);
    float *pe = malloc((size_t)n * C * sizeof *pe), slopes[256];
    double theta[8192], mscale = 1.0;
    assert_non_null(x); assert_non_null(qkv); assert_non_null(pe);
    if (cfg->pos == POS_ROPE) rope_frequencies_at(cfg, n, theta, &mscale);
    if (cfg->pos == POS_SINUSOIDAL) sinusoidal_build_table(pe, n, C, cfg->sinusoidal_scale);
    if (cfg->pos == POS_ALIBI) alibi_slopes(slopes, H);
    const float *wte = ref_param(m, "wte"), *wpe = cfg->pos == POS_LEARNED ? ref_param(m, "wpe") : NULL;
    for (int t = 0; t < n; t++)
        for (int c = 0; c < C; c++)
            x[(size_t)t * C + c] = wte[(size_t)tok[t] * C + c] + (wpe ? wpe[(size_t)t * C + c] : 0.0)
                                   + (cfg->pos == POS_SINUSOIDAL ? pe[(size_t)t * C + c] : 0.0);
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < n; t++) {
            double *u = qkv + (size_t)t * 3 * C;
            ref_layernorm(a, x + (size_t)t * C, ref_layer_param(m, l, "ln_1.weight"), ref_layer_bias(m, l, "ln_1.bias"), C);
            ref_linear(u, a, ref_layer_param(m, l, "attn.c_attn.weight"), ref_layer_bias(m, l, "attn.c_attn.bias"), 3 * C, C);
            for (int part = 0; cfg->pos == POS_ROPE && part < 2; part++)   // q, k: pairs (2i, 2i+1)
                for (int hh = 0; hh < H; hh++)
                    for (int i = 0; i < R / 2; i++) {
                        double *v = u + part * C + hh * D + 2 * i, c = mscale * cos(t * theta[i]),
                               s = mscale * sin(t * theta[i]), v0 = v[0], v1 = v[1];
                        v[0] = v0 * c - v1 * s;
                        v[1] = v0 * s + v1 * c;
                    }
        }
        for (int t = 0; t < n; t++)
            for (int hh = 0; hh < H; hh++) {
                const double *q = qkv + (size_t)t * 3 * C + hh * D;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = qkv + (size_t)j * 3 * C + C + hh * D;
                    double s = 0;
                    for (int d = 0; d < D; d++) s += q[d] * k[d];
                    p[j] = s / sqrt((double)D) - (cfg->pos == POS_ALIBI ? slopes[hh] * (t - j) : 0.0);
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int j = 0; j <= t; j++) s += p[j] * qkv[(size_t)j * 3 * C + 2 * C + hh * D + d];
                    y[(size_t)t * C + hh * D + d] = s / sum;
                }
            }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * C;
            ref_linear(o, y + (size_t)t * C, ref_layer_param(m, l, "attn.c_proj.weight"),
                       ref_layer_bias(m, l, "attn.c_proj.bias"), C, C);
            for (int c = 0; c < C; c++) xt[c] += o[c];
            ref_layernorm(a, xt, ref_layer_param(m, l, "ln_2.weight"), ref_layer_bias(m, l, "ln_2.bias"), C);
            ref_linear(h, a, ref_layer_param(m, l, "mlp.c_fc.weight"), ref_layer_bias(m, l, "mlp.c_fc.bias"), FC, C);
            if (llama)   // SwiGLU: h = [gate | up] -> silu(gate) * up
                for (int k = 0; k < F; k++) h[k] = h[k] / (1.0 + exp(-h[k])) * h[F + k];
            else
                for (int k = 0; k < F; k++) h[k] = ggml_gelu ? ref_gelu_ggml(h[k]) : ref_gelu(h[k]);
            ref_linear(o, h, ref_layer_param(m, l, "mlp.c_proj.weight"), ref_layer_bias(m, l, "mlp.c_proj.bias"), C, F);
            for (int c = 0; c < C; c++) xt[c] += o[c];
        }
    }
    for (int t = 0; t < n; t++) {
        double *z = out + (size_t)t * V, mx = -INFINITY, sum = 0;
        ref_layernorm(a, x + (size_t)t * C, ref_param(m, "ln_f.weight"), llama ? NULL : ref_param(m, "ln_f.bias"), C);
        ref_linear(z, a, wte, NULL, V, C);
        for (int v = 0; v < V; v++) if (z[v] > mx) mx = z[v];
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        for (int v = 0; v < V; v++) z[v] -= mx + log(sum);
    }
    free(x); free(a); free(qkv); free(y); free(h); free(o); free(p); free(pe);
}

#endif
