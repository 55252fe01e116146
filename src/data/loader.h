// loader.h: (B, T) batches from a token file.
//
// Training batches: B windows of T+1 consecutive tokens at offsets drawn
// uniformly from [0, n_tokens - T - 1] by a seeded Rng; inputs are the first T
// tokens of each window, targets the last T (inputs shifted by one).
// The Rng state can be read and restored, so a resumed run sees the same batches.
//
// Data-parallel runs (several processes, docs/TRAINING.md): every process
// advances the same stream. A batch draws world*B offsets and process `rank`
// keeps offsets rank*B .. rank*B+B-1, so one step of N processes with batch B
// reads exactly the windows of one process with batch N*B, no two processes
// read the same draw, and every process's Rng state is the same (one state to
// save). world = 1, rank = 0 (the default) is the single-process loader.
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
    int world, rank;   // the shard of each batch this loader keeps (1, 0: all of it)
    int *inputs;    // (B, T)
    int *targets;   // (B, T)
} DataLoader;

// Opens the file (checked against vocab_size) and allocates the batch buffers.
// Fails with "path: N tokens is shorter than one window of T+1" when too short.
int loader_open(DataLoader *dl, const char *path, int B, int T, uint64_t seed,
                int vocab_size, char *err, size_t errlen);
void loader_close(DataLoader *dl);
// Keep shard `rank` of `world` (0 <= rank < world) of every later training batch.
void loader_set_shard(DataLoader *dl, int world, int rank);
void loader_next_batch(DataLoader *dl);               // random training batch (this loader's shard)
size_t loader_num_eval_windows(const DataLoader *dl); // floor((n_tokens - 1) / T)
// Fills eval batch k (windows k*B .. k*B+B-1, wrapping modulo the number of
// windows if the file holds fewer than needed).
void loader_eval_batch(DataLoader *dl, size_t k);
Rng loader_get_rng(const DataLoader *dl);
void loader_set_rng(DataLoader *dl, Rng rng);

#endif
