// test_data_prepare.c: ./prepare end to end on a corpus the test writes
// itself, and its bad-input errors and exit codes. Runs from the repo root;
// `make test` builds ./prepare first.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/rng.h"
#include "data/bpe.h"
#include "data/tokens.h"

#define DIR "build/test_prepare"
#define N_DOCS 5
static char err[1024];
static char *docs[N_DOCS];   // the documents the corpus is made of

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    size_t len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(len + 1);
    assert_int_equal(fread(b, 1, len, f), len);
    b[len] = 0;
    fclose(f);
    if (n) *n = len;
    return b;
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

// Shell commands run before ./prepare (a resource limit), "" for none.
static char shell_prefix[256];

// Runs ./prepare ARGS; returns its exit status, stderr in *errtext.
static int run_prepare(const char *args, char **errtext) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s./prepare %s >" DIR "/stdout.txt 2>" DIR "/stderr.txt", shell_prefix, args);
    int status = system(cmd);
    *errtext = read_file(DIR "/stderr.txt", NULL);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

// Expects failure with exactly one error line (progress lines aside) that contains want.
static void expect_failure(const char *args, const char *want) {
    char *e;
    int rc = run_prepare(args, &e);
    int error_lines = 0, found = 0;
    for (char *line = strtok(e, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "prepare: training the tokenizer: ", 33) || !strncmp(line, "prepare: encoding: ", 19) ||
            !strncmp(line, "note:", 5))
            continue;   // progress (common/meter.h) and notes are not errors
        error_lines++;
        found |= strstr(line, want) != NULL;
    }
    if (rc == 0 || error_lines != 1 || !found) {
        print_error("./prepare %s: exit %d, %d error lines, want one with \"%s\"; stderr:\n%s\n",
                    args, rc, error_lines, want, e);
        fail();
    }
    free(e);
}

static int setup(void **state) {
    mkdir("build", 0755);
    if (system("rm -rf " DIR) != 0) return -1;
    mkdir(DIR, 0755);
    // Pseudo-English documents, joined with the separator line "===".
    const char *words[] = {"the", "LORD", "and", "said", "unto", "him", "of", "Israel", "in",
                           "that", "day", "king", "house", "land", "caf\xc3\xa9", "42", "Moses"};
    Rng r;
    rng_seed(&r, 17);
    FILE *f = fopen(DIR "/corpus.txt", "wb");
    for (int d = 0; d < N_DOCS; d++) {
        size_t cap = 20000, n = 0;
        docs[d] = malloc(cap);
        for (int line = 0; n < 8000; line++) {
            n += snprintf(docs[d] + n, cap - n, "%d:%d", d + 1, line + 1);
            int len = 5 + (int)rng_below(&r, 12);
            for (int k = 0; k < len; k++) {
                if (rng_below(&r, 3)) {
                    n += snprintf(docs[d] + n, cap - n, " %s", words[rng_below(&r, 17)]);
                } else {   // a made-up name of 2 to 4 syllables: many distinct words
                    const char *syl[] = {"ab", "el", "iah", "ner", "zar", "ith", "ma", "ku", "on", "dri"};
                    n += snprintf(docs[d] + n, cap - n, " ");
                    for (int q = 2 + (int)rng_below(&r, 3); q > 0; q--)
                        n += snprintf(docs[d] + n, cap - n, "%s", syl[rng_below(&r, 10)]);
                }
                if (rng_below(&r, 8) == 0) n += snprintf(docs[d] + n, cap - n, ",");
            }
            n += snprintf(docs[d] + n, cap - n, ".\n");
        }
        fputs(docs[d], f);
        if (d + 1 < N_DOCS) fputs("===\n", f);
    }
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    for (int d = 0; d < N_DOCS; d++) free(docs[d]);
    return 0;
}

// Decodes a token file; checks ids; appends to out (eot as the byte '\x01').
static size_t decode_file(const char *path, const Tokenizer *tok, char *out) {
    TokenFile tf;
    int rc = tokens_open(&tf, path, tok->vocab_size, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
    size_t n = 0;
    for (size_t i = 0; i < tf.n_tokens; i++) {
        uint32_t id = tokens_get(&tf, i);
        if (id == (uint32_t)tok->eot_id) { out[n++] = '\x01'; continue; }
        n += bpe_decode(tok, &id, 1, (uint8_t *)out + n, 64);
    }
    tokens_close(&tf);
    return n;
}

static void test_prepare_end_to_end(void **state) {
    char *e;
    int rc = run_prepare("--vocab-size 600 --val-fraction 0.1 --doc-sep '===\\n' --out-dir " DIR "/out "
                         DIR "/corpus.txt", &e);
    if (rc) print_error("%s\n", e);
    assert_int_equal(rc, 0);
    free(e);
    char *summary = read_file(DIR "/stdout.txt", NULL);
    assert_non_null(strstr(summary, "bytes per token"));
    assert_non_null(strstr(summary, "5 documents"));
    assert_non_null(strstr(summary, "vocab 600"));
    free(summary);

    Tokenizer tok;
    assert_int_equal(bpe_load(&tok, DIR "/out/tokenizer.bin", err, sizeof err), 0);
    assert_int_equal(tok.vocab_size, 600);
    // train + val decode to eot + doc for every document, in order.
    size_t corpus_len;
    free(read_file(DIR "/corpus.txt", &corpus_len));
    char *stream = malloc(2 * corpus_len), *want = malloc(2 * corpus_len);
    size_t n_train = decode_file(DIR "/out/train.bin", &tok, stream);
    size_t n = n_train + decode_file(DIR "/out/val.bin", &tok, stream + n_train);
    size_t nw = 0;
    for (int d = 0; d < N_DOCS; d++) {
        want[nw++] = '\x01';
        memcpy(want + nw, docs[d], strlen(docs[d]));
        nw += strlen(docs[d]);
    }
    assert_int_equal(n, nw);
    assert_memory_equal(stream, want, n);
    // The validation split is the last 10% of the tokens.
    TokenFile tr, va;
    assert_int_equal(tokens_open(&tr, DIR "/out/train.bin", 600, err, sizeof err), 0);
    assert_int_equal(tokens_open(&va, DIR "/out/val.bin", 600, err, sizeof err), 0);
    double total = tr.n_tokens + va.n_tokens;
    assert_true(llabs((long long)va.n_tokens - (long long)(0.1 * total + 0.5)) <= 1);
    // Both name the tokenizer they were made with (its checksum, never 0 here).
    assert_true(bpe_checksum(&tok) != 0);
    assert_true(tr.tokenizer_checksum == bpe_checksum(&tok));
    assert_true(va.tokenizer_checksum == bpe_checksum(&tok));
    // Compression: well over one byte per token on this repetitive text.
    assert_true(corpus_len / (total - N_DOCS) > 2.0);
    tokens_close(&tr); tokens_close(&va);
    free(stream); free(want);
    bpe_free(&tok);
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *fa = read_file(a, &na), *fb = read_file(b, &nb);
    int same = fa && fb && na == nb && memcmp(fa, fb, na) == 0;
    free(fa); free(fb);
    return same;
}

static void test_prepare_deterministic_and_reuse(void **state) {
    char *e;
    assert_int_equal(run_prepare("--vocab-size 500 --out-dir " DIR "/d1 " DIR "/corpus.txt", &e), 0); free(e);
    assert_int_equal(run_prepare("--vocab-size 500 --out-dir " DIR "/d2 " DIR "/corpus.txt", &e), 0); free(e);
    assert_true(same_file(DIR "/d1/tokenizer.bin", DIR "/d2/tokenizer.bin"));
    assert_true(same_file(DIR "/d1/train.bin", DIR "/d2/train.bin"));
    assert_true(same_file(DIR "/d1/val.bin", DIR "/d2/val.bin"));
    // An existing tokenizer gives the same token files, and is copied to OUT.
    assert_int_equal(run_prepare("--tokenizer " DIR "/d1/tokenizer.bin --out-dir " DIR "/d3 " DIR "/corpus.txt", &e), 0);
    free(e);
    assert_true(same_file(DIR "/d1/train.bin", DIR "/d3/train.bin"));
    assert_true(same_file(DIR "/d1/tokenizer.bin", DIR "/d3/tokenizer.bin"));
}

// --pretokenizer: the rule is recorded in tokenizer.bin (GPT-2's, the default,
// as version 2; byte-classes as version 1) and the token files are the whole
// text encoded by it. The text is over 1 MB, so ./prepare encodes it in two
// chunks, and is laid out so that its first 1 MB ends after the second of
// two newlines before a word: a cut there would make "\n\n" one piece where
// the whole text has "\n" "\n" (pretok_chunk_end does not cut there).
static void test_prepare_pretokenizer(void **state) {
    (void)state;
    const size_t MB = 1 << 20;
    static const char tail[] = "\n\nExodus 1\n\nLORD's 'tis we'll caf\xc3\xa9 x\xc2\xb2  \n";
    size_t n = MB + 40000;
    char *text = malloc(n + 1);
    assert_non_null(text);
    // the filler's "\n\n\n" before a word is "\n\n" "\n": a merge of two newlines is learned
    for (size_t i = 0; i < n; i++) text[i] = "And the king said unto him.\n\n\n"[i % 30];
    text[MB - 3] = '.';   // "." then "\n" "\n": the second newline's piece ends at 1 MB
    memcpy(text + MB - 2, tail, sizeof tail - 1);
    text[n] = 0;
    write_file(DIR "/pre.txt", text, n);
    char *e;
    for (int k = 0; k < 2; k++) {
        const char *args = k ? "--vocab-size 400 --val-fraction 0.1 --pretokenizer byte-classes --out-dir " DIR "/pre_b "
                                DIR "/pre.txt"
                             : "--vocab-size 400 --val-fraction 0.1 --out-dir " DIR "/pre_g " DIR "/pre.txt";
        const char *out_dir = k ? DIR "/pre_b" : DIR "/pre_g";
        int rc = run_prepare(args, &e);
        if (rc) print_error("%s\n", e);
        assert_int_equal(rc, 0);
        free(e);
        char path[256], *summary = read_file(DIR "/stdout.txt", NULL);
        assert_non_null(strstr(summary, k ? "pre-tokenizer byte-classes" : "pre-tokenizer gpt2"));
        free(summary);
        snprintf(path, sizeof path, "%s/tokenizer.bin", out_dir);
        size_t len;
        char *file = read_file(path, &len);
        assert_int_equal(file[8], k ? 1 : 2);   // the version
        Tokenizer tok;
        assert_int_equal(bpe_load(&tok, path, err, sizeof err), 0);
        assert_int_equal(len, (k ? 24 : 28) + 8 * (size_t)tok.n_merges);
        assert_int_equal(tok.pretok, k ? BPE_PRETOK_BYTE_CLASSES : BPE_PRETOK_GPT2);
        free(file);
        // eot, then the text encoded whole: train.bin then val.bin
        uint32_t *want = malloc((n + 1) * sizeof *want);
        assert_non_null(want);
        want[0] = (uint32_t)tok.eot_id;
        size_t n_want = 1 + bpe_encode(&tok, (const uint8_t *)text, n, want + 1), at = 0;
        for (int split = 0; split < 2; split++) {
            TokenFile tf;
            snprintf(path, sizeof path, "%s/%s", out_dir, split ? "val.bin" : "train.bin");
            assert_int_equal(tokens_open(&tf, path, tok.vocab_size, err, sizeof err), 0);
            for (size_t i = 0; i < tf.n_tokens; i++, at++) {
                assert_true(at < n_want);
                if (tokens_get(&tf, i) != want[at])
                    fail_msg("%s: token %zu is %u, the whole text encoded gives %u", out_dir, at, tokens_get(&tf, i),
                             want[at]);
            }
            tokens_close(&tf);
        }
        assert_int_equal(at, n_want);
        free(want);
        bpe_free(&tok);
    }
    free(text);
    expect_failure("--pretokenizer gpt-2 " DIR "/corpus.txt", "--pretokenizer: 'gpt-2' is not one of gpt2|byte-classes");
    expect_failure("--pretokenizer gpt2 --tokenizer " DIR "/pre_b/tokenizer.bin --out-dir " DIR "/pre_t " DIR "/pre.txt",
                   "--pretokenizer is for a tokenizer trained here; --tokenizer " DIR "/pre_b/tokenizer.bin has its own");
}

static void test_prepare_split_docs(void **state) {
    char *e;
    int rc = run_prepare("--vocab-size 400 --val-fraction 0.3 --split docs --doc-sep '===\\n' --out-dir "
                         DIR "/docs " DIR "/corpus.txt", &e);
    if (rc) print_error("%s\n", e);
    assert_int_equal(rc, 0);
    free(e);
    Tokenizer tok;
    assert_int_equal(bpe_load(&tok, DIR "/docs/tokenizer.bin", err, sizeof err), 0);
    // Validation = whole documents: it starts with eot and holds the last two
    // documents (30% of five equal documents reaches back into the fourth).
    char *val = malloc(100000);
    size_t n = decode_file(DIR "/docs/val.bin", &tok, val);
    size_t want = 2 + strlen(docs[3]) + strlen(docs[4]);
    assert_int_equal(n, want);
    assert_int_equal(val[0], '\x01');
    assert_memory_equal(val + 1, docs[3], strlen(docs[3]));
    free(val);
    bpe_free(&tok);
}

static void test_prepare_bad_inputs(void **state) {
    write_file(DIR "/empty.txt", "", 0);
    write_file(DIR "/nul.txt", "text\0more", 9);
    write_file(DIR "/latin1.txt", "caf\xe9 au lait", 12);
    write_file(DIR "/tiny.txt", "hi", 2);
    expect_failure(DIR "/missing.txt", DIR "/missing.txt: No such file or directory");
    expect_failure(DIR "/empty.txt", DIR "/empty.txt: the file is empty");
    expect_failure(DIR "/nul.txt", DIR "/nul.txt: not UTF-8 text (NUL byte 0x00 at offset 4");
    expect_failure(DIR "/latin1.txt", DIR "/latin1.txt: not UTF-8 text (invalid byte 0xe9 at offset 3");
    expect_failure("--vocab-size 256 " DIR "/corpus.txt", "prepare: --vocab-size: 256 is out of range [257, 65536]");
    expect_failure("--vocab-size 70000 " DIR "/corpus.txt", "prepare: --vocab-size: 70000 is out of range");
    expect_failure("--vocab-size 300 --out-dir " DIR "/tiny " DIR "/tiny.txt", DIR "/tiny.txt: corpus too short");
    expect_failure("--vocab-size 300 --block-size 100000 --out-dir " DIR "/big " DIR "/corpus.txt",
                   "need at least 100001 in each");
    expect_failure("--tokenizer " DIR "/corpus.txt --out-dir " DIR "/bad " DIR "/corpus.txt",
                   DIR "/corpus.txt: bad magic");
    expect_failure("--split docs --out-dir " DIR "/one " DIR "/corpus.txt", "--split docs needs at least two documents");
    expect_failure("--val-fraction 0.9 " DIR "/corpus.txt", "prepare: --val-fraction: 0.9 is out of range (0, 0.5]");
    expect_failure("--frobnicate 1 " DIR "/corpus.txt", "prepare: unknown option '--frobnicate' (see ./prepare --help)");
    expect_failure(DIR "/corpus.txt --frobnicate", "prepare: unknown option '--frobnicate' (see ./prepare --help)");
    expect_failure(DIR "/corpus.txt --out-dir", "prepare: option '--out-dir' needs a value");
    expect_failure("", "no input file");
    // A failed run leaves nothing behind.
    struct stat st;
    assert_int_not_equal(stat(DIR "/tiny", &st), 0);
    assert_int_not_equal(stat(DIR "/bad", &st), 0);
}

// A disk that fills while the three files are written (simulated with a
// file-size limit: ./prepare ignores SIGXFSZ, so writes past it fail with
// EFBIG, as ENOSPC would): one error line, and no file of the set is left,
// not even the first written.
static void test_prepare_full_disk_leaves_no_partial_set(void **state) {
    char *e;
    assert_int_equal(run_prepare("--vocab-size 300 --out-dir " DIR "/fullref " DIR "/corpus.txt", &e), 0);
    free(e);
    struct stat tok_st, train_st, st;
    assert_int_equal(stat(DIR "/fullref/tokenizer.bin", &tok_st), 0);
    assert_int_equal(stat(DIR "/fullref/train.bin", &train_st), 0);
    // /bin/sh's ulimit -f counts 512-byte blocks: room for tokenizer.bin, not for train.bin.
    long blocks = (long)(tok_st.st_size + 511) / 512;
    if ((long long)blocks * 512 >= (long long)train_st.st_size)
        fail_msg("the test corpus is too small: train.bin (%lld bytes) must exceed %ld blocks",
                 (long long)train_st.st_size, blocks);
    snprintf(shell_prefix, sizeof shell_prefix, "ulimit -f %ld; ", blocks);
    expect_failure("--vocab-size 300 --out-dir " DIR "/full " DIR "/corpus.txt",
                   "write failed: File too large (tokenizer.bin, train.bin and val.bin removed");
    shell_prefix[0] = 0;
    assert_int_not_equal(stat(DIR "/full/tokenizer.bin", &st), 0);
    assert_int_not_equal(stat(DIR "/full/train.bin", &st), 0);
    assert_int_not_equal(stat(DIR "/full/val.bin", &st), 0);
}

// Refused before any work: exit status code and stderr exactly one line
// holding want (no progress of the merges or the encoding before it).
static void expect_refused_first(const char *args, int code, const char *want) {
    char *e;
    int rc = run_prepare(args, &e);
    size_t n = strlen(e);
    if (rc != code || !strstr(e, want) || n == 0 || strchr(e, '\n') != e + n - 1) {
        print_error("./prepare %s: exit %d, want %d and the one line \"%s\" before any work; stderr:\n%s\n",
                    args, rc, code, want, e);
        fail();
    }
    free(e);
}

// An OUT that holds the three files: refused without --overwrite (before
// the work, the files as they were), replaced with it; never onto an input
// (the --tokenizer given, or a corpus file) even with --overwrite; a FIFO in
// OUT never replaced.
static void test_prepare_output_files(void **state) {
    char *e;
    shell_prefix[0] = 0;
    assert_int_equal(run_prepare("--vocab-size 300 --out-dir " DIR "/ow " DIR "/corpus.txt", &e), 0);
    free(e);
    assert_int_equal(system("cp " DIR "/ow/train.bin " DIR "/train.copy"), 0);
    expect_refused_first("--vocab-size 400 --out-dir " DIR "/ow " DIR "/corpus.txt", 2,
                         "prepare: " DIR "/ow/tokenizer.bin: exists; pass --overwrite to replace it");
    assert_true(same_file(DIR "/ow/train.bin", DIR "/train.copy"));
    expect_refused_first("--tokenizer " DIR "/ow/tokenizer.bin --overwrite --out-dir " DIR "/ow " DIR "/corpus.txt", 2,
                         DIR "/ow/tokenizer.bin: the same file as the input " DIR "/ow/tokenizer.bin");
    assert_int_equal(system("cp " DIR "/corpus.txt " DIR "/ow/val.bin"), 0);   // a corpus where val.bin goes
    expect_refused_first("--overwrite --out-dir " DIR "/ow " DIR "/ow/val.bin", 2,
                         DIR "/ow/val.bin: the same file as the input " DIR "/ow/val.bin");
    assert_int_equal(run_prepare("--vocab-size 400 --overwrite --out-dir " DIR "/ow " DIR "/corpus.txt", &e), 0);
    free(e);
    Tokenizer tok;
    assert_int_equal(bpe_load(&tok, DIR "/ow/tokenizer.bin", err, sizeof err), 0);
    assert_int_equal(tok.vocab_size, 400);
    bpe_free(&tok);
    assert_int_equal(system("mkdir -p " DIR "/fifo && mkfifo " DIR "/fifo/val.bin"), 0);
    expect_refused_first("--overwrite --out-dir " DIR "/fifo " DIR "/corpus.txt", 2,
                         DIR "/fifo/val.bin: exists and is not a regular file (a FIFO)");
    struct stat st;
    assert_int_equal(stat(DIR "/fifo/val.bin", &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_not_equal(stat(DIR "/fifo/tokenizer.bin", &st), 0);
}

// An OUT that cannot be made or written is found before the BPE work (exit
// 1): under a regular file, or in a directory without write permission (as
// root, whom permissions do not stop, ./prepare runs as nobody for that).
static void test_prepare_unwritable_out_dir_first(void **state) {
    shell_prefix[0] = 0;
    expect_refused_first("--out-dir " DIR "/corpus.txt/sub " DIR "/corpus.txt", 1,
                         "prepare: " DIR "/corpus.txt/sub: Not a directory");
    write_file(DIR "/plain", "x", 1);
    expect_refused_first("--out-dir " DIR "/plain " DIR "/corpus.txt", 1, "prepare: " DIR "/plain: not a directory");
    assert_int_equal(system("rm -rf " DIR "/ro && mkdir -m 555 " DIR "/ro"), 0);
    if (geteuid() == 0)
        snprintf(shell_prefix, sizeof shell_prefix, "setpriv --reuid=65534 --regid=65534 --clear-groups ");
    expect_refused_first("--out-dir " DIR "/ro/a/b " DIR "/corpus.txt", 1,
                         "prepare: " DIR "/ro/a/b: cannot create directory: cannot write in " DIR "/ro: Permission denied");
    expect_refused_first("--out-dir " DIR "/ro " DIR "/corpus.txt", 1,
                         "prepare: " DIR "/ro: cannot write in this directory: Permission denied");
    shell_prefix[0] = 0;
    struct stat st;
    assert_int_not_equal(stat(DIR "/ro/a", &st), 0);
}

// Every numeric flag by numtext.h's rule, whole and range-checked, and
// --split by its choices: one line naming the flag, exit 2, before any work.
// --help lists every flag (printed from the table), exit 0.
static void test_prepare_strict_numbers(void **state) {
    static const struct { const char *args, *want; } cases[] = {
        {"--vocab-size 4096.0", "prepare: --vocab-size: '4096.0' is not an integer"},
        {"--vocab-size 1e3", "prepare: --vocab-size: '1e3' is not an integer"},
        {"--vocab-size 12abc", "prepare: --vocab-size: '12abc' is not an integer"},
        {"--vocab-size ' 300'", "prepare: --vocab-size: ' 300' is not an integer"},
        {"--block-size -1", "prepare: --block-size: -1 is out of range [1, 1048576]"},
        {"--block-size +5", "prepare: --block-size: '+5' is not an integer"},
        {"--val-fraction .05", "prepare: --val-fraction: '.05' is not a number"},
        {"--val-fraction nan", "prepare: --val-fraction: 'nan' is not a number"},
        {"--val-fraction 0", "prepare: --val-fraction: 0 is out of range (0, 0.5]"},
        {"--val-fraction 0.5000001", "prepare: --val-fraction: 0.5000001 is out of range (0, 0.5]"},
        {"--split docs2", "prepare: --split: 'docs2' is not one of tail|docs"},
        {"--vocab-size", "prepare: option '--vocab-size' needs a value (see ./prepare --help)"},
        {"--overwrite=1", "prepare: option '--overwrite' takes no value (see ./prepare --help)"},
    };
    char args[512];
    shell_prefix[0] = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "--out-dir " DIR "/strict " DIR "/corpus.txt %s", cases[i].args);
        expect_refused_first(args, 2, cases[i].want);
    }
    struct stat st;
    assert_int_not_equal(stat(DIR "/strict", &st), 0);
    char *e;
    assert_int_equal(run_prepare("--help", &e), 0);
    free(e);
    char *help = read_file(DIR "/stdout.txt", NULL);
    static const char *flags[] = {"--vocab-size N", "--val-fraction F", "--split", "--doc-sep STR", "--out-dir DIR",
                                  "--tokenizer PATH", "--block-size T", "--overwrite", "--help"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strstr(help, flags[i])) fail_msg("./prepare --help does not list %s:\n%s", flags[i], help);
    assert_non_null(strstr(help, "(default 4096) [257..65536]"));
    free(help);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepare_strict_numbers),
        cmocka_unit_test(test_prepare_end_to_end),
        cmocka_unit_test(test_prepare_deterministic_and_reuse),
        cmocka_unit_test(test_prepare_pretokenizer),
        cmocka_unit_test(test_prepare_split_docs),
        cmocka_unit_test(test_prepare_bad_inputs),
        cmocka_unit_test(test_prepare_full_disk_leaves_no_partial_set),
        cmocka_unit_test(test_prepare_output_files),
        cmocka_unit_test(test_prepare_unwritable_out_dir_first),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
