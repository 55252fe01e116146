// bpe.h: byte-level BPE tokenizer (train, encode, decode, file I/O).
//
// Ids 0..255 are the 256 single bytes; ids 256.. are learned merges, in the
// order they were learned; the last id is the end-of-text token that
// separates documents. vocab_size = 256 + n_merges + 1. Text is cut into
// pieces by the tokenizer's pre-tokenizer (pretokenize.h) before BPE; merges
// never cross pieces. In every tokenizer ropelab trains, id b is the byte b;
// a tokenizer read from another's files keeps that vocabulary's ids, whose
// first 256 may hold the bytes in another order (GPT-2's: id 0 is '!'):
// byte_id says which (format/hf_tokenizer.h reads them; tokenizer.bin
// version 3 keeps the order, docs/FORMAT.md).
#ifndef ROPELAB_BPE_H
#define ROPELAB_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/atomic_file.h"
#include "data/pretokenize.h"

typedef struct {
    BpePretok pretok;        // the pre-split rule it was trained with, and encodes with
    uint32_t byte_id[256];   // the id of byte b: b itself but in an imported vocabulary
    int vocab_size;
    int eot_id;              // vocab_size - 1
    int n_merges;
    uint32_t (*merges)[2];   // merge i: ids (left, right) -> id 256 + i
    uint8_t **token_bytes;   // bytes of each id (eot: empty)
    int *token_len;
    void *internal;          // encoder lookup tables
} Tokenizer;

typedef void (*BpeProgress)(int merges_done, int merges_total, void *user);

// Vocabulary sizes that can be trained and loaded: the 256 bytes and eot at
// least; at most 65,536 so every id fits the uint16 token files.
#define BPE_MIN_VOCAB 257
#define BPE_MAX_VOCAB 65536
// (The longest token, BPE_MAX_PIECE, is the pre-tokenizer's: pretokenize.h.)

// Learns vocab_size - 257 merges on text, pre-split by BPE_PRETOK_DEFAULT.
int bpe_train(Tokenizer *tok, const uint8_t *text, size_t n, int vocab_size,
              BpeProgress progress, void *user, char *err, size_t errlen);
// Same, with the rule given, over several texts (files or documents): no piece
// crosses a text boundary. If the texts run out of pairs first, fewer merges
// are learned and tok->vocab_size is smaller than asked (the caller can report it).
int bpe_train_multi(Tokenizer *tok, BpePretok rule, const uint8_t *const *texts, const size_t *lens, int n_texts,
                    int vocab_size, BpeProgress progress, void *user, char *err, size_t errlen);
// Builds a tokenizer of the rule from a merge list (checked: each merge refers
// to earlier ids). id_byte: the byte of each of ids 0..255, a permutation of
// 0..255 (checked); NULL for ropelab's own order, id b = byte b.
int bpe_from_merges(Tokenizer *tok, BpePretok rule, const uint8_t *id_byte, const uint32_t (*merges)[2],
                    int n_merges, char *err, size_t errlen);
// Whether id b is byte b for every b (every tokenizer ropelab trains).
int bpe_bytes_in_order(const Tokenizer *tok);
// Writes the tokenizer file atomically; mode: whether an existing PATH is replaced (common/atomic_file.h).
int bpe_save(const Tokenizer *tok, const char *path, AtomicMode mode, char *err, size_t errlen);
int bpe_load(Tokenizer *tok, const char *path, char *err, size_t errlen);
// What identifies a tokenizer: the 64-bit FNV-1a hash of its tokenizer.bin's
// bytes (docs/FORMAT.md), recorded in the token files ./prepare writes and in
// the weights ./train writes (tokenizer_checksum), checked by ./train,
// ./sample, ./eval and ./export. Never 0 in practice: 0 means "not recorded".
uint64_t bpe_checksum(const Tokenizer *tok);
void bpe_free(Tokenizer *tok);

// Encodes n bytes into out, which must hold n ids (a piece starts as the ids
// of its bytes, byte_id, and is merged in place there); returns the number of ids written (at most n; never adds eot).
// Keeps a cache of encoded pieces inside tok, so one Tokenizer must not encode
// from two threads at once. Encoding a text in parts cut where
// pretok_chunk_end(tok->pretok, ...) says gives the same ids as encoding it whole.
size_t bpe_encode(const Tokenizer *tok, const uint8_t *text, size_t n, uint32_t *out);
// Bytes of one id (eot has length 0); out of range -> NULL.
const uint8_t *bpe_token(const Tokenizer *tok, uint32_t id, int *len);
// Decodes ids into out (capacity cap); returns bytes needed (may exceed cap).
size_t bpe_decode(const Tokenizer *tok, const uint32_t *ids, size_t n, uint8_t *out, size_t cap);

#endif
