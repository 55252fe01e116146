// weights_file.h: the model's weights file (src/format/weights_file.c): a
// safetensors file with the contract's names, shapes and __metadata__
// (docs/FORMAT.md), written and read back with every name, dtype and shape
// checked. Training checkpoints and debug states are weights files with
// extra tensors and metadata, written and read through here. Conventions as
// in gpt.h (0 on success, -1 with a one-line message in err, "path: problem").
#ifndef ROPELAB_WEIGHTS_FILE_H
#define ROPELAB_WEIGHTS_FILE_H

#include <stddef.h>

#include "model/gpt.h"
#include "format/safetensors.h"

// Weights as the safetensors file of the contract (names, shapes, metadata).
// Written atomically: temporary file, fsync, rename; an existing PATH (a
// regular file) is replaced: the trainer's model.safetensors.
int gpt_save(const GPT *model, const char *path, char *err, size_t errlen);
// What a weights file may hold besides the model's parameters (allow_extra
// below; extra tensors are never read):
//   GPT_EXTRA_NONE     nothing: a model.safetensors
//   GPT_EXTRA_ANY      any tensor: a debug state or a checkpoint read as weights (gpt_load's 1)
//   GPT_EXTRA_MOMENTS  a training checkpoint's AdamW moments only, GPT_MOMENT_M and
//                      GPT_MOMENT_V + a parameter's name, of its shape (train/checkpoint.h):
//                      gpt_read_params, so --init-from takes a model or a checkpoint
enum { GPT_EXTRA_NONE = 0, GPT_EXTRA_ANY = 1, GPT_EXTRA_MOMENTS = 2 };
#define GPT_MOMENT_M "adamw.m."
#define GPT_MOMENT_V "adamw.v."
// A path that is a directory is read as a Hugging Face model directory
// (format/hf_read.h: config.json, model.safetensors or its shards) by
// gpt_load, gpt_load_probe, gpt_read_params_at and gpt_config_at, with its
// own checks and the same conventions; every other path is a weights file.
//
// Loads a weights file, creating the model from its metadata. The header,
// the metadata and every name, dtype and shape are checked against the
// model the metadata describes before the model is allocated or any tensor
// read (a bad file of any size costs its header); every value must be
// finite; extra tensors as allow_extra says (above). The model is one to
// run (evaluate, sample, export): it has no gradient buffer (gpt_grads is
// NULL, gpt_backward refuses), which would be as large as its parameters.
int gpt_load(GPT **model, const char *path, int allow_extra, char *err, size_t errlen);
// What gpt_load(path, allow_extra) would build, from the file's header alone
// and with gpt_load's checks up to its first allocation (the same messages):
// the model's configuration (resolved), for a program's memory check
// (src/train/footprint.h).
int gpt_load_probe(const char *path, int allow_extra, GPTConfig *cfg, char *err, size_t errlen);

// The same file with extra tensors after the weights and extra metadata
// after the model's: a training checkpoint (AdamW moments, step, ...) and a
// debug state (inputs, targets, loss, grad.*) are written only through here;
// mode: whether an existing PATH is replaced (common/atomic_file.h).
int gpt_save_with(const GPT *model, const char *path, const StTensorOut *extra, int n_extra,
                  const StMeta *extra_meta, int n_extra_meta, AtomicMode mode, char *err, size_t errlen);
// What a file is found to be when a model is read from it: 0 (this model's),
// GPT_FILE_BAD (bad in itself: metadata missing or invalid, a tensor missing,
// of another dtype or shape, not finite, unreadable) or GPT_FILE_OTHER_MODEL
// (a valid file of another configuration; the key that differs is named).
enum { GPT_FILE_BAD = -1, GPT_FILE_OTHER_MODEL = -2 };
// Whether tensor name of an open file is F32 with the shape of entry e. The
// one check of a stored tensor's table entry (no data read).
int gpt_check_tensor(const StFile *file, const char *name, const ParamEntry *e, char *err, size_t errlen);
// Tensor name, checked (gpt_check_tensor), read into dst (numel floats) and
// checked finite: parameters, and the optimizer state that has their shapes.
int gpt_read_tensor(const StFile *file, const char *name, const ParamEntry *e, float *dst,
                    char *err, size_t errlen);
// Everything a reader checks before reading data, on a file opened with
// st_open_header: its metadata describes this model's configuration (with
// length_keys_may_differ, block_size and the rope scaling keys may differ:
// --init-from) and every parameter is there with its dtype and shape; any
// other tensor as allow_extra says (GPT_EXTRA_*), else refused naming it. 0,
// GPT_FILE_BAD or GPT_FILE_OTHER_MODEL.
int gpt_check_file(const GPT *model, const StFile *file, int length_keys_may_differ, int allow_extra,
                   char *err, size_t errlen);
// gpt_check_file (GPT_EXTRA_MOMENTS: a model or a checkpoint, nothing else),
// then every parameter read (gpt_read_tensor). 0, GPT_FILE_BAD or
// GPT_FILE_OTHER_MODEL. The reader of --init-from and of checkpoint_load.
int gpt_read_params(GPT *model, const StFile *file, int length_keys_may_differ, char *err, size_t errlen);
// gpt_read_params on the file at path, or a Hugging Face directory's
// parameters once its configuration passes the same comparison with the
// model's (every key equal, the length keys as length_keys_may_differ
// says). 0, GPT_FILE_BAD or GPT_FILE_OTHER_MODEL: --init-from's reader.
int gpt_read_params_at(GPT *model, const char *path, int length_keys_may_differ, char *err, size_t errlen);
// The model configuration (resolved) of the weights file or directory at path.
int gpt_config_at(const char *path, GPTConfig *cfg, char *err, size_t errlen);
// Whether the tokenizer in (or behind) the file `source` is the one the
// model of `weights` was trained with: its vocabulary size (vocab_size > 0;
// 0: not checked here) and, when both are recorded (non-zero), its checksum
// (bpe_checksum) against the metadata's tokenizer_checksum. ./sample and
// ./export give their tokenizer, ./eval its token file's record. -1 with one
// line naming both files.
int gpt_check_tokenizer(const GPT *model, const char *weights, int vocab_size, uint64_t checksum,
                        const char *source, char *err, size_t errlen);
// The weights file's __metadata__ for this model, as key/value strings:
// format=pt, then every key of the model-key table (docs/FORMAT.md).
#define GPT_META_MAX 32
typedef struct { StMeta items[GPT_META_MAX]; char values[GPT_META_MAX][48]; int count; } GPTMetadata;
void gpt_metadata(const GPT *model, GPTMetadata *meta);
// The model configuration stored in an opened file's metadata (validated).
int gpt_config_from_file(const StFile *file, GPTConfig *cfg, char *err, size_t errlen);

#endif
