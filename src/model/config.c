// config.c: the model configuration: the scheme names, and the one table of
// model keys that drives defaults, parsing, ranges, the rules between keys,
// the weights file's metadata (written and read), ./train --help and the
// resolved config.ini. A new key is one line here, one field of GPTConfig,
// and its use in the scheme that needs it.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/numtext.h"
#include "model/config.h"

#define POS_NAME_ENTRY_(E, name) #name,
static const char *const POS_NAMES[POS_COUNT] = {POS_SCHEME_LIST(POS_NAME_ENTRY_)};

const char *pos_kind_name(PosKind kind) {
    return (kind >= 0 && kind < POS_COUNT) ? POS_NAMES[kind] : "unknown";
}

int pos_kind_from_name(const char *name, PosKind *kind) {
    for (int i = 0; i < POS_COUNT; i++)
        if (name && strcmp(name, POS_NAMES[i]) == 0) { *kind = (PosKind)i; return 0; }
    return -1;
}

const char *pos_kind_list(void) {
    static char list[256];
    if (!list[0])
        for (int i = 0; i < POS_COUNT; i++) {
            const char *sep = i == 0 ? "" : i == POS_COUNT - 1 ? " or " : ", ";
            size_t n = strlen(list);
            snprintf(list + n, sizeof list - n, "%s%s", sep, POS_NAMES[i]);
        }
    return list;
}

// The limits keep every size product well inside size_t and int index
// ranges (see gpt_config_validate_keys for the parameter count).
#define F(field) offsetof(GPTConfig, field)
// Each row names its fields (ModelKey in gpt.h); one left out is 0 or NULL:
// no min_open, not a length key, no if_absent (the key is required), no choices.
static const ModelKey MODEL_KEYS[] = {
    {.name = "n_layer", .section = "model", .type = MODEL_KEY_INT, .offset = F(n_layer), .def = "4", .min = 1,
     .max = 256, .in_config = 1, .scheme = -1,
     .help = "transformer blocks (L)"},
    {.name = "n_head", .section = "model", .type = MODEL_KEY_INT, .offset = F(n_head), .def = "4", .min = 1,
     .max = 256, .in_config = 1, .scheme = -1,
     .help = "attention heads per block (H); must divide d_model"},
    {.name = "d_model", .section = "model", .type = MODEL_KEY_INT, .offset = F(d_model), .def = "128", .min = 2,
     .max = 16384, .in_config = 1, .scheme = -1,
     .help = "model width (C); head_dim = d_model / n_head"},
    {.name = "block_size", .section = "model", .type = MODEL_KEY_INT, .offset = F(block_size), .def = "128",
     .min = 2, .max = 65536, .in_config = 1, .scheme = -1, .length_key = 1,
     .help = "context length (T) of every training window; also the size of wpe for pos=learned"},
    {.name = "block", .section = "model", .type = MODEL_KEY_CHOICE, .offset = F(block), .def = "gpt2", .min = 0,
     .max = 1, .in_config = 1, .scheme = -1, .if_absent = "gpt2", .choices = "gpt2|llama",
     .help = "the block: gpt2 (LayerNorm, GELU MLP of width 4C, biases) or llama (RMSNorm, SwiGLU MLP of width "
             "8C/3 rounded up to a multiple of 8, no biases); docs/MODEL.md"},
    {.name = "pos", .section = "positions", .type = MODEL_KEY_SCHEME, .offset = F(pos), .def = "rope",
     .in_config = 1, .scheme = -1,
     .help = "positional scheme"},
    {.name = "rope_base", .section = "positions", .type = MODEL_KEY_FLOAT, .offset = F(rope_base), .def = "10000",
     .min = 1, .max = 1e12, .min_open = 1, .in_config = 1, .scheme = POS_ROPE,
     .help = "rope: theta_i = rope_base^(-2i/rope_dims)"},
    {.name = "rope_dims", .section = "positions", .type = MODEL_KEY_INT, .offset = F(rope_dims), .def = "0",
     .min = 0, .max = 16384, .in_config = 1, .scheme = POS_ROPE,
     .help = "rope: rotated dims per head, even and <= head_dim; 0 = head_dim"},
    {.name = "t5_num_buckets", .section = "positions", .type = MODEL_KEY_INT, .offset = F(t5_num_buckets),
     .def = "32", .min = 2, .max = 1024, .in_config = 1, .scheme = POS_T5,
     .help = "t5: relative-distance buckets"},
    {.name = "t5_max_distance", .section = "positions", .type = MODEL_KEY_INT, .offset = F(t5_max_distance),
     .def = "128", .min = 2, .max = 1 << 20, .in_config = 1, .scheme = POS_T5,
     .help = "t5: distance where the log-spaced buckets end; > t5_num_buckets/2"},
    // 0.02 = the token embedding's init std: PE's rms (0.02/sqrt 2) is then 1/sqrt 2 of a
    // token vector's, the ratio of Vaswani et al. (docs/POSITIONS.md has the measurement).
    {.name = "sinusoidal_scale", .section = "positions", .type = MODEL_KEY_FLOAT, .offset = F(sinusoidal_scale),
     .def = "0.02", .min = 0, .max = 1000, .min_open = 1, .in_config = 1, .scheme = POS_SINUSOIDAL, .if_absent = "1",
     .help = "sinusoidal: the table PE is multiplied by this; 0.02 keeps Vaswani's position-to-token "
             "ratio, 1 is the unscaled table"},
    {.name = "rope_scaling", .section = "positions", .type = MODEL_KEY_CHOICE, .offset = F(rope_scaling),
     .def = "none", .min = 0, .max = 5, .in_config = 1, .scheme = POS_ROPE, .if_absent = "none", .length_key = 1,
     .choices = "none|linear|ntk|yarn|yarn_paper|dynamic",
     .help = "rope beyond the training length: linear (position "
             "interpolation), ntk (NTK-aware base), yarn (YaRN as Hugging Face and llama.cpp compute it), yarn_paper "
             "(YaRN's ramp as the paper's equation states it), dynamic (Hugging Face's dynamic NTK: the base grows "
             "with the sequence length); docs/POSITIONS.md"},
    {.name = "rope_scaling_factor", .section = "positions", .type = MODEL_KEY_FLOAT,
     .offset = F(rope_scaling_factor), .def = "1", .min = 1, .max = 1e6, .in_config = 1, .scheme = POS_ROPE,
     .if_absent = "1", .length_key = 1,
     .help = "rope_scaling: the factor s (the new length over the trained one); 1 = unscaled"},
    {.name = "rope_original_length", .section = "positions", .type = MODEL_KEY_INT,
     .offset = F(rope_original_length), .def = "0", .min = 0, .max = 1 << 20, .in_config = 1, .scheme = POS_ROPE,
     .if_absent = "0", .length_key = 1,
     .help = "rope_scaling=yarn, yarn_paper, dynamic: the length L the model was trained at; "
             "0 = block_size (./train --init-from sets it to the source model's)"},
    {.name = "rope_yarn_beta_fast", .section = "positions", .type = MODEL_KEY_FLOAT,
     .offset = F(rope_yarn_beta_fast), .def = "32", .min = 0, .max = 1e6, .min_open = 1, .in_config = 1,
     .scheme = POS_ROPE, .if_absent = "32", .length_key = 1,
     .help = "rope_scaling=yarn, yarn_paper: dims turning more than this many times over L keep their " "angles"},
    {.name = "rope_yarn_beta_slow", .section = "positions", .type = MODEL_KEY_FLOAT,
     .offset = F(rope_yarn_beta_slow), .def = "1", .min = 0, .max = 1e6, .min_open = 1, .in_config = 1,
     .scheme = POS_ROPE, .if_absent = "1", .length_key = 1,
     .help = "rope_scaling=yarn, yarn_paper: dims turning fewer than this many times over L are divided " "by s"},
    {.name = "vocab_size", .section = "model", .type = MODEL_KEY_INT, .offset = F(vocab_size), .def = "0", .min = 1,
     .max = 1 << 24, .in_config = 0, .scheme = -1,
     .help = "vocabulary size (from the tokenizer)"},
    // Absent (a file written before the key existed): not recorded, any tokenizer of the right size is taken.
    {.name = "tokenizer_checksum", .section = "model", .type = MODEL_KEY_CHECKSUM, .offset = F(tokenizer_checksum),
     .def = "0000000000000000", .in_config = 0, .scheme = -1, .if_absent = "0000000000000000",
     .help = "64-bit FNV-1a of the tokenizer.bin the model was trained with (from the "
             "tokenizer, bpe_checksum); 0 = not recorded"},
};
#undef F
enum { N_MODEL_KEYS = (int)(sizeof MODEL_KEYS / sizeof MODEL_KEYS[0]) };

int gpt_model_keys(const ModelKey **keys) {
    *keys = MODEL_KEYS;
    return N_MODEL_KEYS;
}

int gpt_model_key_find(const char *name) {
    for (int k = 0; k < N_MODEL_KEYS; k++)
        if (strcmp(MODEL_KEYS[k].name, name) == 0) return k;
    return -1;
}

static void *key_field(GPTConfig *c, int k) { return (char *)c + MODEL_KEYS[k].offset; }
static const void *key_cfield(const GPTConfig *c, int k) { return (const char *)c + MODEL_KEYS[k].offset; }

static int in_range(const ModelKey *key, double v) {
    return (key->min_open ? v > key->min : v >= key->min) && v <= key->max;
}

static void range_text(const ModelKey *key, char *buf, size_t n) {
    char lo[32], hi[32];
    format_double(lo, sizeof lo, key->min);
    format_double(hi, sizeof hi, key->max);
    snprintf(buf, n, "%s%s, %s]", key->min_open ? "(" : "[", lo, hi);
}

int gpt_config_set(GPTConfig *c, int k, const char *value, char *err, size_t errlen) {
    const ModelKey *key = &MODEL_KEYS[k];
    char range[80], text[32];
    range_text(key, range, sizeof range);
    switch (key->type) {
    case MODEL_KEY_INT: {   // numtext.h's rule, as every number read as text
        long long v;
        int rc = parse_integer(value, LLONG_MIN, LLONG_MAX, &v);
        if (rc == NUMTEXT_BAD) { snprintf(err, errlen, "'%s' is not an integer", value); return -1; }
        if (rc != 0 || !in_range(key, (double)v)) { snprintf(err, errlen, "%s is out of range %s", value, range); return -1; }
        *(int *)key_field(c, k) = (int)v;
        return 0;
    }
    case MODEL_KEY_FLOAT: {
        double v;
        if (parse_number(value, &v) != 0) { snprintf(err, errlen, "'%s' is not a number", value); return -1; }
        if (!in_range(key, v)) {
            format_double(text, sizeof text, v);
            snprintf(err, errlen, "%s is out of range %s", text, range);
            return -1;
        }
        *(float *)key_field(c, k) = (float)v;
        return 0;
    }
    case MODEL_KEY_SCHEME: {
        PosKind kind;
        if (pos_kind_from_name(value, &kind) != 0) {
            snprintf(err, errlen, "unknown positional scheme '%s' (one of %s)", value, pos_kind_list());
            return -1;
        }
        *(PosKind *)key_field(c, k) = kind;
        return 0;
    }
    case MODEL_KEY_CHOICE: {   // the index of value in "a|b|c"
        const char *ch = key->choices;
        size_t len = strlen(value);
        for (int i = 0; *ch; i++) {
            size_t n = strcspn(ch, "|");
            if (n == len && strncmp(ch, value, n) == 0) { *(int *)key_field(c, k) = i; return 0; }
            ch += n + (ch[n] == '|');
        }
        snprintf(err, errlen, "'%s' is not one of %s", value, key->choices);
        return -1;
    }
    case MODEL_KEY_CHECKSUM: {   // exactly what gpt_config_get writes
        uint64_t v = 0;
        size_t n = 0;
        for (; value[n] && n < 16; n++) {
            char ch = value[n];
            if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) break;
            v = v << 4 | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
        }
        if (n != 16 || value[n]) { snprintf(err, errlen, "'%s' is not 16 lowercase hexadecimal digits", value); return -1; }
        *(uint64_t *)key_field(c, k) = v;
        return 0;
    }
    }
    return -1;
}

void gpt_config_get(const GPTConfig *c, int k, char *buf, size_t n) {
    const void *p = key_cfield(c, k);
    switch (MODEL_KEYS[k].type) {
    case MODEL_KEY_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case MODEL_KEY_FLOAT: {   // the shortest text that reads back as the same float
        float v = *(const float *)p;
        snprintf(buf, n, "%g", v);
        if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", v);
        break;
    }
    case MODEL_KEY_SCHEME: snprintf(buf, n, "%s", pos_kind_name(*(const PosKind *)p)); break;
    case MODEL_KEY_CHOICE: {
        const char *ch = MODEL_KEYS[k].choices;
        for (int i = *(const int *)p; i > 0 && *ch; i--) ch += strcspn(ch, "|") + (ch[strcspn(ch, "|")] == '|');
        snprintf(buf, n, "%.*s", (int)strcspn(ch, "|"), ch);
        break;
    }
    case MODEL_KEY_CHECKSUM: snprintf(buf, n, "%016llx", (unsigned long long)*(const uint64_t *)p); break;
    }
}

int gpt_mlp_hidden(const GPTConfig *c) {
    if (c->block == BLOCK_LLAMA) return ((8 * c->d_model + 2) / 3 + 7) / 8 * 8;   // ceil(8C/3), then up to 8k
    return 4 * c->d_model;
}

int gpt_mlp_fc_width(const GPTConfig *c) { return (c->block == BLOCK_LLAMA ? 2 : 1) * gpt_mlp_hidden(c); }

void gpt_config_resolve(GPTConfig *c) {
    if (c->rope_dims == 0 && c->n_head > 0 && c->d_model % c->n_head == 0) c->rope_dims = c->d_model / c->n_head;
}

int gpt_config_validate_keys(const GPTConfig *c, char *err, size_t errlen, const char *keys[2]) {
    const char *blame_a = NULL, *blame_b = NULL;
#define FAIL(a, b, ...) do { blame_a = a; blame_b = b; snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)
    for (int k = 0; k < N_MODEL_KEYS; k++) {   // each value in its key's range
        const ModelKey *key = &MODEL_KEYS[k];
        const void *p = key_cfield(c, k);
        char range[80], text[64];
        range_text(key, range, sizeof range);
        gpt_config_get(c, k, text, sizeof text);
        if (key->type == MODEL_KEY_SCHEME && !(c->pos >= 0 && c->pos < POS_COUNT))
            FAIL(key->name, key->name, "unknown positional scheme (%d)", (int)c->pos);
        if (((key->type == MODEL_KEY_INT || key->type == MODEL_KEY_CHOICE) && !in_range(key, *(const int *)p)) ||
            (key->type == MODEL_KEY_FLOAT && !(isfinite(*(const float *)p) && in_range(key, *(const float *)p))))
            FAIL(key->name, key->name, "%s (%s) must be in %s", key->name, text, range);
    }
    // A length key of one scheme away from its "absent" value on a model of another scheme
    // (rope_scaling=yarn with pos=alibi) would change nothing: refused, by ./train, ./eval
    // and ./sample alike, rather than written to the metadata with no effect.
    for (int k = 0; k < N_MODEL_KEYS; k++) {
        const ModelKey *key = &MODEL_KEYS[k];
        if (key->scheme < 0 || key->scheme == (int)c->pos || !key->length_key || !key->if_absent) continue;
        GPTConfig absent = *c;
        char text[64], absent_text[64], msg[128];
        gpt_config_set(&absent, k, key->if_absent, msg, sizeof msg);   // a valid default: cannot fail
        gpt_config_get(&absent, k, absent_text, sizeof absent_text);
        gpt_config_get(c, k, text, sizeof text);
        if (strcmp(text, absent_text) != 0)
            FAIL(key->name, "pos", "%s=%s applies to pos=%s only, not pos=%s", key->name, text,
                 pos_kind_name((PosKind)key->scheme), pos_kind_name(c->pos));
    }
    if (c->d_model % c->n_head != 0)
        FAIL("d_model", "n_head", "d_model (%d) is not divisible by n_head (%d)", c->d_model, c->n_head);
    int head_dim = c->d_model / c->n_head;
    if (c->pos == POS_ROPE) {
        if (c->rope_dims % 2 != 0) FAIL("rope_dims", "rope_dims", "rope_dims (%d) must be even", c->rope_dims);
        if (c->rope_dims > head_dim)
            FAIL("rope_dims", "n_head", "rope_dims (%d) is larger than head_dim = d_model / n_head = %d",
                 c->rope_dims, head_dim);
        if (c->rope_dims == 0 && head_dim % 2 != 0)
            FAIL("pos", "n_head", "head_dim (%d) is odd: set rope_dims to an even value", head_dim);
        if ((c->rope_scaling == ROPE_SCALING_YARN || c->rope_scaling == ROPE_SCALING_YARN_PAPER) &&
            !(c->rope_yarn_beta_fast > c->rope_yarn_beta_slow))
            FAIL("rope_yarn_beta_fast", "rope_yarn_beta_slow", "rope_yarn_beta_fast (%g) must be larger than "
                 "rope_yarn_beta_slow (%g)", (double)c->rope_yarn_beta_fast, (double)c->rope_yarn_beta_slow);
        if ((c->rope_scaling == ROPE_SCALING_NTK || c->rope_scaling == ROPE_SCALING_DYNAMIC) &&
            (c->rope_dims ? c->rope_dims : head_dim) <= 2)
            FAIL("rope_scaling", "rope_dims", "rope_scaling=%s needs rope_dims > 2 (its base is raised to the "
                 "power R/(R-2))", c->rope_scaling == ROPE_SCALING_NTK ? "ntk" : "dynamic");
    }
    if (c->pos == POS_T5 && c->t5_max_distance <= c->t5_num_buckets / 2)
        FAIL("t5_max_distance", "t5_num_buckets", "t5_max_distance (%d) must be larger than t5_num_buckets/2 (%d)",
             c->t5_max_distance, c->t5_num_buckets / 2);
    // Parameters: L (4 C^2 + C x (c_fc's outputs + F)) + V C + ... stay below 2^34 floats (64 GiB).
    size_t C = (size_t)c->d_model, mlp = (size_t)gpt_mlp_fc_width(c) + (size_t)gpt_mlp_hidden(c);
    if ((size_t)c->n_layer * (4 * C * C + C * mlp) + (size_t)c->vocab_size * C > ((size_t)1 << 34))
        FAIL("n_layer", "d_model", "model too large (more than 2^34 parameters)");
    if (keys) keys[0] = keys[1] = NULL;
    return 0;
fail:
    if (keys) { keys[0] = blame_a; keys[1] = blame_b; }
    return -1;
#undef FAIL
}

int gpt_config_validate(const GPTConfig *c, char *err, size_t errlen) {
    return gpt_config_validate_keys(c, err, errlen, NULL);
}

int gpt_config_diff(const GPTConfig *a, const GPTConfig *b, int skip_length_keys, const char **key) {
    for (int k = 0; k < N_MODEL_KEYS; k++) {
        if (skip_length_keys && MODEL_KEYS[k].length_key) continue;
        if (MODEL_KEYS[k].type == MODEL_KEY_CHECKSUM &&   // not recorded on one side: nothing to compare
            (*(const uint64_t *)key_cfield(a, k) == 0 || *(const uint64_t *)key_cfield(b, k) == 0)) continue;
        char va[64], vb[64];
        gpt_config_get(a, k, va, sizeof va);
        gpt_config_get(b, k, vb, sizeof vb);
        if (strcmp(va, vb) != 0) { *key = MODEL_KEYS[k].name; return -1; }
    }
    return 0;
}
