// fuzz_tokens.c: tokens_open on the bytes as an llm.c token file (every token
// read), then loader_open with two batch shapes and a few training and
// evaluation batches.
// Checked: with a vocabulary given, every id in a batch is below it, and each
// target row is its input row shifted by one token.
#include "fuzz_util.h"

#include "data/loader.h"
#include "data/tokens.h"

#define FUZZ_TOKENS_VOCAB 300

static void fuzz_tokens_batches(const char *path, int B, int T, int vocab) {
    char err[512];
    DataLoader dl;
    if (loader_open(&dl, path, B, T, 42, vocab, err, sizeof err) != 0) return;
    static const size_t eval_k[] = {0, 1, 7, SIZE_MAX / 2};
    for (int step = 0; step < 7; step++) {
        if (step < 3) loader_next_batch(&dl);
        else loader_eval_batch(&dl, eval_k[step - 3]);
        for (int i = 0; i < B * T; i++) {
            if (vocab > 0 && ((unsigned)dl.inputs[i] >= (unsigned)vocab || (unsigned)dl.targets[i] >= (unsigned)vocab))
                fuzz_fail("tokens", "a batch holds an id beyond the vocabulary");
            if (i % T != T - 1 && dl.targets[i] != dl.inputs[i + 1])
                fuzz_fail("tokens", "targets are not the inputs shifted by one");
        }
    }
    loader_close(&dl);
}

int fuzz_tokens_one(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file(data, size);
    char err[512];
    TokenFile tf;
    if (tokens_open(&tf, path, 0, err, sizeof err) == 0) {
        volatile uint32_t sink = 0;
        for (size_t i = 0; i < tf.n_tokens; i++) sink ^= tokens_get(&tf, i);
        (void)sink;
        tokens_close(&tf);
    }
    fuzz_tokens_batches(path, 3, 5, FUZZ_TOKENS_VOCAB);
    fuzz_tokens_batches(path, 1, 1, 0);
    return 0;
}

FUZZ_TARGET(fuzz_tokens_one)
