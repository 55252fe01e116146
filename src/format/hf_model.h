// hf_model.h: a trained model as a Hugging Face model directory, for
// ./export --format hf (docs/FORMAT.md, "Hugging Face"):
//
//   config.json            the model class and its configuration
//   model.safetensors      the weights under Hugging Face's names, in its layouts
//   tokenizer.json         the tokenizer in the `tokenizers` library's format
//   tokenizer_config.json  PreTrainedTokenizerFast, <|endoftext|> as bos and eos
//
// Two of Hugging Face's classes compute a ropelab model exactly:
//   block=gpt2, pos=learned          GPT2LMHeadModel ("gelu_new" is the tanh GELU); every
//                                    weight of a linear layer transposed (GPT-2's Conv1D
//                                    stores [in, out])
//   block=llama, pos=rope, R = D     LlamaForCausalLM; c_attn cut into q_proj, k_proj,
//                                    v_proj and c_fc into gate_proj, up_proj by rows, the
//                                    rows of each head of q and k permuted from our adjacent
//                                    pairs to Llama's rotate-half (gguf_neox_source_row)
// Both tie the head to the embedding (tie_word_embeddings, no lm_head.weight).
// Every other block and scheme, and a scaled rope, is refused in one line.
#ifndef ROPELAB_HF_MODEL_H
#define ROPELAB_HF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "data/bpe.h"
#include "model/gpt.h"

// Hugging Face's tensors of a model, by which ./export writes and
// format/hf_read.c reads: each is one of ours or a block of its rows,
// placed by one of
//   HF_ROWS         rows part*rows/parts .. (part+1)*rows/parts - 1 of ours as they are
//                   (parts = 1: the whole tensor; c_attn's v, c_fc's gate and up)
//   HF_TRANSPOSED   ours transposed: GPT-2's Conv1D keeps a weight as [in, out]
//   HF_ROTATE_HALF  q's or k's rows (part 0 or 1 of c_attn's 3), permuted within each head:
//                   Llama's row i < D/2 is our row 2i, its row D/2 + i our row 2i + 1
//                   (rotate-half pairs (i, i + D/2) are our adjacent pairs; gguf_neox_source_row)
#define HF_MAX_PARTS 3   // the most tensors of theirs one of ours is (c_attn: q, k, v)
typedef enum { HF_ROWS, HF_TRANSPOSED, HF_ROTATE_HALF } HfLayout;
typedef struct {
    char name[96];       // with the base model's prefix (hf_base_prefix): transformer.h.0.ln_1.weight
    HfLayout layout;
    int part, parts;
    int ndim;
    int64_t shape[2];    // Hugging Face's shape (transposed: ours reversed)
    size_t numel;
} HfPart;
// Our parameter e of a cfg model (block=gpt2 or llama) as Hugging Face's tensors; their
// count (at most HF_MAX_PARTS), 0 for a parameter with no name there (wpe of llama, ...).
int hf_parts(const GPTConfig *cfg, const ParamEntry *e, HfPart parts[HF_MAX_PARTS]);
// Where element k (in storage order) of Hugging Face's tensor p is in e's data: the one
// map of the layouts, by which the writer gathers and the reader scatters.
size_t hf_our_index(const GPTConfig *cfg, const ParamEntry *e, const HfPart *p, size_t k);
// The prefix of every name but lm_head.weight: the base model's attribute in the class,
// "transformer." (GPT2LMHeadModel) or "model." (LlamaForCausalLM). A file saved from the
// base model alone (GPT-2's released model.safetensors) has names without it.
const char *hf_base_prefix(const GPTConfig *cfg);

// The files written into the directory, in the order they are written.
#define HF_N_FILES 4
extern const char *const HF_FILES[HF_N_FILES];

// Whether cfg cannot be exported: 1 with why (one line, no file name) in the
// caller's buffer, or 0. The schemes' answers are their pos_exports (model/pos.h).
int hf_model_refusal(const GPTConfig *cfg, char *why, size_t n);
// The bytes hf_model_write allocates for the tensors it makes (transposed or
// permuted copies), from cfg alone.
size_t hf_model_bytes(const GPTConfig *cfg);
// Whether dir may receive an export, checked before the work:
// common/atomic_dir.h's rules for the four files: nothing there, an empty
// directory, or with replace an earlier export (exactly the four, regular
// files), so a run directory never is (./export also names what marks one:
// train/run_dir.h). 0, or -1 with "dir: problem".
int hf_model_check_target(const char *dir, int replace, char *err, size_t errlen);
// Writes the directory whole (common/atomic_dir.h): the four files into a
// new sibling dir.tmp.XXXXXX, then renamed into place (with replace, an
// exchange with the export there). A failure or a kill leaves dir as it
// was. 0; 1 written, but the replaced directory was left (err says where);
// -1 with a message ("path: problem", or a refusal without a path); -2
// when out of memory.
int hf_model_write(GPT *model, const Tokenizer *tok, const char *dir, int replace, char *err, size_t errlen);

#endif
