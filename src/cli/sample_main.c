// sample_main.c: ./sample, text generation from a trained weights file.
//
//   ./sample --weights RUN/model.safetensors --tokenizer data/kjv/tokenizer.bin
//            --prompt "In the beginning" --tokens 200 --temperature 0.8 --top-k 40 --seed 1
//
// The prompt is encoded with the BPE tokenizer and fed one token at a time
// through gpt_decode_step, which keeps each layer's keys and values in a KV
// cache: every new token costs one position's work, not a whole recompute.
// Positions are the token's index in the sequence (0 = first prompt token)
// for every scheme. For `learned` the wpe table has block_size rows, so
// generation STOPS at block_size tokens (we do not slide the window: a slid
// window would need the whole cache recomputed at new positions). The other
// schemes can run past block_size (extrapolation; quality may drop).
// Same weights, prompt, settings and seed: same text.
//
// Logits that are not finite (finite weights whose products overflow
// float32) stop the program with an error, at any step: nothing is sampled
// from them. The prompt is echoed on stdout once it has been read, so a
// refusal while reading it leaves stdout empty.
//
// Progress on stderr (common/meter.h), for reading the prompt and for
// generating: every token is one decode step attending to all the positions
// before it, so a long prompt or a long generation takes time quadratic in
// its length. stdout carries only the text: where stderr goes to the same
// place there is no progress while text is being written (on a terminal the
// prompt's \r line is erased before the text starts).
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/blas_cpu.h"
#include "common/cli.h"
#include "common/meter.h"
#include "common/rng.h"
#include "common/threads.h"
#include "data/bpe.h"
#include "format/hf_tokenizer.h"
#include "format/weights_file.h"
#include "model/gpt.h"
#include "train/footprint.h"
#include "train/model_overrides.h"
#include "train/options.h"

typedef struct {
    ModelOverrides overrides;   // --rope_scaling=... and the other length keys
    const char *weights, *tokenizer, *prompt;
    int n_tokens, top_k, threads;
    float temperature;
    uint64_t seed;
    char matmul_name[OPT_STR_MAX], precision_name[OPT_STR_MAX];   // ./train's keys matmul, precision
    GPTMatmul matmul;           // the engine of the linear products they name (options_engine)
    GPTPrecision precision;
} SampleArgs;

static void parse_args(int argc, char **argv, SampleArgs *a) {
    *a = (SampleArgs){0};
    model_overrides_take_or_exit("sample", &argc, argv, &a->overrides);
#define F(field) offsetof(SampleArgs, field)
    // The flags (common/opt.h). Not static: the entries of ./train's keys are
    // copies of its table's (options_flag), made here.
    const OptSpec flags[] = {
        {.name = "weights", .type = OPT_ARG, .offset = F(weights), .arg = "FILE", .min = 1, .required = 1,
         .help = "safetensors weights (RUN_DIR/model.safetensors), or a Hugging Face model directory (GPT-2, "
                 "Llama; docs/FORMAT.md)"},
        {.name = "tokenizer", .type = OPT_ARG, .offset = F(tokenizer), .arg = "PATH", .min = 1,
         .help = "the model's tokenizer: tokenizer.bin written by ./prepare, a Hugging Face tokenizer.json, or a "
                 "directory holding tokenizer.json (a Hugging Face model's) or GPT-2's encoder.json and vocab.bpe "
                 "(default: the --weights directory, for a Hugging Face model; required for a weights file)"},
        {.name = "prompt", .type = OPT_ARG, .def = "", .offset = F(prompt), .arg = "TEXT",
         .help = "text to continue (default: start of a document)"},
        {.name = "tokens", .type = OPT_INT, .def = "200", .offset = F(n_tokens), .arg = "N", .min = 0, .max = 1000000,
         .help = "tokens to generate"},
        {.name = "temperature", .type = OPT_FLOAT, .def = "0.8", .offset = F(temperature), .arg = "X", .min = 0,
         .max = 1e30, .help = "0 = greedy"},
        {.name = "top-k", .type = OPT_INT, .def = "40", .offset = F(top_k), .arg = "K", .min = 0, .max = 1 << 30,
         .help = "sample among the K most likely tokens, 0 = all"},
        options_flag("seed", F(seed), "N", "sampling seed"),
        options_flag("threads", F(threads), "N", NULL),
        options_flag("matmul", F(matmul_name), "M", "the linear products' engine: auto (./train's key matmul: for "
                     "fp32 onednn with AVX-512, openblas without it; for bf16 onednn), openblas, onednn, or reference "
                     "(plain loops, slow)"),
        options_flag("precision", F(precision_name), "P", "fp32 or bf16 (the products' inputs, on oneDNN)"),
    };
#undef F
    const CliSpec spec = {
        .prog = "sample",
        .usage = "usage: ./sample --weights FILE --tokenizer PATH [options], or ./sample --weights HF_DIR [options]\n",
        CLI_FLAGS(flags),
        .help_more = model_overrides_usage,
    };
    cli_parse_or_exit(&spec, argc, argv, a, NULL, NULL);
    struct stat st;
    if (!a->tokenizer) {
        // A Hugging Face model directory carries its tokenizer.json.
        if (stat(a->weights, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "sample: --tokenizer is required with a weights file (%s)\n", a->weights);
            exit(2);
        }
        a->tokenizer = a->weights;
    }
    char err[ERR_MAX];
    if (options_engine(a->matmul_name, a->precision_name, 0, &a->matmul, &a->precision, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "sample: %s\n", err);
        exit(2);
    }
}

// Picks the next token from logits (V): greedy at temperature 0, otherwise
// softmax(logits / temperature) restricted to the top_k largest logits.
// probs and order are scratch buffers of V entries.
static int sample_token(const float *logits, int V, float temperature, int top_k,
                        float *probs, int *order, Rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature == 0.0f) return best;
    int k = (top_k > 0 && top_k < V) ? top_k : V;
    // Partial selection sort of the k largest (k is small in practice; ties by lower id).
    for (int i = 0; i < V; i++) order[i] = i;
    for (int i = 0; i < k; i++) {
        int m = i;
        for (int j = i + 1; j < V; j++) if (logits[order[j]] > logits[order[m]]) m = j;
        int tmp = order[i]; order[i] = order[m]; order[m] = tmp;
    }
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        probs[i] = expf((logits[order[i]] - logits[best]) / temperature);
        sum += probs[i];
    }
    double u = rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < k; i++) {
        acc += probs[i];
        if (u < acc) return order[i];
    }
    return order[k - 1];
}

// Whether every logit is finite; otherwise *what is "nan" or "infinite" (the first found).
static int logits_finite(const float *logits, int V, const char **what) {
    for (int i = 0; i < V; i++)
        if (!isfinite(logits[i])) { *what = isnan(logits[i]) ? "nan" : "infinite"; return 0; }
    return 1;
}

static void print_token(const Tokenizer *tok, int id) {
    int len;
    const uint8_t *bytes = bpe_token(tok, (uint32_t)id, &len);
    if (bytes && len > 0) fwrite(bytes, 1, (size_t)len, stdout);
    fflush(stdout);
}

int main(int argc, char **argv) {
    cli_start();
    blas_use_native_kernels(argv);
    SampleArgs a;
    parse_args(argc, argv, &a);
    threads_set(a.threads);
    char err[ERR_MAX];
    Tokenizer tok;
    GPT *model = NULL;
    KVCache *cache = NULL;
    uint32_t *prompt_ids = NULL;
    float *logits = NULL, *probs = NULL;
    int *order = NULL, tok_loaded = 0, rc = 1;
    Meter meter = {0};
    if (tokenizer_read(&tok, a.tokenizer, err, sizeof err)) { fprintf(stderr, "sample: %s\n", err); goto done; }
    tok_loaded = 1;
    // The file's model, the prompt's length, then the whole need (the model, the
    // file read whole, the KV cache), checked before anything large is allocated.
    GPTConfig file_cfg;
    Footprint need;
    if (gpt_load_probe(a.weights, 0, &file_cfg, err, sizeof err)) {
        fprintf(stderr, "sample: %s\n", err);
        goto done;
    }
    size_t plen = strlen(a.prompt);
    prompt_ids = malloc((plen + 1) * sizeof *prompt_ids);
    if (!prompt_ids) { fprintf(stderr, "sample: out of memory\n"); goto done; }
    size_t n_prompt = 0;
    prompt_ids[n_prompt++] = (uint32_t)tok.eot_id;   // a sample starts a new document
    n_prompt += bpe_encode(&tok, (const uint8_t *)a.prompt, plen, prompt_ids + 1);
    int max_positions = gpt_config_max_positions(&file_cfg);
    int max_len = n_prompt + (size_t)a.n_tokens > (size_t)max_positions ? max_positions : (int)n_prompt + a.n_tokens;
    if (n_prompt > (size_t)max_len) {
        fprintf(stderr, "sample: the prompt (%zu tokens) is longer than the %d positions of this pos=%s model\n",
                n_prompt, max_len, pos_kind_name(file_cfg.pos));
        goto done;
    }
    GPTWorkload work = {.matmul = a.matmul, .precision = a.precision, .n_threads = omp_get_max_threads()};
    if (footprint_sample(&need, &file_cfg, &work, max_len, err, sizeof err) ||
        footprint_check(&need, 1, err, sizeof err)) {
        fprintf(stderr, "sample: %s\n", err);
        goto done;
    }
    if (gpt_load(&model, a.weights, 0, err, sizeof err)) { fprintf(stderr, "sample: %s\n", err); goto done; }
    // decoding runs the KV cache's attention (kvcache.c), never the engine's: no attention choice
    if (gpt_set_matmul(model, a.matmul, a.precision, GPT_ATTENTION_BLOCKED, err, sizeof err) ||
        model_overrides_apply(model, &a.overrides, err, sizeof err)) {
        fprintf(stderr, "sample: %s: %s\n", a.weights, err);
        rc = 2;
        goto done;
    }
    const GPTConfig *cfg = gpt_config(model);
    if (gpt_check_tokenizer(model, a.weights, tok.vocab_size, bpe_checksum(&tok), a.tokenizer, err, sizeof err)) {
        fprintf(stderr, "sample: %s\n", err);
        goto done;
    }
    int V = cfg->vocab_size;
    logits = malloc((size_t)V * sizeof *logits);
    probs = malloc((size_t)V * sizeof *probs);
    order = malloc((size_t)V * sizeof *order);
    if (!logits || !probs || !order) { fprintf(stderr, "sample: out of memory\n"); goto done; }
    if (kv_cache_create(&cache, model, max_len, err, sizeof err)) { fprintf(stderr, "sample: %s\n", err); goto done; }
    Rng rng;
    rng_seed(&rng, a.seed);
    // Tokens that can be generated: a.n_tokens, or up to the last position
    // plus one (the token sampled from the last position's logits is printed).
    long long gen_total = (long long)max_len - (long long)n_prompt + 1;
    if (gen_total > a.n_tokens) gen_total = a.n_tokens;
    int shares_stdout = meter_stderr_is_stdout();
    const char *bad;
    meter_start(&meter, "sample");

    meter_phase(&meter, !shares_stdout || meter.tty, 1);   // no text on stdout yet
    for (size_t i = 0; i < n_prompt; i++) {
        if (gpt_decode_step(model, cache, (int)prompt_ids[i], logits, err, sizeof err) != 0) {
            meter_clear(&meter);
            fprintf(stderr, "sample: %s\n", err);
            goto done;
        }
        if (!logits_finite(logits, V, &bad)) {
            meter_clear(&meter);
            fprintf(stderr, "sample: %s: the logits are %s at prompt token %zu of %zu (the forward pass overflows "
                    "float32 with these weights); no text\n", a.weights, bad, i + 1, n_prompt);
            goto done;
        }
        meter_update(&meter, "reading the prompt:", (long long)i + 1, (long long)n_prompt, "tokens");
    }
    meter_phase(&meter, !shares_stdout, 1);
    fwrite(a.prompt, 1, plen, stdout);
    int generated = 0;
    while (generated < a.n_tokens) {
        int next = sample_token(logits, V, a.temperature, a.top_k, probs, order, &rng);
        if (next == tok.eot_id) break;                  // the model ended the document
        print_token(&tok, next);
        generated++;
        meter_update(&meter, "generated", generated, gen_total, "tokens");
        if (kv_cache_len(cache) >= max_len) break;
        if (gpt_decode_step(model, cache, next, logits, err, sizeof err) != 0) {
            meter_clear(&meter);
            printf("\n");
            fprintf(stderr, "sample: %s\n", err);
            goto done;
        }
        if (!logits_finite(logits, V, &bad)) {
            meter_clear(&meter);
            printf("\n");
            fflush(stdout);
            fprintf(stderr, "sample: %s: the logits are %s after %d generated tokens (the forward pass overflows "
                    "float32 with these weights); the text stops here\n", a.weights, bad, generated);
            goto done;
        }
    }
    meter_clear(&meter);
    printf("\n");
    if (generated < a.n_tokens && kv_cache_len(cache) >= gpt_max_positions(model))
        fprintf(stderr, "sample: stopped at %d tokens: pos=%s has no position beyond it\n",
                gpt_max_positions(model), pos_kind_name(cfg->pos));
    rc = fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
    if (rc) fprintf(stderr, "sample: writing the text failed\n");
done:
    free(logits); free(probs); free(order); free(prompt_ids);
    kv_cache_free(cache);
    gpt_free(model);
    if (tok_loaded) bpe_free(&tok);
    return rc;
}
