// gpt.c: the model's life around its two passes (which are in reference.c):
// creation and freeing, the engine (gpt_set_matmul), the activation
// buffers, a loaded model's length keys, the accessors of gpt.h, and
// gpt_forward / gpt_backward, which check their inputs and run the passes.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/memory.h"
#include "engine/engine_create.h"
#include "model/gpt.h"
#include "model/params.h"

int gpt_describe(GPT **model, const GPTConfig *cfg, char *err, size_t errlen) {
    *model = NULL;
    GPTConfig c = *cfg;
    if (gpt_config_validate(&c, err, errlen) != 0) return -1;
    gpt_config_resolve(&c);
    GPT *m = calloc(1, sizeof(GPT));
    if (!m) { snprintf(err, errlen, "out of memory"); return -1; }
    m->cfg = c;
    m->mlp_hidden = gpt_mlp_hidden(&c);
    m->mlp_fc_width = gpt_mlp_fc_width(&c);
    m->pos = pos_scheme(c.pos);
    if (params_build_table(m, err, errlen) != 0) { gpt_free(m); return -1; }
    *model = m;
    return 0;
}

// The one place an engine is chosen (engine_create.h); the new one makes its
// own copies of the weights at first use.
int gpt_engine_make(GPTMatmul matmul, GPTPrecision precision, GPTAttention attention, Engine **e, char *err,
                    size_t errlen) {
    int bf16 = precision == GPT_BF16, fused = attention == GPT_ATTENTION_FUSED;
    *e = NULL;
    if (precision != GPT_FP32 && precision != GPT_BF16) {
        snprintf(err, errlen, "unknown precision %d", (int)precision);
        return -1;
    }
    if (attention != GPT_ATTENTION_BLOCKED && attention != GPT_ATTENTION_FUSED) {
        snprintf(err, errlen, "unknown attention %d", (int)attention);
        return -1;
    }
    if (fused && matmul == GPT_MATMUL_REFERENCE) {
        snprintf(err, errlen, "the fused attention runs on openblas (fp32) or onednn (fp32 or bf16); the reference "
                 "engine has the plain one");
        return -1;
    }
    if (bf16 && matmul != GPT_MATMUL_ONEDNN) {
        snprintf(err, errlen, "the %s matmul engine computes in fp32 only (bf16 needs onednn)",
                 matmul == GPT_MATMUL_REFERENCE ? "reference" : "openblas");
        return -1;
    }
    switch (matmul) {
    case GPT_MATMUL_OPENBLAS: return engine_openblas_create(e, fused, err, errlen);
    case GPT_MATMUL_ONEDNN: return engine_onednn_create(e, bf16, fused, err, errlen);
    case GPT_MATMUL_REFERENCE: return engine_reference_create(e, err, errlen);
    default: snprintf(err, errlen, "unknown matmul engine %d", (int)matmul); return -1;
    }
}

void gpt_engine_free(Engine *e) {
    if (e) e->free(e);
}

// Whether activations already sized for the model's engine suit e too: their
// layout follows keeps_inputs and attention_reads_out (gpt_alloc_activations).
static int same_layout(const GPT *m, const Engine *e) {
    return !m->acts.encoded || (m->engine->keeps_inputs == e->keeps_inputs &&
                                m->engine->attention_reads_out == e->attention_reads_out);
}

// The old engine, and any copies of the weights it kept, go.
int gpt_set_matmul(GPT *m, GPTMatmul matmul, GPTPrecision precision, GPTAttention attention, char *err,
                   size_t errlen) {
    Engine *e;
    if (gpt_engine_make(matmul, precision, attention, &e, err, errlen) != 0) return -1;
    int relayout = m->engine && !same_layout(m, e);   // the activations are made again for it
    gpt_engine_free(m->engine);
    m->engine = e;
    return relayout ? gpt_alloc_activations(m, m->acts.B_max, m->acts.T_max, err, errlen) : 0;
}

int gpt_engine_swap(GPT *m, Engine **e, char *err, size_t errlen) {
    if (!same_layout(m, *e)) {
        snprintf(err, errlen, "the two engines lay the activations out differently: they cannot take turns");
        return -1;
    }
    Engine *was = m->engine;
    m->engine = *e;
    *e = was;
    return 0;
}

const char *gpt_matmul_describe(const GPT *m) { return m->engine->describe; }

void gpt_set_logits_rows(GPT *m, int n) { m->logits_rows_asked = n > 0 ? n : 0; }

static size_t activations_bytes_for(const GPTConfig *c, int B, int T, int forward_only, int keeps_inputs,
                                    int reads_out, int logits_rows);
static int logits_rows_for(const GPTConfig *c, int B, int T, int asked);

// Each figure from the function its allocation is sized with. The engine is
// the one gpt_set_matmul(matmul, precision, attention) makes: oneDNN in bf16
// keeps its own copies of the linear inputs (its Engine.keeps_inputs), so the
// activations hold one layer of them.
int gpt_memory(const GPTConfig *cfg, const GPTWorkload *w, GPTMemory *mem, char *err, size_t errlen) {
    const int B = w->B, T = w->T, n_threads = w->n_threads;
    memset(mem, 0, sizeof *mem);
    GPT *shell;
    if (gpt_describe(&shell, cfg, err, errlen) != 0) return -1;
    const GPTConfig *c = &shell->cfg;   // resolved
    if (B > 0 && gpt_check_batch(c, B, T, err, errlen) != 0) {
        gpt_free(shell);
        return -1;
    }
    int bf16 = w->precision == GPT_BF16, keeps_inputs = w->matmul == GPT_MATMUL_ONEDNN && bf16;
    int fused = w->attention == GPT_ATTENTION_FUSED;
    int n_pos = B > 0 && T > c->block_size ? T : c->block_size;
    mem->n_params = shell->num_params;
    mem->params = params_buffer_bytes(shell->num_params);
    mem->grads = w->backward ? mem->params : 0;   // a model read to run has none (gpt_load)
    mem->pos_tables = pos_tables_bytes(shell->pos, c, n_pos);
    int logits_rows = B > 0 ? logits_rows_for(c, B, T, w->logits_rows) : 1;
    mem->activations = B > 0 ? activations_bytes_for(c, B, T, !w->backward, keeps_inputs, fused, logits_rows) : 0;
    EngineShapes s = {.B = B, .T = T, .C = c->d_model, .H = c->n_head, .L = c->n_layer, .V = c->vocab_size,
                      .F = gpt_mlp_hidden(c), .FC = gpt_mlp_fc_width(c), .head_rows = logits_rows,
                      .backward = w->backward};
    mem->engine = w->matmul == GPT_MATMUL_ONEDNN      ? engine_onednn_bytes_for(&s, bf16, fused, n_threads)
                : w->matmul == GPT_MATMUL_REFERENCE ? engine_reference_bytes_for(&s, n_threads)
                                                    : engine_openblas_bytes_for(&s, fused, n_threads);
    gpt_free(shell);
    return 0;
}

int gpt_reconfigure(GPT *m, const GPTConfig *cfg, char *err, size_t errlen) {
    GPTConfig c = *cfg;
    const char *key;
    if (gpt_config_validate(&c, err, errlen) != 0) return -1;
    gpt_config_resolve(&c);
    if (gpt_config_diff(&c, &m->cfg, 1, &key) != 0) {
        snprintf(err, errlen, "%s cannot change for a trained model (only block_size and the rope scaling keys can)", key);
        return -1;
    }
    if (m->pos->max_pos_is_block && c.block_size != m->cfg.block_size) {
        snprintf(err, errlen, "pos=%s has one learned row per position: block_size cannot change (%d -> %d)",
                 pos_kind_name(c.pos), m->cfg.block_size, c.block_size);
        return -1;
    }
    // The tables cover as many positions as before (activations may be sized for T > block_size).
    int n_pos = m->pos_ctx.n_pos > c.block_size ? m->pos_ctx.n_pos : c.block_size;
    m->cfg = c;
    pos_ctx_free(&m->pos_ctx);
    if (pos_ctx_init(&m->pos_ctx, m->pos, &m->cfg, n_pos, err, errlen) != 0) return -1;
    for (int i = 0; i < m->n_pos_params; i++) {
        m->pos_ctx.param[i] = m->p.pos[i];
        m->pos_ctx.dparam[i] = m->g.pos[i];
    }
    return 0;
}

int gpt_create_uninit(GPT **model, const GPTConfig *cfg, int with_grads, char *err, size_t errlen) {
    if (gpt_describe(model, cfg, err, errlen) != 0) return -1;
    GPT *m = *model;
    *model = NULL;
    if (params_alloc(m, with_grads, err, errlen) != 0 ||
        pos_ctx_init(&m->pos_ctx, m->pos, &m->cfg, m->cfg.block_size, err, errlen) != 0 ||
        gpt_set_matmul(m, GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_BLOCKED, err, errlen) != 0) {
        gpt_free(m);
        return -1;
    }
    for (int i = 0; i < m->n_pos_params; i++) {
        m->pos_ctx.param[i] = m->p.pos[i];
        m->pos_ctx.dparam[i] = m->g.pos[i];
    }
    *model = m;
    return 0;
}

int gpt_create(GPT **model, const GPTConfig *cfg, uint64_t seed, char *err, size_t errlen) {
    if (gpt_create_uninit(model, cfg, 1, err, errlen) != 0) return -1;
    params_init(*model, seed);
    return 0;
}

void gpt_free(GPT *m) {
    if (!m) return;
    params_free(m);
    pos_ctx_free(&m->pos_ctx);
    if (m->engine) m->engine->free(m->engine);
    free(m->acts.encoded);   // the one activation allocation starts here
    free(m->acts.tokens);
    free(m->acts.layer);
    free(m);
}

const GPTConfig *gpt_config(const GPT *m) { return &m->cfg; }
size_t gpt_num_params(const GPT *m) { return m->num_params; }
float *gpt_params(GPT *m) {
    if (m->engine && m->engine->weights_changed) m->engine->weights_changed(m->engine);   // the caller may write
    return m->params;
}
float *gpt_grads(GPT *m) { return m->grads; }
int gpt_param_entries(const GPT *m, const ParamEntry **entries) {
    *entries = m->entries;
    return m->n_entries;
}
const ParamEntry *gpt_find_param(const GPT *m, const char *name) {
    for (int i = 0; i < m->n_entries; i++)
        if (strcmp(m->entries[i].name, name) == 0) return &m->entries[i];
    return NULL;
}
const float *gpt_losses(const GPT *m) { return m->acts.losses; }
int gpt_max_positions(const GPT *m) { return gpt_config_max_positions(&m->cfg); }
int gpt_config_max_positions(const GPTConfig *c) {
    const PosScheme *s = pos_scheme(c->pos);
    return s && s->max_pos_is_block ? c->block_size : INT_MAX;
}
// On the pool, in 64K-float chunks: one thread alone does not reach the memory's bandwidth.
void gpt_zero_grad(GPT *m) {
    const size_t n = m->grads ? m->num_params : 0, chunk = (size_t)1 << 16;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += chunk) memset(m->grads + i, 0, (n - i < chunk ? n - i : chunk) * sizeof(float));
}

int gpt_check_batch(const GPTConfig *c, int B, int T, char *err, size_t errlen) {
    if (B < 1 || T < 1) { snprintf(err, errlen, "batch size (%d) and sequence length (%d) must be >= 1", B, T); return -1; }
    const PosScheme *s = pos_scheme(c->pos);
    if (s && s->max_pos_is_block && T > c->block_size) {
        snprintf(err, errlen, "pos=%s cannot run sequences of %d tokens: block_size is %d",
                 pos_kind_name(c->pos), T, c->block_size);
        return -1;
    }
    // The widest activation row is max(V, 3C, c_fc's outputs) floats; every index stays below 2^31.
    size_t widest = (size_t)c->vocab_size, fc = (size_t)gpt_mlp_fc_width(c), qkv = (size_t)3 * c->d_model;
    if (fc > widest) widest = fc;
    if (qkv > widest) widest = qkv;
    if ((size_t)B * T > ((size_t)1 << 31) / widest) {
        snprintf(err, errlen, "batch (%d x %d) too large for the activation buffers (B*T*max(V, 3C, c_fc's "
                 "outputs) must stay below 2^31)", B, T);
        return -1;
    }
    return 0;
}

// One allocation for every activation buffer, carved up by this table, plus
// the (B,T) token copies and the layers' LayerActs. Each entry: where its
// pointer goes (into a and layer 0's l0, which may be scratch when only the
// size is wanted) and its floats. The per-layer buffers hold L slices, the
// four linear inputs 1 when the engine keeps its own copy of them
// (keeps_inputs: Activations in gpt_internal.h). A model without gradients
// (forward_only: gpt_load's, to evaluate) keeps one slice of each, every
// layer writing over the last (layer l reads only its input x, layer l-1's
// res3, and that only until its own res2 is made), and no backward buffers.
enum { ACT_BUFFERS = 28 };
typedef struct { float **ptr; size_t n; } ActSlice;

// The positions whose logits the head holds at once (model_forward's chunks): all
// B*T of them where their B*T*V floats fit LOGITS_MAX_FLOATS (the studies' vocabulary
// and batches), else whole slices of 64 rows (the OpenBLAS engine's) that do:
// GPT-2's 50,257 tokens, 320 positions at a time, 64 MB of logits rather than 1.6 GB
// at B 8, T 1,024. asked > 0: that many instead (gpt_set_logits_rows).
#define LOGITS_MAX_FLOATS ((size_t)1 << 24)
static int logits_rows_for(const GPTConfig *c, int B, int T, int asked) {
    size_t BT = (size_t)B * T, V = c->vocab_size;
    if (asked > 0) return (size_t)asked < BT ? asked : (int)BT;
    if (BT * V <= LOGITS_MAX_FLOATS) return (int)BT;
    size_t rows = LOGITS_MAX_FLOATS / V / 64 * 64;
    return rows < 64 ? 64 : rows < BT ? (int)rows : (int)BT;
}

static void activation_table(const GPTConfig *c, int B, int T, int forward_only, int keeps_inputs, int reads_out,
                             int logits_rows, Activations *a, LayerActs *l0, ActSlice table[ACT_BUFFERS]) {
    size_t L = forward_only ? 1 : c->n_layer, C = c->d_model, H = c->n_head, V = c->vocab_size;
    size_t F = gpt_mlp_hidden(c), FC = gpt_mlp_fc_width(c), BT = (size_t)B * T;
    size_t Li = keeps_inputs ? 1 : L;                 // slices of the linear inputs
    size_t La = keeps_inputs && !reads_out ? 1 : L;   // of attention's output (a linear input, read by a fused backward)
    size_t BTb = forward_only ? 0 : BT;               // rows of the backward's buffers
    const PosScheme *s = pos_scheme(c->pos);   // a distance bias or not
    const ActSlice t[ACT_BUFFERS] = {
        {&a->encoded, BT * C},       {&l0->ln1, Li * BT * C},    {&l0->ln1_mean, L * BT},
        {&l0->ln1_rstd, L * BT},     {&l0->qkv, L * BT * 3 * C}, {&l0->atty, La * BT * C},
        {&l0->att_lse, L * BT * H},  {&l0->res2, L * BT * C},    {&l0->ln2, Li * BT * C},
        {&l0->ln2_mean, L * BT},     {&l0->ln2_rstd, L * BT},    {&l0->fch, L * BT * FC},
        {&l0->fch_act, Li * BT * F}, {&l0->res3, L * BT * C},    {&a->lnf, BT * C},
        {&a->lnf_mean, BT},          {&a->lnf_rstd, BT},         {&a->logits, (size_t)logits_rows * V},
        {&a->ce_lse, BT},            {&a->losses, BT},           {&a->pos_bias, s->bias_fill ? H * T : 0},
        {&a->dres, BTb * C},         {&a->dact, BTb * C},        {&a->dqkv, BTb * 3 * C},
        {&a->dhidden, BTb * FC},     {&a->proj_out, BT * C},
        {&a->dpos_bias, s->bias_backward ? BTb * H : 0},
        {&a->dact_out, c->block == BLOCK_LLAMA ? BTb * F : 0},
    };
    memcpy(table, t, sizeof t);
}

// Layer l's slices, S rows each, from layer 0's; the linear inputs' slice is li (0 or l),
// attention's output's la. (Its input x is set by the caller.)
static LayerActs layer_slices(const LayerActs *l0, int l, int li, int la, size_t S, const GPTConfig *c) {
    size_t C = c->d_model, H = c->n_head, F = gpt_mlp_hidden(c), FC = gpt_mlp_fc_width(c);
    return (LayerActs){
        .ln1 = l0->ln1 + li * S * C,   .ln1_mean = l0->ln1_mean + l * S, .ln1_rstd = l0->ln1_rstd + l * S,
        .qkv = l0->qkv + l * S * 3 * C, .atty = l0->atty + la * S * C,   .att_lse = l0->att_lse + l * S * H,
        .res2 = l0->res2 + l * S * C,  .ln2 = l0->ln2 + li * S * C,     .ln2_mean = l0->ln2_mean + l * S,
        .ln2_rstd = l0->ln2_rstd + l * S, .fch = l0->fch + l * S * FC,  .fch_act = l0->fch_act + li * S * F,
        .res3 = l0->res3 + l * S * C,
    };
}

// A buffer's slice of the allocation: its floats rounded up to 16 (64 bytes), so each starts aligned.
static size_t slice_floats(size_t n) { return (n + 15) / 16 * 16; }

static size_t activation_floats(const ActSlice table[ACT_BUFFERS]) {
    size_t total = 0;
    for (int i = 0; i < ACT_BUFFERS; i++) total += slice_floats(table[i].n);
    return total;
}

// gpt_alloc_activations(B, T)'s allocation, for forward passes only
// (forward_only) or a backward too, laid out for an engine that keeps its own
// copies of the linear inputs (keeps_inputs: bf16) and whose attention
// backward reads the forward's output (reads_out: fused; engine.h), the head
// holding logits_rows positions' logits.
static size_t activations_bytes_for(const GPTConfig *c, int B, int T, int forward_only, int keeps_inputs,
                                    int reads_out, int logits_rows) {
    Activations scratch;
    LayerActs l0;
    ActSlice table[ACT_BUFFERS];
    activation_table(c, B, T, forward_only, keeps_inputs, reads_out, logits_rows, &scratch, &l0, table);
    return activation_floats(table) * sizeof(float) + 2 * (size_t)B * T * sizeof(int) +
           (size_t)c->n_layer * sizeof(LayerActs);
}

// The previous buffers are freed first, then the total is checked against
// the memory available, before the scheme's tables grow to T positions (at
// most T x C floats, no more than one (B,T,C) buffer) and before the
// buffers are allocated and zeroed.
int gpt_alloc_activations(GPT *m, int B, int T, char *err, size_t errlen) {
    const GPTConfig *c = &m->cfg;
    if (gpt_check_batch(c, B, T, err, errlen) != 0) return -1;
    Activations *a = &m->acts;
    free(a->encoded);
    free(a->tokens);
    free(a->layer);
    memset(a, 0, sizeof *a);
    int keeps_inputs = m->engine->keeps_inputs, reads_out = m->engine->attention_reads_out;
    int forward_only = m->grads == NULL;
    size_t BT = (size_t)B * T;
    LayerActs l0;
    ActSlice table[ACT_BUFFERS];
    int logits_rows = logits_rows_for(c, B, T, m->logits_rows_asked);
    activation_table(c, B, T, forward_only, keeps_inputs, reads_out, logits_rows, a, &l0, table);
    size_t total = activation_floats(table);
    size_t bytes = activations_bytes_for(c, B, T, forward_only, keeps_inputs, reads_out, logits_rows);
    char what[96];
    snprintf(what, sizeof what, "activations for batch %d x %d tokens", B, T);
    if (mem_check(bytes, what, err, errlen) != 0) return -1;
    if (pos_ctx_ensure(&m->pos_ctx, m->pos, T > c->block_size ? T : c->block_size, err, errlen) != 0) return -1;
    float *base = aligned_alloc(64, total * sizeof(float));
    int *tokens = malloc(2 * BT * sizeof(int));
    LayerActs *layer = malloc((size_t)c->n_layer * sizeof(LayerActs));
    if (!base || !tokens || !layer) {
        free(base);
        free(tokens);
        free(layer);
        snprintf(err, errlen, "out of memory for activations (%.1f MB for B=%d, T=%d)",
                 total * 4.0 / 1e6, B, T);
        return -1;
    }
    memset(base, 0, total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < ACT_BUFFERS; i++) {   // a buffer of no floats is NULL
        *table[i].ptr = table[i].n ? base + off : NULL;
        off += slice_floats(table[i].n);
    }
    if (!a->dact_out) a->dact_out = a->dhidden;   // gpt2: GELU's backward runs in place
    for (int l = 0; l < c->n_layer; l++) {
        int ls = forward_only ? 0 : l;   // the layer's slice of the per-layer buffers
        layer[l] = layer_slices(&l0, ls, keeps_inputs ? 0 : ls, keeps_inputs && !reads_out ? 0 : ls, BT, c);
        layer[l].x = l == 0 ? a->encoded : layer[l - 1].res3;
    }
    a->layer = layer;
    a->tokens = tokens;
    a->targets = tokens + BT;
    a->B_max = B;
    a->T_max = T;
    a->logits_rows = logits_rows;
    a->bytes = bytes;
    return 0;
}

/* ---- the passes (model_forward, model_backward: reference.c), for the programs ---- */

// Whether a forward's batch (B,T) fits the activations and every token
// (input and target) is in the vocabulary; 0, or -1 with a message.
static int check_inputs(const GPT *m, const int *inputs, const int *targets, int B, int T, char *err, size_t errlen) {
    const Activations *a = &m->acts;
    if (!a->encoded || B < 1 || T < 1 || B > a->B_max || T > a->T_max) {
        snprintf(err, errlen, "batch %dx%d does not fit the activations (%dx%d)", B, T, a->B_max, a->T_max);
        return -1;
    }
    int V = m->cfg.vocab_size;
    for (int i = 0; i < B * T; i++) {
        if (inputs[i] < 0 || inputs[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V))) {
            snprintf(err, errlen, "token %d at index %d is outside the vocabulary (%d)",
                     inputs[i] < 0 || inputs[i] >= V ? inputs[i] : targets[i], i, V);
            return -1;
        }
    }
    return 0;
}

// The batch is copied: backward reads the tokens and targets after the caller's buffers have moved on.
int gpt_forward(GPT *m, const int *inputs, const int *targets, int B, int T, float *loss, char *err,
                size_t errlen) {
    Activations *a = &m->acts;
    m->have_targets = 0;
    if (check_inputs(m, inputs, targets, B, T, err, errlen) != 0) return -1;
    memcpy(a->tokens, inputs, (size_t)B * T * sizeof(int));
    if (targets) memcpy(a->targets, targets, (size_t)B * T * sizeof(int));
    m->B = B;
    m->T = T;
    double mean = model_forward(m, a->tokens, targets ? a->targets : NULL, B, T, NULL);
    if (m->engine->err[0]) return engine_failed(m->engine, err, errlen);   // (engine.h: its first failure)
    if (targets && loss) *loss = (float)mean;
    m->have_targets = targets != NULL;
    return 0;
}

int gpt_backward(GPT *m, float loss_scale, char *err, size_t errlen) {
    if (!m->grads) {
        snprintf(err, errlen, "backward: the model was read from a file to run, without gradients (gpt_load)");
        return -1;
    }
    if (!m->have_targets) {
        snprintf(err, errlen, "backward: the last forward had no targets (or was already backpropagated)");
        return -1;
    }
    m->have_targets = 0;   // the logits buffer is about to hold dlogits
    model_backward(m, m->B, m->T, loss_scale);
    return m->engine->err[0] ? engine_failed(m->engine, err, errlen) : 0;
}
