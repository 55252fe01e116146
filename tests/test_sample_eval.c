// test_sample_eval.c: ./sample and ./eval as a user runs them.
//
// The test makes its own tokenizer (BPE on a small text) and a random model
// for each scheme, saves them, and runs the programs as subprocesses:
//   - ./sample with a fixed seed prints the same text twice; another seed
//     prints other text; learned stops at block_size and says so;
//   - ./eval's loss equals the mean loss computed here directly with
//     gpt_forward, on the engine --matmul auto picks, over the same fixed
//     windows, read here from the token file without the loader (an
//     independent path);
//   - ./eval refuses a learned model at a length beyond block_size, and
//     runs the other schemes at 2x block_size;
//   - weights whose forward pass overflows float32 (finite values of 1e38):
//     ./eval and ./sample refuse the non-finite loss or logits with one
//     line and exit 1, and ./sample prints no text from them (also when the
//     overflow comes only at a later position, in the middle of generating);
//   - --seed and --threads follow ./train's rules (exit 2, one line); every
//     numeric flag is read whole by numtext.h's rule, range checked (exit 2,
//     one line naming the flag);
//   - a short run writes nothing to stderr; long work (a long prompt, many
//     tokens, many batches) shows progress on stderr after 2 s, never on
//     stdout, and none where stderr is stdout.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_shell.h"

#include "data/bpe.h"
#include "data/tokens.h"
#include "model/gpt.h"
#include "format/weights_file.h"
#include "train/options.h"
#include "util_gradcheck.h"

static char dir[128];
static char err[512];

static const char *TEXT =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
    "the face of the waters. And God said, Let there be light: and there was light. ";

// Runs cmd through the shell; returns its exit status and its stdout (and stderr if merged by cmd).
static int run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/ropelab_test_sample_%d", (int)getpid());
    if (run_shell("rm -rf %s && mkdir -p %s", dir, dir) != 0) return -1;
    // Tokenizer on 20 copies of the text; token file of the text encoded 40 times.
    size_t len = strlen(TEXT), reps = 40;
    uint8_t *text = malloc(len * reps);
    for (size_t r = 0; r < reps; r++) memcpy(text + r * len, TEXT, len);
    Tokenizer tok;
    if (bpe_train(&tok, text, len * 20, 300, NULL, NULL, err, sizeof err)) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/tok.bin", dir);
    if (bpe_save(&tok, path, ATOMIC_REPLACE, err, sizeof err)) return -1;
    uint32_t *ids = malloc(len * reps * sizeof *ids);
    size_t n = bpe_encode(&tok, text, len * reps, ids);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    if (tokens_write(path, ids, n, tok.vocab_size, bpe_checksum(&tok), ATOMIC_REPLACE, err, sizeof err)) return -1;
    // One random model per scheme (the trained values do not matter here).
    for (int k = 0; k < POS_COUNT; k++) {
        GPTConfig cfg = { .n_layer = 2, .n_head = 2, .d_model = 32, .vocab_size = tok.vocab_size,
                          .block_size = 16, .pos = (PosKind)k };
        gc_config_defaults(&cfg);
        GPT *model;
        if (gpt_create(&model, &cfg, 7, err, sizeof err)) return -1;
        float *p = gpt_params(model);
        for (size_t i = 0; i < gpt_num_params(model); i++) p[i] *= 20.0f;  // sharper logits
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, pos_kind_name((PosKind)k));
        if (gpt_save(model, path, err, sizeof err)) return -1;
        gpt_free(model);
    }
    bpe_free(&tok);
    free(text);
    free(ids);
    *state = NULL;
    return 0;
}

static int teardown(void **state) {
    return run_shell("rm -rf %s", dir) == 0 ? 0 : -1;
}

static int sample(const char *pos, int seed, int n_tokens, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "./sample --weights %s/%s.safetensors --tokenizer %s/tok.bin --prompt 'And God' "
             "--tokens %d --seed %d --temperature 1.0 --top-k 0 --threads 1 2>&1",
             dir, pos, dir, n_tokens, seed);
    return run(cmd, out, cap);
}

static void test_sample_is_deterministic(void **state) {
    static char a[8192], b[8192], c[8192];
    for (int k = 0; k < POS_COUNT; k++) {
        const char *pos = pos_kind_name((PosKind)k);
        if (k == POS_LEARNED) continue;           // learned: its own test below
        assert_int_equal(sample(pos, 5, 40, a, sizeof a), 0);
        assert_int_equal(sample(pos, 5, 40, b, sizeof b), 0);
        assert_int_equal(sample(pos, 6, 40, c, sizeof c), 0);
        assert_string_equal(a, b);
        assert_string_not_equal(a, c);
        assert_true(strncmp(a, "And God", 7) == 0);   // the prompt comes first
        assert_true(strlen(a) > 7 + 20);              // and then generated text
    }
}

static void test_sample_learned_stops_at_block_size(void **state) {
    static char out[8192];
    assert_int_equal(sample("learned", 5, 100, out, sizeof out), 0);
    assert_non_null(strstr(out, "stopped at 16 tokens: pos=learned has no position beyond it"));
}

static void test_sample_bad_inputs(void **state) {
    static char out[4096];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./sample --weights %s/missing.safetensors --tokenizer %s/tok.bin 2>&1", dir, dir);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "missing.safetensors"));
    snprintf(cmd, sizeof cmd, "./sample --weights %s/rope.safetensors --tokenizer %s/tok.bin --top-k x 2>&1", dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--top-k"));
    // The tokenizer used as weights: a bad safetensors file, one line.
    snprintf(cmd, sizeof cmd, "./sample --weights %s/tok.bin --tokenizer %s/tok.bin 2>&1", dir, dir);
    assert_int_not_equal(run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "tok.bin"));
    assert_null(strchr(out, '\n') ? strchr(strchr(out, '\n') + 1, '\n') : NULL);
}

// Mean loss over batches of B fixed windows (window w = tokens w*T .. w*T+T),
// computed here from the raw token file.
static double direct_eval_loss(const char *pos, int B, int T, int batches) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, pos);
    GPT *model;
    assert_int_equal(gpt_load(&model, path, 0, err, sizeof err), 0);
    // on the engine ./eval's --matmul auto runs here (options_engine's rule)
    GPTMatmul matmul;
    GPTPrecision precision;
    assert_int_equal(options_engine("auto", "fp32", 0, &matmul, &precision, NULL, err, sizeof err), 0);
    assert_int_equal(gpt_set_matmul(model, matmul, precision, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    TokenFile tf;
    snprintf(path, sizeof path, "%s/val.bin", dir);
    assert_int_equal(tokens_open(&tf, path, 0, err, sizeof err), 0);
    assert_int_equal(gpt_alloc_activations(model, B, T, err, sizeof err), 0);
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    double sum = 0;
    for (int k = 0; k < batches; k++) {
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                size_t at = (size_t)(k * B + b) * T + t;
                in[b * T + t] = (int)tokens_get(&tf, at);
                tg[b * T + t] = (int)tokens_get(&tf, at + 1);
            }
        sum += gc_forward(model, in, tg, B, T);
    }
    free(in); free(tg);
    tokens_close(&tf);
    gpt_free(model);
    return sum / batches;
}

static double eval_program(const char *pos, int B, int T, int batches, int *status) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "./eval --weights %s/%s.safetensors --data %s/val.bin --seq-len %d "
             "--batch-size %d --batches %d --threads 1 2>&1", dir, pos, dir, T, B, batches);
    *status = run(cmd, out, sizeof out);
    const char *at = strstr(out, " loss=");
    return at ? atof(at + 6) : -1.0;
}

static void test_eval_matches_direct_loss(void **state) {
    for (int k = 0; k < POS_COUNT; k++) {
        const char *pos = pos_kind_name((PosKind)k);
        int lengths[2] = {16, 32};
        for (int li = 0; li < (k == POS_LEARNED ? 1 : 2); li++) {
            int status;
            double got = eval_program(pos, 2, lengths[li], 3, &status);
            assert_int_equal(status, 0);
            double want = direct_eval_loss(pos, 2, lengths[li], 3);
            assert_true(want > 0.5);
            assert_float_equal(got, want, 1e-5 * want);   // ./eval prints 6 decimals
        }
    }
}

static void test_eval_refuses_learned_beyond_block(void **state) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "./eval --weights %s/learned.safetensors --data %s/val.bin --seq-len 32 2>&1", dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "learned"));
    assert_non_null(strstr(out, "at most 16 positions"));
}

// A window the model cannot index (B*T*max(V, 3C, c_fc's outputs) past
// 2^31) is a command-line error, exit 2 as ./train's, not a bad file's 1.
static void test_eval_refuses_too_large_batch(void **state) {
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "./eval --weights %s/rope.safetensors --data %s/val.bin --seq-len 1048576 2>&1", dir,
             dir);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "rope.safetensors: --batch-size 8, --seq-len 1048576: batch (8 x 1048576) too large "
                                "for the activation buffers"));
    assert_int_equal(strchr(out, '\n') - out, (long)strlen(out) - 1);   // one line
}

// The number of lines in out (a last line without '\n' counts).
static int count_lines(const char *out) {
    int n = 0;
    for (const char *p = out; *p; p++) n += *p == '\n';
    return n + (out[0] && out[strlen(out) - 1] != '\n');
}

// The whole of a small file (the test's stdout/stderr captures), "" if absent.
static void read_text(const char *path, char *out, size_t cap) {
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

// dir/NAME.safetensors: the rope model with every parameter set to value, or
// (row >= 0, learned model) only wpe's row `row`.
static void write_overflowing(const char *name, const char *from, int row, float value) {
    char path[512];
    GPT *model;
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, from);
    assert_int_equal(gpt_load(&model, path, 0, err, sizeof err), 0);
    float *p = gpt_params(model);
    if (row < 0) {
        for (size_t i = 0; i < gpt_num_params(model); i++) p[i] = value;
    } else {
        const ParamEntry *wpe = gpt_find_param(model, "wpe");
        assert_non_null(wpe);
        int C = wpe->shape[1];
        for (int c = 0; c < C; c++) p[wpe->offset + (size_t)row * C + c] = value;
    }
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    assert_int_equal(gpt_save(model, path, err, sizeof err), 0);
    gpt_free(model);
}

// Every weight 1e38 (finite: the file loads) overflows in the first forward
// pass: no loss=nan and no text sampled from NaN logits, one line, exit 1.
static void test_overflowing_weights_refused(void **state) {
    static char out[8192];
    char cmd[1024], want[600];
    write_overflowing("huge", "rope", -1, 1e38f);
    snprintf(cmd, sizeof cmd, "./eval --weights %s/huge.safetensors --data %s/val.bin --batches 2 --threads 1 2>&1",
             dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    snprintf(want, sizeof want, "eval: %s/huge.safetensors: the loss is ", dir);
    if (strncmp(out, want, strlen(want)) != 0 || count_lines(out) != 1 || !strstr(out, "no result"))
        fail_msg("./eval printed: %s", out);
    // ./sample: the message on stderr, nothing on stdout (not even the prompt).
    snprintf(cmd, sizeof cmd, "./sample --weights %s/huge.safetensors --tokenizer %s/tok.bin --prompt 'And God' "
             "--tokens 5 --threads 1 2>%s/err.txt", dir, dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_string_equal(out, "");
    snprintf(cmd, sizeof cmd, "%s/err.txt", dir);
    read_text(cmd, out, sizeof out);
    snprintf(want, sizeof want, "sample: %s/huge.safetensors: the logits are ", dir);
    if (strncmp(out, want, strlen(want)) != 0 || count_lines(out) != 1 || !strstr(out, "no text"))
        fail_msg("./sample printed on stderr: %s", out);
}

// wpe's row 10 at 1e38: the prompt (positions 0..3) and the first tokens are
// fine, the step at position 10 overflows (LayerNorm's float sum is inf).
// The same seed as the learned test above, which generates to position 16
// without an end of document, so the text before position 10 is the same.
static void test_overflow_while_generating_stops(void **state) {
    static char out[8192], good[8192];
    char cmd[1024], want[600];
    write_overflowing("learned-row10", "learned", 10, 1e38f);
    snprintf(cmd, sizeof cmd, "./sample --weights %s/learned-row10.safetensors --tokenizer %s/tok.bin "
             "--prompt 'And God' --tokens 100 --seed 5 --temperature 1.0 --top-k 0 --threads 1 2>&1", dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_int_equal(sample("learned", 5, 100, good, sizeof good), 0);
    // The text up to the overflow is the good model's, then one line.
    const char *nl = strstr(out, "\nsample: ");
    assert_non_null(nl);
    assert_true(nl - out > 7 && strncmp(out, good, (size_t)(nl - out)) == 0);
    snprintf(want, sizeof want, "sample: %s/learned-row10.safetensors: the logits are ", dir);
    if (strncmp(nl + 1, want, strlen(want)) != 0 || count_lines(nl + 1) != 1 || !strstr(nl + 1, "generated tokens"))
        fail_msg("./sample printed: %s", out);
    assert_null(strstr(out, "stopped at"));
}

// ./PROG (sample or eval) on the rope model with args: exit 2 and exactly the
// line want. (timeout: an output refused for being a FIFO must not be waited on.)
static void expect_line(const char *prog, const char *args, const char *want) {
    static char out[4096];
    char cmd[1024], line[600];
    if (strcmp(prog, "sample") == 0)
        snprintf(cmd, sizeof cmd, "./sample --weights %s/rope.safetensors --tokenizer %s/tok.bin --tokens 3 %s 2>&1",
                 dir, dir, args);
    else
        snprintf(cmd, sizeof cmd, "timeout 60 ./eval --weights %s/rope.safetensors --data %s/val.bin --batches 1 %s 2>&1",
                 dir, dir, args);
    int rc = run(cmd, out, sizeof out);
    snprintf(line, sizeof line, "%s\n", want);
    if (rc != 2 || strcmp(out, line) != 0) fail_msg("%s %s: exit %d, want 2 and '%s', printed: %s", prog, args, rc, want, out);
}

// --seed and --threads are ./train's keys: seed a u64 (no '-', no overflow),
// threads in [0, 4096]; refused before any file is read, exit 2, one line.
static void test_shared_options_follow_train(void **state) {
    static const struct { const char *prog, *args, *want; } cases[] = {
        {"sample", "--seed -1", "sample: --seed: '-1' is not a non-negative integer"},
        {"sample", "--seed 18446744073709551616", "sample: --seed: '18446744073709551616' is not a non-negative integer"},
        {"sample", "--threads 4097", "sample: --threads: 4097 is out of range [0, 4096]"},
        {"sample", "--threads -1", "sample: --threads: -1 is out of range [0, 4096]"},
        {"eval", "--threads 4097", "eval: --threads: 4097 is out of range [0, 4096]"},
        {"eval", "--threads 16777216", "eval: --threads: 16777216 is out of range [0, 4096]"},
        {"eval", "--threads x", "eval: --threads: 'x' is not an integer"},
    };
    static char out[4096];
    char cmd[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_line(cases[i].prog, cases[i].args, cases[i].want);
    // The largest seed is a seed.
    snprintf(cmd, sizeof cmd, "./sample --weights %s/rope.safetensors --tokenizer %s/tok.bin --tokens 3 "
             "--seed 18446744073709551615 --threads 1 2>&1", dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 0);
}

// An unknown option, or one without its value: one line (not getopt's line and
// the whole usage), exit 2.
static void test_unknown_option_one_line(void **state) {
    expect_line("sample", "--bogus", "sample: unknown option '--bogus' (see ./sample --help)");
    expect_line("sample", "--top-k", "sample: option '--top-k' needs a value (see ./sample --help)");
    expect_line("eval", "--bogus=1", "eval: unknown option '--bogus' (see ./eval --help)");
    expect_line("eval", "--help=1", "eval: option '--help' takes no value (see ./eval --help)");
    expect_line("eval", "-q", "eval: unknown option '-q' (see ./eval --help)");
}

// Every numeric flag by numtext.h's rule: the whole string, JSON's number
// grammar, range checked. One line naming the flag, exit 2, before any file
// is read. --help lists every flag (printed from the table), exit 0.
static void test_strict_numbers(void **state) {
    static const struct { const char *prog, *args, *want; } cases[] = {
        {"eval", "--batches 1e3", "eval: --batches: '1e3' is not an integer"},
        {"eval", "--batches 16777217", "eval: --batches: 16777217 is out of range [0, 16777216]"},
        {"eval", "--seq-len -1", "eval: --seq-len: -1 is out of range [1, 16777216]"},
        {"eval", "--seq-len 12abc", "eval: --seq-len: '12abc' is not an integer"},
        {"eval", "--batch-size 08", "eval: --batch-size: '08' is not an integer"},
        {"eval", "--batch-size 0", "eval: --batch-size: 0 is out of range [1, 16777216]"},
        {"eval", "--batch-size=", "eval: --batch-size: '' is not an integer"},
        {"eval", "--threads 2.0", "eval: --threads: '2.0' is not an integer"},
        {"eval", "--matmul blas", "eval: --matmul: 'blas' is not one of auto|openblas|onednn|reference"},
        {"sample", "--tokens 12abc", "sample: --tokens: '12abc' is not an integer"},
        {"sample", "--tokens 1000001", "sample: --tokens: 1000001 is out of range [0, 1000000]"},
        {"sample", "--temperature nan", "sample: --temperature: 'nan' is not a number"},
        {"sample", "--temperature inf", "sample: --temperature: 'inf' is not a number"},
        {"sample", "--temperature .5", "sample: --temperature: '.5' is not a number"},
        {"sample", "--temperature -0.1", "sample: --temperature: -0.1 is out of range [0, 1e+30]"},
        {"sample", "--temperature 1e999", "sample: --temperature: '1e999' is not a number"},
        {"sample", "--top-k ' 4'", "sample: --top-k: ' 4' is not an integer"},
        {"sample", "--top-k 0x10", "sample: --top-k: '0x10' is not an integer"},
        {"sample", "--seed 1e3", "sample: --seed: '1e3' is not a non-negative integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_line(cases[i].prog, cases[i].args, cases[i].want);
    static char out[16384];
    static const char *eval_flags[] = {"--weights FILE", "--data FILE", "--seq-len N", "--batch-size B", "--batches K",
        "--threads N", "--precision P", "--matmul M", "--per-position F", "--overwrite", "--reproducible", "--help",
        "--rope_scaling=VALUE"};
    static const char *sample_flags[] = {"--weights FILE", "--tokenizer PATH", "--prompt TEXT", "--tokens N",
        "--temperature X", "--top-k K", "--seed N", "--threads N", "--matmul M", "--precision P", "--help",
        "--rope_scaling=VALUE"};
    assert_int_equal(run("./eval --help", out, sizeof out), 0);
    for (size_t i = 0; i < sizeof eval_flags / sizeof eval_flags[0]; i++)
        if (!strstr(out, eval_flags[i])) fail_msg("./eval --help does not list %s:\n%s", eval_flags[i], out);
    assert_non_null(strstr(out, "(default 8) [1..16777216]"));
    assert_int_equal(run("./sample --help", out, sizeof out), 0);
    for (size_t i = 0; i < sizeof sample_flags / sizeof sample_flags[0]; i++)
        if (!strstr(out, sample_flags[i])) fail_msg("./sample --help does not list %s:\n%s", sample_flags[i], out);
    assert_non_null(strstr(out, "(default 0.8) [0..1e+30]"));
}

// ./eval --per-position F: written whole, a new F; an existing one only with
// --overwrite; never the --data or --weights file, a FIFO (which the old
// fopen would block on) or a directory. Each refusal one line, exit 2.
static void test_eval_per_position_file(void **state) {
    static char out[8192];
    char cmd[2048], f[300], msg[1200];
    snprintf(f, sizeof f, "%s/pos.csv", dir);
    for (int overwrite = 0; overwrite < 2; overwrite++) {   // a new file, then replaced with --overwrite
        snprintf(cmd, sizeof cmd, "./eval --weights %s/rope.safetensors --data %s/val.bin --batches 1 --threads 1 "
                 "--per-position %s %s >/dev/null 2>&1 && head -1 %s && wc -l < %s", dir, dir, f,
                 overwrite ? "--overwrite" : "", f, f);
        assert_int_equal(run(cmd, out, sizeof out), 0);
        assert_string_equal(out, "position,loss\n17\n");   // the header and block_size rows
        if (overwrite) break;
        snprintf(cmd, sizeof cmd, "--per-position %s", f);
        snprintf(msg, sizeof msg, "eval: %s: exists; pass --overwrite to replace it", f);
        expect_line("eval", cmd, msg);
    }
    assert_int_equal(run_shell("cp %s/val.bin %s/val.copy && mkfifo %s/pos.fifo && mkdir %s/pos.d", dir, dir, dir, dir), 0);
    snprintf(cmd, sizeof cmd, "--per-position %s/./val.bin --overwrite", dir);
    snprintf(msg, sizeof msg, "eval: %s/./val.bin: the same file as the input %s/val.bin; an output is never "
             "written onto an input", dir, dir);
    expect_line("eval", cmd, msg);
    assert_int_equal(run_shell("cmp -s %s/val.bin %s/val.copy", dir, dir), 0);
    snprintf(cmd, sizeof cmd, "--per-position %s/pos.fifo --overwrite", dir);
    snprintf(msg, sizeof msg, "eval: %s/pos.fifo: exists and is not a regular file (a FIFO); not replaced", dir);
    expect_line("eval", cmd, msg);
    snprintf(cmd, sizeof cmd, "--per-position %s/pos.d", dir);
    snprintf(msg, sizeof msg, "eval: %s/pos.d: exists and is not a regular file (a directory); not replaced", dir);
    expect_line("eval", cmd, msg);
    assert_int_equal(run_shell("test -p %s/pos.fifo && test -d %s/pos.d && ! ls %s | grep -q tmp", dir, dir, dir), 0);
}

// A short run: nothing on stderr, and stdout is what it was with 2>&1.
static void test_short_run_no_progress(void **state) {
    static char merged[8192], text[8192], errs[8192];
    char cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    assert_int_equal(sample("rope", 5, 40, merged, sizeof merged), 0);
    snprintf(cmd, sizeof cmd, "./sample --weights %s/rope.safetensors --tokenizer %s/tok.bin --prompt 'And God' "
             "--tokens 40 --seed 5 --temperature 1.0 --top-k 0 --threads 1 2>%s", dir, dir, path);
    assert_int_equal(run(cmd, text, sizeof text), 0);
    read_text(path, errs, sizeof errs);
    assert_string_equal(errs, "");
    assert_string_equal(text, merged);
    snprintf(cmd, sizeof cmd, "./eval --weights %s/rope.safetensors --data %s/val.bin --batches 3 --batch-size 2 "
             "--threads 1 2>%s", dir, dir, path);
    assert_int_equal(run(cmd, text, sizeof text), 0);
    read_text(path, errs, sizeof errs);
    assert_string_equal(errs, "");
    assert_true(strncmp(text, "eval: weights=", 14) == 0 && count_lines(text) == 1);
}

// Long work, stopped by timeout after 4 s (its first line is due at 2 s),
// the four runs side by side: a 60,000-token prompt, 100,000 tokens to
// generate, 2^24 batches to evaluate, and the generation again with stderr
// where stdout goes (2>&1), which must show no progress.
static void test_long_work_shows_progress(void **state) {
    static char out[65536], errs[65536];
    char base[512], s_prompt[1024], s_gen[1024], s_merged[1024], e_long[1024], path[512];
    snprintf(base, sizeof base, "timeout 4 ./sample --weights %s/rope.safetensors --tokenizer %s/tok.bin --threads 1",
             dir, dir);
    snprintf(s_prompt, sizeof s_prompt, "%s --tokens 5 --prompt \"$(head -c 60000 /dev/zero | tr '\\0' '\\377')\" "
             ">%s/p.out 2>%s/p.err", base, dir, dir);
    snprintf(s_gen, sizeof s_gen, "%s --tokens 100000 >%s/g.out 2>%s/g.err", base, dir, dir);
    snprintf(s_merged, sizeof s_merged, "%s --tokens 100000 >%s/m.out 2>&1", base, dir);
    snprintf(e_long, sizeof e_long, "timeout 4 ./eval --weights %s/rope.safetensors --data %s/val.bin --batch-size 1 "
             "--batches 16777216 --threads 1 >%s/e.out 2>%s/e.err", dir, dir, dir, dir);
    assert_int_equal(run_shell("(%s) & (%s) & (%s) & (%s) & wait", s_prompt, s_gen, s_merged, e_long), 0);
    static const struct { const char *file, *want; } lines[] = {
        {"p.err", "sample: reading the prompt: "}, {"g.err", "sample: generated "}, {"e.err", "eval: "}};
    static const char *totals[] = {"/60,001 tokens, ", "/100,000 tokens, ", "/16,777,216 batches, "};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, lines[i].file);
        read_text(path, errs, sizeof errs);
        if (strncmp(errs, lines[i].want, strlen(lines[i].want)) != 0 || !strstr(errs, totals[i]) ||
            !strstr(errs, "/s, ETA ") || errs[strlen(errs) - 1] != '\n')
            fail_msg("%s: %s", lines[i].file, errs);
    }
    // stdout: no progress in it (the prompt run had not started its text).
    snprintf(path, sizeof path, "%s/p.out", dir);
    read_text(path, out, sizeof out);
    assert_string_equal(out, "");
    snprintf(path, sizeof path, "%s/e.out", dir);
    read_text(path, out, sizeof out);
    assert_string_equal(out, "");
    snprintf(path, sizeof path, "%s/g.out", dir);
    read_text(path, out, sizeof out);
    assert_true(strlen(out) > 100 && !strstr(out, "generated"));
    snprintf(path, sizeof path, "%s/m.out", dir);
    read_text(path, out, sizeof out);
    assert_true(strlen(out) > 100 && !strstr(out, "generated"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_is_deterministic),
        cmocka_unit_test(test_sample_learned_stops_at_block_size),
        cmocka_unit_test(test_sample_bad_inputs),
        cmocka_unit_test(test_eval_matches_direct_loss),
        cmocka_unit_test(test_eval_refuses_learned_beyond_block),
        cmocka_unit_test(test_eval_refuses_too_large_batch),
        cmocka_unit_test(test_overflowing_weights_refused),
        cmocka_unit_test(test_overflow_while_generating_stops),
        cmocka_unit_test(test_shared_options_follow_train),
        cmocka_unit_test(test_short_run_no_progress),
        cmocka_unit_test(test_long_work_shows_progress),
        cmocka_unit_test(test_unknown_option_one_line),
        cmocka_unit_test(test_strict_numbers),
        cmocka_unit_test(test_eval_per_position_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
