// weights_file.h: the model's weights file (src/model/weights_file.c): a
// safetensors file with the contract's names, shapes and __metadata__
// (docs/FORMAT.md), written and read back with every name, dtype and shape
// checked. Training checkpoints and debug states are weights files with
// extra tensors and metadata, written and read through here. Conventions as
// in gpt.h (0 on success, -1 with a one-line message in err, "path: problem").
#ifndef ROPELAB_WEIGHTS_FILE_H
#define ROPELAB_WEIGHTS_FILE_H

#include <stddef.h>

#include "model/gpt.h"
#include "model/safetensors.h"

// Weights as the safetensors file of the contract (names, shapes, metadata).
// Written atomically: temporary file, fsync, rename.
int gpt_save(const GPT *model, const char *path, char *err, size_t errlen);
// Loads a weights file, creating the model from its metadata. Every name,
// dtype and shape is checked against the metadata before the model is
// allocated, every value must be finite; extra tensors are an error unless
// allow_extra is set (a training checkpoint carrying optimizer state).
int gpt_load(GPT **model, const char *path, int allow_extra, char *err, size_t errlen);
// What gpt_load(path, allow_extra) would build, from the file's header alone
// and with gpt_load's checks up to its first allocation (the same messages):
// the model's configuration (resolved), and the bytes reading the file's data
// takes (st_data_bytes), for a program's memory check (src/train/footprint.h).
int gpt_load_probe(const char *path, int allow_extra, GPTConfig *cfg, size_t *read_bytes, char *err, size_t errlen);

// The same file with extra tensors after the weights and extra metadata
// after the model's: a training checkpoint (AdamW moments, step, ...) and a
// debug state (inputs, targets, loss, grad.*) are written only through here.
int gpt_save_with(const GPT *model, const char *path, const StTensorOut *extra, int n_extra,
                  const StMeta *extra_meta, int n_extra_meta, char *err, size_t errlen);
// Tensor name of an open file, checked to be F32 with the shape of entry e
// and finite, copied into dst (numel floats). The one check of a stored
// tensor: parameters, and the optimizer state that has their shapes.
int gpt_read_tensor(const StFile *file, const char *name, const ParamEntry *e, float *dst,
                    char *err, size_t errlen);
// The parameters of an open file whose metadata describes this model's
// configuration (a key that differs is named; with length_keys_may_differ,
// block_size and the rope scaling keys may differ: --init-from), every tensor checked.
int gpt_read_params(GPT *model, const StFile *file, int length_keys_may_differ, char *err, size_t errlen);
// Only the first half of gpt_read_params: whether the file's metadata
// describes this model's configuration (the caller tells a configuration
// that does not match a file apart from a file that is bad).
int gpt_check_file_config(const GPT *model, const StFile *file, int length_keys_may_differ, char *err, size_t errlen);
// The weights file's __metadata__ for this model, as key/value strings:
// format=pt, then every key of the model-key table (docs/FORMAT.md).
#define GPT_META_MAX 32
typedef struct { StMeta items[GPT_META_MAX]; char values[GPT_META_MAX][48]; int count; } GPTMetadata;
void gpt_metadata(const GPT *model, GPTMetadata *meta);
// The model configuration stored in an opened file's metadata (validated).
int gpt_config_from_file(const StFile *file, GPTConfig *cfg, char *err, size_t errlen);

#endif
