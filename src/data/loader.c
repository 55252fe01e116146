// loader.c: (B, T) batches from a token file (see loader.h for the contract).
//
// A window is T+1 consecutive tokens w[0..T]: inputs are w[0..T-1] and targets
// w[1..T], so target[b,t] is the token that follows input[b,t] in the stream.
#include "data/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int loader_open(DataLoader *dl, const char *path, int B, int T, uint64_t seed,
                int vocab_size, char *err, size_t errlen) {
    memset(dl, 0, sizeof *dl);
    if (B < 1 || T < 1) {
        snprintf(err, errlen, "%s: batch size %d and sequence length %d must be at least 1", path, B, T);
        return -1;
    }
    if (tokens_open(&dl->file, path, vocab_size, err, errlen)) return -1;
    if (dl->file.n_tokens < (size_t)T + 1) {
        snprintf(err, errlen, "%s: %zu tokens is shorter than one window of T+1 = %d tokens",
                 path, dl->file.n_tokens, T + 1);
        tokens_close(&dl->file);
        return -1;
    }
    dl->B = B;
    dl->T = T;
    dl->world = 1;
    dl->rank = 0;
    rng_seed(&dl->rng, seed);
    dl->inputs = malloc((size_t)B * T * sizeof *dl->inputs);
    dl->targets = malloc((size_t)B * T * sizeof *dl->targets);
    if (!dl->inputs || !dl->targets) {
        snprintf(err, errlen, "%s: out of memory for a batch of %d x %d", path, B, T);
        loader_close(dl);
        return -1;
    }
    return 0;
}

void loader_close(DataLoader *dl) {
    tokens_close(&dl->file);
    free(dl->inputs);
    free(dl->targets);
    memset(dl, 0, sizeof *dl);
}

// Copies the window starting at token `start` into row b.
static void fill_row(DataLoader *dl, int b, size_t start) {
    int T = dl->T;
    int *inp = dl->inputs + (size_t)b * T, *tgt = dl->targets + (size_t)b * T;
    for (int t = 0; t < T; t++) {
        inp[t] = (int)tokens_get(&dl->file, start + t);
        tgt[t] = (int)tokens_get(&dl->file, start + t + 1);
    }
}

void loader_set_shard(DataLoader *dl, int world, int rank) {
    dl->world = world;
    dl->rank = rank;
}

void loader_next_batch(DataLoader *dl) {
    // Start offsets are uniform in [0, n_tokens - T - 1]: the last window ends
    // exactly at the last token. All world*B offsets are drawn (rng_below may
    // take more than one draw each), so every shard's stream stays the same.
    uint64_t n_starts = dl->file.n_tokens - dl->T;
    int first = dl->rank * dl->B, end = first + dl->B;
    for (int i = 0; i < dl->world * dl->B; i++) {
        size_t start = (size_t)rng_below(&dl->rng, n_starts);
        if (i >= first && i < end) fill_row(dl, i - first, start);
    }
}

size_t loader_num_eval_windows(const DataLoader *dl) {
    return (dl->file.n_tokens - 1) / dl->T;
}

void loader_eval_batch(DataLoader *dl, size_t k) {
    size_t n_windows = loader_num_eval_windows(dl);
    for (int b = 0; b < dl->B; b++) {
        size_t window = (k * dl->B + b) % n_windows;
        fill_row(dl, b, window * dl->T);
    }
}

Rng loader_get_rng(const DataLoader *dl) { return dl->rng; }
void loader_set_rng(DataLoader *dl, Rng rng) { dl->rng = rng; }
