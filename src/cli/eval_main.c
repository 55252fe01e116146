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
// stderr (common/meter.h); stdout holds only the result line.
//
// --reproducible evaluates as ./train's reproducible = 1 trains: OpenBLAS in
// fp32 with its Haswell kernels (the program starts again with
// OPENBLAS_CORETYPE set, common/blas_cpu.h), so the printed loss is the same
// bits on any x86-64 CPU with AVX2 and FMA, at any thread count.
//
// --per-position F is written atomically, after the evaluation; an existing F
// is replaced only with --overwrite, and never when it is one of the inputs
// or not a regular file (common/cli.h), which is checked first.
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/blas_cpu.h"
#include "common/cli.h"
#include "common/meter.h"
#include "common/threads.h"
#include "data/loader.h"
#include "format/weights_file.h"
#include "model/gpt.h"
#include "train/footprint.h"
#include "train/model_overrides.h"
#include "train/options.h"

// The longest --seq-len and --batch-size, and the most --batches: 2^24.
#define EVAL_MAX (1 << 24)

typedef struct {
    const char *weights, *data;
    int seq_len, batch_size, batches, threads, overwrite, reproducible;
    int logits_rows;            // ./train's key logits_rows
    char matmul_name[OPT_STR_MAX], precision_name[OPT_STR_MAX];   // ./train's keys matmul, precision
    char attention_name[OPT_STR_MAX];                             // and attention
    GPTMatmul matmul;           // the engine they name (options_engine, options_attention)
    GPTPrecision precision;
    GPTAttention attention;
    const char *per_position;   // CSV of the mean loss at each position, or NULL
    ModelOverrides overrides;   // --rope_scaling=... and the other length keys
} EvalArgs;

static void parse_args(int argc, char **argv, EvalArgs *a) {
    *a = (EvalArgs){0};
    model_overrides_take_or_exit("eval", &argc, argv, &a->overrides);
#define F(field) offsetof(EvalArgs, field)
    // The flags (common/opt.h). Not static: the entries of ./train's keys are
    // copies of its table's (options_flag), made here.
    const OptSpec flags[] = {
        {.name = "weights", .type = OPT_ARG, .offset = F(weights), .arg = "FILE", .min = 1, .required = 1,
         .help = "safetensors weights (RUN_DIR/model.safetensors), or a Hugging Face model directory (GPT-2, "
                 "Llama; docs/FORMAT.md)"},
        {.name = "data", .type = OPT_ARG, .offset = F(data), .arg = "FILE", .min = 1, .required = 1,
         .help = "token file (llm.c format), e.g. data/kjv/val.bin"},
        {.name = "seq-len", .type = OPT_INT, .offset = F(seq_len), .arg = "N", .min = 1, .max = EVAL_MAX,
         .help = "window length (default: the model's block_size)"},
        {.name = "batch-size", .type = OPT_INT, .def = "8", .offset = F(batch_size), .arg = "B", .min = 1,
         .max = EVAL_MAX, .help = "windows per forward pass"},
        {.name = "batches", .type = OPT_INT, .def = "0", .offset = F(batches), .arg = "K", .min = 0, .max = EVAL_MAX,
         .help = "batches to evaluate, 0 = every whole batch in the file"},
        options_flag("threads", F(threads), "N", NULL),
        options_flag("precision", F(precision_name), "P", "fp32 or bf16 (the products' inputs, on oneDNN)"),
        options_flag("matmul", F(matmul_name), "M", "the products' engine: auto (./train's key matmul: for fp32 "
                     "onednn with AVX-512, openblas without it and with --reproducible; for bf16 onednn), openblas, "
                     "onednn, or reference (plain loops, slow)"),
        options_flag("attention", F(attention_name), "A", "attention's kernels: auto (blocked), blocked, or fused "
                     "(key blocks and an online softmax; openblas fp32, onednn fp32 or bf16)"),
        options_flag("logits_rows", F(logits_rows), "N", "positions whose logits the head and the loss hold at "
                     "once; 0 = all where their B*T*V floats fit 64 MB, else slices of 64 positions that do"),
        {.name = "per-position", .type = OPT_ARG, .offset = F(per_position), .arg = "F", .min = 1,
         .help = "also write F: position,loss (mean over the windows at each position)"},
        {.name = "overwrite", .type = OPT_FLAG, .offset = F(overwrite),
         .help = "replace F if it exists (a regular file, not one of the inputs)"},
        {.name = "reproducible", .type = OPT_FLAG, .offset = F(reproducible),
         .help = "the same bits on any x86-64 CPU with AVX2 and FMA: OpenBLAS fp32 with its Haswell kernels, like "
                 "./train's reproducible = 1 (docs/TRAINING.md)"},
    };
#undef F
    const CliSpec spec = {
        .prog = "eval",
        .usage = "usage: ./eval --weights FILE --data FILE [options]\n",
        CLI_FLAGS(flags),
        .about = "Prints one line: loss, perplexity, windows and tokens evaluated.\n",
        .help_more = model_overrides_usage,
    };
    cli_parse_or_exit(&spec, argc, argv, a, NULL, NULL);
    char err[ERR_MAX];
    if (options_engine(a->matmul_name, a->precision_name, a->reproducible, &a->matmul, &a->precision, NULL, err,
                       sizeof err) != 0) {
        fprintf(stderr, "eval: %s\n", err);
        exit(2);
    }
    if (a->reproducible && (a->matmul != GPT_MATMUL_OPENBLAS || a->precision != GPT_FP32)) {
        fprintf(stderr, "eval: --reproducible runs on OpenBLAS in fp32 (--matmul auto or openblas, --precision "
                "fp32): oneDNN's kernels and blocking follow the CPU\n");
        exit(2);
    }
    if (options_attention(a->attention_name, a->matmul, a->precision, a->reproducible, &a->attention, err,
                          sizeof err) != 0) {
        fprintf(stderr, "eval: --attention: %s\n", err);
        exit(2);
    }
    const char *inputs[] = {a->weights, a->data};
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
        char msg[ERR_MAX];
        blas_use_reproducible_kernels(args);
        if (blas_reproducible_check(msg, sizeof msg) != 0) { fprintf(stderr, "eval: %s\n", msg); return 2; }
    } else {
        blas_use_native_kernels(args);
    }
    free(args);
    threads_set(a.threads);
    char err[ERR_MAX];
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
    // A batch the model cannot index is the command line's (exit 2), as
    // ./train's batch_size and block_size are (options_check_batch).
    if (gpt_check_batch(&file_cfg, a.batch_size, T, err, sizeof err)) {
        fprintf(stderr, "eval: %s: --batch-size %d, --seq-len %d: %s\n", a.weights, a.batch_size, T, err);
        rc = 2;
        goto done;
    }
    GPTWorkload work = {.matmul = a.matmul, .precision = a.precision, .attention = a.attention,
                        .B = a.batch_size, .T = T, .n_threads = omp_get_max_threads(),
                        .logits_rows = a.logits_rows};
    if (footprint_eval(&need, &file_cfg, &work, err, sizeof err) ||
        footprint_check(&need, 1, err, sizeof err)) {
        fprintf(stderr, "eval: %s\n", err);
        goto done;
    }
    if (gpt_load(&model, a.weights, 0, err, sizeof err)) { fprintf(stderr, "eval: %s\n", err); goto done; }
    if (gpt_set_matmul(model, a.matmul, a.precision, a.attention, err, sizeof err) ||
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
    gpt_set_logits_rows(model, a.logits_rows);
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
