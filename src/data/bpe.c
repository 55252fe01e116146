// bpe.c: the byte-level BPE tokenizer at run time: the pre-split rule, the
// tokenizer file, encoding and decoding. Training lives in bpe_train.c.
//
// Pre-split rule (in the spirit of GPT-2's regex; merges never cross pieces).
// Every byte has a class: space (' ', \t, \n, \v, \f, \r), letter (A-Z, a-z and
// every byte >= 0x80, so a UTF-8 sequence stays inside its word), digit (0-9),
// or other (punctuation, control bytes, NUL). The text is cut into pieces:
//   - an optional single ' ' followed by a run of letters,   " Lord"
//   - an optional single ' ' followed by a run of digits,    " 1189"
//   - an optional single ' ' followed by a run of others,    " ("  ".\n" is two)
//   - a run of whitespace; if it is followed by a non-space and ends in ' ',
//     that last ' ' is left to start the next piece:  "\n  1 In" ->
//     "\n ", " 1", " In".
// A run longer than BPE_MAX_PIECE (256) bytes is cut every 256 bytes, which
// bounds the cost of encoding one piece on pathological input.
//
// Tokenizer file (all integers uint32 little-endian):
//   bytes 0..7   magic "RLBPETOK"
//   8            version (1)
//   12           vocab_size  (257..65536)
//   16           eot_id      (= vocab_size - 1)
//   20           n_merges    (= vocab_size - 257)
//   24 + 8 i     merge i: left id, right id  (both < 256 + i)  -> id 256 + i
// The file size must be exactly 24 + 8 n_merges.
#include "data/bpe.h"

#include "common/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/hashmap.h"

static const char BPE_MAGIC[8] = {'R', 'L', 'B', 'P', 'E', 'T', 'O', 'K'};
#define BPE_VERSION 1
#define BPE_HEADER_BYTES 24

// ---------------------------------------------------------------- pre-split

enum { CLS_SPACE, CLS_LETTER, CLS_DIGIT, CLS_OTHER };

static inline int byte_class(uint8_t c) {
    if (c == ' ' || (c >= '\t' && c <= '\r')) return CLS_SPACE;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CLS_LETTER;
    if (c >= '0' && c <= '9') return CLS_DIGIT;
    return CLS_OTHER;
}

size_t bpe_piece_end(const uint8_t *s, size_t n, size_t i) {
    size_t limit = n - i > BPE_MAX_PIECE ? i + BPE_MAX_PIECE : n;
    size_t j = i;
    if (s[j] == ' ' && j + 1 < limit && byte_class(s[j + 1]) != CLS_SPACE) j++;  // leading ' '
    int c = byte_class(s[j]);
    while (j < limit && byte_class(s[j]) == c) j++;
    // A whitespace run gives its last ' ' to the word that follows it.
    if (c == CLS_SPACE && j < n && j - 1 > i && s[j - 1] == ' ' && byte_class(s[j]) != CLS_SPACE) j--;
    return j;
}

// ---------------------------------------------------------------- tables

// One cached piece: its bytes at keys[key_off], its ids at ids[ids_off].
typedef struct {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids;   // key_len 0 marks an empty slot
} CacheSlot;

#define CACHE_MAX_ENTRIES (1u << 21)

typedef struct {
    U64Map rank;               // (left << 32 | right) -> merge index
    uint8_t *arena;            // bytes of every token, back to back
    CacheSlot *slots;          // encode cache, open addressing
    size_t cap, n;
    uint8_t *keys;  size_t keys_n, keys_cap;
    uint32_t *ids;  size_t ids_n, ids_cap;
    uint32_t work[2][BPE_MAX_PIECE];
} BpeInternal;

static uint64_t pair_key(uint32_t left, uint32_t right) { return ((uint64_t)left << 32) | right; }

int bpe_from_merges(Tokenizer *tok, const uint32_t (*merges)[2], int n_merges, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    int vocab_size = 256 + n_merges + 1;
    if (n_merges < 0 || vocab_size > BPE_MAX_VOCAB) {
        snprintf(err, errlen, "%d merges give a vocabulary outside %d..%d", n_merges, BPE_MIN_VOCAB, BPE_MAX_VOCAB);
        return -1;
    }
    for (int i = 0; i < n_merges; i++)
        for (int k = 0; k < 2; k++)
            if (merges[i][k] >= (uint32_t)(256 + i)) {
                snprintf(err, errlen, "merge %d refers to id %u, beyond the %d ids defined before it",
                         i, merges[i][k], 256 + i);
                return -1;
            }
    tok->vocab_size = vocab_size;
    tok->eot_id = vocab_size - 1;
    tok->n_merges = n_merges;
    tok->merges = data_realloc(NULL, (n_merges ? n_merges : 1) * sizeof *tok->merges);
    memcpy(tok->merges, merges, n_merges * sizeof *tok->merges);
    tok->token_len = data_realloc(NULL, vocab_size * sizeof(int));
    tok->token_bytes = data_realloc(NULL, vocab_size * sizeof(uint8_t *));

    // Token lengths first, then all bytes in one arena.
    size_t total = 256;
    for (int id = 0; id < 256; id++) tok->token_len[id] = 1;
    for (int i = 0; i < n_merges; i++) {
        tok->token_len[256 + i] = tok->token_len[merges[i][0]] + tok->token_len[merges[i][1]];
        total += tok->token_len[256 + i];
    }
    tok->token_len[tok->eot_id] = 0;
    BpeInternal *in = calloc(1, sizeof *in);
    if (!in) { fprintf(stderr, "out of memory\n"); exit(1); }
    in->arena = data_realloc(NULL, total);
    uint8_t *p = in->arena;
    for (int id = 0; id < 256; id++) { tok->token_bytes[id] = p; *p++ = (uint8_t)id; }
    for (int i = 0; i < n_merges; i++) {
        uint32_t l = merges[i][0], r = merges[i][1];
        tok->token_bytes[256 + i] = p;
        memcpy(p, tok->token_bytes[l], tok->token_len[l]); p += tok->token_len[l];
        memcpy(p, tok->token_bytes[r], tok->token_len[r]); p += tok->token_len[r];
    }
    tok->token_bytes[tok->eot_id] = p;   // empty

    u64map_init(&in->rank, n_merges);
    for (int i = 0; i < n_merges; i++) {
        int inserted;
        u64map_put(&in->rank, pair_key(merges[i][0], merges[i][1]), (uint32_t)i, &inserted);
        if (!inserted) {   // a repeated pair would be unreachable when encoding
            snprintf(err, errlen, "merge %d repeats the pair (%u, %u)", i, merges[i][0], merges[i][1]);
            tok->internal = in;
            bpe_free(tok);
            return -1;
        }
    }
    tok->internal = in;
    return 0;
}

void bpe_free(Tokenizer *tok) {
    BpeInternal *in = tok->internal;
    if (in) {
        u64map_free(&in->rank);
        free(in->arena); free(in->slots); free(in->keys); free(in->ids);
        free(in);
    }
    free(tok->merges); free(tok->token_bytes); free(tok->token_len);
    memset(tok, 0, sizeof *tok);
}

// ---------------------------------------------------------------- file

static void put_u32(uint8_t *p, uint32_t v) { p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24; }
static uint32_t get_u32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

int bpe_save(const Tokenizer *tok, const char *path, char *err, size_t errlen) {
    size_t bytes = BPE_HEADER_BYTES + 8 * (size_t)tok->n_merges;
    uint8_t *buf = data_realloc(NULL, bytes);
    memcpy(buf, BPE_MAGIC, 8);
    put_u32(buf + 8, BPE_VERSION);
    put_u32(buf + 12, tok->vocab_size);
    put_u32(buf + 16, tok->eot_id);
    put_u32(buf + 20, tok->n_merges);
    for (int i = 0; i < tok->n_merges; i++) {
        put_u32(buf + BPE_HEADER_BYTES + 8 * i, tok->merges[i][0]);
        put_u32(buf + BPE_HEADER_BYTES + 8 * i + 4, tok->merges[i][1]);
    }
    // Atomic: a crash leaves the old file or the new one, never half of one.
    AtomicFile af;
    FILE *f = atomic_open(&af, path, err, errlen);
    int ok = f && fwrite(buf, 1, bytes, f) == bytes;
    free(buf);
    return f ? atomic_commit(&af, ok, err, errlen) : -1;
}

int bpe_load(Tokenizer *tok, const char *path, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return -1; }
    uint8_t head[BPE_HEADER_BYTES];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < BPE_HEADER_BYTES || fread(head, 1, BPE_HEADER_BYTES, f) != BPE_HEADER_BYTES) {
        snprintf(err, errlen, "%s: %ld bytes is too short for a tokenizer file (%d-byte header)", path, size, BPE_HEADER_BYTES);
        fclose(f); return -1;
    }
    uint32_t version = get_u32(head + 8), vocab = get_u32(head + 12), eot = get_u32(head + 16), n_merges = get_u32(head + 20);
    const char *problem = NULL;
    char msg[200];
    if (memcmp(head, BPE_MAGIC, 8) != 0) problem = "bad magic (not a ropelab tokenizer file)";
    else if (version != BPE_VERSION) {
        snprintf(msg, sizeof msg, "tokenizer version %u is not supported (expected %d)", version, BPE_VERSION); problem = msg;
    } else if (vocab < BPE_MIN_VOCAB || vocab > BPE_MAX_VOCAB) {
        snprintf(msg, sizeof msg, "vocabulary size %u out of range (%d..%d)", vocab, BPE_MIN_VOCAB, BPE_MAX_VOCAB); problem = msg;
    } else if (n_merges != vocab - 257) {
        snprintf(msg, sizeof msg, "vocabulary size %u does not match %u merges (expected %u)", vocab, n_merges, n_merges + 257); problem = msg;
    } else if (eot != vocab - 1) {
        snprintf(msg, sizeof msg, "eot id %u is not vocab_size - 1 = %u", eot, vocab - 1); problem = msg;
    } else if ((size_t)size != BPE_HEADER_BYTES + 8 * (size_t)n_merges) {
        snprintf(msg, sizeof msg, "file is %ld bytes, expected %zu for %u merges", size,
                 BPE_HEADER_BYTES + 8 * (size_t)n_merges, n_merges); problem = msg;
    }
    if (problem) { snprintf(err, errlen, "%s: %s", path, problem); fclose(f); return -1; }

    size_t body = 8 * (size_t)n_merges;
    uint8_t *buf = data_realloc(NULL, body);
    if (fread(buf, 1, body, f) != body) {
        snprintf(err, errlen, "%s: read error", path);
        free(buf); fclose(f); return -1;
    }
    fclose(f);
    uint32_t (*merges)[2] = data_realloc(NULL, (n_merges ? n_merges : 1) * sizeof *merges);
    for (uint32_t i = 0; i < n_merges; i++) {
        merges[i][0] = get_u32(buf + 8 * i);
        merges[i][1] = get_u32(buf + 8 * i + 4);
    }
    free(buf);
    char why[300];
    int rc = bpe_from_merges(tok, (const uint32_t (*)[2])merges, (int)n_merges, why, sizeof why);
    free(merges);
    if (rc) { snprintf(err, errlen, "%s: %s", path, why); return -1; }
    return 0;
}

// ---------------------------------------------------------------- encode

// BPE on one piece: repeatedly merge every occurrence (left to right) of the
// adjacent pair with the lowest rank, which replays the merges of training in
// the order they were learned. O(len^2) at worst, len <= BPE_MAX_PIECE.
static int encode_piece(const Tokenizer *tok, BpeInternal *in, const uint8_t *s, int len, uint32_t *out) {
    uint32_t *a = in->work[0], *b = in->work[1];
    for (int i = 0; i < len; i++) a[i] = s[i];
    int n = len;
    while (n > 1) {
        uint32_t best = UINT32_MAX;
        for (int i = 0; i + 1 < n; i++) {
            const uint32_t *r = u64map_get(&in->rank, pair_key(a[i], a[i + 1]));
            if (r && *r < best) best = *r;
        }
        if (best == UINT32_MAX) break;
        uint32_t left = tok->merges[best][0], right = tok->merges[best][1], id = 256 + best;
        int m = 0;
        for (int i = 0; i < n;) {
            if (i + 1 < n && a[i] == left && a[i + 1] == right) { b[m++] = id; i += 2; }
            else b[m++] = a[i++];
        }
        uint32_t *t = a; a = b; b = t;
        n = m;
    }
    memcpy(out, a, n * sizeof *out);
    return n;
}

static CacheSlot *cache_find(BpeInternal *in, const uint8_t *s, int len, uint64_t h) {
    size_t mask = in->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        CacheSlot *c = &in->slots[i];
        if (c->key_len == 0) return c;
        if (c->hash == h && c->key_len == len && memcmp(in->keys + c->key_off, s, len) == 0) return c;
    }
}

static void cache_grow(BpeInternal *in) {
    CacheSlot *old = in->slots;
    size_t old_cap = in->cap;
    in->cap = old_cap ? 2 * old_cap : 4096;
    in->slots = calloc(in->cap, sizeof *in->slots);
    if (!in->slots) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key_len) {
            size_t mask = in->cap - 1, j = old[i].hash & mask;
            while (in->slots[j].key_len) j = (j + 1) & mask;
            in->slots[j] = old[i];
        }
    free(old);
}

static void cache_insert(BpeInternal *in, CacheSlot *slot, const uint8_t *s, int len, uint64_t h,
                         const uint32_t *ids, int n_ids) {
    if (in->keys_n + len > in->keys_cap) {
        in->keys_cap = 2 * (in->keys_n + len) + 4096;
        in->keys = data_realloc(in->keys, in->keys_cap);
    }
    if (in->ids_n + n_ids > in->ids_cap) {
        in->ids_cap = 2 * (in->ids_n + n_ids) + 4096;
        in->ids = data_realloc(in->ids, in->ids_cap * sizeof *in->ids);
    }
    *slot = (CacheSlot){h, (uint32_t)in->keys_n, (uint32_t)in->ids_n, (uint16_t)len, (uint16_t)n_ids};
    memcpy(in->keys + in->keys_n, s, len);
    memcpy(in->ids + in->ids_n, ids, n_ids * sizeof *ids);
    in->keys_n += len;
    in->ids_n += n_ids;
    in->n++;
}

size_t bpe_encode(const Tokenizer *tok, const uint8_t *text, size_t n, uint32_t *out) {
    BpeInternal *in = tok->internal;
    if (in->cap == 0) cache_grow(in);
    size_t n_out = 0;
    for (size_t i = 0; i < n;) {
        size_t j = bpe_piece_end(text, n, i);
        int len = (int)(j - i);
        uint64_t h = hash_bytes(text + i, len);
        CacheSlot *slot = cache_find(in, text + i, len, h);
        if (slot->key_len) {
            memcpy(out + n_out, in->ids + slot->ids_off, slot->n_ids * sizeof *out);
            n_out += slot->n_ids;
        } else {
            int m = encode_piece(tok, in, text + i, len, out + n_out);
            if (in->n < CACHE_MAX_ENTRIES) {
                if (2 * (in->n + 1) > in->cap) { cache_grow(in); slot = cache_find(in, text + i, len, h); }
                cache_insert(in, slot, text + i, len, h, out + n_out, m);
            }
            n_out += m;
        }
        i = j;
    }
    return n_out;
}

// ---------------------------------------------------------------- decode

const uint8_t *bpe_token(const Tokenizer *tok, uint32_t id, int *len) {
    if (id >= (uint32_t)tok->vocab_size) { *len = 0; return NULL; }
    *len = tok->token_len[id];
    return tok->token_bytes[id];
}

size_t bpe_decode(const Tokenizer *tok, const uint32_t *ids, size_t n, uint8_t *out, size_t cap) {
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        int len;
        const uint8_t *p = bpe_token(tok, ids[i], &len);
        if (!p) continue;   // ids outside the vocabulary decode to nothing
        if (need + len <= cap) memcpy(out + need, p, len);
        else if (need < cap) memcpy(out + need, p, cap - need);
        need += len;
    }
    return need;
}
