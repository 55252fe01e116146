// export_main.c: ./export, a trained model and its tokenizer as one GGUF
// file that llama.cpp runs (docs/FORMAT.md, "Running a model in llama.cpp"),
// or with --format hf as a Hugging Face model directory (format/hf_model.h).
//
//   ./export --weights RUN/model.safetensors --tokenizer data/kjv/tokenizer.bin --out model.gguf
//   ./export --weights RUN/model.safetensors --tokenizer data/kjv/tokenizer.bin --format hf --out DIR
//
// The architecture llama.cpp runs it as follows from pos (format/gguf_model.h);
// a scheme or rope scaling with no exact home there is refused in one line
// (exit 2) and nothing is written. The length keys of ./eval and ./sample
// (--rope_scaling=yarn --rope_scaling_factor=4 ...) apply before exporting, so a
// rope model can be written with llama.cpp's own YaRN or linear scaling. The
// file is written atomically: a failure leaves --out as it was. An existing
// --out is replaced only with --overwrite, and never when it is one of the
// inputs or not a regular file (common/cli.h); that is checked first. With
// --format hf --out is a directory written whole or not at all
// (hf_model_write): never a run directory, and an existing one replaced
// only with --overwrite and only if it is an earlier export.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/meter.h"
#include "data/bpe.h"
#include "format/bpe_gpt2.h"
#include "format/gguf.h"
#include "format/gguf_model.h"
#include "format/hf_model.h"
#include "format/hf_tokenizer.h"
#include "format/weights_file.h"
#include "train/footprint.h"
#include "train/model_overrides.h"
#include "train/run_dir.h"

// The longest --context-length: 2^20 positions. Past a model's block_size
// only rope's scalings make sense, and sinusoidal's and none's table is that
// many rows of d_model floats, in memory and in the file (4 GB at width 1024).
#define EXPORT_MAX_CONTEXT (1 << 20)

typedef struct {
    ModelOverrides overrides;
    const char *weights, *tokenizer, *out;
    const char *inputs[1 + TOKENIZER_MAX_FILES];   // the weights and the tokenizer's files (tokenizer_files)
    int n_inputs;
    char tokenizer_files[TOKENIZER_MAX_FILES][4096];
    char format[8];                      // --format: gguf or hf
    int context_length, overwrite, hf;   // hf: --format hf
} ExportArgs;

static void parse_args(int argc, char **argv, ExportArgs *a) {
    *a = (ExportArgs){0};
    model_overrides_take_or_exit("export", &argc, argv, &a->overrides);
#define F(field) offsetof(ExportArgs, field)
    static const OptSpec flags[] = {
        {.name = "weights", .type = OPT_ARG, .offset = F(weights), .arg = "FILE", .min = 1, .required = 1,
         .help = "safetensors weights (RUN_DIR/model.safetensors), or a Hugging Face model directory (GPT-2, "
                 "Llama; docs/FORMAT.md)"},
        {.name = "tokenizer", .type = OPT_ARG, .offset = F(tokenizer), .arg = "PATH", .min = 1, .required = 1,
         .help = "the model's tokenizer: tokenizer.bin written by ./prepare, or the same read from a tokenizer.json "
                 "or a directory (./sample --help)"},
        {.name = "out", .type = OPT_ARG, .offset = F(out), .arg = "FILE", .min = 1, .required = 1,
         .help = "the GGUF file to write (llama.cpp's format); --format hf: the directory"},
        {.name = "format", .type = OPT_STR, .offset = F(format), .arg = "F", .def = "gguf", .choices = "gguf|hf",
         .help = "gguf: one file for llama.cpp; hf: a Hugging Face model directory (config.json, "
                 "model.safetensors, tokenizer.json, tokenizer_config.json): GPT2LMHeadModel for block=gpt2 with "
                 "pos=learned, LlamaForCausalLM for block=llama with rope over the whole head, unscaled; others "
                 "refused"},
        {.name = "overwrite", .type = OPT_FLAG, .offset = F(overwrite),
         .help = "replace FILE if it exists (a regular file, not one of the inputs); --format hf: an earlier "
                 "export (a directory of exactly its four files, never a run directory)"},
        {.name = "context-length", .type = OPT_INT, .offset = F(context_length), .arg = "N", .min = 1,
         .max = EXPORT_MAX_CONTEXT,
         .help = "llama.cpp's context_length, and the rows of the position table of sinusoidal and none (default: "
                 "block_size; learned: block_size only; with --rope_scaling=linear, ntk or yarn, "
                 "rope_scaling_factor x the original length L (rope_original_length, else block_size): Hugging "
                 "Face's s x L, said on stderr; at most 2^20: the table is N x d_model floats, in memory and in "
                 "the file)"},
    };
#undef F
    static const CliSpec spec = {
        .prog = "export",
        .usage = "usage: ./export --weights FILE --tokenizer PATH --out FILE.gguf [options]\n",
        CLI_FLAGS(flags),
        .about = "block=gpt2: pos=learned, sinusoidal, none run as llama.cpp's gpt2, rope as gptneox, alibi as\n"
                 "mpt. block=llama: rope as llama (rope_dims < head_dim: chatglm), alibi as refact; its other\n"
                 "schemes have no home there and are refused, as t5 is for both blocks.\n",
        .help_more = model_overrides_usage,
    };
    cli_parse_or_exit(&spec, argc, argv, a, NULL, NULL);
    a->hf = !strcmp(a->format, "hf");
    char err[ERR_MAX];
    int n_files = tokenizer_files(a->tokenizer, a->tokenizer_files, err, sizeof err);   // (refused when read)
    a->inputs[0] = a->weights;
    a->inputs[1] = a->tokenizer;
    for (int i = 0; i < n_files; i++) a->inputs[1 + i] = a->tokenizer_files[i];
    a->n_inputs = 1 + (n_files > 0 ? n_files : 1);
    if (!a->hf && cli_check_output(a->out, a->overwrite, a->inputs, a->n_inputs, err, sizeof err) != 0) {
        fprintf(stderr, "export: %s\n", err);
        exit(2);
    }
}

// --format hf, checked before any work: --out never a run directory
// (run_dir.h's marks), then by hf_model_check_target's rules (nothing, an
// empty directory, or with --overwrite an earlier export), none of its files
// an input; no --context-length.
static void check_hf_args(const ExportArgs *a) {
    char err[ERR_MAX], path[4096];
    if (a->context_length) {
        fprintf(stderr, "export: --context-length is for GGUF files: --format hf writes block_size\n");
        exit(2);
    }
    char mark[64];
    if (run_dir_holds_run(a->out, mark, sizeof mark)) {
        fprintf(stderr, "export: %s: holds a ropelab run (%s); an export never replaces a run directory\n", a->out,
                mark);
        exit(2);
    }
    if (hf_model_check_target(a->out, a->overwrite, err, sizeof err) != 0) {
        fprintf(stderr, "export: %s\n", err);
        exit(2);
    }
    for (int i = 0; i < HF_N_FILES; i++) {   // an export's file is replaced, an input never
        snprintf(path, sizeof path, "%s/%s", a->out, HF_FILES[i]);
        if (cli_check_output(path, 1, a->inputs, a->n_inputs, err, sizeof err) != 0) {
            fprintf(stderr, "export: %s\n", err);
            exit(2);
        }
    }
}

// A byte-class tokenizer (version 1) is exported all the same (bpe_gpt2.h
// says why: the model runs the same on the same ids), with this warning;
// consumer ("llama.cpp") cuts text by GPT-2's rule, as its file says (where).
static void warn_pretokenizer(const Tokenizer *tok, const char *path, const char *consumer, const char *where) {
    if (tok->pretok == BPE_PRETOK_GPT2) return;
    fprintf(stderr, "export: warning: %s cuts text by the %s rule (a tokenizer file of version 1), %s by GPT-2's "
            "(%s): a text with a contraction, a blank line before a word or non-ASCII characters gets other ids in "
            "%s than in ropelab (docs/FORMAT.md); ./prepare's default, --pretokenizer gpt2, is %s's rule\n",
            path, pretok_name(tok->pretok), consumer, where, consumer, consumer);
}

// --format hf: the directory's four files (hf_model.h). rc as main's.
static int export_hf(GPT *model, const Tokenizer *tok, const ExportArgs *a) {
    char err[ERR_MAX];
    if (hf_model_refusal(gpt_config(model), err, sizeof err)) {
        fprintf(stderr, "export: %s: %s; nothing written\n", a->weights, err);
        return 2;
    }
    warn_pretokenizer(tok, a->tokenizer, "Hugging Face", "tokenizer.json's ByteLevel pre-tokenizer, GPT-2's regex");
    int written = hf_model_write(model, tok, a->out, a->overwrite, err, sizeof err);
    if (written < 0) {
        fprintf(stderr, "export: %s\n", err);
        return 1;
    }
    if (written == 1) fprintf(stderr, "export: note: %s\n", err);
    fprintf(stderr, "export: %s (%spos=%s) -> %s/: Hugging Face %s\n", a->weights,
            gpt_config(model)->block == BLOCK_LLAMA ? "block=llama, " : "", pos_kind_name(gpt_config(model)->pos),
            a->out, gpt_config(model)->block == BLOCK_LLAMA ? "LlamaForCausalLM" : "GPT2LMHeadModel");
    return 0;
}

int main(int argc, char **argv) {
    cli_start();
    ExportArgs a;
    parse_args(argc, argv, &a);
    if (a.hf) check_hf_args(&a);
    char err[ERR_MAX];
    Tokenizer tok;
    GPT *model = NULL;
    GgufModel gm = {0};
    BpeGguf vocab = {0};
    int tok_loaded = 0, rc = 1;
    if (tokenizer_read(&tok, a.tokenizer, err, sizeof err)) { fprintf(stderr, "export: %s\n", err); goto done; }
    tok_loaded = 1;
    // The file's model, then the whole need (the model, the file read whole, the
    // tensors the export makes), checked before anything large is allocated.
    GPTConfig file_cfg;
    Footprint need;
    if (gpt_load_probe(a.weights, 0, &file_cfg, err, sizeof err) ||
        (a.hf ? footprint_export_hf(&need, &file_cfg, err, sizeof err)
              : footprint_export(&need, &file_cfg, a.context_length, err, sizeof err)) ||
        footprint_check(&need, 1, err, sizeof err)) {
        fprintf(stderr, "export: %s\n", err);
        goto done;
    }
    if (gpt_load(&model, a.weights, 0, err, sizeof err)) { fprintf(stderr, "export: %s\n", err); goto done; }
    if (model_overrides_apply(model, &a.overrides, err, sizeof err)) {
        fprintf(stderr, "export: %s: %s\n", a.weights, err);
        rc = 2;
        goto done;
    }
    if (gpt_check_tokenizer(model, a.weights, tok.vocab_size, bpe_checksum(&tok), a.tokenizer, err, sizeof err)) {
        fprintf(stderr, "export: %s\n", err);
        goto done;
    }
    if (a.hf) {
        rc = export_hf(model, &tok, &a);
        goto done;
    }
    // A long table or a large file shows progress on stderr (common/meter.h), as ./eval and ./sample do.
    Meter meter;
    meter_start(&meter, "export");
    meter_phase(&meter, 1, 0);
    int described = gguf_model_describe(model, a.context_length, &gm, &meter, err, sizeof err);
    meter_clear(&meter);
    if (described != 0) {
        fprintf(stderr, "export: %s: %s; nothing written\n", a.weights, err);
        rc = described == -1 ? 2 : 1;
        goto done;
    }
    if (gm.note[0]) fprintf(stderr, "export: note: %s\n", gm.note);
    if (bpe_gguf(&tok, &vocab, err, sizeof err)) { fprintf(stderr, "export: %s\n", err); goto done; }
    if (vocab.n_duplicates > 0)
        fprintf(stderr, "export: note: %s has %d tokens whose bytes another token has too; llama.cpp encodes "
                "such a text as the last of them (generation is unaffected)\n", a.tokenizer, vocab.n_duplicates);
    warn_pretokenizer(&tok, a.tokenizer, "llama.cpp", "tokenizer.ggml.pre = \"gpt-2\", the nearest it has");
    GgufKv kv[GGUF_MODEL_MAX_KV + BPE_GGUF_KV];
    memcpy(kv, gm.kv, (size_t)gm.n_kv * sizeof *kv);
    memcpy(kv + gm.n_kv, vocab.kv, sizeof vocab.kv);
    meter_phase(&meter, 1, 0);
    int written = gguf_write(a.out, kv, gm.n_kv + BPE_GGUF_KV, gm.tensors, gm.n_tensors,
                             a.overwrite ? ATOMIC_REPLACE : ATOMIC_NEW, &meter, err, sizeof err);
    meter_clear(&meter);
    if (written != 0) {
        fprintf(stderr, "export: %s\n", err);
        goto done;
    }
    fprintf(stderr, "export: %s (%spos=%s) -> %s: llama.cpp architecture %s, %d tensors, %d tokens\n", a.weights,
            gpt_config(model)->block == BLOCK_LLAMA ? "block=llama, " : "", pos_kind_name(gpt_config(model)->pos),
            a.out, gm.arch, gm.n_tensors, tok.vocab_size);
    rc = 0;
done:
    bpe_gguf_free(&vocab);
    gguf_model_free(&gm);
    gpt_free(model);
    if (tok_loaded) bpe_free(&tok);
    return rc;
}
