// hf_tokenizer.h: tokenizers in other programs' files, both ways, and the one
// way every program opens the tokenizer it is given (docs/FORMAT.md,
// "Tokenizers of other programs").
//
// Read: a byte-level BPE in GPT-2's byte alphabet (format/bpe_gpt2.h), from
//   tokenizer.json   Hugging Face's tokenizers library's file: GPT-2's, and
//                    what ./export --format hf writes (below)
//   encoder.json + vocab.bpe   OpenAI's original pair for GPT-2 (Hugging
//                    Face names the same files vocab.json and merges.txt)
// into ropelab's Tokenizer, with the file's ids: the vocabulary must be in
// merge order (the 256 single bytes in any order, then the result of merge i
// at id 256 + i, then the end-of-text token <|endoftext|> as the last id),
// cut by GPT-2's regex (BPE_PRETOK_GPT2). A single byte's id is its place in
// the file's vocabulary (GPT-2's: '!' is id 0), kept in Tokenizer.byte_id
// and written by bpe_save as tokenizer.bin version 3. Anything else (another
// model, a normalizer, byte fallback, another pre-tokenizer, a second
// special token, a vocabulary out of merge order or beyond BPE_MAX_VOCAB,
// malformed JSON) is refused in one line naming the file and the key or the
// token, never approximated.
//
// Written: tokenizer.json and tokenizer_config.json of ./export --format hf
// (format/hf_model.h writes the directory).
#ifndef ROPELAB_HF_TOKENIZER_H
#define ROPELAB_HF_TOKENIZER_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "data/bpe.h"

// The largest JSON or merges file read (checked before it is read): 64 MiB.
// GPT-2's tokenizer.json is 1.36 MB for its 50,257 tokens and 50,000 merges,
// 27 bytes per token and merge, its tokens 4.9 bytes on average; 64 MiB holds
// BPE_MAX_VOCAB tokens and merges of 1,000 bytes each, tokens averaging 80
// bytes even with every byte escaped as \u and four hex digits (6 characters, twice: once in
// the vocabulary, once in a merge). No byte-level BPE ropelab can hold comes
// near it; a file past it is refused unread.
#define HF_TOKENIZER_MAX_BYTES (64 << 20)

// The tokenizer at path, for every program's --tokenizer (and ./train's
// tokenizer key): a tokenizer.bin (its magic, bpe_load), a tokenizer.json
// (any other file), or a directory holding tokenizer.json (a Hugging Face
// model directory) or else GPT-2's pair (encoder.json or vocab.json, with
// vocab.bpe or merges.txt). 0, or -1 with one line "path: problem".
int tokenizer_read(Tokenizer *tok, const char *path, char *err, size_t errlen);

// The files tokenizer_read reads for path, in order, into files (one or two,
// each at most 4096 bytes with its NUL): the path itself for a file, the
// directory's tokenizer.json or its pair. Their number, or -1 with a message
// (a directory holding neither, or both names of one of the pair's files).
#define TOKENIZER_MAX_FILES 2
int tokenizer_files(const char *path, char files[TOKENIZER_MAX_FILES][4096], char *err, size_t errlen);

// The readers themselves: tokenizer.json, and GPT-2's pair.
int hf_tokenizer_read_json(Tokenizer *tok, const char *path, char *err, size_t errlen);
int hf_tokenizer_read_gpt2(Tokenizer *tok, const char *vocab_path, const char *merges_path, char *err,
                           size_t errlen);

// tokenizer.json of tok for ./export --format hf into *out: 0; -1 with a
// message when it cannot be written (two tokens of the same bytes: a JSON
// vocabulary maps a text to one id); -2 when out of memory.
int hf_tokenizer_json(const Tokenizer *tok, cJSON **out, char *err, size_t errlen);
// tokenizer_config.json: PreTrainedTokenizerFast, <|endoftext|> as bos and eos.
cJSON *hf_tokenizer_config_json(const Tokenizer *tok, int model_max_length);

#endif
