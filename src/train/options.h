// options.h: the configuration of a training run.
//
// Two tables list every key once: the model keys ([model], [positions]) in
// src/model/config.c (gpt_model_keys), and the keys of training itself
// ([data], [optim], [run]) in options.c: section, type, default, range, help
// text and field. Together they drive the INI reader (libinih), the
// --key=value command line, --help and the resolved config.ini written into
// the run directory, so a key cannot be documented in one place and
// forgotten in another, and the model's rules are the model's.
//
// Errors name where the bad value came from: "configs/x.ini:7: message" for
// a file line, "--key: message" for the command line.
//
// The table of training keys is in the programs' one option-table form
// (common/opt.h), read by opt_parse; ./eval and ./sample take the keys they
// share with ./train as flags of that key's type, range and default
// (options_flag).
#ifndef ROPELAB_TRAIN_OPTIONS_H
#define ROPELAB_TRAIN_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/opt.h"
#include "model/gpt.h"

#define OPT_MAX_KEYS 64

typedef struct {
    // [model] and [positions]: the model keys, whose table lives in src/model
    // (gpt_model_keys); model.vocab_size is filled from the tokenizer.
    GPTConfig model;
    // [data]
    char tokenizer[OPT_STR_MAX], train_file[OPT_STR_MAX], val_file[OPT_STR_MAX];
    // [optim]
    float lr, min_lr;
    int warmup_steps;
    float beta1, beta2, eps, weight_decay, grad_clip;
    int batch_size, grad_accum;
    // [run]
    int steps, eval_every, eval_batches, save_every;
    uint64_t seed;
    int threads;
    char precision[8];          // fp32 | bf16
    char matmul[16];            // auto | openblas | onednn | reference
    char attention[16];         // auto | blocked | fused
    int logits_rows;            // positions whose logits are held at once (0: as many as fit; gpt_set_logits_rows)
    int reproducible;           // 1: bits independent of the CPU (OpenBLAS fp32, Haswell kernels)
    char out_dir[OPT_STR_MAX];  // "" = runs/<pos>-<config name>-s<seed>, resolved by options_check

    // Not keys: where each value came from, for error messages.
    char config_name[128];           // basename of the config file without .ini ("default" if none)
    char src_file[OPT_STR_MAX];      // the config file read, if any
    int src_line[OPT_MAX_KEYS];      // per key: 0 default, >0 line in src_file, -1 command line
    // --resume: what the run's record in its checkpoint said of config.ini
    int resume_recorded;             // 1: the checkpoint holds the record (options_check_record passed)
    char resume_changes[1024];       // the keys the command line changed, "lr 0.01 -> 0.003, ..." ("" none)
} TrainOptions;

// Flags of ./train that are not configuration keys.
typedef struct {
    const char *config_path;   // positional argument, NULL if none
    const char *resume_dir;    // --resume DIR
    const char *debug_state;   // --debug-state FILE
    const char *init_from;     // --init-from FILE: start from trained weights (only length keys may differ)
    int quiet;                 // --quiet: no progress output
    int overwrite;             // --overwrite: start over in an existing run directory, replace --debug-state FILE
    int help;                  // --help
} TrainArgs;

void options_defaults(TrainOptions *opt);

// Reads an INI file over opt. Unknown keys, keys in the wrong section,
// duplicates and bad values fail with "path:line: message".
int options_load_file(TrainOptions *opt, const char *path, char *err, size_t errlen);

// Sets one key from text; errors read "--name: message" (line < 0) or
// "src_file:line: message" (line > 0).
int options_set(TrainOptions *opt, const char *name, const char *value, int line,
                char *err, size_t errlen);

// Checks combinations (the model's rules, min_lr <= lr) and resolves
// rope_dims = 0 and out_dir = "". The message names the source of the key
// that was set last among the keys involved.
int options_check(TrainOptions *opt, char *err, size_t errlen);

// Whether batches of batch_size x block_size fit cfg (options_model_config's),
// the message naming where batch_size or block_size came from.
int options_check_batch(const TrainOptions *opt, const GPTConfig *cfg, char *err, size_t errlen);

// The model's rules once vocab_size is known (model too large ...), with the
// message naming where the keys involved came from. Fills *cfg.
int options_model_config(const TrainOptions *opt, int vocab_size, GPTConfig *cfg, char *err, size_t errlen);

// The whole command line: the flags (./train's table, read by cli_parse:
// common/cli.h), the optional config file (or RUN_DIR/config.ini with
// --resume), then every --key=value over it, then options_check. On
// --resume, keys that define the model or the data cannot be overridden,
// and config.ini must hold the run's record (options_check_record, against
// RUN_DIR/checkpoint.safetensors), before anything else is read.
// argv is not changed. Returns 0 (args->help set for --help), or -1 with a
// message (the caller exits with status 2).
int options_parse_args(int argc, char **argv, TrainOptions *opt, TrainArgs *args,
                       char *err, size_t errlen);

// --help: usage and every key with its default, range and meaning.
void options_print_help(FILE *f);

// The resolved configuration as an INI file that options_load_file reads back.
int options_write_ini(const TrainOptions *opt, const char *path, int vocab_size,
                      char *err, size_t errlen);

// The engine of the matrix products named by the keys matmul
// (auto|openblas|onednn|reference, already checked against the key's
// choices) and precision (fp32|bf16), in the reproducible mode or not.
// matmul = auto is, for fp32, onednn where oneDNN runs its AVX-512 kernels
// (engine_onednn_has_avx512) and openblas otherwise, openblas always when
// reproducible is 1; for bf16 onednn. bf16 on an engine other than onednn is
// refused. choice (if not NULL) gets a static line saying what the key chose
// and why ("matmul = auto: onednn fp32 (AVX-512)"), for the start line and
// machine.txt. The one home of that rule: ./eval, ./sample, and ./train
// (options_matmul) where it does not measure (train/matmul_auto.h: a resume
// without a recorded choice, --debug-state, oneDNN fp32 unavailable).
int options_engine(const char *matmul, const char *precision, int reproducible, GPTMatmul *m, GPTPrecision *p,
                   const char **choice, char *err, size_t errlen);
// The same rule with the ISA question answered by the caller (avx512: 1 if
// oneDNN runs AVX-512 kernels; hooked: the answer came from the test build's
// hook, which the choice line then says), so that tests can run both sides.
int options_engine_for(const char *matmul, const char *precision, int reproducible, int avx512, int hooked,
                       GPTMatmul *m, GPTPrecision *p, const char **choice, char *err, size_t errlen);
// The attention kernels named by the key attention (auto|blocked|fused, already
// checked against the key's choices) on the engine (matmul, precision): auto is
// blocked (the bits of every run before the fused attention existed); fused
// needs openblas (fp32) or onednn (fp32 or bf16) and is refused in the reproducible mode
// (reproducible 1), which keeps the blocked attention's bits. The one home of
// that rule: ./train (options_matmul), ./eval.
int options_attention(const char *attention, GPTMatmul matmul, GPTPrecision precision, int reproducible,
                      GPTAttention *a, char *err, size_t errlen);
// The value of the key matmul that names engine m: "openblas", "onednn", "reference".
const char *options_matmul_name(GPTMatmul m);
// options_engine and options_attention of these options, naming where the keys came from;
// choice as options_engine's.
int options_matmul(const TrainOptions *opt, GPTMatmul *matmul, GPTPrecision *precision, GPTAttention *attention,
                   const char **choice, char *err, size_t errlen);

// The training key `key` (an OPTION_TABLE key: "seed", "threads", "matmul",
// "precision") as a command-line flag of another program (./sample --seed,
// ./eval --threads): the key's type, range, choices and default, its value
// at offset in that program's struct (of the key's type: int, uint64_t,
// float, char[OPT_STR_MAX]), arg its value's name in --help, help its help
// text there (NULL: the key's own). Not a training key: an internal error.
OptSpec options_flag(const char *key, size_t offset, const char *arg, const char *help);

// Hash of the keys that fix the model and the data (sections model, positions,
// data, and seed): a checkpoint records it and --resume checks it. A model
// key at its if_absent value (the meaning of files written before the key
// existed) is left out, so adding a key keeps older runs resumable.
uint64_t options_model_hash(const TrainOptions *opt);

// The run's record of its configuration: "key = value" lines of every key
// of config.ini but out_dir (where the directory is, not what it trains), in
// config.ini's order. A checkpoint keeps it (checkpoint.h), so --resume can
// tell a config.ini that was damaged or edited from the run's own. 0, or -1
// when it does not fit in n bytes.
int options_record(const TrainOptions *opt, char *buf, size_t n);
// --resume: the keys read from RUN_DIR/config.ini (opt->src_file) against the
// run's record. A key of the record that config.ini lacks, or holds with
// another value, is refused ("RUN_DIR/config.ini:LINE: lr = 0.003 differs
// from the run's record ..."); a key given on the command line (--key=value)
// is the explicit change, taken. `changes` gets those changes, "lr 0.01 ->
// 0.003, steps 600 -> 1200" ("" if none). 0, or -1 with a message.
int options_check_record(const TrainOptions *opt, const char *record, const char *record_file, char *changes,
                         size_t changes_len, char *err, size_t errlen);

#endif
