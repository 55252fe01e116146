// checkpoint.h: training checkpoints and the debug-state file.
//
// RUN_DIR/checkpoint.safetensors holds everything a resumed run needs, in one
// file so it is always self-consistent:
//   every parameter under its contract name (as in model.safetensors),
//   adamw.m.NAME and adamw.v.NAME (the AdamW moments, F32, shape of NAME),
//   metadata: the contract keys (pos, n_layer, ...) plus
//     ropelab_checkpoint = "1", step (updates done), data_rng (4 decimal
//     uint64 of the loader's xoshiro state, space separated), elapsed_s,
//     config_hash (options_model_hash, hex), world_size (the number of
//     processes of a data-parallel run, only when more than 1; their loaders
//     share one stream, so data_rng is every rank's state), matmul_auto
//     (openblas | onednn: the engine matmul = auto chose in fp32 for this
//     run, which a resume keeps; absent where it never chose), and the run's
//     record: run_config, every key that shapes the training as "key = value"
//     lines (options_record), and run_data, the checksums of the tokenizer
//     and the two token files (run_dir.h), so that a resume can tell a
//     damaged config.ini or changed data from the run's own.
// gpt_load(path, allow_extra = 1) reads it as a weights file too.
// Files are written with gpt_save_with (st_write: temporary file, fsync,
// rename), so a crash at any moment leaves the previous checkpoint whole.
#ifndef ROPELAB_TRAIN_CHECKPOINT_H
#define ROPELAB_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "model/gpt.h"
#include "format/safetensors.h"
#include "train/adamw.h"

typedef struct {
    int step;            // updates done
    Rng data_rng;        // training loader state after those updates
    double elapsed_s;    // training wall time so far
    uint64_t config_hash;
    int world_size;      // processes training together (0 counts as 1)
    char matmul_auto[16];   // "openblas" | "onednn": matmul = auto's fp32 choice for the run ("" none)
} TrainState;

// The run's record kept in the checkpoint ("" when an older ./train wrote it).
#define RUN_RECORD_MAX 8192
typedef struct {
    char config[RUN_RECORD_MAX];   // options_record
    char data[160];                // "tokenizer TOK_FNV1A train TRAIN_FNV1A val VAL_FNV1A", 16 hex digits each
} RunRecord;

// The largest step a checkpoint may hold (the range of the `steps` key).
#define CHECKPOINT_MAX_STEP 1000000000

int checkpoint_save(const char *path, GPT *model, const AdamW *opt, const TrainState *state,
                    const RunRecord *record, char *err, size_t errlen);

// Loads into an existing model and optimizer built from the same options.
// Checks the format marker, config_hash (against state->config_hash on entry),
// world_size (absent = 1; against state->world_size on entry, 0 meaning 1),
// step (1..CHECKPOINT_MAX_STEP), data_rng (4 uint64, not all zero), the
// model keys of the metadata, every tensor's dtype, shape and finiteness
// (v >= 0), and that nothing is missing or extra.
int checkpoint_load(const char *path, GPT *model, AdamW *opt, TrainState *state,
                    char *err, size_t errlen);
// The metadata checks of checkpoint_load, from the file's header alone and
// before any model exists: a config.ini edited to another model is refused
// before that model is built. Fills state's step, data_rng, elapsed_s and
// matmul_auto.
int checkpoint_check(const char *path, TrainState *state, char *err, size_t errlen);
// The run's record from the checkpoint's header (its fields "" where an
// older ./train wrote none). 0, or -1 with a message.
int checkpoint_read_record(const char *path, RunRecord *record, char *err, size_t errlen);

// The debug-state file of the contract: parameters, inputs and targets (I32 [B,T]),
// loss (F32 [1]) and grad.NAME for every parameter, with the contract metadata.
// Its metadata also says how the products were computed: precision (fp32 |
// bf16), matmul (openblas | onednn | reference) and, for the fused attention
// only, attention = fused (a file without the key is the blocked one's), so a
// checker can compute the same way. mode: whether an existing PATH is
// replaced (./train --overwrite).
int debug_state_save(const char *path, GPT *model, const int *inputs, const int *targets,
                     int B, int T, float loss, const char *precision, const char *matmul, int fused,
                     AtomicMode mode, char *err, size_t errlen);

#endif
