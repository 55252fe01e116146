// params.c: the parameter table (names and shapes of the safetensors
// contract, in a fixed order), the flat params/grads buffers with named
// pointers into them, and the seeded initialisation.
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/memory.h"
#include "common/rng.h"
#include "model/params.h"

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

// One layer's tensors, in file order: name suffix, shape, AdamW decay,
// initialisation, and the field of LayerTensors that points at it. Biases
// (bias = 1) exist for block=gpt2 only. F = gpt_mlp_hidden, FC = c_fc's
// outputs (gpt2: F = 4C; llama: 2F, gate rows then up rows).
enum { ZERO, ONE, STD, PROJ };
enum { LAYER_TENSORS = 12 };
typedef struct { const char *suffix; int ndim, rows, cols, wd, init, bias; size_t field; } LayerEntry;

static void layer_table(const GPTConfig *c, LayerEntry t[LAYER_TENSORS]) {
    int C = c->d_model, F = gpt_mlp_hidden(c), FC = gpt_mlp_fc_width(c);
#define FIELD(f) offsetof(LayerTensors, f)
    const LayerEntry table[LAYER_TENSORS] = {
        {"ln_1.weight", 1, C, 0, 0, ONE, 0, FIELD(ln_1_w)},
        {"ln_1.bias", 1, C, 0, 0, ZERO, 1, FIELD(ln_1_b)},
        {"attn.c_attn.weight", 2, 3 * C, C, 1, STD, 0, FIELD(c_attn_w)},
        {"attn.c_attn.bias", 1, 3 * C, 0, 0, ZERO, 1, FIELD(c_attn_b)},
        {"attn.c_proj.weight", 2, C, C, 1, PROJ, 0, FIELD(attn_proj_w)},
        {"attn.c_proj.bias", 1, C, 0, 0, ZERO, 1, FIELD(attn_proj_b)},
        {"ln_2.weight", 1, C, 0, 0, ONE, 0, FIELD(ln_2_w)},
        {"ln_2.bias", 1, C, 0, 0, ZERO, 1, FIELD(ln_2_b)},
        {"mlp.c_fc.weight", 2, FC, C, 1, STD, 0, FIELD(c_fc_w)},
        {"mlp.c_fc.bias", 1, FC, 0, 0, ZERO, 1, FIELD(c_fc_b)},
        {"mlp.c_proj.weight", 2, C, F, 1, PROJ, 0, FIELD(mlp_proj_w)},
        {"mlp.c_proj.bias", 1, C, 0, 0, ZERO, 1, FIELD(mlp_proj_b)},
    };
#undef FIELD
    memcpy(t, table, sizeof table);
}

static int has_biases(const GPTConfig *c) { return c->block == BLOCK_GPT2; }

// The table in file order: wte, the scheme's tensors, h.0.* .. h.{L-1}.*, ln_f.*.
// weight_decay is 1 exactly for the 2-D matrices of linear layers and wte.
// Initialisation (GPT-2's, see docs/MODEL.md):
//   wte, c_attn.weight, c_fc.weight   N(0, 0.02)
//   attn/mlp c_proj.weight            N(0, 0.02 / sqrt(2L))  (residual projections)
//   the scheme's tensors              as the scheme says (wpe N(0, 0.01), rel_bias 0)
//   biases 0, norm weights 1 (LayerNorm's bias 0).
static void build_table(GPT *m) {
    const GPTConfig *c = &m->cfg;
    int C = c->d_model;
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    char name[64];
    LayerEntry layer[LAYER_TENSORS];
    layer_table(c, layer);
    m->n_entries = 0;
    m->num_params = 0;
    add_entry(m, "wte", 2, c->vocab_size, C, 1, std, 0.0f);
    for (int i = 0; i < m->n_pos_params; i++) {
        const PosParam *p = &m->pos_params[i];
        add_entry(m, p->name, 2, p->rows, p->cols, 0, p->init_std, 0.0f);
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int i = 0; i < LAYER_TENSORS; i++) {
            const LayerEntry *t = &layer[i];
            if (t->bias && !has_biases(c)) continue;
            snprintf(name, sizeof name, "h.%d.%s", l, t->suffix);
            add_entry(m, name, t->ndim, t->rows, t->cols, t->wd,
                      t->init == STD ? std : t->init == PROJ ? proj_std : 0.0f, t->init == ONE ? 1.0f : 0.0f);
        }
    add_entry(m, "ln_f.weight", 1, C, 0, 0, 0.0f, 1.0f);
    if (has_biases(c)) add_entry(m, "ln_f.bias", 1, C, 0, 0, 0.0f, 0.0f);
}

// Points the named pointers of t at buffer base, following the table order
// (a tensor the block does not have stays NULL).
static void point_tensors(GPT *m, ModelTensors *t, float *base) {
    int k = 0;
    LayerEntry layer[LAYER_TENSORS];
    layer_table(&m->cfg, layer);
    t->wte = base + m->entries[k++].offset;
    for (int i = 0; i < POS_MAX_PARAMS; i++) t->pos[i] = i < m->n_pos_params ? base + m->entries[k++].offset : NULL;
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int i = 0; i < LAYER_TENSORS; i++) {
            float **slot = (float **)((char *)&t->h[l] + layer[i].field);
            *slot = layer[i].bias && !has_biases(&m->cfg) ? NULL : base + m->entries[k++].offset;
        }
    t->ln_f_w = base + m->entries[k++].offset;
    t->ln_f_b = has_biases(&m->cfg) ? base + m->entries[k++].offset : NULL;
}

// The bytes alloc_floats(n) takes: 4n rounded up to a multiple of 64
// (aligned_alloc wants a multiple of the alignment), at least 64.
size_t params_buffer_bytes(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return bytes ? bytes : 64;
}

static float *alloc_floats(size_t n) {
    size_t bytes = params_buffer_bytes(n);
    float *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

int params_build_table(GPT *m, char *err, size_t errlen) {
    int L = m->cfg.n_layer;
    m->n_pos_params = m->pos->params ? m->pos->params(&m->cfg, m->pos_params) : 0;
    m->entries = calloc((size_t)1 + POS_MAX_PARAMS + LAYER_TENSORS * (size_t)L + 2, sizeof(ParamEntry));
    if (!m->entries) {
        snprintf(err, errlen, "out of memory for the parameter table");
        return -1;
    }
    build_table(m);
    return 0;
}

// The parameters and (with_grads) the gradients: 4 bytes per parameter
// each, checked against the memory available before either is allocated
// (the buffers are zeroed, so every page would be touched at once). Without
// gradients, m->grads and every pointer of m->g stay NULL.
int params_alloc(GPT *m, int with_grads, char *err, size_t errlen) {
    int L = m->cfg.n_layer;
    char what[96];
    snprintf(what, sizeof what, "the model's %zu parameters%s", m->num_params, with_grads ? " and their gradients" : "");
    if (mem_check((with_grads ? 2 : 1) * params_buffer_bytes(m->num_params), what, err, errlen) != 0) return -1;
    m->p.h = calloc((size_t)L, sizeof(LayerTensors));
    m->g.h = calloc((size_t)L, sizeof(LayerTensors));
    m->params = alloc_floats(m->num_params);
    m->grads = with_grads ? alloc_floats(m->num_params) : NULL;
    if (!m->p.h || !m->g.h || !m->params || (with_grads && !m->grads)) {
        snprintf(err, errlen, "out of memory for %zu parameters", m->num_params);
        return -1;
    }
    point_tensors(m, &m->p, m->params);
    if (with_grads) point_tensors(m, &m->g, m->grads);
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
