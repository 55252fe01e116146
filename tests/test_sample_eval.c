// test_sample_eval.c: ./sample and ./eval as a user runs them.
//
// The test makes its own tokenizer (BPE on a small text) and a random model
// for each scheme, saves them, and runs the programs as subprocesses:
//   - ./sample with a fixed seed prints the same text twice; another seed
//     prints other text; learned stops at block_size and says so;
//   - ./eval's loss equals the mean loss computed here directly with
//     gpt_forward over the same fixed windows, read here from the token file
//     without the loader (an independent path);
//   - ./eval refuses a learned model at a length beyond block_size, and
//     runs the other schemes at 2x block_size.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "data/bpe.h"
#include "data/tokens.h"
#include "model/gpt.h"
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
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    if (system(cmd) != 0) return -1;
    // Tokenizer on 20 copies of the text; token file of the text encoded 40 times.
    size_t len = strlen(TEXT), reps = 40;
    uint8_t *text = malloc(len * reps);
    for (size_t r = 0; r < reps; r++) memcpy(text + r * len, TEXT, len);
    Tokenizer tok;
    if (bpe_train(&tok, text, len * 20, 300, NULL, NULL, err, sizeof err)) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/tok.bin", dir);
    if (bpe_save(&tok, path, err, sizeof err)) return -1;
    uint32_t *ids = malloc(len * reps * sizeof *ids);
    size_t n = bpe_encode(&tok, text, len * reps, ids);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    if (tokens_write(path, ids, n, tok.vocab_size, err, sizeof err)) return -1;
    // One random model per scheme (the trained values do not matter here).
    for (int k = 0; k < POS_COUNT; k++) {
        GPTConfig cfg = { .n_layer = 2, .n_head = 2, .d_model = 32, .vocab_size = tok.vocab_size,
                          .block_size = 16, .pos = (PosKind)k };
        gpt_config_defaults(&cfg);
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
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_is_deterministic),
        cmocka_unit_test(test_sample_learned_stops_at_block_size),
        cmocka_unit_test(test_sample_bad_inputs),
        cmocka_unit_test(test_eval_matches_direct_loss),
        cmocka_unit_test(test_eval_refuses_learned_beyond_block),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
