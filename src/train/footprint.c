// footprint.c: each program's memory need (see footprint.h).
#include "train/footprint.h"

#include <stdio.h>
#include <string.h>

#include "common/memory.h"
#include "format/gguf_model.h"
#include "format/hf_model.h"
#include "train/adamw.h"

// The model's buffers but the activations and the engine's: what exists from
// its creation (gpt_create, gpt_load) on.
static size_t model_base(const GPTMemory *m) { return m->params + m->grads + m->pos_tables; }

// The model loaded, no pass run (./export): no activations, no engine scratch.
static const GPTWorkload MODEL_ALONE = {.matmul = GPT_MATMUL_OPENBLAS, .precision = GPT_FP32, .n_threads = 1};

int footprint_train(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, int with_adamw, char *err,
                    size_t errlen) {
    memset(f, 0, sizeof *f);
    GPTWorkload train = *w;
    train.backward = 1;
    if (gpt_memory(cfg, &train, &f->model, err, errlen) != 0) return -1;
    const GPTMemory *m = &f->model;
    f->adamw = with_adamw ? adamw_bytes(m->n_params) : 0;
    // The model and its activations (setup), AdamW's moments, the engine's
    // buffers (at the first pass): all held to the end.
    f->bytes = model_base(m) + m->activations + f->adamw + m->engine;
    snprintf(f->what, sizeof f->what, "the model's %zu parameters, their gradients%s and activations for batch %d x %d",
             m->n_params, with_adamw ? ", AdamW moments" : "", w->B, w->T);
    return 0;
}

int footprint_train_auto(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, char *err, size_t errlen) {
    Footprint on;
    GPTWorkload each = *w;
    each.precision = GPT_FP32;
    each.matmul = GPT_MATMUL_OPENBLAS;
    if (footprint_train(f, cfg, &each, 1, err, errlen) != 0) return -1;
    each.matmul = GPT_MATMUL_ONEDNN;
    if (footprint_train(&on, cfg, &each, 1, err, errlen) != 0) return -1;
    size_t engines = f->model.engine + on.model.engine;
    if (on.bytes > f->bytes) *f = on;
    // (fp32's activations are the same on both engines)
    size_t trial = model_base(&f->model) + f->model.activations + engines;
    if (trial > f->bytes) f->bytes = trial;
    return 0;
}

int footprint_eval(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    GPTWorkload eval = *w;
    eval.backward = 0;
    if (gpt_memory(cfg, &eval, &f->model, err, errlen) != 0) return -1;
    const GPTMemory *m = &f->model;
    f->bytes = model_base(m) + m->activations + m->engine;
    snprintf(f->what, sizeof f->what, "the model's %zu parameters and activations for batch %d x %d", m->n_params,
             w->B, w->T);
    return 0;
}

int footprint_sample(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, int max_len, char *err,
                     size_t errlen) {
    memset(f, 0, sizeof *f);
    // no batch pass (B = 0): the attention's engine scratch is none either way
    GPTWorkload decode = {.matmul = w->matmul, .precision = w->precision, .n_threads = w->n_threads};
    if (gpt_memory(cfg, &decode, &f->model, err, errlen) != 0) return -1;
    const GPTMemory *m = &f->model;
    f->work = kv_cache_bytes(cfg, max_len);
    f->bytes = model_base(m) + f->work + m->engine;
    snprintf(f->what, sizeof f->what, "the model's %zu parameters and a KV cache of %d positions", m->n_params,
             max_len);
    return 0;
}

int footprint_export(Footprint *f, const GPTConfig *cfg, int context_length, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (gpt_memory(cfg, &MODEL_ALONE, &f->model, err, errlen) != 0) return -1;
    const GPTMemory *m = &f->model;
    int n_ctx = context_length > 0 ? context_length : cfg->block_size;
    f->work = gguf_model_bytes(cfg, n_ctx);
    f->bytes = model_base(m) + f->work;
    if (cfg->pos == POS_SINUSOIDAL || cfg->pos == POS_NONE)
        snprintf(f->what, sizeof f->what, "the model's %zu parameters and a position table of %d rows", m->n_params,
                 n_ctx);
    else
        snprintf(f->what, sizeof f->what, "the model's %zu parameters and the exported tensors", m->n_params);
    return 0;
}

int footprint_export_hf(Footprint *f, const GPTConfig *cfg, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (gpt_memory(cfg, &MODEL_ALONE, &f->model, err, errlen) != 0) return -1;
    f->work = hf_model_bytes(cfg);
    f->bytes = model_base(&f->model) + f->work;
    snprintf(f->what, sizeof f->what, "the model's %zu parameters and the exported tensors", f->model.n_params);
    return 0;
}

int footprint_check(const Footprint *f, int processes, char *err, size_t errlen) {
    char what[sizeof f->what + 64];
    if (processes > 1) snprintf(what, sizeof what, "%d processes' %s", processes, f->what);
    else snprintf(what, sizeof what, "%s", f->what);
    return mem_check_processes(f->bytes, processes, what, err, errlen);
}
