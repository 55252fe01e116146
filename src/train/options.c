// options.c: the table of configuration keys and everything it drives:
// defaults, the INI reader, --key=value, consistency checks, --help and the
// resolved config.ini.
#include "train/options.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_INT, T_U64, T_FLOAT, T_STR, T_POS } OptType;

typedef struct {
    const char *name, *section;
    OptType type;
    const char *def;     // default, as text: parsed like any value from a file
    size_t offset;       // field of TrainOptions
    double min, max;     // inclusive range (strings: min 1 = must not be empty)
    int fixed;           // defines the model or the data: cannot change on --resume
    const char *help;
} OptSpec;

#define F(field) offsetof(TrainOptions, field)
static const OptSpec OPTION_TABLE[] = {
    {"n_layer", "model", T_INT, "4", F(n_layer), 1, 256, 1, "transformer blocks (L)"},
    {"n_head", "model", T_INT, "4", F(n_head), 1, 256, 1, "attention heads per block (H); must divide d_model"},
    {"d_model", "model", T_INT, "128", F(d_model), 2, 16384, 1, "model width (C); head_dim = d_model / n_head"},
    {"block_size", "model", T_INT, "128", F(block_size), 2, 65536, 1,
     "context length (T) of every training window; also the size of wpe for pos=learned"},

    {"pos", "positions", T_POS, "rope", F(pos), 1, 0, 1,
     "positional scheme: rope, learned, sinusoidal, t5, alibi or none"},
    {"rope_base", "positions", T_FLOAT, "10000", F(rope_base), 1, 1e12, 1,
     "rope: theta_i = rope_base^(-2i/rope_dims)"},
    {"rope_dims", "positions", T_INT, "0", F(rope_dims), 0, 16384, 1,
     "rope: rotated dims per head, even and <= head_dim; 0 = head_dim"},
    {"t5_num_buckets", "positions", T_INT, "32", F(t5_num_buckets), 2, 1024, 1, "t5: relative-distance buckets"},
    {"t5_max_distance", "positions", T_INT, "128", F(t5_max_distance), 2, 1 << 20, 1,
     "t5: distance where the log-spaced buckets end; > t5_num_buckets/2"},

    {"sinusoidal_scale", "positions", T_FLOAT, "1", F(sinusoidal_scale), 1e-6, 1000, 1,
     "sinusoidal: the table PE is multiplied by this (1 = Vaswani's unit amplitude)"},

    {"tokenizer", "data", T_STR, "data/kjv/tokenizer.bin", F(tokenizer), 1, 0, 1,
     "BPE tokenizer written by ./prepare; gives vocab_size"},
    {"train_file", "data", T_STR, "data/kjv/train.bin", F(train_file), 1, 0, 1, "training tokens (llm.c token file)"},
    {"val_file", "data", T_STR, "data/kjv/val.bin", F(val_file), 1, 0, 1, "validation tokens (llm.c token file)"},

    {"lr", "optim", T_FLOAT, "0.002", F(lr), 0, 1e30, 0, "peak learning rate, reached at the end of warmup"},
    {"min_lr", "optim", T_FLOAT, "0.0002", F(min_lr), 0, 1e30, 0,
     "learning rate at the end of the cosine decay; <= lr"},
    {"warmup_steps", "optim", T_INT, "50", F(warmup_steps), 0, 1e9, 0,
     "steps of linear warmup from lr/warmup_steps to lr"},
    {"beta1", "optim", T_FLOAT, "0.9", F(beta1), 0, 0.999999, 0, "AdamW first-moment decay"},
    {"beta2", "optim", T_FLOAT, "0.95", F(beta2), 0, 0.999999, 0, "AdamW second-moment decay"},
    {"eps", "optim", T_FLOAT, "1e-08", F(eps), 1e-30, 1, 0, "AdamW epsilon, added to sqrt(v_hat)"},
    {"weight_decay", "optim", T_FLOAT, "0.1", F(weight_decay), 0, 10, 0,
     "decoupled weight decay, on wte and the linear weight matrices only (not biases, LayerNorm, wpe, rel_bias)"},
    {"grad_clip", "optim", T_FLOAT, "1", F(grad_clip), 0, 1e30, 0,
     "clip the global gradient norm to this value; 0 = no clipping"},
    {"batch_size", "optim", T_INT, "16", F(batch_size), 1, 65536, 0, "sequences per micro-batch (B)"},
    {"grad_accum", "optim", T_INT, "1", F(grad_accum), 1, 65536, 0,
     "micro-batches per step; tokens per step = batch_size * block_size * grad_accum"},

    {"steps", "run", T_INT, "600", F(steps), 1, 1e9, 0, "optimizer steps (updates) in the run"},
    {"eval_every", "run", T_INT, "50", F(eval_every), 0, 1e9, 0,
     "validation loss every this many steps (and at step 0 and the last step); 0 = only those"},
    {"eval_batches", "run", T_INT, "8", F(eval_batches), 1, 1e6, 0,
     "validation batches per evaluation (fixed windows from the start of val_file)"},
    {"save_every", "run", T_INT, "100", F(save_every), 0, 1e9, 0,
     "checkpoint every this many steps (and at the end); 0 = only at the end"},
    {"seed", "run", T_U64, "1", F(seed), 0, 0, 1, "seeds the initial weights and the order of training batches"},
    {"threads", "run", T_INT, "0", F(threads), 0, 4096, 0, "OpenMP and OpenBLAS threads; 0 = all cores"},
    {"out_dir", "run", T_STR, "", F(out_dir), 0, 0, 0, "run directory; empty = runs/<pos>-<config name>-s<seed>"},
};
#undef F
enum { N_KEYS = (int)(sizeof OPTION_TABLE / sizeof OPTION_TABLE[0]) };
_Static_assert(N_KEYS <= OPT_MAX_KEYS, "OPT_MAX_KEYS too small");

static const char *SECTIONS[] = {"model", "positions", "data", "optim", "run"};
enum { N_SECTIONS = (int)(sizeof SECTIONS / sizeof SECTIONS[0]) };

static int find_key(const char *name) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(OPTION_TABLE[i].name, name) == 0) return i;
    return -1;
}

static void *field(TrainOptions *opt, int k) { return (char *)opt + OPTION_TABLE[k].offset; }
static const void *cfield(const TrainOptions *opt, int k) { return (const char *)opt + OPTION_TABLE[k].offset; }

// Shortest decimal text that reads back as the same float.
static void format_float(char *buf, size_t n, float v) {
    snprintf(buf, n, "%g", v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", v);
}

static void format_value(const TrainOptions *opt, int k, char *buf, size_t n) {
    const void *p = cfield(opt, k);
    switch (OPTION_TABLE[k].type) {
    case T_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case T_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case T_FLOAT: format_float(buf, n, *(const float *)p); break;
    case T_STR:
    case T_POS: snprintf(buf, n, "%s", (const char *)p); break;
    }
}

// "where: " prefix for a message about key k set at line (0 default, >0 file, <0 cli).
static void vreport(const TrainOptions *opt, int k, int line, char *err, size_t errlen,
                    const char *fmt, va_list ap) {
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (line < 0) snprintf(err, errlen, "--%s: %s", OPTION_TABLE[k].name, msg);
    else if (line > 0) snprintf(err, errlen, "%s:%d: %s", opt->src_file, line, msg);
    else snprintf(err, errlen, "%s (default): %s", OPTION_TABLE[k].name, msg);
}

static int report(const TrainOptions *opt, int k, int line, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(opt, k, line, err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int set_value(TrainOptions *opt, int k, const char *value, int line, char *err, size_t errlen) {
    const OptSpec *s = &OPTION_TABLE[k];
    // In a file the message also names the key; on the command line "--key:" does.
    const char *kn = line > 0 ? s->name : NULL;
#define BAD(...) do { char m_[640]; snprintf(m_, sizeof m_, __VA_ARGS__); \
        return kn ? report(opt, k, line, err, errlen, "%s: %s", kn, m_) \
                  : report(opt, k, line, err, errlen, "%s", m_); } while (0)
    char *end;
    switch (s->type) {
    case T_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (!*value || *end || errno) BAD("'%s' is not an integer", value);
        if (v < s->min || v > s->max) BAD("%lld is out of range [%.0f, %.0f]", v, s->min, s->max);
        *(int *)field(opt, k) = (int)v;
        break;
    }
    case T_U64: {
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (!*value || *end || errno || strchr(value, '-')) BAD("'%s' is not a non-negative integer", value);
        *(uint64_t *)field(opt, k) = (uint64_t)v;
        break;
    }
    case T_FLOAT: {
        errno = 0;
        double v = strtod(value, &end);
        if (!*value || *end || errno || !isfinite(v)) BAD("'%s' is not a number", value);
        if (v < s->min || v > s->max) BAD("%g is out of range [%g, %g]", v, s->min, s->max);
        *(float *)field(opt, k) = (float)v;
        break;
    }
    case T_POS:
    case T_STR: {
        size_t len = strlen(value);
        if (len >= OPT_STR_MAX) BAD("value is longer than %d characters", OPT_STR_MAX - 1);
        if (s->min >= 1 && len == 0) BAD("must not be empty");
        if (strchr(value, '\n')) BAD("value contains a newline");
        if (s->type == T_POS) {
            PosKind kind;
            if (pos_kind_from_name(value, &kind) != 0) {
                char names[256] = "";
                for (int i = 0; i < POS_COUNT; i++) {
                    strcat(names, i ? ", " : "");
                    strcat(names, pos_kind_name((PosKind)i));
                }
                BAD("unknown positional scheme '%s' (one of %s)", value, names);
            }
        }
        memcpy(field(opt, k), value, len + 1);
        break;
    }
    }
#undef BAD
    opt->src_line[k] = line;
    return 0;
}

void options_defaults(TrainOptions *opt) {
    memset(opt, 0, sizeof *opt);
    char err[256];
    for (int k = 0; k < N_KEYS; k++)
        if (set_value(opt, k, OPTION_TABLE[k].def, 0, err, sizeof err) != 0) {
            fprintf(stderr, "internal error: bad default: %s\n", err);
            abort();
        }
    snprintf(opt->config_name, sizeof opt->config_name, "default");
}

int options_set(TrainOptions *opt, const char *name, const char *value, int line, char *err, size_t errlen) {
    int k = find_key(name);
    if (k < 0) {
        if (line > 0) snprintf(err, errlen, "%s:%d: unknown key '%s' (see ./train --help)", opt->src_file, line, name);
        else snprintf(err, errlen, "--%s: unknown key (see ./train --help)", name);
        return -1;
    }
    return set_value(opt, k, value, line, err, errlen);
}

// ---- INI files -------------------------------------------------------------

typedef struct {
    TrainOptions *opt;
    int newlines;        // complete lines read so far
    int partial;         // the last chunk read did not end a line
    FILE *file;
    char err[1024];
    int seen[OPT_MAX_KEYS];
} IniState;

// Reader for ini_parse_stream that counts lines, so the handler knows its
// line. inih may read one long line in several chunks, hence newlines+partial.
static char *ini_reader_counting(char *str, int num, void *stream) {
    IniState *st = stream;
    char *r = fgets(str, num, st->file);
    if (r) {
        size_t n = strlen(r);
        int ends = n > 0 && r[n - 1] == '\n';
        st->newlines += ends;
        st->partial = !ends;
    }
    return r;
}

static int on_ini_key(void *user, const char *section, const char *name, const char *value) {
    IniState *st = user;
    TrainOptions *opt = st->opt;
    int line = st->newlines + st->partial;
    int k = find_key(name);
    if (!*section) {
        snprintf(st->err, sizeof st->err, "%s:%d: key '%s' is outside any [section]", opt->src_file, line, name);
        return 0;
    }
    int known_section = 0;
    for (int i = 0; i < N_SECTIONS; i++) known_section |= strcmp(SECTIONS[i], section) == 0;
    if (!known_section) {
        snprintf(st->err, sizeof st->err, "%s:%d: unknown section [%s] (sections: model, positions, data, optim, run)",
                 opt->src_file, line, section);
        return 0;
    }
    if (k < 0) {
        snprintf(st->err, sizeof st->err, "%s:%d: unknown key '%s' in [%s] (see ./train --help)",
                 opt->src_file, line, name, section);
        return 0;
    }
    if (strcmp(OPTION_TABLE[k].section, section) != 0) {
        snprintf(st->err, sizeof st->err, "%s:%d: key '%s' belongs in section [%s], not [%s]",
                 opt->src_file, line, name, OPTION_TABLE[k].section, section);
        return 0;
    }
    if (st->seen[k]) {
        snprintf(st->err, sizeof st->err, "%s:%d: key '%s' was already set on line %d",
                 opt->src_file, line, name, st->seen[k]);
        return 0;
    }
    st->seen[k] = line;
    return set_value(opt, k, value, line, st->err, sizeof st->err) == 0;
}

int options_load_file(TrainOptions *opt, const char *path, char *err, size_t errlen) {
    // Runtime settings of Debian's libinih: stop at the first error (so the
    // returned line is the one we report), no multi-line values, any line length.
    ini_stop_on_first_error = 1;
    ini_allow_multiline = 0;
    ini_use_stack = 0;
    ini_allow_realloc = 1;

    IniState st = {.opt = opt};
    st.file = fopen(path, "r");
    if (!st.file) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(opt->src_file, sizeof opt->src_file, "%s", path);
    int rc = ini_parse_stream(ini_reader_counting, &st, on_ini_key, &st);
    fclose(st.file);
    if (rc != 0) {
        if (st.err[0]) snprintf(err, errlen, "%s", st.err);
        else if (rc > 0) snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
        else snprintf(err, errlen, "%s: cannot parse (error %d)", path, rc);
        return -1;
    }
    // config name: basename without ".ini"
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(opt->config_name, sizeof opt->config_name, "%s", base);
    size_t n = strlen(opt->config_name);
    if (n > 4 && strcmp(opt->config_name + n - 4, ".ini") == 0) opt->config_name[n - 4] = 0;
    return 0;
}

// ---- consistency -----------------------------------------------------------

// The most recently given of two keys: command line, then later file lines, then defaults.
static int later_key(const TrainOptions *opt, int a, int b) {
    int ra = opt->src_line[a] < 0 ? INT_MAX : opt->src_line[a];
    int rb = opt->src_line[b] < 0 ? INT_MAX : opt->src_line[b];
    return rb > ra ? b : a;
}

static int blame(const TrainOptions *opt, const char *name_a, const char *name_b, char *err, size_t errlen,
                 const char *fmt, ...) {
    int k = later_key(opt, find_key(name_a), find_key(name_b));
    va_list ap;
    va_start(ap, fmt);
    vreport(opt, k, opt->src_line[k], err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int options_check(TrainOptions *opt, char *err, size_t errlen) {
    if (opt->d_model % opt->n_head != 0)
        return blame(opt, "d_model", "n_head", err, errlen, "d_model (%d) is not divisible by n_head (%d)",
                     opt->d_model, opt->n_head);
    int head_dim = opt->d_model / opt->n_head;
    if (opt->rope_dims % 2 != 0)
        return blame(opt, "rope_dims", "rope_dims", err, errlen, "rope_dims (%d) must be even", opt->rope_dims);
    if (opt->rope_dims > head_dim)
        return blame(opt, "rope_dims", "n_head", err, errlen,
                     "rope_dims (%d) is larger than head_dim = d_model / n_head = %d", opt->rope_dims, head_dim);
    if (opt->t5_max_distance <= opt->t5_num_buckets / 2)
        return blame(opt, "t5_max_distance", "t5_num_buckets", err, errlen,
                     "t5_max_distance (%d) must be larger than t5_num_buckets/2 (%d)",
                     opt->t5_max_distance, opt->t5_num_buckets / 2);
    if (opt->min_lr > opt->lr)
        return blame(opt, "min_lr", "lr", err, errlen, "min_lr (%g) is larger than lr (%g)", opt->min_lr, opt->lr);
    if (opt->rope_dims == 0) opt->rope_dims = head_dim;
    if (!opt->out_dir[0]) {
        char buf[2 * OPT_STR_MAX + 64];
        snprintf(buf, sizeof buf, "runs/%s-%s-s%llu", opt->pos, opt->config_name, (unsigned long long)opt->seed);
        if (strlen(buf) >= OPT_STR_MAX)
            return blame(opt, "out_dir", "out_dir", err, errlen, "the default run directory name is too long");
        memcpy(opt->out_dir, buf, strlen(buf) + 1);
    }
    return 0;
}

// ---- command line ----------------------------------------------------------

// "--name=value" or "--name value" for a flag that takes a value.
static int flag_value(int argc, char **argv, int *i, const char *flag, const char **out, char *err, size_t errlen) {
    const char *a = argv[*i];
    size_t n = strlen(flag);
    if (a[n] == '=') { *out = a + n + 1; return 0; }
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "%s: missing value", flag);
        return -1;
    }
    *out = argv[++*i];
    return 0;
}

static int is_flag(const char *a, const char *flag) {
    size_t n = strlen(flag);
    return strncmp(a, flag, n) == 0 && (a[n] == 0 || a[n] == '=');
}

int options_parse_args(int argc, char **argv, TrainOptions *opt, TrainArgs *args, char *err, size_t errlen) {
    memset(args, 0, sizeof *args);
    options_defaults(opt);
    int key_args[256], n_key_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) args->help = 1;
        else if (strcmp(a, "--quiet") == 0) args->quiet = 1;
        else if (strcmp(a, "--overwrite") == 0) args->overwrite = 1;
        else if (is_flag(a, "--resume")) {
            if (flag_value(argc, argv, &i, "--resume", &args->resume_dir, err, errlen)) return -1;
        } else if (is_flag(a, "--debug-state")) {
            if (flag_value(argc, argv, &i, "--debug-state", &args->debug_state, err, errlen)) return -1;
        } else if (strncmp(a, "--", 2) == 0) {
            if (!strchr(a, '=')) {
                snprintf(err, errlen, "%s: expected %s=VALUE (see ./train --help)", a, a);
                return -1;
            }
            if (n_key_args == (int)(sizeof key_args / sizeof key_args[0])) {
                snprintf(err, errlen, "%s: too many --key=value arguments", a);
                return -1;
            }
            key_args[n_key_args++] = i;
        } else if (a[0] == '-' && a[1]) {
            snprintf(err, errlen, "%s: unknown flag (see ./train --help)", a);
            return -1;
        } else if (args->config_path) {
            snprintf(err, errlen, "%s: only one config file can be given (already have %s)", a, args->config_path);
            return -1;
        } else args->config_path = a;
    }
    if (args->help) return 0;

    char resume_ini[OPT_STR_MAX + 32];
    if (args->resume_dir) {
        if (args->debug_state) {
            snprintf(err, errlen, "--debug-state: cannot be combined with --resume (it uses the initial weights)");
            return -1;
        }
        if (args->config_path) {
            snprintf(err, errlen, "--resume: give a config file or --resume RUN_DIR, not both "
                     "(a resumed run reads RUN_DIR/config.ini)");
            return -1;
        }
        snprintf(resume_ini, sizeof resume_ini, "%s/config.ini", args->resume_dir);
        if (options_load_file(opt, resume_ini, err, errlen)) return -1;
    } else if (args->config_path) {
        if (options_load_file(opt, args->config_path, err, errlen)) return -1;
    }

    for (int j = 0; j < n_key_args; j++) {
        const char *a = argv[key_args[j]] + 2;
        const char *eq = strchr(a, '=');
        char name[128];
        size_t n = (size_t)(eq - a);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, a, n);
        name[n] = 0;
        for (char *c = name; *c; c++) if (*c == '-') *c = '_';  // --rope-dims = --rope_dims
        int k = find_key(name);
        if (k >= 0 && args->resume_dir && (OPTION_TABLE[k].fixed || strcmp(name, "out_dir") == 0)) {
            snprintf(err, errlen, "--%s: cannot be changed on --resume (it is fixed by %s)", name, resume_ini);
            return -1;
        }
        if (options_set(opt, name, eq + 1, -1, err, errlen)) return -1;
    }
    if (args->resume_dir) {
        if (strlen(args->resume_dir) >= OPT_STR_MAX) {
            snprintf(err, errlen, "--resume: path too long");
            return -1;
        }
        snprintf(opt->out_dir, sizeof opt->out_dir, "%s", args->resume_dir);
    }
    return options_check(opt, err, errlen);
}

// ---- output ----------------------------------------------------------------

static const char *type_name(OptType t) {
    switch (t) {
    case T_INT: return "int";
    case T_U64: return "uint64";
    case T_FLOAT: return "float";
    case T_POS: return "scheme";
    default: return "path";
    }
}

void options_print_help(FILE *f) {
    fprintf(f,
        "usage: ./train [CONFIG.ini] [--key=value ...] [--overwrite] [--quiet]\n"
        "       ./train --resume RUN_DIR [--key=value ...]\n"
        "       ./train [CONFIG.ini] [--key=value ...] --debug-state FILE\n"
        "\n"
        "Trains a GPT-2-style model on llm.c token files with AdamW, linear warmup and\n"
        "cosine decay. Writes RUN_DIR/config.ini, log.csv, checkpoint.safetensors and\n"
        "model.safetensors (see docs/TRAINING.md).\n"
        "\n"
        "flags:\n"
        "  --resume RUN_DIR    continue RUN_DIR from its checkpoint (reads RUN_DIR/config.ini;\n"
        "                      only [optim] and [run] keys may be overridden)\n"
        "  --debug-state FILE  one forward/backward on the first batch; write parameters,\n"
        "                      inputs, targets, loss and grad.NAME to FILE and exit\n"
        "  --overwrite         start a new run even if RUN_DIR already holds one\n"
        "  --quiet             no progress output (errors still go to stderr)\n"
        "  --help              this text\n"
        "\n"
        "keys: in CONFIG.ini under their [section], or as --key=value (the command line\n"
        "wins). Paths are relative to the current directory. Defaults in parentheses.\n");
    for (int s = 0; s < N_SECTIONS; s++) {
        fprintf(f, "\n[%s]\n", SECTIONS[s]);
        for (int k = 0; k < N_KEYS; k++) {
            const OptSpec *o = &OPTION_TABLE[k];
            if (strcmp(o->section, SECTIONS[s]) != 0) continue;
            char range[96] = "";
            if (o->type == T_INT) snprintf(range, sizeof range, " [%.0f..%.0f]", o->min, o->max);
            if (o->type == T_FLOAT) snprintf(range, sizeof range, " [%g..%g]", o->min, o->max);
            fprintf(f, "  %-16s %-6s (%s)%s\n      %s\n", o->name, type_name(o->type),
                    o->def[0] ? o->def : "\"\"", range, o->help);
        }
    }
}

int options_write_ini(const TrainOptions *opt, const char *path, int vocab_size, char *err, size_t errlen) {
    char tmp[OPT_STR_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "; ropelab run configuration, resolved by ./train (every key, defaults included).\n"
               "; Load it again with ./train FILE, or continue the run with ./train --resume DIR.\n"
               "; vocab_size = %d (from the tokenizer)\n", vocab_size);
    for (int s = 0; s < N_SECTIONS; s++) {
        fprintf(f, "\n[%s]\n", SECTIONS[s]);
        for (int k = 0; k < N_KEYS; k++) {
            if (strcmp(OPTION_TABLE[k].section, SECTIONS[s]) != 0) continue;
            char v[OPT_STR_MAX + 32];
            format_value(opt, k, v, sizeof v);
            fprintf(f, "; %s\n%s = %s\n", OPTION_TABLE[k].help, OPTION_TABLE[k].name, v);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

uint64_t options_model_hash(const TrainOptions *opt) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < N_KEYS; k++) {
        if (!OPTION_TABLE[k].fixed) continue;
        char v[OPT_STR_MAX + 160];
        char text[sizeof v + 64];
        format_value(opt, k, v, sizeof v);
        snprintf(text, sizeof text, "%s=%s\n", OPTION_TABLE[k].name, v);
        for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    }
    return h;
}

void options_gpt_config(const TrainOptions *opt, int vocab_size, GPTConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->n_layer = opt->n_layer;
    cfg->n_head = opt->n_head;
    cfg->d_model = opt->d_model;
    cfg->vocab_size = vocab_size;
    cfg->block_size = opt->block_size;
    gpt_config_defaults(cfg);
    PosKind kind = POS_ROPE;
    pos_kind_from_name(opt->pos, &kind);
    cfg->pos = kind;
    cfg->rope_base = opt->rope_base;
    cfg->rope_dims = opt->rope_dims;
    cfg->t5_num_buckets = opt->t5_num_buckets;
    cfg->t5_max_distance = opt->t5_max_distance;
    cfg->sinusoidal_scale = opt->sinusoidal_scale;
}
