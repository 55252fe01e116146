// params.c: the parameter table (names and shapes of the safetensors
// contract, in a fixed order), the flat params/grads buffers with named
// pointers into them, and the seeded initialisation.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/memory.h"
#include "common/rng.h"
#include "model/gpt_internal.h"

static void add_entry(GPT *m, const char *name, int ndim, int s0, int s1, int weight_decay,
                      float init_std, float init_value) {
    ParamEntry *e = &m->entries[m->n_entries++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ndim = ndim;
    e->shape[0] = s0;
    e->shape[1] = ndim == 2 ? s1 : 0;
    e->numel = (size_t)s0 * (ndim == 2 ? (size_t)s1 : 1);
    e->offset = m->num_params;
    e->weight_decay = weight_decay;
    e->init_std = init_std;
    e->init_value = init_value;
    m->num_params += e->numel;
}

// The table in file order: wte, the scheme's tensors, h.0.* .. h.{L-1}.*, ln_f.*.
// weight_decay is 1 exactly for the 2-D matrices of linear layers and wte.
// Initialisation (GPT-2's, see docs/MODEL.md):
//   wte, c_attn.weight, c_fc.weight   N(0, 0.02)
//   attn/mlp c_proj.weight            N(0, 0.02 / sqrt(2L))  (residual projections)
//   the scheme's tensors              as the scheme says (wpe N(0, 0.01), rel_bias 0)
//   biases 0, LayerNorm weight 1, bias 0.
static void build_table(GPT *m) {
    const GPTConfig *c = &m->cfg;
    int C = c->d_model;
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    char name[64];
    m->n_entries = 0;
    m->num_params = 0;
    add_entry(m, "wte", 2, c->vocab_size, C, 1, std, 0.0f);
    for (int i = 0; i < m->n_pos_params; i++) {
        const PosParam *p = &m->pos_params[i];
        add_entry(m, p->name, 2, p->rows, p->cols, 0, p->init_std, 0.0f);
    }
    enum { ZERO, ONE, STD, PROJ };
    for (int l = 0; l < c->n_layer; l++) {
        static const struct { const char *suffix; int ndim, rows, cols, wd, init; } layer[12] = {
            {"ln_1.weight", 1, 1, 0, 0, ONE},          {"ln_1.bias", 1, 1, 0, 0, ZERO},
            {"attn.c_attn.weight", 2, 3, 1, 1, STD},   {"attn.c_attn.bias", 1, 3, 0, 0, ZERO},
            {"attn.c_proj.weight", 2, 1, 1, 1, PROJ},  {"attn.c_proj.bias", 1, 1, 0, 0, ZERO},
            {"ln_2.weight", 1, 1, 0, 0, ONE},          {"ln_2.bias", 1, 1, 0, 0, ZERO},
            {"mlp.c_fc.weight", 2, 4, 1, 1, STD},      {"mlp.c_fc.bias", 1, 4, 0, 0, ZERO},
            {"mlp.c_proj.weight", 2, 1, 4, 1, PROJ},   {"mlp.c_proj.bias", 1, 1, 0, 0, ZERO},
        };  // rows/cols in units of C: c_fc.weight is [4C, C], mlp.c_proj.weight [C, 4C]
        for (int i = 0; i < 12; i++) {
            int init = layer[i].init;
            snprintf(name, sizeof name, "h.%d.%s", l, layer[i].suffix);
            add_entry(m, name, layer[i].ndim, layer[i].rows * C, layer[i].cols * C, layer[i].wd,
                      init == STD ? std : init == PROJ ? proj_std : 0.0f, init == ONE ? 1.0f : 0.0f);
        }
    }
    add_entry(m, "ln_f.weight", 1, C, 0, 0, 0.0f, 1.0f);
    add_entry(m, "ln_f.bias", 1, C, 0, 0, 0.0f, 0.0f);
}

// Points the named pointers of t at buffer base, following the table order.
static void point_tensors(GPT *m, ModelTensors *t, float *base) {
    int k = 0;
    t->wte = base + m->entries[k++].offset;
    for (int i = 0; i < POS_MAX_PARAMS; i++) t->pos[i] = i < m->n_pos_params ? base + m->entries[k++].offset : NULL;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        LayerTensors *h = &t->h[l];
        float **slots[12] = {&h->ln_1_w, &h->ln_1_b, &h->c_attn_w, &h->c_attn_b,
                             &h->attn_proj_w, &h->attn_proj_b, &h->ln_2_w, &h->ln_2_b,
                             &h->c_fc_w, &h->c_fc_b, &h->mlp_proj_w, &h->mlp_proj_b};
        for (int i = 0; i < 12; i++) *slots[i] = base + m->entries[k++].offset;
    }
    t->ln_f_w = base + m->entries[k++].offset;
    t->ln_f_b = base + m->entries[k++].offset;
}

// The bytes alloc_floats(n) takes: 4n rounded up to a multiple of 64
// (aligned_alloc wants a multiple of the alignment), at least 64.
static size_t floats_bytes(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return bytes ? bytes : 64;
}

static float *alloc_floats(size_t n) {
    size_t bytes = floats_bytes(n);
    float *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

int params_build_table(GPT *m, char *err, size_t errlen) {
    int L = m->cfg.n_layer;
    m->n_pos_params = m->pos->params ? m->pos->params(&m->cfg, m->pos_params) : 0;
    m->entries = calloc((size_t)1 + POS_MAX_PARAMS + 12 * (size_t)L + 2, sizeof(ParamEntry));
    if (!m->entries) {
        snprintf(err, errlen, "out of memory for the parameter table");
        return -1;
    }
    build_table(m);
    return 0;
}

// The parameters and the gradients: 2 x 4 bytes per parameter, checked
// against the memory available before either is allocated (the buffers are
// zeroed, so every page would be touched at once).
int params_alloc(GPT *m, char *err, size_t errlen) {
    int L = m->cfg.n_layer;
    char what[96];
    snprintf(what, sizeof what, "the model's %zu parameters and their gradients", m->num_params);
    if (mem_check(2 * floats_bytes(m->num_params), what, err, errlen) != 0) return -1;
    m->p.h = calloc((size_t)L, sizeof(LayerTensors));
    m->g.h = calloc((size_t)L, sizeof(LayerTensors));
    m->params = alloc_floats(m->num_params);
    m->grads = alloc_floats(m->num_params);
    if (!m->p.h || !m->g.h || !m->params || !m->grads) {
        snprintf(err, errlen, "out of memory for %zu parameters", m->num_params);
        return -1;
    }
    point_tensors(m, &m->p, m->params);
    point_tensors(m, &m->g, m->grads);
    return 0;
}

void params_free(GPT *m) {
    free(m->entries);
    free(m->p.h);
    free(m->g.h);
    free(m->params);
    free(m->grads);
}

// Every tensor draws from its own stream rng_seed_named(seed, name), so the
// values depend only on (seed, name): not on the thread count, nor on which
// other tensors exist (two schemes share every common tensor bit for bit).
void params_init(GPT *m, uint64_t seed) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int k = 0; k < m->n_entries; k++) {
        const ParamEntry *e = &m->entries[k];
        float *w = m->params + e->offset;
        if (e->init_std > 0.0f) {
            Rng r;
            rng_seed_named(&r, seed, e->name);
            for (size_t i = 0; i < e->numel; i++) w[i] = (float)(e->init_std * rng_normal(&r));
        } else {
            for (size_t i = 0; i < e->numel; i++) w[i] = e->init_value;
        }
    }
}
