// config.c: the model configuration: scheme names, defaults, validation.
#include <stdio.h>
#include <string.h>

#include "model/gpt_internal.h"

static const char *const POS_NAMES[POS_COUNT] = {"rope", "learned", "sinusoidal", "t5", "alibi", "none"};

const char *pos_kind_name(PosKind kind) {
    return (kind >= 0 && kind < POS_COUNT) ? POS_NAMES[kind] : "unknown";
}

int pos_kind_from_name(const char *name, PosKind *kind) {
    for (int i = 0; i < POS_COUNT; i++)
        if (name && strcmp(name, POS_NAMES[i]) == 0) { *kind = (PosKind)i; return 0; }
    return -1;
}

void gpt_config_defaults(GPTConfig *cfg) {
    cfg->rope_base = 10000.0f;
    // rope_dims 0 means "all of head_dim"; resolved when the model is built.
    cfg->rope_dims = (cfg->n_head > 0 && cfg->d_model > 0 && cfg->d_model % cfg->n_head == 0)
                         ? cfg->d_model / cfg->n_head : 0;
    cfg->t5_num_buckets = 32;
    cfg->t5_max_distance = 128;
    cfg->sinusoidal_scale = 1.0f;
}

void config_resolve(GPTConfig *cfg) {
    if (cfg->rope_dims == 0 && cfg->n_head > 0) cfg->rope_dims = cfg->d_model / cfg->n_head;
}

// Limits keep every size product well inside size_t and int index ranges.
int gpt_config_validate(const GPTConfig *c, char *err, size_t errlen) {
#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
    if (c->pos < 0 || c->pos >= POS_COUNT) FAIL("unknown positional scheme (%d)", (int)c->pos);
    if (c->n_layer < 1 || c->n_layer > 1024) FAIL("n_layer (%d) must be in 1..1024", c->n_layer);
    if (c->n_head < 1 || c->n_head > 1024) FAIL("n_head (%d) must be in 1..1024", c->n_head);
    if (c->d_model < 1 || c->d_model > 65536) FAIL("d_model (%d) must be in 1..65536", c->d_model);
    if (c->d_model % c->n_head != 0)
        FAIL("d_model (%d) is not divisible by n_head (%d)", c->d_model, c->n_head);
    if (c->vocab_size < 1 || c->vocab_size > (1 << 24))
        FAIL("vocab_size (%d) must be in 1..16777216", c->vocab_size);
    if (c->block_size < 1 || c->block_size > (1 << 20))
        FAIL("block_size (%d) must be in 1..1048576", c->block_size);
    int D = c->d_model / c->n_head;
    if (c->pos == POS_ROPE) {
        if (!(c->rope_base > 1.0f)) FAIL("rope_base (%g) must be > 1", (double)c->rope_base);
        if (c->rope_dims < 0 || c->rope_dims > D || c->rope_dims % 2 != 0)
            FAIL("rope_dims (%d) must be even and in 2..head_dim (%d) (0 = head_dim)", c->rope_dims, D);
        if (c->rope_dims == 0 && D % 2 != 0)
            FAIL("head_dim (%d) is odd: set rope_dims to an even value", D);
    }
    if (c->pos == POS_SINUSOIDAL && !(c->sinusoidal_scale > 0.0f && c->sinusoidal_scale <= 1e3f))
        FAIL("sinusoidal_scale (%g) must be in (0, 1000]", (double)c->sinusoidal_scale);
    if (c->pos == POS_T5) {
        if (c->t5_num_buckets < 2 || c->t5_num_buckets > 4096)
            FAIL("t5_num_buckets (%d) must be in 2..4096", c->t5_num_buckets);
        if (c->t5_max_distance <= c->t5_num_buckets / 2)
            FAIL("t5_max_distance (%d) must exceed t5_num_buckets/2 (%d)",
                 c->t5_max_distance, c->t5_num_buckets / 2);
    }
    if ((size_t)c->n_layer * 12 * (size_t)c->d_model * c->d_model + (size_t)c->vocab_size * c->d_model
        > ((size_t)1 << 34))
        FAIL("model too large (more than 2^34 parameters)");
    return 0;
#undef FAIL
}
