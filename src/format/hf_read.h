// hf_read.h: a Hugging Face model directory read as a ropelab model, the
// way in for what ./export --format hf writes (hf_model.h) and for the
// released checkpoints of the same two classes (docs/FORMAT.md, "Reading a
// Hugging Face directory"):
//
//   config.json                    GPT2LMHeadModel or LlamaForCausalLM, mapped to a GPTConfig
//   model.safetensors, or          the weights under Hugging Face's names (hf_parts), each
//   model.safetensors.index.json   F32, F16 or BF16 (widened exactly), in one file or in
//   and the shards it names        the shards the index's weight_map names
//
// What the model's maths cannot honour is refused in one line naming the
// file and the key: another class, grouped-query attention, an eps or MLP
// width other than ropelab's, an untied head, a rope scaling it does not
// compute, a tensor missing, left over, of another shape or dtype. Every
// check but the values' is made from config.json, the index and the
// safetensors headers, before anything is allocated that the files size (a
// bad directory of any size costs its headers); the tensors are then read
// through one buffer of HF_READ_CHUNK floats straight into the model.
// tokenizer.json is not read here: the model's tokenizer_checksum is 0
// (not recorded), and the programs take the tokenizer they are given.
// Conventions as in weights_file.h (0 on success, -1 with one line "path: problem").
#ifndef ROPELAB_HF_READ_H
#define ROPELAB_HF_READ_H

#include <stddef.h>

#include "model/gpt.h"

// The floats of the one read buffer (256 KiB): below what the memory check
// counts (train/footprint.h), so reading a directory adds nothing to it.
#define HF_READ_CHUNK (1 << 16)

typedef struct HfDir HfDir;
// Opens the directory and checks everything above but the tensors' values
// (an lm_head.weight, which must equal the embedding, is compared through
// the buffer here). The shards stay open until hf_close.
int hf_open(HfDir **dir, const char *path, char *err, size_t errlen);
// The model the directory holds (resolved; tokenizer_checksum 0).
const GPTConfig *hf_config(const HfDir *dir);
// Every parameter of model, a model of hf_config's parameters (its length
// keys may differ: ./train --init-from), read, widened, transposed or
// permuted into place (hf_our_index), each value checked finite.
int hf_read_params(const HfDir *dir, GPT *model, char *err, size_t errlen);
void hf_close(HfDir *dir);

#endif
