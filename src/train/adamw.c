// adamw.c: AdamW update, global gradient norm and clipping (maths in adamw.h).
#include "train/adamw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/memory.h"

// m and v, n floats each (at least one).
size_t adamw_bytes(size_t n) { return 2 * (n ? n : 1) * sizeof(float); }

int adamw_init(AdamW *opt, const AdamWConfig *cfg, size_t n, char *err, size_t errlen) {
    opt->cfg = *cfg;
    opt->n = n;
    opt->m = opt->v = NULL;
    char what[96];
    snprintf(what, sizeof what, "the AdamW moments of %zu parameters", n);
    if (mem_check(adamw_bytes(n), what, err, errlen) != 0) return -1;
    opt->m = calloc(n ? n : 1, sizeof(float));
    opt->v = calloc(n ? n : 1, sizeof(float));
    if (!opt->m || !opt->v) {
        adamw_free(opt);
        snprintf(err, errlen, "out of memory for %s", what);
        return -1;
    }
    return 0;
}

void adamw_free(AdamW *opt) {
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
}

void adamw_update(const AdamWConfig *cfg, float *param, const float *grad, float *m, float *v,
                  size_t n, float lr, int t, int decay) {
    const float beta1 = cfg->beta1, beta2 = cfg->beta2, eps = cfg->eps;
    const float bias1 = (float)(1.0 - pow(cfg->beta1, t));   // bias corrections of the zero-initialised moments
    const float bias2 = (float)(1.0 - pow(cfg->beta2, t));
    const float shrink = decay ? 1.0f - lr * cfg->weight_decay : 1.0f;
    // One pass over param, grad, m, v (16 bytes read, 12 written per
    // parameter): vectorised (sqrtf is one instruction under -fno-math-errno,
    // see the Makefile) and split over threads, so it runs at memory speed.
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float m_hat = m[i] / bias1, v_hat = v[i] / bias2;
        param[i] = param[i] * shrink - lr * m_hat / (sqrtf(v_hat) + eps);
    }
}

void adamw_step(AdamW *opt, float *params, const float *grads, const ParamEntry *entries,
                int n_entries, float lr, int t) {
    for (int e = 0; e < n_entries; e++) {
        size_t o = entries[e].offset;
        adamw_update(&opt->cfg, params + o, grads + o, opt->m + o, opt->v + o, entries[e].numel,
                     lr, t, entries[e].weight_decay);
    }
}

enum { NORM_CHUNK = 4096 };

double grad_global_norm(const float *grads, size_t n) {
    size_t n_chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double total = 0.0;
    double partial[256];
    // Chunks in groups of 256: each chunk's sum is computed by one thread,
    // and the partial sums are added in chunk order.
    for (size_t c0 = 0; c0 < n_chunks; c0 += 256) {
        size_t nc = n_chunks - c0 < 256 ? n_chunks - c0 : 256;
        #pragma omp parallel for schedule(static)
        for (size_t c = 0; c < nc; c++) {
            size_t begin = (c0 + c) * NORM_CHUNK, end = begin + NORM_CHUNK < n ? begin + NORM_CHUNK : n;
            double s = 0.0;
            for (size_t i = begin; i < end; i++) s += (double)grads[i] * grads[i];
            partial[c] = s;
        }
        for (size_t c = 0; c < nc; c++) total += partial[c];
    }
    return sqrt(total);
}

float grad_clip(float *grads, size_t n, double norm, float max_norm) {
    if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
    float scale = (float)(max_norm / norm);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) grads[i] *= scale;
    return scale;
}
