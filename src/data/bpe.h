// bpe.h: byte-level BPE tokenizer (train, encode, decode, file I/O).
//
// Ids 0..255 are the raw bytes; ids 256.. are learned merges, in the order they
// were learned; the last id is the end-of-text token that separates documents.
// vocab_size = 256 + n_merges + 1.
#ifndef ROPELAB_BPE_H
#define ROPELAB_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int vocab_size;
    int eot_id;              // vocab_size - 1
    int n_merges;
    uint32_t (*merges)[2];   // merge i: ids (left, right) -> id 256 + i
    uint8_t **token_bytes;   // bytes of each id (eot: empty)
    int *token_len;
    void *internal;          // encoder lookup tables
} Tokenizer;

typedef void (*BpeProgress)(int merges_done, int merges_total, void *user);

// Learns vocab_size - 257 merges on text (pre-split into words first; see bpe.c).
int bpe_train(Tokenizer *tok, const uint8_t *text, size_t n, int vocab_size,
              BpeProgress progress, void *user, char *err, size_t errlen);
int bpe_save(const Tokenizer *tok, const char *path, char *err, size_t errlen);
int bpe_load(Tokenizer *tok, const char *path, char *err, size_t errlen);
void bpe_free(Tokenizer *tok);

// Encodes n bytes; returns the number of ids written (at most n; never adds eot).
size_t bpe_encode(const Tokenizer *tok, const uint8_t *text, size_t n, uint32_t *out);
// Bytes of one id (eot has length 0); out of range -> NULL.
const uint8_t *bpe_token(const Tokenizer *tok, uint32_t id, int *len);
// Decodes ids into out (capacity cap); returns bytes needed (may exceed cap).
size_t bpe_decode(const Tokenizer *tok, const uint32_t *ids, size_t n, uint8_t *out, size_t cap);

#endif
