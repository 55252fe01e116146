// util_gradcheck.c: central finite differences against analytic gradients.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "model/gpt_internal.h"
#include "util_gradcheck.h"

double gc_rel_err(double a, double n, double floor) {
    double den = fmax(fmax(fabs(a), fabs(n)), floor);
    return fabs(a - n) / den;
}

double gc_dot(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

void gc_fill_normal(float *x, size_t n, double mean, double std, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)(mean + std * rng_normal(&r));
}

double gc_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

// Central difference with step h, dividing by the step actually taken in float.
static double central(gc_loss_fn loss, void *ctx, float *xi, float h) {
    float saved = *xi;
    *xi = saved + h;
    double lp = loss(ctx);
    float up = *xi;
    *xi = saved - h;
    double lm = loss(ctx);
    float down = *xi;
    *xi = saved;
    return (lp - lm) / ((double)up - (double)down);
}

// Richardson extrapolation of two central differences: the h^2 error terms
// cancel, (4 D(h) - D(2h)) / 3 = f' + O(h^4). That allows a larger step,
// and the float rounding noise of the loss is divided by a larger step.
static double richardson(gc_loss_fn loss, void *ctx, float *xi, float h) {
    return (4.0 * central(loss, ctx, xi, h) - central(loss, ctx, xi, 2.0f * h)) / 3.0;
}

GcResult gc_check(gc_loss_fn loss, void *ctx, float *x, const float *grad, size_t n,
                  int n_check, float eps, double floor, uint64_t seed) {
    GcResult res = {0};
    Rng r;
    rng_seed(&r, seed);
    int all = n_check <= 0 || (size_t)n_check >= n;
    int count = all ? (int)n : n_check;
    for (int k = 0; k < count; k++) {
        size_t i = all ? (size_t)k : (size_t)rng_below(&r, n);
        double numeric = richardson(loss, ctx, x + i, eps);
        double e = gc_rel_err(grad[i], numeric, floor);
        if (e > res.max_rel || res.n_checked == 0) {
            res.max_rel = e;
            res.worst_index = i;
            res.worst_analytic = grad[i];
            res.worst_numeric = numeric;
        }
        res.n_checked++;
    }
    return res;
}

void gc_randomize_params(GPT *model, uint64_t seed) {
    const ParamEntry *e;
    int n = gpt_param_entries(model, &e);
    float *p = gpt_params(model);
    for (int k = 0; k < n; k++) {
        const char *name = e[k].name;
        size_t len = strlen(name);
        int is_bias = len >= 5 && strcmp(name + len - 5, ".bias") == 0;
        int is_ln = strstr(name, "ln_") != NULL;
        double mean = 0.0, std = 0.3;
        if (strcmp(name, "wte") == 0 || strcmp(name, "wpe") == 0) std = 0.5;
        else if (strcmp(name, "rel_bias") == 0) std = 1.0;
        else if (is_ln && !is_bias) { mean = 1.0; std = 0.2; }
        else if (is_bias) std = 0.2;
        gc_fill_normal(p + e[k].offset, e[k].numel, mean, std, seed + 7919u * (uint64_t)k);
    }
}

GcResult gc_check_direction(gc_loss_fn loss, void *ctx, float *x, const float *grad, size_t n,
                            float eps, double floor, uint64_t seed) {
    GcResult res = {0};
    float *saved = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float));
    gc_fill_normal(u, n, 0.0, 1.0, seed);
    double norm = sqrt(gc_dot(u, u, n));
    for (size_t i = 0; i < n; i++) u[i] = (float)(u[i] / norm);
    memcpy(saved, x, n * sizeof(float));
    double d[2];
    for (int k = 0; k < 2; k++) {   // steps eps and 2 eps, then Richardson
        float h = eps * (float)(k + 1);
        for (size_t i = 0; i < n; i++) x[i] = saved[i] + h * u[i];
        double lp = loss(ctx);
        for (size_t i = 0; i < n; i++) x[i] = saved[i] - h * u[i];
        double lm = loss(ctx);
        d[k] = (lp - lm) / (2.0 * h);
    }
    memcpy(x, saved, n * sizeof(float));
    res.worst_numeric = (4.0 * d[0] - d[1]) / 3.0;
    res.worst_analytic = gc_dot(grad, u, n);
    res.max_rel = gc_rel_err(res.worst_analytic, res.worst_numeric, floor);
    res.n_checked = 1;
    free(saved);
    free(u);
    return res;
}

float gc_forward(GPT *model, const int *inputs, const int *targets, int B, int T) {
    char err[256];
    float loss = 0.0f;
    if (gpt_forward(model, inputs, targets, B, T, &loss, err, sizeof err) != 0) {
        fprintf(stderr, "gpt_forward failed: %s\n", err);
        abort();
    }
    return loss;
}

void gc_backward(GPT *model, float loss_scale) {
    char err[256];
    if (gpt_backward(model, loss_scale, err, sizeof err) != 0) {
        fprintf(stderr, "gpt_backward failed: %s\n", err);
        abort();
    }
}

const float *gc_logits(const GPT *model) { return model->acts.logits; }

void gc_config_defaults(GPTConfig *cfg) {
    const ModelKey *keys;
    int n = gpt_model_keys(&keys);
    char err[128];
    for (int k = 0; k < n; k++)
        if (keys[k].scheme >= 0 && gpt_config_set(cfg, k, keys[k].def, err, sizeof err) != 0) {
            fprintf(stderr, "bad default of %s: %s\n", keys[k].name, err);
            abort();
        }
    gpt_config_resolve(cfg);
}
