// eval_main.c: ./eval, the mean loss and perplexity of a weights file on a
// token file, at a chosen sequence length.
//
//   ./eval --weights RUN/model.safetensors --data data/kjv/val.bin --seq-len 512
//
// It walks the same fixed, non-overlapping windows as the training loop's
// validation (loader_eval_batch), so with the run's --batch-size and
// --batches it reproduces the validation loss the training log shows.
// --seq-len may exceed the training block_size for every scheme but
// `learned`, whose wpe table has only block_size rows: that is the length
// extrapolation study of `make compare`.
//
// A loss that is not finite (finite weights whose products overflow float32)
// is refused, not printed. A long evaluation shows the batches done on
// stderr (cli/meter.h); stdout holds only the result line.
//
// --reproducible evaluates as ./train's reproducible = 1 trains: OpenBLAS in
// fp32 with its Haswell kernels (the program starts again with
// OPENBLAS_CORETYPE set, common/blas_cpu.h), so the printed loss is the same
// bits on any x86-64 CPU with AVX2 and FMA, at any thread count.
//
// --per-position F is written atomically, after the evaluation; an existing F
// is replaced only with --overwrite, and never when it is one of the inputs
// or not a regular file (cli/cli.h), which is checked first.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/blas_cpu.h"
#include "cli/cli.h"
#include "common/threads.h"
#include "data/loader.h"
#include "model/gpt.h"
#include "format/weights_file.h"
#include "cli/footprint.h"
#include "cli/model_overrides.h"
#include "cli/meter.h"
#include "train/options.h"

typedef struct {
    const char *weights, *data;
    int seq_len, batch_size, batches, threads, overwrite, reproducible;
    GPTMatmul matmul;
    GPTPrecision precision;
    const char *per_position;   // CSV of the mean loss at each position, or NULL
    ModelOverrides overrides;   // --rope_scaling=... and the other length keys
} EvalArgs;

static void usage(FILE *out) {
    fprintf(out,
        "usage: ./eval --weights FILE --data FILE [options]\n"
        "  --weights FILE     safetensors weights (RUN_DIR/model.safetensors)\n"
        "  --data FILE        token file (llm.c format), e.g. data/kjv/val.bin\n"
        "  --seq-len N        window length (default: the model's block_size)\n"
        "  --batch-size B     windows per forward pass (default 8)\n"
        "  --batches K        batches to evaluate, 0 = every whole batch in the file (default 0)\n"
        "  --threads N        threads, 0 = all cores (default 0)\n"
        "  --precision P      fp32 (default) or bf16 (the products' inputs, on oneDNN)\n"
        "  --matmul M         the products' engine: auto (default: openblas for fp32, onednn for bf16),\n"
        "                     openblas, onednn, or reference (plain loops, slow)\n"
        "  --per-position F   also write F: position,loss (mean over the windows at each position)\n"
        "  --overwrite        replace F if it exists (a regular file, not one of the inputs)\n"
        "  --reproducible     the same bits on any x86-64 CPU with AVX2 and FMA: OpenBLAS fp32 with its\n"
        "                     Haswell kernels, like ./train's reproducible = 1 (docs/TRAINING.md)\n"
        "Prints one line: loss, perplexity, windows and tokens evaluated.\n");
    model_overrides_usage(out);
}

static void parse_args(int argc, char **argv, EvalArgs *a) {
    *a = (EvalArgs){ .batch_size = 8 };
    model_overrides_take_or_exit("eval", &argc, argv, &a->overrides);
    static const struct option opts[] = {
        {"weights", 1, 0, 'w'}, {"data", 1, 0, 'd'}, {"seq-len", 1, 0, 'T'},
        {"batch-size", 1, 0, 'B'}, {"batches", 1, 0, 'K'}, {"threads", 1, 0, 'j'},
        {"precision", 1, 0, 'p'}, {"matmul", 1, 0, 'm'}, {"per-position", 1, 0, 'P'}, {"overwrite", 0, 0, 'O'},
        {"reproducible", 0, 0, 'R'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c, idx = 0;
    char matmul[OPT_STR_MAX] = "auto", precision[OPT_STR_MAX] = "fp32";
    while ((c = cli_getopt("eval", argc, argv, opts, &idx)) != -1) {
        if (c == 'w') { a->weights = optarg; continue; }
        if (c == 'd') { a->data = optarg; continue; }
        if (c == 'P') { a->per_position = optarg; continue; }
        if (c == 'O') { a->overwrite = 1; continue; }
        if (c == 'R') { a->reproducible = 1; continue; }
        if (c == 'p' || c == 'm') {   // ./train's keys, by its table's rules
            char msg[256];
            if (options_parse_key_value(opts[idx].name, optarg, c == 'p' ? precision : matmul, msg, sizeof msg) != 0) {
                fprintf(stderr, "eval: --%s: %s\n", opts[idx].name, msg);
                exit(2);
            }
            continue;
        }
        if (c == 'h') { usage(stdout); exit(0); }
        if (c == 'j') {   // ./train's key, by its table's rules
            char msg[256];
            if (options_parse_key_value("threads", optarg, &a->threads, msg, sizeof msg) != 0) {
                fprintf(stderr, "eval: --threads: %s\n", msg);
                exit(2);
            }
            continue;
        }
        char *end;
        long v = strtol(optarg, &end, 10);
        long lo = c == 'K' ? 0 : 1;
        if (*optarg == '\0' || *end != '\0' || v < lo || v > (1 << 24)) {
            fprintf(stderr, "eval: --%s: expected an integer >= %ld, got '%s'\n", opts[idx].name, lo, optarg);
            exit(2);
        }
        if (c == 'T') a->seq_len = (int)v;
        if (c == 'B') a->batch_size = (int)v;
        if (c == 'K') a->batches = (int)v;
    }
    if (optind < argc) { fprintf(stderr, "eval: unexpected argument '%s'\n", argv[optind]); exit(2); }
    char msg[256];
    if (options_engine(matmul, precision, &a->matmul, &a->precision, msg, sizeof msg) != 0) {
        fprintf(stderr, "eval: %s\n", msg);
        exit(2);
    }
    if (a->reproducible && (a->matmul != GPT_MATMUL_OPENBLAS || a->precision != GPT_FP32)) {
        fprintf(stderr, "eval: --reproducible runs on OpenBLAS in fp32 (--matmul auto or openblas, --precision "
                "fp32): oneDNN's kernels and blocking follow the CPU\n");
        exit(2);
    }
    if (!a->weights || !a->data) { fprintf(stderr, "eval: --weights and --data are required (see --help)\n"); exit(2); }
    const char *inputs[] = {a->weights, a->data};
    char err[1024];
    if (a->per_position && cli_check_output(a->per_position, a->overwrite, inputs, 2, err, sizeof err) != 0) {
        fprintf(stderr, "eval: %s\n", err);
        exit(2);
    }
}

int main(int argc, char **argv) {
    cli_start();
    // parse_args takes the model keys out of argv: a re-execution needs them all.
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) { fprintf(stderr, "eval: out of memory\n"); return 1; }
    memcpy(args, argv, ((size_t)argc + 1) * sizeof *args);
    EvalArgs a;
    parse_args(argc, argv, &a);
    if (a.reproducible) {   // may start the program again, with OPENBLAS_CORETYPE set
        char msg[256];
        blas_use_reproducible_kernels(args);
        if (blas_reproducible_check(msg, sizeof msg) != 0) { fprintf(stderr, "eval: %s\n", msg); return 2; }
    } else {
        blas_use_native_kernels(args);
    }
    free(args);
    threads_set(a.threads);
    char err[512];
    GPT *model = NULL;
    DataLoader dl;
    double *pos_sum = NULL;
    Meter meter = {0};
    int dl_open = 0, rc = 1;
    // The file's model and the whole need (the model, the file read whole, the
    // activations and the engine's buffers), checked before anything large is allocated.
    GPTConfig file_cfg;
    Footprint need;
    if (gpt_load_probe(a.weights, 0, &file_cfg, err, sizeof err)) {
        fprintf(stderr, "eval: %s\n", err);
        goto done;
    }
    int T = a.seq_len ? a.seq_len : file_cfg.block_size;
    if (T > gpt_config_max_positions(&file_cfg)) {
        fprintf(stderr, "eval: %s: pos=%s has at most %d positions; --seq-len %d is not possible\n",
                a.weights, pos_kind_name(file_cfg.pos), gpt_config_max_positions(&file_cfg), T);
        rc = 2;
        goto done;
    }
    if (footprint_eval(&need, &file_cfg, a.batch_size, T, a.matmul, a.precision, omp_get_max_threads(),
                       err, sizeof err) ||
        footprint_check(&need, 1, err, sizeof err)) {
        fprintf(stderr, "eval: %s\n", err);
        goto done;
    }
    if (gpt_load(&model, a.weights, 0, err, sizeof err)) { fprintf(stderr, "eval: %s\n", err); goto done; }
    if (gpt_set_matmul(model, a.matmul, a.precision, err, sizeof err) ||
        model_overrides_apply(model, &a.overrides, err, sizeof err)) {
        fprintf(stderr, "eval: %s: %s\n", a.weights, err);
        rc = 2;
        goto done;
    }
    const GPTConfig *cfg = gpt_config(model);
    if (loader_open(&dl, a.data, a.batch_size, T, 0, cfg->vocab_size, err, sizeof err)) {
        fprintf(stderr, "eval: %s\n", err);
        goto done;
    }
    dl_open = 1;
    if (gpt_check_tokenizer(model, a.weights, 0, dl.file.tokenizer_checksum, a.data, err, sizeof err)) {
        fprintf(stderr, "eval: %s\n", err);
        goto done;
    }
    size_t windows = loader_num_eval_windows(&dl);
    size_t batches = a.batches ? (size_t)a.batches : windows / (size_t)a.batch_size;
    if (batches == 0) {
        fprintf(stderr, "eval: %s: %zu windows of %d tokens is fewer than one batch of %d\n",
                a.data, windows, T, a.batch_size);
        goto done;
    }
    if (gpt_alloc_activations(model, a.batch_size, T, err, sizeof err)) { fprintf(stderr, "eval: %s\n", err); goto done; }
    double sum = 0.0;
    pos_sum = a.per_position ? calloc((size_t)T, sizeof *pos_sum) : NULL;
    if (a.per_position && !pos_sum) { fprintf(stderr, "eval: out of memory\n"); goto done; }
    // Progress on stderr unless it would land in a file or pipe that also
    // takes the result line (on a terminal the line is erased before it).
    meter_start(&meter, "eval");
    meter_phase(&meter, !meter_stderr_is_stdout() || meter.tty, 0);
    for (size_t k = 0; k < batches; k++) {
        float loss;
        loader_eval_batch(&dl, k);
        if (gpt_forward(model, dl.inputs, dl.targets, a.batch_size, T, &loss, err, sizeof err) != 0) {
            meter_clear(&meter);
            fprintf(stderr, "eval: %s: %s\n", a.data, err);
            goto done;
        }
        if (!isfinite(loss)) {
            meter_clear(&meter);
            fprintf(stderr, "eval: %s: the loss is %s on %s at batch %zu of %zu (the forward pass overflows "
                    "float32 with these weights); no result\n", a.weights, isnan(loss) ? "nan" : "infinite",
                    a.data, k + 1, batches);
            goto done;
        }
        sum += loss;
        const float *losses = gpt_losses(model);   // (B,T)
        for (int b = 0; pos_sum && b < a.batch_size; b++)
            for (int t = 0; t < T; t++) pos_sum[t] += losses[(size_t)b * T + t];
        meter_update(&meter, "", (long long)k + 1, (long long)batches, "batches");
    }
    meter_clear(&meter);
    if (a.per_position) {
        AtomicFile af;
        FILE *f = atomic_open(&af, a.per_position, a.overwrite ? ATOMIC_REPLACE : ATOMIC_NEW, err, sizeof err);
        int ok = f != NULL && fprintf(f, "position,loss\n") > 0;
        for (int t = 0; ok && t < T; t++) ok = fprintf(f, "%d,%.6f\n", t, pos_sum[t] / (batches * a.batch_size)) > 0;
        if (!f || atomic_commit(&af, ok, err, sizeof err) != 0) { fprintf(stderr, "eval: %s\n", err); goto done; }
    }
    double loss = sum / (double)batches;
    printf("eval: weights=%s data=%s pos=%s seq_len=%d windows=%zu tokens=%zu loss=%.6f ppl=%.4f\n",
           a.weights, a.data, pos_kind_name(cfg->pos), T, batches * a.batch_size,
           batches * a.batch_size * (size_t)T, loss, exp(loss));
    rc = 0;
done:
    free(pos_sum);
    if (dl_open) loader_close(&dl);
    gpt_free(model);
    return rc;
}
