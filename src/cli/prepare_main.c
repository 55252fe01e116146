// prepare_main.c: ./prepare, text file(s) in; a tokenizer and train/val token
// files out.
//
//   ./prepare --vocab-size 4096 --val-fraction 0.05 --out-dir data/kjv data/kjv.txt
//   ./prepare --record RUN/data.txt [--out-dir DIR]    the data of a record, again
//
// 0. Before any work: OUT can be written (it exists or can be created, and
//    is writable), and each output file may be written there: not there, or
//    with --overwrite a regular file, and never one of the inputs (common/cli.h).
// 1. Read every file (UTF-8 text, checked) and cut it into documents: each file
//    is one document, or, with --doc-sep STR, every STR starts a new one.
// 2. Train the BPE tokenizer on the documents (or read one, --tokenizer: a
//    tokenizer.bin, a tokenizer.json, or GPT-2's encoder.json and vocab.bpe,
//    format/hf_tokenizer.h).
// 3. Encode: every document is preceded by the end-of-text token (as llm.c's
//    data scripts do), so documents are separated by it and a sampler can
//    start from it.
// 4. Split the token stream: the last --val-fraction of it is the validation
//    split (--split tail), or from the start of the document holding that
//    point (--split docs). The two splits never overlap.
// 5. Write OUT/tokenizer.bin, OUT/train.bin, OUT/val.bin and their data record
//    OUT/data.txt (the recipe and the checksums: data/data_record.h),
//    atomically, and print a summary.
//
// --record FILE takes the recipe from a data record (a run's, a study's) and
// makes its data in OUT (default: the directory the record names): when OUT
// already holds the record's three files (the same checksums) there is
// nothing to do (exit 0); when it holds other data it is left alone (exit 2);
// otherwise the record's input texts are checked against its checksums, the
// recipe runs, and its files are checked too: data that differs from the
// record is removed again and refused (exit 1), so a run is never re-made on
// other data of the same name.
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/meter.h"
#include "data/bpe.h"
#include "data/data_record.h"
#include "data/tokens.h"
#include "format/hf_tokenizer.h"

typedef struct {
    int vocab_size;
    double val_fraction;
    const char *split;         // --split: "tail" or "docs"
    int split_docs;            // 0: tail of the stream, 1: whole documents
    const char *doc_sep_arg;   // --doc-sep as given (escapes), or NULL
    char *doc_sep;             // the separator itself; NULL: one document per file
    const char *out_dir;       // --out-dir, or out_dir_default
    char out_dir_default[DATA_PATH_MAX];
    const char *tokenizer;     // existing tokenizer to use instead of training one (tokenizer_read's PATH)
    char tokenizer_files[TOKENIZER_MAX_FILES][4096];   // the files read for it (tokenizer_files)
    int n_tokenizer_files;
    const char *pretok_arg;    // --pretokenizer as given, or NULL
    BpePretok pretok;          // the pre-split rule of a tokenizer trained here
    int block_size;            // > 0: both splits must hold one window of block_size + 1
    int overwrite;             // --overwrite: replace the files of an existing OUT
    const char *record_path;   // --record FILE: the recipe (and checksums) of a data record
    DataRecord record;         // its contents (has_recipe = 0 without --record)
    const char **inputs;
    int n_inputs;
} Options;

typedef struct { const uint8_t *bytes; size_t len; } Doc;

// ------------------------------------------------------------ options

static char *unescape(const char *s) {
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out) return NULL;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s;
        } else *o++ = *s;
    }
    *o = 0;
    return out;
}

static void free_options(Options *o) {
    free(o->inputs);
    free(o->doc_sep);
    data_record_free(&o->record);
    memset(o, 0, sizeof *o);
}

// --record FILE: the options of its recipe into o. Only --out-dir may be given
// beside it (the recipe is the record's). 0, or -1 with a message.
static int options_from_record(Options *o, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int with_value = strcmp(a, "--record") == 0 || strcmp(a, "--out-dir") == 0;
        if (with_value) { i++; continue; }
        if (strncmp(a, "--record=", 9) != 0 && strncmp(a, "--out-dir=", 10) != 0) {
            fprintf(stderr, "prepare: --record %s: takes its recipe from the record; '%s' cannot be given "
                    "beside it (only --out-dir)\n", o->record_path, a);
            return -1;
        }
    }
    char err[ERR_MAX];
    DataRecord *r = &o->record;
    if (data_record_read(r, o->record_path, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return -1; }
    if (r->has_recipe) {   // (without one, OUT can only be found to hold the record's files)
        o->vocab_size = r->vocab_size;
        o->val_fraction = r->val_fraction;
        o->split = r->split;
        if (r->doc_sep[0]) o->doc_sep_arg = r->doc_sep;
        if (r->tokenizer_from.path[0]) o->tokenizer = r->tokenizer_from.path;
        else o->pretok_arg = r->pretokenizer;
    }
    const char **inputs = realloc(o->inputs, ((size_t)r->n_inputs + 1) * sizeof *inputs);
    if (!inputs) { fprintf(stderr, "prepare: out of memory\n"); return -1; }
    o->inputs = inputs;
    o->n_inputs = r->n_inputs;
    for (int i = 0; i < r->n_inputs; i++) o->inputs[i] = r->inputs[i].path;
    if (!o->out_dir) {   // the directory of the record's files
        snprintf(o->out_dir_default, sizeof o->out_dir_default, "%s", r->files[DATA_TRAIN].path);
        char *slash = strrchr(o->out_dir_default, '/');
        if (slash) *slash = 0;
        else snprintf(o->out_dir_default, sizeof o->out_dir_default, ".");
        o->out_dir = o->out_dir_default;
    }
    return 0;
}

// The command line into o (--help: the help, exit 0; a bad option: one
// line, exit 2). 0, or -1 with a message.
static int parse_options(int argc, char **argv, Options *o) {
    memset(o, 0, sizeof *o);
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (!o->inputs) { fprintf(stderr, "prepare: out of memory\n"); return -1; }
#define F(field) offsetof(Options, field)
    static const OptSpec flags[] = {
        {.name = "vocab-size", .type = OPT_INT, .def = "4096", .offset = F(vocab_size), .arg = "N",
         .min = BPE_MIN_VOCAB, .max = BPE_MAX_VOCAB,
         .help = "vocabulary size including eot (the 256 bytes and eot at least, uint16 token ids at most)"},
        {.name = "val-fraction", .type = OPT_DOUBLE, .def = "0.05", .offset = F(val_fraction), .arg = "F",
         .min = 0, .min_open = 1, .max = 0.5, .help = "held-out fraction of the tokens"},
        {.name = "split", .type = OPT_ARG, .def = "tail", .offset = F(split), .arg = "HOW", .choices = "tail|docs",
         .help = "validation = the last tokens (tail) or the last whole documents (docs)"},
        {.name = "doc-sep", .type = OPT_ARG, .offset = F(doc_sep_arg), .arg = "STR", .min = 1,
         .help = "a new document starts at every STR (escapes \\n \\t \\\\); default: each file is one document"},
        // Room for "/tokenizer.bin" and the writer's ".tmp.XXXXXX" within PATH_MAX.
        {.name = "out-dir", .type = OPT_ARG, .offset = F(out_dir), .arg = "DIR", .min = 1, .max = PATH_MAX - 33,
         .help = "output directory (default data/NAME, NAME = first file without its extension)"},
        {.name = "tokenizer", .type = OPT_ARG, .offset = F(tokenizer), .arg = "PATH", .min = 1,
         .help = "use this tokenizer (and its pre-tokenizer) instead of training one: a tokenizer.bin, a Hugging "
                 "Face tokenizer.json of a byte-level BPE, or a directory holding tokenizer.json or GPT-2's "
                 "encoder.json and vocab.bpe (docs/DATA.md)"},
        {.name = "pretokenizer", .type = OPT_ARG, .offset = F(pretok_arg), .arg = "RULE",
         .choices = "gpt2|byte-classes",
         .help = "the pre-split rule of the tokenizer trained: gpt2 (GPT-2's regex, as llama.cpp; the default) "
                 "or byte-classes (the rule of the tokenizer files of version 1; docs/DATA.md)"},
        {.name = "block-size", .type = OPT_INT, .offset = F(block_size), .arg = "T", .min = 1, .max = 1 << 20,
         .help = "fail unless both splits hold one window of T+1 tokens"},
        {.name = "overwrite", .type = OPT_FLAG, .offset = F(overwrite),
         .help = "replace the three files if OUT already holds them"},
        {.name = "record", .type = OPT_ARG, .offset = F(record_path), .arg = "FILE", .min = 1,
         .help = "make the data of a data record (a run's RUN/data.txt, a study's) from its recipe into OUT "
                 "(default: the directory it names), checked against its checksums; nothing to do if OUT "
                 "holds it already, and OUT is left alone if it holds other data (docs/DATA.md)"},
    };
#undef F
    static const CliSpec spec = {
        .prog = "prepare",
        .usage = "usage: ./prepare [options] FILE [FILE...]\n"
                 "Trains a byte-level BPE tokenizer on UTF-8 text file(s), encodes them and writes\n"
                 "OUT/tokenizer.bin, OUT/train.bin and OUT/val.bin (llm.c token files).\n"
                 "\n",
        CLI_FLAGS(flags),
        .positional = 1,
    };
    cli_parse_or_exit(&spec, argc, argv, o, o->inputs, &o->n_inputs);
    if (o->record_path && options_from_record(o, argc, argv) != 0) return -1;
    o->split_docs = strcmp(o->split, "docs") == 0;
    if (o->doc_sep_arg) {
        if (!(o->doc_sep = unescape(o->doc_sep_arg))) { fprintf(stderr, "prepare: out of memory\n"); return -1; }
        if (!*o->doc_sep) { fprintf(stderr, "prepare: --doc-sep: the separator is empty\n"); return -1; }
    }
    if (o->n_inputs == 0 && !o->record_path) {
        fprintf(stderr, "prepare: no input file (see ./prepare --help)\n");
        return -1;
    }
    o->pretok = BPE_PRETOK_DEFAULT;
    if (o->pretok_arg && pretok_from_name(o->pretok_arg, &o->pretok) != 0) {   // the table allows only the names
        fprintf(stderr, "prepare: --pretokenizer %s: expected gpt2 or byte-classes\n", o->pretok_arg);
        return -1;
    }
    if (o->tokenizer && o->pretok_arg) {
        fprintf(stderr, "prepare: --pretokenizer is for a tokenizer trained here; --tokenizer %s has its own\n",
                o->tokenizer);
        return -1;
    }
    if (!o->out_dir) {   // data/NAME from the first input (NAME at most 255 bytes, a file name)
        const char *base = strrchr(o->inputs[0], '/');
        base = base ? base + 1 : o->inputs[0];
        size_t len = strcspn(base, ".");
        if (len == 0) len = strlen(base);
        snprintf(o->out_dir_default, sizeof o->out_dir_default, "data/%.*s", (int)len, base);
        o->out_dir = o->out_dir_default;
    }
    return 0;
}

// The tokenizer given, as a data record names an input: its path, and the
// size and checksum of the files read for it (one, or GPT-2's two).
static int record_tokenizer(const Options *o, DataFile *f, char *err, size_t errlen) {
    const char *files[TOKENIZER_MAX_FILES];
    for (int i = 0; i < o->n_tokenizer_files; i++) files[i] = o->tokenizer_files[i];
    return data_files_record(f, o->tokenizer, files, o->n_tokenizer_files, err, errlen);
}

// ------------------------------------------------------------ input

// Offset of the first byte that breaks UTF-8 (or is NUL), or n if none.
static size_t utf8_check(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        int extra;
        uint32_t min;
        if (c == 0) return i;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { extra = 1; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { extra = 2; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { extra = 3; min = 0x10000; }
        else return i;
        if (i + extra >= n) return i;   // truncated sequence at the end
        uint32_t cp = c & (0x3F >> extra);
        for (int k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += extra + 1;
    }
    return n;
}

static uint8_t *read_text(const char *path, size_t *len) {
    long long size;
    char err[ERR_MAX];
    FILE *f = fopen_regular_file(path, &size, err, sizeof err);
    if (!f) { fprintf(stderr, "%s\n", err); return NULL; }
    if (size == 0) { fprintf(stderr, "%s: the file is empty\n", path); fclose(f); return NULL; }
    uint8_t *buf = malloc((size_t)size);
    if (!buf) { fprintf(stderr, "%s: out of memory for %lld bytes\n", path, size); fclose(f); return NULL; }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) { fprintf(stderr, "%s: read error\n", path); free(buf); return NULL; }
    size_t bad = utf8_check(buf, got);
    if (bad < got) {
        fprintf(stderr, "%s: not UTF-8 text (%s byte 0x%02x at offset %zu; binary file?)\n",
                path, buf[bad] == 0 ? "NUL" : "invalid", buf[bad], bad);
        free(buf);
        return NULL;
    }
    *len = got;
    return buf;
}

// Cuts text into documents at every occurrence of sep (dropped); empty ones
// are skipped. 0, or -1 when out of memory.
static int split_docs(const uint8_t *text, size_t n, const char *sep, Doc **docs, int *n_docs, int *cap) {
    size_t seplen = sep ? strlen(sep) : 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        int at_sep = seplen && i + seplen <= n && memcmp(text + i, sep, seplen) == 0;
        if (i == n || at_sep) {
            if (i > start) {
                if (*n_docs == *cap) {
                    int new_cap = *cap ? 2 * *cap : 64;
                    Doc *bigger = realloc(*docs, (size_t)new_cap * sizeof **docs);
                    if (!bigger) return -1;
                    *docs = bigger;
                    *cap = new_cap;
                }
                (*docs)[(*n_docs)++] = (Doc){text + start, i - start};
            }
            if (at_sep) { i += seplen - 1; start = i + 1; }
        }
    }
    return 0;
}

// ------------------------------------------------------------ progress

// bpe_train's progress callback: merges done of the vocabulary's, on the meter (common/meter.h).
static void on_merge(int done, int total, void *meter) {
    meter_update(meter, "training the tokenizer:", done, total, "merges");
}

// Step 0: OUT and the three output files can be written, before any work.
// 0, or the exit status: 1 for a directory that cannot be written (or out of
// memory), 2 for an output file refused (the command line's: exists without
// --overwrite, not a regular file, one of the inputs).
static int check_outputs(const Options *o, char *const paths[4]) {
    char err[ERR_MAX];
    if (fs_check_writable_dir(o->out_dir, err, sizeof err) != 0) { fprintf(stderr, "prepare: %s\n", err); return 1; }
    const char **inputs = malloc(((size_t)o->n_inputs + TOKENIZER_MAX_FILES) * sizeof *inputs);
    if (!inputs) { fprintf(stderr, "prepare: out of memory\n"); return 1; }
    memcpy(inputs, o->inputs, (size_t)o->n_inputs * sizeof *inputs);
    for (int i = 0; i < o->n_tokenizer_files; i++) inputs[o->n_inputs + i] = o->tokenizer_files[i];
    int rc = 0, n_inputs = o->n_inputs + o->n_tokenizer_files;
    for (int i = 0; i < 4 && rc == 0; i++)
        if (cli_check_output(paths[i], o->overwrite, inputs, n_inputs, err, sizeof err) != 0) {
            fprintf(stderr, "prepare: %s\n", err);
            rc = 2;
        }
    free(inputs);
    return rc;
}

// ------------------------------------------------------------ data records

// --record: whether OUT holds the record's data already. 0: it does not hold
// any of the three files (make them); 1: it holds exactly the record's
// (nothing to do); 2: it holds other data (left alone), with a message.
static int record_already_held(const Options *o, char *const paths[3]) {
    const DataRecord *r = &o->record;
    int present = 0;
    for (int i = 0; i < DATA_N_FILES; i++) present += access(paths[i], F_OK) == 0;
    if (present == 0) return 0;
    char err[ERR_MAX];
    DataRecord held = {0};
    for (int i = 0; i < DATA_N_FILES; i++) {
        if (present < DATA_N_FILES) {
            fprintf(stderr, "prepare: %s holds some of tokenizer.bin, train.bin and val.bin, not the data of %s; "
                    "it is left as it is: give another --out-dir\n", o->out_dir, o->record_path);
            return 2;
        }
        if (data_file_record(&held.files[i], paths[i], err, sizeof err) != 0) {
            fprintf(stderr, "prepare: %s\n", err);
            return 2;
        }
    }
    int differs = -1;
    if (r->files[DATA_TRAIN].known) {
        differs = data_record_first_difference(&held, r);
    } else {   // a recipe alone: OUT's own record must be of the same recipe, and of these files
        char path[PATH_MAX + 16];
        DataRecord own;
        snprintf(path, sizeof path, "%s/data.txt", o->out_dir);
        differs = DATA_TRAIN;
        if (data_record_read(&own, path, err, sizeof err) == 0) {
            if (data_record_same_recipe(&own, r)) differs = data_record_first_difference(&held, &own);
            data_record_free(&own);
        }
    }
    if (differs < 0) {
        printf("prepare: %s holds the data of %s; nothing to do\n", o->out_dir,
               o->record_path);
        return 1;
    }
    const DataFile *want = &r->files[differs], *got = &held.files[differs];
    if (want->known)
        fprintf(stderr, "prepare: %s holds other data than %s (%s: FNV-1a %016llx, recorded %016llx); it is left as "
                "it is: give another --out-dir\n", o->out_dir, o->record_path, DATA_FILE_NAMES[differs],
                (unsigned long long)got->fnv1a, (unsigned long long)want->fnv1a);
    else
        fprintf(stderr, "prepare: %s holds data made another way than the recipe of %s (its data.txt is missing "
                "or of another recipe); it is left as it is: give another --out-dir\n", o->out_dir, o->record_path);
    return 2;
}

// --record: the input texts (and a given tokenizer) must be the record's (size and checksum), before any work. 0, or -1 with a message.
static int record_check_inputs(const Options *o) {
    char err[ERR_MAX], cmd[2048];
    for (int i = -1; i < o->record.n_inputs; i++) {   // -1: the tokenizer the recipe encodes with, if any
        const DataFile *want = i < 0 ? &o->record.tokenizer_from : &o->record.inputs[i];
        if (!want->path[0]) continue;
        DataFile got;
        if (!want->known) continue;   // a recipe alone: whatever text is there
        if ((i < 0 ? record_tokenizer(o, &got, err, sizeof err) : data_file_record(&got, want->path, err, sizeof err))
            != 0) {
            fprintf(stderr, "%s (an input of the recipe of %s)\n", err, o->record_path);
            return -1;
        }
        if (got.bytes != want->bytes || got.fnv1a != want->fnv1a) {
            data_record_command(&o->record, o->out_dir, cmd, sizeof cmd);
            fprintf(stderr, "%s: %lld bytes, FNV-1a %016llx; the record %s was made from %lld bytes, FNV-1a %016llx: "
                    "another text, so `%s` cannot make its data\n", want->path, got.bytes,
                    (unsigned long long)got.fnv1a, o->record_path, want->bytes, (unsigned long long)want->fnv1a, cmd);
            return -1;
        }
    }
    return 0;
}

// OUT/data.txt for the files just written: their checksums and the recipe
// that made them. With --record they must be the record's; if they are not,
// the four files are removed. 0, or -1 with a message.
static int write_data_record(const Options *o, const Tokenizer *tok, char *const paths[4]) {
    char err[ERR_MAX];
    DataRecord r = {0};
    r.has_recipe = 1;
    r.vocab_size = o->vocab_size;   // as asked: a corpus that runs out of pairs makes fewer, the same again
    r.val_fraction = o->val_fraction;
    snprintf(r.split, sizeof r.split, "%s", o->split);
    if (o->doc_sep_arg) snprintf(r.doc_sep, sizeof r.doc_sep, "%s", o->doc_sep_arg);
    r.n_inputs = o->n_inputs;
    r.inputs = calloc((size_t)o->n_inputs, sizeof *r.inputs);
    int rc = r.inputs ? 0 : -1;
    if (rc != 0) snprintf(err, sizeof err, "prepare: out of memory");
    if (o->tokenizer) rc = rc ? rc : record_tokenizer(o, &r.tokenizer_from, err, sizeof err);
    else snprintf(r.pretokenizer, sizeof r.pretokenizer, "%s", pretok_name(tok->pretok));
    for (int i = 0; rc == 0 && i < o->n_inputs; i++) rc = data_file_record(&r.inputs[i], o->inputs[i], err, sizeof err);
    for (int i = 0; rc == 0 && i < DATA_N_FILES; i++) rc = data_file_record(&r.files[i], paths[i], err, sizeof err);
    int differs = rc == 0 && o->record_path && o->record.files[DATA_TRAIN].known
                      ? data_record_first_difference(&r, &o->record) : -1;
    if (rc == 0 && differs >= 0) {
        char cmd[2048];
        data_record_command(&o->record, o->out_dir, cmd, sizeof cmd);
        snprintf(err, sizeof err, "prepare: `%s` made %s with FNV-1a %016llx here, the record %s says %016llx: this "
                 "./prepare does not make the recorded data; the files made are removed", cmd, DATA_FILE_NAMES[differs],
                 (unsigned long long)r.files[differs].fnv1a, o->record_path,
                 (unsigned long long)o->record.files[differs].fnv1a);
        rc = -1;
    }
    if (rc == 0) rc = data_record_write(&r, paths[3], o->overwrite ? ATOMIC_REPLACE : ATOMIC_NEW, err, sizeof err);
    data_record_free(&r);
    if (rc == 0) return 0;
    for (int i = 0; i < 4; i++) unlink(paths[i]);
    fprintf(stderr, "%s\n", err);
    return -1;
}

// ------------------------------------------------------------ main

int main(int argc, char **argv) {
    cli_start();
    Options o;
    if (parse_options(argc, argv, &o) != 0) { free_options(&o); return 2; }
    double t_start = clock_seconds();
    int rc = 1, tok_loaded = 0;
    Doc *docs = NULL;
    int n_docs = 0, cap_docs = 0;
    size_t total_bytes = 0;
    uint8_t **texts = calloc((size_t)o.n_inputs, sizeof *texts);
    uint32_t *ids = NULL;
    const uint8_t **ptrs = NULL;
    size_t *lens = NULL;
    char *path_tok = NULL, *path_train = NULL, *path_val = NULL, *path_record = NULL, err[ERR_MAX];
    Tokenizer tok;
    Meter meter;   // progress of the merges and the encoding on stderr (common/meter.h), as the other programs'
    meter_start(&meter, "prepare");
    size_t dir_len = strlen(o.out_dir) + 32;
    path_tok = malloc(dir_len);
    path_train = malloc(dir_len);
    path_val = malloc(dir_len);
    path_record = malloc(dir_len);
    if (!texts || !path_tok || !path_train || !path_val || !path_record) { fprintf(stderr, "prepare: out of memory\n"); goto done; }
    snprintf(path_tok, dir_len, "%s/tokenizer.bin", o.out_dir);
    snprintf(path_train, dir_len, "%s/train.bin", o.out_dir);
    snprintf(path_val, dir_len, "%s/val.bin", o.out_dir);
    snprintf(path_record, dir_len, "%s/data.txt", o.out_dir);
    char *paths[4] = {path_tok, path_train, path_val, path_record};
    if (o.record_path) {
        int held = record_already_held(&o, paths);
        if (held != 0) { rc = held == 1 ? 0 : 2; goto done; }
        if (!o.record.has_recipe) {
            fprintf(stderr, "%s: records no recipe (its files were not made by ./prepare, or by one older than data "
                    "records), and %s does not hold them: its data cannot be made again\n", o.record_path, o.out_dir);
            goto done;
        }
    }
    if (o.tokenizer) {   // the files it names, checked as inputs and recorded
        o.n_tokenizer_files = tokenizer_files(o.tokenizer, o.tokenizer_files, err, sizeof err);
        if (o.n_tokenizer_files < 0) { fprintf(stderr, "%s\n", err); goto done; }
    }
    if (o.record_path && record_check_inputs(&o) != 0) goto done;
    int checked = check_outputs(&o, paths);
    if (checked != 0) { rc = checked; goto done; }

    // 1. Read and cut into documents.
    for (int i = 0; i < o.n_inputs; i++) {
        size_t len;
        texts[i] = read_text(o.inputs[i], &len);
        if (!texts[i]) goto done;
        total_bytes += len;
        if (split_docs(texts[i], len, o.doc_sep, &docs, &n_docs, &cap_docs) != 0) {
            fprintf(stderr, "%s: out of memory for the document list\n", o.inputs[i]);
            goto done;
        }
    }
    if (n_docs == 0) {
        fprintf(stderr, "%s: no text left once the document separators are removed\n", o.inputs[0]);
        goto done;
    }

    // 2. Tokenizer.
    double t0 = clock_seconds();
    if (o.tokenizer) {
        if (tokenizer_read(&tok, o.tokenizer, err, sizeof err)) { fprintf(stderr, "%s\n", err); goto done; }
    } else {
        ptrs = malloc((size_t)n_docs * sizeof *ptrs);
        lens = malloc((size_t)n_docs * sizeof *lens);
        if (!ptrs || !lens) { fprintf(stderr, "prepare: out of memory\n"); goto done; }
        for (int d = 0; d < n_docs; d++) { ptrs[d] = docs[d].bytes; lens[d] = docs[d].len; }
        meter_phase(&meter, 1, 0);
        int trained = bpe_train_multi(&tok, o.pretok, ptrs, lens, n_docs, o.vocab_size, on_merge, &meter, err,
                                      sizeof err);
        meter_clear(&meter);
        if (trained != 0) {
            fprintf(stderr, "%s: %s\n", o.inputs[0], err);
            goto done;
        }
        if (tok.vocab_size < o.vocab_size)
            fprintf(stderr, "note: the corpus ran out of pairs after %d merges; the vocabulary is %d, not %d\n",
                    tok.n_merges, tok.vocab_size, o.vocab_size);
    }
    tok_loaded = 1;
    double t_train = clock_seconds() - t0;

    // 3. Encode, eot before every document, in chunks of about 1 MB cut where the rule allows (pretok_chunk_end).
    t0 = clock_seconds();
    ids = malloc((total_bytes + (size_t)n_docs) * sizeof *ids);
    if (!ids) { fprintf(stderr, "%s: out of memory for %zu tokens\n", o.inputs[0], total_bytes + n_docs); goto done; }
    size_t n_ids = 0, n_eot = 0, done_bytes = 0;
    const size_t chunk = 1 << 20;
    meter_phase(&meter, 1, 0);
    for (int d = 0; d < n_docs; d++) {
        ids[n_ids++] = tok.eot_id;
        n_eot++;
        const uint8_t *s = docs[d].bytes;
        size_t n = docs[d].len;
        for (size_t start = 0; start < n;) {
            size_t end = pretok_chunk_end(tok.pretok, s, n, start, chunk);
            n_ids += bpe_encode(&tok, s + start, end - start, ids + n_ids);
            done_bytes += end - start;
            start = end;
            meter_update(&meter, "encoding:", (long long)done_bytes, (long long)total_bytes, "bytes");
        }
    }
    meter_clear(&meter);
    double t_encode = clock_seconds() - t0;

    // 4. Split.
    size_t n_val = (size_t)llround(o.val_fraction * n_ids), split = n_ids - n_val;
    if (o.split_docs) {
        while (split > 0 && ids[split] != (uint32_t)tok.eot_id) split--;   // back to a document start
        if (split == 0) {
            fprintf(stderr, "%s: --split docs needs at least two documents before the last %.1f%% of the tokens "
                    "(use --doc-sep or --split tail)\n", o.inputs[0], 100 * o.val_fraction);
            goto done;
        }
        n_val = n_ids - split;
    }
    size_t min_split = o.block_size > 0 ? (size_t)o.block_size + 1 : 2;
    if (split < min_split || n_val < min_split) {
        fprintf(stderr, "%s: corpus too short: %zu tokens give %zu train and %zu validation tokens, "
                "need at least %zu in each (one window)\n", o.inputs[0], n_ids, split, n_val, min_split);
        goto done;
    }
    // 5. Write, only now that every check has passed. OUT always holds the
    // tokenizer of its token files (a copy when one was given).
    // Each file is written atomically, but the three are one set: when one
    // fails (a full disk) after another was written, that one would pair a
    // new tokenizer with old or missing token files, so the whole set is
    // removed. A failure of the first leaves OUT as it was.
    if (make_dirs(o.out_dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        goto done;
    }
    AtomicMode mode = o.overwrite ? ATOMIC_REPLACE : ATOMIC_NEW;
    uint64_t checksum = bpe_checksum(&tok);   // the token files name their tokenizer
    int failed = bpe_save(&tok, path_tok, mode, err, sizeof err) != 0, tok_written = !failed;
    if (!failed) failed = tokens_write(path_train, ids, split, tok.vocab_size, checksum, mode, err, sizeof err) != 0;
    if (!failed)
        failed = tokens_write(path_val, ids + split, n_val, tok.vocab_size, checksum, mode, err, sizeof err) != 0;
    if (failed && !tok_written) {
        fprintf(stderr, "%s\n", err);
        goto done;
    }
    if (failed) {
        for (int i = 0; i < 3; i++) unlink(paths[i]);
        fprintf(stderr, "%s (tokenizer.bin, train.bin and val.bin removed from %s: they are written as one set)\n",
                err, o.out_dir);
        goto done;
    }
    if (write_data_record(&o, &tok, paths) != 0) goto done;   // removes the set when it cannot be recorded
    size_t text_tokens = n_ids - n_eot;
    printf("prepare: %d file%s, %d document%s -> %s/\n", o.n_inputs, o.n_inputs > 1 ? "s" : "",
           n_docs, n_docs > 1 ? "s" : "", o.out_dir);
    printf("  corpus      %zu bytes\n", total_bytes);
    printf("  tokenizer   %s: vocab %d (%d merges, eot %d), pre-tokenizer %s, %s in %.2f s\n",
           o.tokenizer ? o.tokenizer : path_tok, tok.vocab_size, tok.n_merges, tok.eot_id, pretok_name(tok.pretok),
           o.tokenizer ? "loaded" : "trained", t_train);
    printf("  tokens      %zu (%zu text + %zu eot), %.3f bytes per token, encoded in %.2f s (%.1f MB/s)\n",
           n_ids, text_tokens, n_eot, text_tokens ? (double)total_bytes / text_tokens : 0.0, t_encode,
           t_encode > 0 ? total_bytes / t_encode / 1e6 : 0.0);
    printf("  train       %s: %zu tokens\n", path_train, split);
    printf("  val         %s: %zu tokens (%.1f%%, %s)\n", path_val, n_val, 100.0 * n_val / n_ids,
           o.split_docs ? "whole documents" : "tail");
    printf("  time        %.2f s\n", clock_seconds() - t_start);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    if (tok_loaded) bpe_free(&tok);
    free(ids); free(docs); free(ptrs); free(lens);
    free(path_tok); free(path_train); free(path_val); free(path_record);
    for (int i = 0; texts && i < o.n_inputs; i++) free(texts[i]);
    free(texts);
    free_options(&o);
    return rc;
}
