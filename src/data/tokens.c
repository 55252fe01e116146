// tokens.c: reading (mmap) and writing (atomic) llm.c token files.
//
// Layout (docs/FORMAT.md, "Token files"): 256 int32 little-endian header words,
// then the tokens. header[0] magic, header[1] version, header[2] count:
//   20240520 / 1: uint16 tokens        20240801 / 7: uint32 tokens
// header[3..4] the tokenizer's checksum (0: not recorded). The rest of the header is zero. ropelab runs on little-endian machines only
// (as llm.c does); the tokens are used in place, without a copy.
#include "common/fs.h"
#include "data/tokens.h"

#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_WORDS 256
#define HEADER_BYTES (HEADER_WORDS * 4)
#define MAGIC_U16 20240520
#define VERSION_U16 1
#define MAGIC_U32 20240801
#define VERSION_U32 7

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token files are little-endian and used in place: a little-endian machine is needed"
#endif

// Unmaps after a failed check (err already filled) and returns -1.
static int unmap_and_fail(TokenFile *tf) {
    if (tf->map) munmap(tf->map, tf->map_bytes);
    tf->map = NULL;
    return -1;
}

int tokens_open(TokenFile *tf, const char *path, int vocab_size, char *err, size_t errlen) {
    memset(tf, 0, sizeof *tf);
    snprintf(tf->path, sizeof tf->path, "%s", path);
    long long file_size;
    int fd = open_regular_file(path, &file_size, err, errlen);
    if (fd < 0) return -1;
    size_t size = (size_t)file_size;
    if (size < HEADER_BYTES) {
        snprintf(err, errlen, "%s: %zu bytes is too short for a token file (%d-byte header)", path, size, HEADER_BYTES);
        close(fd); return -1;
    }
    tf->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (tf->map == MAP_FAILED) {
        tf->map = NULL;
        snprintf(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        return -1;
    }
    tf->map_bytes = size;
    int32_t header[5];
    memcpy(header, tf->map, sizeof header);
    if (header[0] == MAGIC_U16) tf->token_bytes = 2;
    else if (header[0] == MAGIC_U32) tf->token_bytes = 4;
    else {
        snprintf(err, errlen, "%s: bad magic %d (expected %d or %d: not an llm.c token file)",
                 path, header[0], MAGIC_U16, MAGIC_U32);
        return unmap_and_fail(tf);
    }
    int want_version = tf->token_bytes == 2 ? VERSION_U16 : VERSION_U32;
    if (header[1] != want_version) {
        snprintf(err, errlen, "%s: version %d does not match magic %d (expected %d)",
                 path, header[1], header[0], want_version);
        return unmap_and_fail(tf);
    }
    if (header[2] < 0) {
        snprintf(err, errlen, "%s: negative token count %d", path, header[2]);
        return unmap_and_fail(tf);
    }
    tf->n_tokens = (size_t)(uint32_t)header[2];
    size_t expect = HEADER_BYTES + tf->n_tokens * tf->token_bytes;
    if (size != expect) {
        snprintf(err, errlen, "%s: file is %zu bytes but the header's %zu tokens need %zu",
                 path, size, tf->n_tokens, expect);
        return unmap_and_fail(tf);
    }
    tf->tokens = (const uint8_t *)tf->map + HEADER_BYTES;
    tf->tokenizer_checksum = (uint64_t)(uint32_t)header[3] | (uint64_t)(uint32_t)header[4] << 32;
    if (vocab_size > 0) {
        for (size_t i = 0; i < tf->n_tokens; i++) {
            uint32_t id = tokens_get(tf, i);
            if (id >= (uint32_t)vocab_size) {
                snprintf(err, errlen, "%s: token %zu is %u, beyond the vocabulary of %d",
                         path, i, id, vocab_size);
                return unmap_and_fail(tf);
            }
        }
    }
    return 0;
}

void tokens_close(TokenFile *tf) {
    if (tf->map) munmap(tf->map, tf->map_bytes);
    memset(tf, 0, sizeof *tf);
}

int tokens_check_tokenizer(const TokenFile *tf, uint64_t checksum, const char *tokenizer, char *err, size_t errlen) {
    if (tf->tokenizer_checksum == 0 || tf->tokenizer_checksum == checksum) return 0;
    snprintf(err, errlen, "%s and %s are of different tokenizers (tokenizer checksum %016llx in the token file, "
             "%016llx for %s)", tf->path, tokenizer, (unsigned long long)tf->tokenizer_checksum,
             (unsigned long long)checksum, tokenizer);
    return -1;
}

int tokens_write(const char *path, const uint32_t *tokens, size_t n, int vocab_size, uint64_t tokenizer_checksum,
                 AtomicMode mode,
                 char *err, size_t errlen) {
    if (vocab_size <= 0) { snprintf(err, errlen, "%s: vocabulary size %d is not positive", path, vocab_size); return -1; }
    if (n > INT32_MAX) { snprintf(err, errlen, "%s: %zu tokens do not fit the header's int32 count", path, n); return -1; }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= (uint32_t)vocab_size) {
            snprintf(err, errlen, "%s: token %zu is %u, beyond the vocabulary of %d", path, i, tokens[i], vocab_size);
            return -1;
        }
    int wide = vocab_size > 65536;
    int32_t header[HEADER_WORDS] = {0};
    header[0] = wide ? MAGIC_U32 : MAGIC_U16;
    header[1] = wide ? VERSION_U32 : VERSION_U16;
    header[2] = (int32_t)n;
    header[3] = (int32_t)(uint32_t)tokenizer_checksum;
    header[4] = (int32_t)(uint32_t)(tokenizer_checksum >> 32);

    AtomicFile af;
    FILE *f = atomic_open(&af, path, mode, err, errlen);
    if (!f) return -1;
    int ok = fwrite(header, 1, HEADER_BYTES, f) == HEADER_BYTES;
    if (wide) {
        ok = ok && fwrite(tokens, 4, n, f) == n;
    } else {
        uint16_t chunk[8192];   // narrow in chunks: no second copy of the whole stream
        for (size_t i = 0; ok && i < n; i += 8192) {
            size_t m = n - i < 8192 ? n - i : 8192;
            for (size_t k = 0; k < m; k++) chunk[k] = (uint16_t)tokens[i + k];
            ok = fwrite(chunk, 2, m, f) == m;
        }
    }
    return atomic_commit(&af, ok, err, errlen);
}
