// loader.h: (B, T) batches from a token file.
//
// Training batches: B windows of T+1 consecutive tokens at offsets drawn
// uniformly from [0, n_tokens - T - 1] by a seeded Rng; inputs are the first T
// tokens of each window, targets the last T (inputs shifted by one).
// The Rng state can be read and restored, so a resumed run sees the same batches.
//
// Evaluation: fixed, non-overlapping windows walking the file from the start
// (window k starts at k*T), B of them per batch, so every evaluation sees
// exactly the same tokens.
#ifndef ROPELAB_LOADER_H
#define ROPELAB_LOADER_H

#include "common/rng.h"
#include "data/tokens.h"

typedef struct {
    TokenFile file;
    int B, T;
    Rng rng;
    int *inputs;    // (B, T)
    int *targets;   // (B, T)
} DataLoader;

// Opens the file (checked against vocab_size) and allocates the batch buffers.
// Fails with "path: N tokens is shorter than one window of T+1" when too short.
int loader_open(DataLoader *dl, const char *path, int B, int T, uint64_t seed,
                int vocab_size, char *err, size_t errlen);
void loader_close(DataLoader *dl);
void loader_next_batch(DataLoader *dl);               // random training batch
size_t loader_num_eval_windows(const DataLoader *dl); // floor((n_tokens - 1) / T)
// Fills eval batch k (windows k*B .. k*B+B-1, wrapping modulo the number of
// windows if the file holds fewer than needed).
void loader_eval_batch(DataLoader *dl, size_t k);
Rng loader_get_rng(const DataLoader *dl);
void loader_set_rng(DataLoader *dl, Rng rng);

#endif
