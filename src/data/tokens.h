// tokens.h: token files in llm.c's format (see docs/FORMAT.md):
// a 256 x int32 little-endian header, then the tokens.
//   header[0] = 20240520, header[1] = 1: tokens are uint16
//   header[0] = 20240801, header[1] = 7: tokens are uint32 (vocabularies > 65,536)
//   header[2] = number of tokens; file size = 1024 + count * token size.
//   header[3], header[4] = the low and high 32 bits of the tokenizer's
//   checksum (bpe_checksum) when ropelab wrote the file; 0 and 0 in llm.c's
//   files (and ropelab's before it recorded one): not recorded.
#ifndef ROPELAB_TOKENS_H
#define ROPELAB_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "common/atomic_file.h"

typedef struct {
    char path[512];
    void *map;           // mmap of the whole file
    size_t map_bytes;
    size_t n_tokens;
    int token_bytes;     // 2 or 4
    const void *tokens;  // first token, inside map
    uint64_t tokenizer_checksum;   // of the tokenizer the tokens are of (bpe_checksum); 0: not recorded
} TokenFile;

// Opens with mmap and checks magic, version, count and file size. If
// vocab_size > 0, also checks every token id is < vocab_size.
int tokens_open(TokenFile *tf, const char *path, int vocab_size, char *err, size_t errlen);
void tokens_close(TokenFile *tf);
static inline uint32_t tokens_get(const TokenFile *tf, size_t i) {
    return tf->token_bytes == 2 ? ((const uint16_t *)tf->tokens)[i] : ((const uint32_t *)tf->tokens)[i];
}
// Writes atomically (tmp + fsync + rename; mode: whether an existing PATH is
// replaced, common/atomic_file.h); uint16 layout if vocab_size <= 65536;
// tokenizer_checksum (bpe_checksum of the tokenizer that made the tokens; 0: none) in the header.
int tokens_write(const char *path, const uint32_t *tokens, size_t n, int vocab_size, uint64_t tokenizer_checksum,
                 AtomicMode mode, char *err, size_t errlen);
// Whether tf's tokens are of the tokenizer whose checksum is given (tokenizer
// names it in the message): yes, or not recorded in tf. -1 with one line naming both files.
int tokens_check_tokenizer(const TokenFile *tf, uint64_t checksum, const char *tokenizer, char *err, size_t errlen);

#endif
