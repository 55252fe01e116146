// options.c: the configuration of a training run. The keys of training
// itself are OPTION_TABLE; the model keys are the model's table, asked
// through gpt.h. Together they drive defaults, the INI reader, --key=value,
// the checks, --help and the resolved config.ini.
#include "train/options.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/cli.h"
#include "common/ini_file.h"
#include "engine/engine_create.h"
#include "train/checkpoint.h"
#include "train/fault_inject.h"
#include "train/run_dir.h"

// The keys of training itself ([data], [optim], [run]), in the programs' one
// option-table form (common/opt.h: name, section, type, default as text, field
// of TrainOptions, range, fixed on --resume, help, choices); the model keys
// are the model's table (gpt_model_keys).
#define KEY(name_, section_, type_, def_, field, min_, max_, fixed_, help_, choices_)                          \
    {.name = name_, .section = section_, .type = type_, .def = def_, .offset = offsetof(TrainOptions, field), \
     .min = min_, .max = max_, .fixed = fixed_, .help = help_, .choices = choices_}
static const OptSpec OPTION_TABLE[] = {
    KEY("tokenizer", "data", OPT_STR, "data/kjv/tokenizer.bin", tokenizer, 1, 0, 1,
        "BPE tokenizer written by ./prepare; gives vocab_size and the model's tokenizer_checksum", NULL),
    KEY("train_file", "data", OPT_STR, "data/kjv/train.bin", train_file, 1, 0, 1,
        "training tokens (llm.c token file)", NULL),
    KEY("val_file", "data", OPT_STR, "data/kjv/val.bin", val_file, 1, 0, 1,
        "validation tokens (llm.c token file)", NULL),

    KEY("lr", "optim", OPT_FLOAT, "0.002", lr, 0, 1e30, 0,
        "peak learning rate, reached at the end of warmup", NULL),
    KEY("min_lr", "optim", OPT_FLOAT, "0.0002", min_lr, 0, 1e30, 0,
        "learning rate at the end of the cosine decay; <= lr", NULL),
    KEY("warmup_steps", "optim", OPT_INT, "50", warmup_steps, 0, 1e9, 0,
        "steps of linear warmup from lr/warmup_steps to lr", NULL),
    KEY("beta1", "optim", OPT_FLOAT, "0.9", beta1, 0, 0.999999, 0,
        "AdamW first-moment decay", NULL),
    KEY("beta2", "optim", OPT_FLOAT, "0.95", beta2, 0, 0.999999, 0,
        "AdamW second-moment decay", NULL),
    KEY("eps", "optim", OPT_FLOAT, "1e-08", eps, 1e-30, 1, 0,
        "AdamW epsilon, added to sqrt(v_hat)", NULL),
    KEY("weight_decay", "optim", OPT_FLOAT, "0.1", weight_decay, 0, 10, 0,
        "decoupled weight decay, on wte and the linear weight matrices only (not biases, norm weights, wpe, rel_bias)", NULL),
    KEY("grad_clip", "optim", OPT_FLOAT, "1", grad_clip, 0, 1e30, 0,
        "clip the global gradient norm to this value; 0 = no clipping", NULL),
    KEY("batch_size", "optim", OPT_INT, "16", batch_size, 1, 65536, 0,
        "sequences per micro-batch (B)", NULL),
    KEY("grad_accum", "optim", OPT_INT, "1", grad_accum, 1, 65536, 0,
        "micro-batches per step; tokens per step = batch_size * block_size * grad_accum", NULL),

    KEY("steps", "run", OPT_INT, "600", steps, 1, 1e9, 0,
        "optimizer steps (updates) in the run", NULL),
    KEY("eval_every", "run", OPT_INT, "50", eval_every, 0, 1e9, 0,
        "validation loss every this many steps (and at step 0 and the last step); 0 = only those", NULL),
    KEY("eval_batches", "run", OPT_INT, "8", eval_batches, 1, 1e6, 0,
        "validation batches per evaluation (fixed windows from the start of val_file)", NULL),
    KEY("save_every", "run", OPT_INT, "100", save_every, 0, 1e9, 0,
        "checkpoint every this many steps (and at the end); 0 = only at the end", NULL),
    KEY("seed", "run", OPT_U64, "1", seed, 0, 0, 1,
        "seeds the initial weights and the order of training batches", NULL),
    KEY("threads", "run", OPT_INT, "0", threads, 0, 4096, 0,
        "OpenMP and OpenBLAS threads; 0 = all cores", NULL),
    KEY("precision", "run", OPT_STR, "fp32", precision, 1, 0, 0,
        "fp32, or bf16: the linear layers' and attention's products take bf16 inputs (fp32 accumulation, "
        "fp32 weights and everything else); may change on --resume", "fp32|bf16"),
    KEY("matmul", "run", OPT_STR, "auto", matmul, 1, 0, 0,
        "engine of the linear layers' and attention's products: openblas (fp32), onednn (fp32 or bf16), "
        "reference (fp32, plain loops: slow); auto = in fp32 the faster of openblas and onednn, timed on the run's "
        "model before step 0 and kept for the run's life (a resume measures nothing); openblas with "
        "reproducible = 1; onednn for bf16", "auto|openblas|onednn|reference"),
    KEY("attention", "run", OPT_STR, "auto", attention, 1, 0, 0,
        "attention's kernels: blocked (blocks of 64 query rows against all their keys: each softmax row at once, "
        "scratch ~ T), fused (blocks of 64 query rows x 64 keys, an online softmax: scratch independent of T; "
        "openblas fp32, onednn fp32 or bf16; not with reproducible = 1); auto = blocked; may change on --resume",
        "auto|blocked|fused"),
    KEY("logits_rows", "run", OPT_INT, "0", logits_rows, 0, 1 << 30, 0,
        "positions whose logits the tied head and the loss hold at once; 0 = all of them where their B*T*V floats "
        "fit 64 MB, else slices of 64 positions that do (a 50,257-token vocabulary); more than one chunk makes "
        "each chunk's logits again in backward; may change on --resume", NULL),
    KEY("reproducible", "run", OPT_INT, "0", reproducible, 0, 1, 0,
        "1: the run's bits are the same on any x86-64 CPU with AVX2 and FMA, whatever the thread count and "
        "OPENBLAS_CORETYPE: OpenBLAS fp32 on its Haswell kernels (./train sets OPENBLAS_CORETYPE=Haswell and "
        "starts again if OpenBLAS runs others); the study scripts use it (docs/TRAINING.md)", NULL),
    KEY("out_dir", "run", OPT_STR, "", out_dir, 0, 0, 0,
        "run directory; empty = runs/<pos>-<config name>-s<seed>", NULL),
};
#undef KEY
enum { N_OPTS = (int)(sizeof OPTION_TABLE / sizeof OPTION_TABLE[0]) };

// Keys are numbered model keys first (0 .. n_model - 1, in the model's table
// order), then OPTION_TABLE. Only model keys that are config keys are used.
static const ModelKey *model_keys(int *n) {
    static const ModelKey *keys;
    static int count;
    if (!keys) count = gpt_model_keys(&keys);
    *n = count;
    return keys;
}
static int n_model_keys(void) { int n; model_keys(&n); return n; }
static int n_keys(void) { return n_model_keys() + N_OPTS; }
static int is_model_key(int k) { return k < n_model_keys(); }
static const OptSpec *opt_spec(int k) { return &OPTION_TABLE[k - n_model_keys()]; }
static const ModelKey *model_key(int k) { int n; return &model_keys(&n)[k]; }

static const char *key_name(int k) { return is_model_key(k) ? model_key(k)->name : opt_spec(k)->name; }
static const char *key_section(int k) { return is_model_key(k) ? model_key(k)->section : opt_spec(k)->section; }
static int key_in_config(int k) { return !is_model_key(k) || model_key(k)->in_config; }
static int key_fixed(int k) { return is_model_key(k) || opt_spec(k)->fixed; }

static const char *SECTIONS[] = {"model", "positions", "data", "optim", "run"};
enum { N_SECTIONS = (int)(sizeof SECTIONS / sizeof SECTIONS[0]) };

static int find_key(const char *name) {
    for (int k = 0; k < n_keys(); k++)
        if (key_in_config(k) && strcmp(key_name(k), name) == 0) return k;
    return -1;
}

static void *field(TrainOptions *opt, int k) { return (char *)opt + opt_spec(k)->offset; }
static const void *cfield(const TrainOptions *opt, int k) { return (const char *)opt + opt_spec(k)->offset; }

// Shortest decimal text that reads back as the same float.
static void format_float(char *buf, size_t n, float v) {
    snprintf(buf, n, "%g", v);
    if (strtof(buf, NULL) != v) snprintf(buf, n, "%.9g", v);
}

static void format_value(const TrainOptions *opt, int k, char *buf, size_t n) {
    if (is_model_key(k)) { gpt_config_get(&opt->model, k, buf, n); return; }
    const void *p = cfield(opt, k);
    switch (opt_spec(k)->type) {
    case OPT_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case OPT_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case OPT_FLOAT: format_float(buf, n, *(const float *)p); break;
    case OPT_STR: snprintf(buf, n, "%s", (const char *)p); break;
    case OPT_DOUBLE: case OPT_ARG: case OPT_FLAG: buf[0] = 0; break;   // no training key's type
    }
}

// "where: " prefix for a message about key k set at line (0 default, >0 file, <0 cli).
static void vreport(const TrainOptions *opt, int k, int line, char *err, size_t errlen,
                    const char *fmt, va_list ap) {
    char msg[ERR_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (line < 0) snprintf(err, errlen, "--%s: %s", key_name(k), msg);
    else if (line > 0) snprintf(err, errlen, "%s:%d: %s", opt->src_file, line, msg);
    else snprintf(err, errlen, "%s (default): %s", key_name(k), msg);
}

static int report(const TrainOptions *opt, int k, int line, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(opt, k, line, err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int set_value(TrainOptions *opt, int k, const char *value, int line, char *err, size_t errlen) {
    char msg[ERR_MAX];
    // The model's table parses and range-checks its keys, OPTION_TABLE the rest (opt_parse).
    if (is_model_key(k) ? gpt_config_set(&opt->model, k, value, msg, sizeof msg)
                        : opt_parse(opt_spec(k), value, field(opt, k), msg, sizeof msg)) {
        // In a file the message also names the key; on the command line "--key:" does.
        return line > 0 ? report(opt, k, line, err, errlen, "%s: %s", key_name(k), msg)
                        : report(opt, k, line, err, errlen, "%s", msg);
    }
    opt->src_line[k] = line;
    return 0;
}

OptSpec options_flag(const char *key, size_t offset, const char *arg, const char *help) {
    int k = find_key(key);
    if (k < 0 || is_model_key(k)) {
        fprintf(stderr, "internal error: '%s' is not a training key\n", key);
        abort();
    }
    OptSpec s = *opt_spec(k);
    s.section = NULL;
    s.fixed = 0;
    s.offset = offset;
    s.arg = arg;
    if (help) s.help = help;
    return s;
}

void options_defaults(TrainOptions *opt) {
    memset(opt, 0, sizeof *opt);
    if (n_keys() > OPT_MAX_KEYS) {   // src_line has one slot per key
        fprintf(stderr, "internal error: %d keys, OPT_MAX_KEYS is %d\n", n_keys(), OPT_MAX_KEYS);
        abort();
    }
    char err[ERR_MAX];
    for (int k = 0; k < n_keys(); k++)
        if (key_in_config(k) &&
            set_value(opt, k, is_model_key(k) ? model_key(k)->def : opt_spec(k)->def, 0, err, sizeof err) != 0) {
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
    int seen[OPT_MAX_KEYS];   // per key: the line that set it (0: not yet)
} IniKeys;

// One key of a config file (ini_file_read's on_key): in a section of the
// table, its own, and once.
static int on_ini_key(void *user, const char *section, const char *name, const char *value, int line, char *err,
                      size_t errlen) {
    IniKeys *st = user;
    TrainOptions *opt = st->opt;
    int k = find_key(name);
    if (!*section) {
        snprintf(err, errlen, "%s:%d: key '%s' is outside any [section]", opt->src_file, line, name);
        return -1;
    }
    int known_section = 0;
    for (int i = 0; i < N_SECTIONS; i++) known_section |= strcmp(SECTIONS[i], section) == 0;
    if (!known_section) {
        snprintf(err, errlen, "%s:%d: unknown section [%s] (sections: model, positions, data, optim, run)",
                 opt->src_file, line, section);
        return -1;
    }
    if (k < 0) {
        snprintf(err, errlen, "%s:%d: unknown key '%s' in [%s] (see ./train --help)",
                 opt->src_file, line, name, section);
        return -1;
    }
    if (strcmp(key_section(k), section) != 0) {
        snprintf(err, errlen, "%s:%d: key '%s' belongs in section [%s], not [%s]",
                 opt->src_file, line, name, key_section(k), section);
        return -1;
    }
    if (st->seen[k]) {
        snprintf(err, errlen, "%s:%d: key '%s' was already set on line %d",
                 opt->src_file, line, name, st->seen[k]);
        return -1;
    }
    st->seen[k] = line;
    return set_value(opt, k, value, line, err, errlen);
}

int options_load_file(TrainOptions *opt, const char *path, char *err, size_t errlen) {
    IniKeys st = {.opt = opt};
    snprintf(opt->src_file, sizeof opt->src_file, "%s", path);
    if (ini_file_read(path, on_ini_key, &st, err, errlen) != 0) return -1;
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

int options_model_config(const TrainOptions *opt, int vocab_size, GPTConfig *cfg, char *err, size_t errlen) {
    *cfg = opt->model;
    cfg->vocab_size = vocab_size;
    const char *keys[2];
    char msg[ERR_MAX];
    if (gpt_config_validate_keys(cfg, msg, sizeof msg, keys) == 0) {
        gpt_config_resolve(cfg);
        return 0;
    }
    if (find_key(keys[0]) < 0 || find_key(keys[1]) < 0) {   // vocab_size: the tokenizer's
        snprintf(err, errlen, "%s: %s", opt->tokenizer, msg);
        return -1;
    }
    return blame(opt, keys[0], keys[1], err, errlen, "%s", msg);
}

int options_check_batch(const TrainOptions *opt, const GPTConfig *cfg, char *err, size_t errlen) {
    char msg[ERR_MAX];
    if (gpt_check_batch(cfg, opt->batch_size, cfg->block_size, msg, sizeof msg) == 0) return 0;
    return blame(opt, "batch_size", "block_size", err, errlen, "%s", msg);
}

int options_engine(const char *matmul, const char *precision, int reproducible, GPTMatmul *m, GPTPrecision *p,
                   const char **choice, char *err, size_t errlen) {
    int hooked = 0;   // the test build's ROPELAB_TEST_AUTO_ISA (fault_inject.h) may answer for the CPU
    int avx512 = strcmp(matmul, "auto") == 0 ? fault_auto_has_avx512(engine_onednn_has_avx512(), &hooked) : 0;
    if (avx512 < 0) {
        snprintf(err, errlen, "matmul = auto: the test hook's ISA is neither avx512 nor avx2");
        return -1;
    }
    return options_engine_for(matmul, precision, reproducible, avx512, hooked, m, p, choice, err, errlen);
}

int options_engine_for(const char *matmul, const char *precision, int reproducible, int avx512, int hooked,
                       GPTMatmul *m, GPTPrecision *p, const char **choice, char *err, size_t errlen) {
    const char *said = "matmul = openblas";
    *p = strcmp(precision, "bf16") == 0 ? GPT_BF16 : GPT_FP32;
    if (strcmp(matmul, "auto") == 0) {
        // The rule, from the whole training step timed on each CPU of
        // docs/results/bench/README.md (PERFORMANCE.md, "Design facts"): in fp32 oneDNN is the
        // faster engine wherever it runs its AVX-512 kernels, OpenBLAS below
        // them; wrong in places (L on an AMX Xeon), so ./train measures
        // instead where it can (matmul_auto.h) and this answers for ./eval,
        // ./sample and a resume whose checkpoint records no choice. bf16 has
        // only oneDNN; the reproducible mode only OpenBLAS (oneDNN's kernels
        // follow the CPU).
        if (*p == GPT_BF16) {
            *m = GPT_MATMUL_ONEDNN;
            said = "matmul = auto: onednn bf16";
        } else if (reproducible) {
            *m = GPT_MATMUL_OPENBLAS;
            said = "matmul = auto: openblas fp32 (reproducible)";
        } else if (avx512) {
            *m = GPT_MATMUL_ONEDNN;
            said = hooked ? "matmul = auto: onednn fp32 (AVX-512, as the test hook says)"
                          : "matmul = auto: onednn fp32 (AVX-512)";
        } else {
            *m = GPT_MATMUL_OPENBLAS;
            said = hooked ? "matmul = auto: openblas fp32 (no AVX-512, as the test hook says)"
                          : "matmul = auto: openblas fp32 (no AVX-512)";
        }
    } else if (strcmp(matmul, "onednn") == 0) {
        *m = GPT_MATMUL_ONEDNN;
        said = "matmul = onednn";
    } else if (strcmp(matmul, "reference") == 0) {
        *m = GPT_MATMUL_REFERENCE;
        said = "matmul = reference";
    } else {
        *m = GPT_MATMUL_OPENBLAS;
    }
    if (choice) *choice = said;
    if (*p == GPT_BF16 && *m != GPT_MATMUL_ONEDNN) {
        snprintf(err, errlen, "precision=bf16 needs matmul=onednn (or auto): %s has no bf16 products",
                 *m == GPT_MATMUL_OPENBLAS ? "OpenBLAS" : "the reference engine");
        return -1;
    }
    return 0;
}

const char *options_matmul_name(GPTMatmul m) {
    return m == GPT_MATMUL_ONEDNN ? "onednn" : m == GPT_MATMUL_REFERENCE ? "reference" : "openblas";
}

int options_attention(const char *attention, GPTMatmul matmul, GPTPrecision precision, int reproducible,
                      GPTAttention *a, char *err, size_t errlen) {
    *a = strcmp(attention, "fused") == 0 ? GPT_ATTENTION_FUSED : GPT_ATTENTION_BLOCKED;   // auto: blocked
    if (*a == GPT_ATTENTION_FUSED && matmul == GPT_MATMUL_REFERENCE) {
        snprintf(err, errlen, "attention=fused runs on openblas (fp32) or onednn (fp32 or bf16): the reference "
                 "engine has the plain attention");
        return -1;
    }
    if (*a == GPT_ATTENTION_FUSED && reproducible) {
        snprintf(err, errlen, "the reproducible mode runs the blocked attention (attention = auto or blocked), "
                 "whose bits its runs were written with");
        return -1;
    }
    return 0;
}

int options_matmul(const TrainOptions *opt, GPTMatmul *matmul, GPTPrecision *precision, GPTAttention *attention,
                   const char **choice, char *err, size_t errlen) {
    char msg[ERR_MAX];
    if (options_engine(opt->matmul, opt->precision, opt->reproducible, matmul, precision, choice, msg,
                       sizeof msg) != 0)
        return blame(opt, "precision", "matmul", err, errlen, "%s", msg);
    if (opt->reproducible && (*matmul != GPT_MATMUL_OPENBLAS || *precision != GPT_FP32))
        return blame(opt, "reproducible", strcmp(opt->precision, "fp32") ? "precision" : "matmul", err, errlen,
                     "reproducible = 1 runs on OpenBLAS in fp32 (matmul = auto or openblas, precision = fp32): "
                     "oneDNN's kernels and blocking follow the CPU");
    if (options_attention(opt->attention, *matmul, *precision, opt->reproducible, attention, msg, sizeof msg) != 0)
        return blame(opt, "attention", opt->reproducible         ? "reproducible"
                                       : *precision == GPT_BF16 ? "precision"
                                                                : "matmul",
                     err, errlen, "%s", msg);
    return 0;
}

int options_check(TrainOptions *opt, char *err, size_t errlen) {
    // The model's rules before the tokenizer is read: vocab_size 1 leaves out
    // nothing but its own size (trainer checks again with the real one).
    GPTConfig cfg;
    if (options_model_config(opt, 1, &cfg, err, errlen) != 0) return -1;
    if (opt->min_lr > opt->lr) {
        char min_lr[32], lr[32];
        format_float(min_lr, sizeof min_lr, opt->min_lr);
        format_float(lr, sizeof lr, opt->lr);
        return blame(opt, "min_lr", "lr", err, errlen, "min_lr (%s) is larger than lr (%s)", min_lr, lr);
    }
    GPTMatmul matmul;
    GPTPrecision precision;
    GPTAttention attention;
    if (options_matmul(opt, &matmul, &precision, &attention, NULL, err, errlen) != 0) return -1;
    gpt_config_resolve(&opt->model);
    if (!opt->out_dir[0]) {
        char buf[2 * OPT_STR_MAX + 64];
        snprintf(buf, sizeof buf, "runs/%s-%s-s%llu", pos_kind_name(opt->model.pos), opt->config_name,
                 (unsigned long long)opt->seed);
        if (strlen(buf) >= OPT_STR_MAX)
            return blame(opt, "out_dir", "out_dir", err, errlen, "the default run directory name is too long");
        memcpy(opt->out_dir, buf, strlen(buf) + 1);
    }
    return 0;
}

// ---- command line ----------------------------------------------------------

// ./train's flags, read by the programs' one command-line reader (common/cli.h);
// the config file and the keys (--KEY=VALUE) are what it leaves.
#define A(field) offsetof(TrainArgs, field)
static const OptSpec TRAIN_FLAGS[] = {
    {.name = "resume", .type = OPT_ARG, .offset = A(resume_dir), .arg = "RUN_DIR", .min = 1,
     .max = OPT_STR_MAX - 1,   // RUN_DIR becomes out_dir: refused whole, never read or named cut short
     .help = "continue RUN_DIR from its checkpoint (reads RUN_DIR/config.ini; only [optim] and [run] keys may be "
             "overridden)"},
    {.name = "debug-state", .type = OPT_ARG, .offset = A(debug_state), .arg = "FILE", .min = 1,
     .help = "one forward/backward on the first batch; write parameters, inputs, targets, loss and grad.NAME to "
             "FILE and exit"},
    {.name = "init-from", .type = OPT_ARG, .offset = A(init_from), .arg = "FILE", .min = 1,
     .help = "start a new run from the weights of FILE (a model.safetensors, a checkpoint or a Hugging Face model "
             "directory); the model keys must be "
             "FILE's but for block_size and the rope scaling keys (fine-tuning at a longer context); not RUN_DIR's "
             "own model or checkpoint, which the run replaces"},
    {.name = "overwrite", .type = OPT_FLAG, .offset = A(overwrite),
     .help = "start a new run even if RUN_DIR already holds one; with --debug-state, replace FILE if it exists "
             "(never an input)"},
    {.name = "quiet", .type = OPT_FLAG, .offset = A(quiet), .help = "no progress output (errors still go to stderr)"},
};
#undef A

static const CliSpec TRAIN_CLI = {
    .prog = "train",
    .usage = "usage: ./train [CONFIG.ini] [--key=value ...] [--overwrite] [--quiet] [--init-from FILE]\n"
             "       ./train --resume RUN_DIR [--key=value ...]\n"
             "       ./train [CONFIG.ini] [--key=value ...] --debug-state FILE [--overwrite]\n"
             "\n"
             "Trains a decoder-only transformer (a GPT-2 or LLaMA-style block: the block key) on\n"
             "llm.c token files with AdamW, linear warmup and cosine decay. Writes\n"
             "RUN_DIR/config.ini, log.csv, checkpoint.safetensors and model.safetensors\n"
             "(see docs/TRAINING.md).\n"
             "\n"
             "flags:\n",
    CLI_FLAGS(TRAIN_FLAGS),
    .positional = 1,
    .keys = 1,
    .about = "\n"
             "keys: in CONFIG.ini under their [section], or as --key=value (the command line\n"
             "wins). Paths are relative to the current directory. Defaults in parentheses.\n",
};

// What the flags left, in order: the config file (one at most) and the keys,
// --KEY=VALUE ('-' may stand for '_'), read over the config file (or
// RUN_DIR/config.ini with --resume), then options_check.
static int read_config_and_keys(TrainOptions *opt, TrainArgs *args, const char **rest, int n_rest, char *err,
                                size_t errlen) {
    for (int i = 0; i < n_rest; i++) {
        const char *a = rest[i];
        if (strncmp(a, "--", 2) == 0 && !strchr(a, '=')) {
            snprintf(err, errlen, "%s: expected %s=VALUE (see ./train --help)", a, a);
            return -1;
        }
        if (strncmp(a, "--", 2) == 0) continue;
        if (args->config_path) {
            snprintf(err, errlen, "%s: only one config file can be given (already have %s)", a, args->config_path);
            return -1;
        }
        args->config_path = a;
    }
    char resume_ini[OPT_STR_MAX + 32];
    if (args->resume_dir && args->init_from) {
        snprintf(err, errlen, "--init-from: cannot be combined with --resume (a resumed run continues from its checkpoint)");
        return -1;
    }
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
        // a link, FIFO or device planted among the run's files is refused before any is read (run_dir.h)
        if (run_dir_check_files(args->resume_dir, err, errlen) != 0) return -1;
        if (options_load_file(opt, resume_ini, err, errlen)) return -1;
        // A run written before a model key existed meant that key's if_absent value, not today's default.
        for (int k = 0; k < n_model_keys(); k++)
            if (model_key(k)->in_config && model_key(k)->if_absent && opt->src_line[k] == 0 &&
                set_value(opt, k, model_key(k)->if_absent, 0, err, errlen) != 0)
                return -1;
    } else if (args->config_path) {
        if (options_load_file(opt, args->config_path, err, errlen)) return -1;
    }

    for (int i = 0; i < n_rest; i++) {
        if (strncmp(rest[i], "--", 2) != 0) continue;   // the config file
        const char *a = rest[i] + 2;
        const char *eq = strchr(a, '=');
        char name[128];
        size_t n = (size_t)(eq - a);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, a, n);
        name[n] = 0;
        for (char *c = name; *c; c++) if (*c == '-') *c = '_';  // --rope-dims = --rope_dims
        int k = find_key(name);
        if (k >= 0 && args->resume_dir && (key_fixed(k) || strcmp(name, "out_dir") == 0)) {
            snprintf(err, errlen, "--%s: cannot be changed on --resume (it is fixed by %s)", name, resume_ini);
            return -1;
        }
        if (options_set(opt, name, eq + 1, -1, err, errlen)) return -1;
    }
    if (args->resume_dir) {
        snprintf(opt->out_dir, sizeof opt->out_dir, "%s", args->resume_dir);
        // config.ini against the run's record in its checkpoint (none yet: the run stopped before its first save)
        char ckpt[OPT_STR_MAX + 32];
        static RunRecord record;   // 8 KB: not on the stack of every caller
        snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", args->resume_dir);
        if (access(ckpt, F_OK) == 0) {
            if (checkpoint_read_record(ckpt, &record, err, errlen) != 0) return -1;
            opt->resume_recorded = record.config[0] != 0;
            if (opt->resume_recorded && options_check_record(opt, record.config, ckpt, opt->resume_changes,
                                                             sizeof opt->resume_changes, err, errlen) != 0)
                return -1;
        }
    }
    return options_check(opt, err, errlen);
}

int options_parse_args(int argc, char **argv, TrainOptions *opt, TrainArgs *args, char *err, size_t errlen) {
    memset(args, 0, sizeof *args);
    options_defaults(opt);
    const char **rest = malloc((size_t)argc * sizeof *rest);
    if (!rest) {
        snprintf(err, errlen, "out of memory for the command line");
        return -1;
    }
    int n_rest, rc = cli_parse(&TRAIN_CLI, argc, argv, args, rest, &n_rest, err, errlen);
    if (rc == CLI_HELP) args->help = 1;
    else if (rc == 0) rc = read_config_and_keys(opt, args, rest, n_rest, err, errlen);
    free(rest);
    return rc == CLI_HELP ? 0 : rc;
}

// ---- output ----------------------------------------------------------------

static const char *type_name(int k) {
    if (is_model_key(k)) {
        switch (model_key(k)->type) {
        case MODEL_KEY_INT: return "int";
        case MODEL_KEY_FLOAT: return "float";
        case MODEL_KEY_SCHEME: return "scheme";
        case MODEL_KEY_CHOICE: return "choice";
        case MODEL_KEY_CHECKSUM: return "checksum";
        }
    }
    switch (opt_spec(k)->type) {
    case OPT_INT: return "int";
    case OPT_U64: return "uint64";
    case OPT_FLOAT: return "float";
    default: return opt_spec(k)->choices ? "choice" : "path";
    }
}

// Default, range and help of key k for --help.
static void key_doc(int k, const char **def, char *range, size_t n, char *help, size_t hn) {
    range[0] = 0;
    if (is_model_key(k)) {
        const ModelKey *m = model_key(k);
        *def = m->def;
        if (m->type == MODEL_KEY_INT) snprintf(range, n, " [%.0f..%.0f]", m->min, m->max);
        if (m->type == MODEL_KEY_FLOAT) snprintf(range, n, " %s%g..%g]", m->min_open ? "(" : "[", m->min, m->max);
        if (m->type == MODEL_KEY_CHOICE) snprintf(range, n, " {%s}", m->choices);
        if (m->type == MODEL_KEY_SCHEME) snprintf(help, hn, "%s: %s", m->help, pos_kind_list());
        else snprintf(help, hn, "%s", m->help);
        return;
    }
    const OptSpec *o = opt_spec(k);
    *def = o->def;
    opt_doc_range(o, range, n);
    snprintf(help, hn, "%s", o->help);
}

void options_print_help(FILE *f) {
    cli_print_help(&TRAIN_CLI, f);
    for (int s = 0; s < N_SECTIONS; s++) {
        fprintf(f, "\n[%s]\n", SECTIONS[s]);
        for (int k = 0; k < n_keys(); k++) {
            if (!key_in_config(k) || strcmp(key_section(k), SECTIONS[s]) != 0) continue;
            const char *def;
            char range[96], help[512];
            key_doc(k, &def, range, sizeof range, help, sizeof help);
            fprintf(f, "  %-20s %-6s (%s)%s\n      %s\n", key_name(k), type_name(k), def[0] ? def : "\"\"",
                    range, help);
        }
    }
}

int options_write_ini(const TrainOptions *opt, const char *path, int vocab_size, char *err, size_t errlen) {
    AtomicFile af;
    FILE *f = atomic_open(&af, path, ATOMIC_REPLACE, err, errlen);
    if (!f) return -1;
    fprintf(f, "; ropelab run configuration, resolved by ./train (every key, defaults included).\n"
               "; Load it again with ./train FILE, or continue the run with ./train --resume DIR.\n"
               "; vocab_size = %d (from the tokenizer)\n", vocab_size);
    for (int s = 0; s < N_SECTIONS; s++) {
        fprintf(f, "\n[%s]\n", SECTIONS[s]);
        for (int k = 0; k < n_keys(); k++) {
            if (!key_in_config(k) || strcmp(key_section(k), SECTIONS[s]) != 0) continue;
            char v[OPT_STR_MAX + 32], help[512], range[96];
            const char *def;
            format_value(opt, k, v, sizeof v);
            key_doc(k, &def, range, sizeof range, help, sizeof help);
            fprintf(f, "; %s\n%s = %s\n", help, key_name(k), v);
        }
    }
    return atomic_commit(&af, !ferror(f), err, errlen);
}

uint64_t options_model_hash(const TrainOptions *opt) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < n_keys(); k++) {
        if (!key_in_config(k) || !key_fixed(k)) continue;
        char v[OPT_STR_MAX + 160];
        char text[sizeof v + 64];
        format_value(opt, k, v, sizeof v);
        if (is_model_key(k) && model_key(k)->if_absent && strcmp(v, model_key(k)->if_absent) == 0) continue;
        snprintf(text, sizeof text, "%s=%s\n", key_name(k), v);
        for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    }
    return h;
}

int options_record(const TrainOptions *opt, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int s = 0; s < N_SECTIONS; s++)
        for (int k = 0; k < n_keys(); k++) {
            if (!key_in_config(k) || strcmp(key_section(k), SECTIONS[s]) != 0 || strcmp(key_name(k), "out_dir") == 0)
                continue;
            char v[OPT_STR_MAX + 32];
            format_value(opt, k, v, sizeof v);
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s = %s\n", key_name(k), v);
        }
    return len < n ? 0 : -1;
}

int options_check_record(const TrainOptions *opt, const char *record, const char *record_file, char *changes,
                         size_t changes_len, char *err, size_t errlen) {
    size_t changes_used = 0;
    changes[0] = 0;
    for (const char *line = record; *line;) {
        const char *nl = strchr(line, '\n'), *eq = strstr(line, " = ");
        size_t line_len = nl ? (size_t)(nl - line) : strlen(line);
        char name[64], recorded[OPT_STR_MAX + 32], now[OPT_STR_MAX + 32];
        if (!eq || eq > line + line_len || (size_t)(eq - line) >= sizeof name ||
            line_len - (size_t)(eq + 3 - line) >= sizeof recorded) {
            snprintf(err, errlen, "%s: metadata run_config is not \"key = value\" lines", record_file);
            return -1;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - line), line);
        snprintf(recorded, sizeof recorded, "%.*s", (int)(line_len - (size_t)(eq + 3 - line)), eq + 3);
        line += line_len + (nl != NULL);
        int k = find_key(name);
        if (k < 0) {
            snprintf(err, errlen, "%s: records the key '%s', which this ./train does not know (a newer ./train "
                     "made the run)", record_file, name);
            return -1;
        }
        format_value(opt, k, now, sizeof now);
        if (opt->src_line[k] == 0) {
            snprintf(err, errlen, "%s: lacks the key '%s' (the run's record in %s: %s = %s); restore it", opt->src_file,
                     name, record_file, name, recorded);
            return -1;
        }
        if (strcmp(now, recorded) == 0) continue;
        if (opt->src_line[k] > 0) {
            snprintf(err, errlen, "%s:%d: %s = %s differs from the run's record in %s (%s = %s); restore it, or "
                     "change it with --%s=%s", opt->src_file, opt->src_line[k], name, now, record_file, name, recorded,
                     name, now);
            return -1;
        }
        changes_used += (size_t)snprintf(changes + changes_used, changes_used < changes_len ? changes_len - changes_used : 0,
                                         "%s%s %s -> %s", changes_used ? ", " : "", name, recorded, now);
    }
    return 0;
}
