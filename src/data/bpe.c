// bpe.c: the byte-level BPE tokenizer at run time: the tokenizer file,
// encoding and decoding. Training lives in bpe_train.c, the pre-split rules
// (which cut a text into the pieces BPE works on) in pretokenize.c.
//
// Tokenizer file (all integers uint32 little-endian):
//   bytes 0..7   magic "RLBPETOK"
//   8            version (1, 2 or 3)
//   12           vocab_size  (257..65536)
//   16           eot_id      (= vocab_size - 1)
//   20           n_merges    (= vocab_size - 257)
//   24           versions 2 and 3: the pre-tokenizer (0: byte classes, 1: GPT-2's regex)
//   28           version 3 only: 256 bytes, the byte of each of ids 0..255
//   H + 8 i      merge i: left id, right id  (both < 256 + i)  -> id 256 + i
// H, the header, is 24 bytes in version 1, 28 in version 2 and 284 in
// version 3; the file size must be exactly H + 8 n_merges. Version 1 has no
// pre-tokenizer field: its rule is the byte classes, the only one there was
// when it was written. A tokenizer of that rule is always written as version
// 1, so a file made before the rule was recorded keeps its bytes and its
// checksum; version 2 names any other rule. Both mean id b = byte b; version
// 3, written only for a tokenizer whose ids 0..255 hold the bytes in another
// order (one read from GPT-2's files), says which, so every file of versions
// 1 and 2 is written as it always was. Each tokenizer has exactly one
// layout, so its checksum is that of its file.
#include "common/fs.h"
#include "data/bpe.h"

#include "common/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/hashmap.h"

static const char BPE_MAGIC[8] = {'R', 'L', 'B', 'P', 'E', 'T', 'O', 'K'};
#define BPE_HEADER_V1 24   // magic, version, vocab_size, eot_id, n_merges
#define BPE_HEADER_V2 28   // and the pre-tokenizer
#define BPE_HEADER_V3 (BPE_HEADER_V2 + 256)   // and the byte of each of ids 0..255

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
} BpeInternal;

static uint64_t pair_key(uint32_t left, uint32_t right) { return ((uint64_t)left << 32) | right; }

int bpe_from_merges(Tokenizer *tok, BpePretok rule, const uint8_t *id_byte, const uint32_t (*merges)[2],
                    int n_merges, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    int vocab_size = 256 + n_merges + 1;
    if (n_merges < 0 || vocab_size > BPE_MAX_VOCAB) {
        snprintf(err, errlen, "%d merges give a vocabulary outside %d..%d", n_merges, BPE_MIN_VOCAB, BPE_MAX_VOCAB);
        return -1;
    }
    int id_of[256];   // byte -> id, -1 until seen: the order must hold each byte once
    for (int b = 0; b < 256; b++) id_of[b] = -1;
    for (int id = 0; id < 256; id++) {
        int b = id_byte ? id_byte[id] : id;
        if (id_of[b] >= 0) {
            snprintf(err, errlen, "ids %d and %d are both the byte 0x%02x: the first 256 ids must be the 256 bytes, "
                     "each once", id_of[b], id, b);
            return -1;
        }
        id_of[b] = id;
    }
    for (int i = 0; i < n_merges; i++)
        for (int k = 0; k < 2; k++)
            if (merges[i][k] >= (uint32_t)(256 + i)) {
                snprintf(err, errlen, "merge %d refers to id %u, beyond the %d ids defined before it",
                         i, merges[i][k], 256 + i);
                return -1;
            }
    // Token lengths first, each bounded before anything is sized from it:
    // training learns merges inside parts of pieces of at most BPE_MAX_PIECE
    // bytes, so no token a tokenizer learned is longer. (A crafted chain of
    // self-doubling merges would otherwise reach 2^31 bytes in 31 merges.)
    // The arena of all token bytes is then at most vocab_size * BPE_MAX_PIECE.
    int *len = malloc((size_t)vocab_size * sizeof *len);
    if (!len) { snprintf(err, errlen, "out of memory for %d tokens", vocab_size); return -1; }
    size_t total = 256;
    for (int id = 0; id < 256; id++) len[id] = 1;
    for (int i = 0; i < n_merges; i++) {
        len[256 + i] = len[merges[i][0]] + len[merges[i][1]];   // <= 2 * BPE_MAX_PIECE: no overflow
        if (len[256 + i] > BPE_MAX_PIECE) {
            snprintf(err, errlen, "merge %d makes a token of %d bytes, longer than the longest token "
                     "a tokenizer can learn (%d bytes)", i, len[256 + i], BPE_MAX_PIECE);
            free(len);
            return -1;
        }
        total += (size_t)len[256 + i];
    }
    len[vocab_size - 1] = 0;   // eot
    tok->pretok = rule;
    tok->vocab_size = vocab_size;
    tok->eot_id = vocab_size - 1;
    tok->n_merges = n_merges;
    tok->token_len = len;
    tok->merges = malloc((size_t)(n_merges ? n_merges : 1) * sizeof *tok->merges);
    tok->token_bytes = malloc((size_t)vocab_size * sizeof(uint8_t *));
    BpeInternal *in = calloc(1, sizeof *in);
    tok->internal = in;
    if (!tok->merges || !tok->token_bytes || !in || !(in->arena = malloc(total)) ||
        u64map_init(&in->rank, (size_t)n_merges) != 0) {
        snprintf(err, errlen, "out of memory for a tokenizer of %d tokens", vocab_size);
        bpe_free(tok);
        return -1;
    }
    memcpy(tok->merges, merges, (size_t)n_merges * sizeof *tok->merges);
    for (int b = 0; b < 256; b++) tok->byte_id[b] = (uint32_t)id_of[b];
    uint8_t *p = in->arena;
    for (int id = 0; id < 256; id++) { tok->token_bytes[id] = p; *p++ = id_byte ? id_byte[id] : (uint8_t)id; }
    for (int i = 0; i < n_merges; i++) {
        uint32_t l = merges[i][0], r = merges[i][1];
        tok->token_bytes[256 + i] = p;
        memcpy(p, tok->token_bytes[l], len[l]); p += len[l];
        memcpy(p, tok->token_bytes[r], len[r]); p += len[r];
    }
    tok->token_bytes[tok->eot_id] = p;   // empty

    for (int i = 0; i < n_merges; i++) {
        int inserted;
        if (!u64map_put(&in->rank, pair_key(merges[i][0], merges[i][1]), (uint32_t)i, &inserted)) {
            snprintf(err, errlen, "out of memory for a tokenizer of %d tokens", vocab_size);
            bpe_free(tok);
            return -1;
        }
        if (!inserted) {   // a repeated pair would be unreachable when encoding
            snprintf(err, errlen, "merge %d repeats the pair (%u, %u)", i, merges[i][0], merges[i][1]);
            bpe_free(tok);
            return -1;
        }
    }
    return 0;
}

int bpe_bytes_in_order(const Tokenizer *tok) {
    for (int b = 0; b < 256; b++)
        if (tok->byte_id[b] != (uint32_t)b) return 0;
    return 1;
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

// The tokenizer file's bytes (docs/FORMAT.md), in order, handed to sink a
// field or a merge at a time: the one layout bpe_save writes and
// bpe_checksum hashes.
typedef struct { FILE *f; int ok; uint64_t hash; } ByteSink;
typedef void (*SinkFn)(ByteSink *sink, const uint8_t *bytes, size_t n);

static void file_bytes(const Tokenizer *tok, SinkFn put, ByteSink *sink) {
    uint8_t header[BPE_HEADER_V3], merge[8];
    int version = !bpe_bytes_in_order(tok) ? 3 : tok->pretok == BPE_PRETOK_BYTE_CLASSES ? 1 : 2;
    memcpy(header, BPE_MAGIC, 8);
    put_u32(header + 8, (uint32_t)version);
    put_u32(header + 12, tok->vocab_size);
    put_u32(header + 16, tok->eot_id);
    put_u32(header + 20, tok->n_merges);
    put_u32(header + 24, tok->pretok);   // versions 2 and 3
    for (int id = 0; id < 256; id++) header[BPE_HEADER_V2 + id] = tok->token_bytes[id][0];   // version 3
    put(sink, header, version == 1 ? BPE_HEADER_V1 : version == 2 ? BPE_HEADER_V2 : BPE_HEADER_V3);
    for (int i = 0; i < tok->n_merges; i++) {
        put_u32(merge, tok->merges[i][0]);
        put_u32(merge + 4, tok->merges[i][1]);
        put(sink, merge, sizeof merge);
    }
}

static void sink_write(ByteSink *s, const uint8_t *bytes, size_t n) {
    s->ok = s->ok && fwrite(bytes, 1, n, s->f) == n;
}

int bpe_save(const Tokenizer *tok, const char *path, AtomicMode mode, char *err, size_t errlen) {
    // Atomic: a crash leaves the old file or the new one, never half of one.
    AtomicFile af;
    ByteSink sink = {.f = atomic_open(&af, path, mode, err, errlen), .ok = 1};
    if (!sink.f) return -1;
    file_bytes(tok, sink_write, &sink);
    return atomic_commit(&af, sink.ok, err, errlen);
}

// FNV-1a, 64 bits: h = 14695981039346656037, then per byte
// h = (h xor byte) * 1099511628211 mod 2^64.
static void sink_fnv1a(ByteSink *s, const uint8_t *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) s->hash = (s->hash ^ bytes[i]) * 0x100000001b3ull;
}

// A loaded tokenizer has exactly its file's bytes (bpe_load accepts one
// layout only), so this is the checksum of tokenizer.bin as a file.
uint64_t bpe_checksum(const Tokenizer *tok) {
    ByteSink sink = {.hash = 0xcbf29ce484222325ull};
    file_bytes(tok, sink_fnv1a, &sink);
    return sink.hash;
}

// The whole file is read and checked before anything is sized from it: the
// header's counts must agree with each other and with the file size, which
// is at most 284 + 8 * (BPE_MAX_VOCAB - 257) bytes.
int bpe_load(Tokenizer *tok, const char *path, char *err, size_t errlen) {
    memset(tok, 0, sizeof *tok);
    enum { MAX_BYTES = BPE_HEADER_V3 + 8 * (BPE_MAX_VOCAB - 257) };
    long long file_size;
    FILE *f = fopen_regular_file(path, &file_size, err, errlen);
    if (!f) return -1;
    if (file_size < BPE_HEADER_V1 || file_size > MAX_BYTES) {
        snprintf(err, errlen, "%s: %lld bytes is too %s for a tokenizer file (%d..%d bytes)", path,
                 file_size, file_size < BPE_HEADER_V1 ? "short" : "long", BPE_HEADER_V1, (int)MAX_BYTES);
        fclose(f); return -1;
    }
    size_t size = (size_t)file_size;
    uint8_t *buf = malloc(size);
    if (!buf) { snprintf(err, errlen, "%s: out of memory", path); fclose(f); return -1; }
    size_t got = fread(buf, 1, size, f);
    int read_failed = ferror(f);
    fclose(f);
    if (got != size || read_failed) {
        snprintf(err, errlen, "%s: read error (%zu of %zu bytes)", path, got, size);
        free(buf); return -1;
    }
    uint32_t version = get_u32(buf + 8), vocab = get_u32(buf + 12), eot = get_u32(buf + 16), n_merges = get_u32(buf + 20);
    size_t header = version == 3 ? BPE_HEADER_V3 : version == 2 ? BPE_HEADER_V2 : BPE_HEADER_V1;
    uint32_t rule = version >= 2 && size >= header ? get_u32(buf + 24) : BPE_PRETOK_BYTE_CLASSES;
    const uint8_t *id_byte = version == 3 && size >= header ? buf + BPE_HEADER_V2 : NULL;
    int in_order = 1;
    for (int id = 0; id_byte && id < 256; id++) in_order &= id_byte[id] == id;
    const char *problem = NULL;
    char msg[200];
    if (memcmp(buf, BPE_MAGIC, 8) != 0) problem = "bad magic (not a ropelab tokenizer file)";
    else if (version < 1 || version > 3) {
        snprintf(msg, sizeof msg, "tokenizer version %u is not supported (expected 1, 2 or 3)", version); problem = msg;
    } else if (size < header) {
        snprintf(msg, sizeof msg, "file is %zu bytes, shorter than the %zu of a version %u header", size, header,
                 version); problem = msg;
    } else if (version == 2 && rule != BPE_PRETOK_GPT2) {   // byte classes are version 1's
        snprintf(msg, sizeof msg, "pre-tokenizer %u is not one of version 2 (%d: %s)", rule, BPE_PRETOK_GPT2,
                 pretok_name(BPE_PRETOK_GPT2)); problem = msg;
    } else if (version == 3 && rule != BPE_PRETOK_GPT2 && rule != BPE_PRETOK_BYTE_CLASSES) {
        snprintf(msg, sizeof msg, "pre-tokenizer %u is not one ropelab knows (%d: %s, %d: %s)", rule,
                 BPE_PRETOK_BYTE_CLASSES, pretok_name(BPE_PRETOK_BYTE_CLASSES), BPE_PRETOK_GPT2,
                 pretok_name(BPE_PRETOK_GPT2)); problem = msg;
    } else if (version == 3 && in_order) {   // one layout per tokenizer: then it is version 1's or 2's
        problem = "version 3 with ids 0..255 in byte order (such a tokenizer is written as version 1 or 2)";
    } else if (vocab < BPE_MIN_VOCAB || vocab > BPE_MAX_VOCAB) {
        snprintf(msg, sizeof msg, "vocabulary size %u out of range (%d..%d)", vocab, BPE_MIN_VOCAB, BPE_MAX_VOCAB); problem = msg;
    } else if (n_merges != vocab - 257) {
        snprintf(msg, sizeof msg, "vocabulary size %u does not match %u merges (expected %u)", vocab, n_merges, n_merges + 257); problem = msg;
    } else if (eot != vocab - 1) {
        snprintf(msg, sizeof msg, "eot id %u is not vocab_size - 1 = %u", eot, vocab - 1); problem = msg;
    } else if (size != header + 8 * (size_t)n_merges) {
        snprintf(msg, sizeof msg, "file is %zu bytes, expected %zu for %u merges", size,
                 header + 8 * (size_t)n_merges, n_merges); problem = msg;
    }
    if (problem) { snprintf(err, errlen, "%s: %s", path, problem); free(buf); return -1; }

    uint32_t (*merges)[2] = malloc((n_merges ? n_merges : 1) * sizeof *merges);
    if (!merges) { snprintf(err, errlen, "%s: out of memory", path); free(buf); return -1; }
    for (uint32_t i = 0; i < n_merges; i++) {
        merges[i][0] = get_u32(buf + header + 8 * i);
        merges[i][1] = get_u32(buf + header + 8 * i + 4);
    }
    char why[300];
    int rc = bpe_from_merges(tok, (BpePretok)rule, id_byte, (const uint32_t (*)[2])merges, (int)n_merges, why,
                             sizeof why);
    free(merges);
    free(buf);
    if (rc) { snprintf(err, errlen, "%s: %s", path, why); return -1; }
    return 0;
}

// ---------------------------------------------------------------- encode

// BPE on one piece: repeatedly merge every occurrence (left to right) of the
// adjacent pair with the lowest rank, which replays the merges of training in
// the order they were learned. In place in ids (len ids: the ids of the
// piece's bytes first); returns the number left. O(len x merges applied) at worst.
static size_t merge_passes(const Tokenizer *tok, const BpeInternal *in, const uint8_t *s, size_t len, uint32_t *ids) {
    for (size_t i = 0; i < len; i++) ids[i] = tok->byte_id[s[i]];
    size_t n = len;
    while (n > 1) {
        uint32_t best = UINT32_MAX;
        for (size_t i = 0; i + 1 < n; i++) {
            const uint32_t *r = u64map_get(&in->rank, pair_key(ids[i], ids[i + 1]));
            if (r && *r < best) best = *r;
        }
        if (best == UINT32_MAX) break;
        uint32_t left = tok->merges[best][0], right = tok->merges[best][1], id = 256 + best;
        size_t m = 0;   // m <= i: the pass writes only where it has read
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && ids[i] == left && ids[i + 1] == right) { ids[m++] = id; i += 2; }
            else ids[m++] = ids[i++];
        }
        n = m;
    }
    return n;
}

// The same merges in the same order, in O(len log len): for a piece longer than
// BPE_MAX_PIECE (GPT-2's rule does not cut its pieces: a long word of a script
// written without spaces, a long run of white space or of punctuation), where
// merge_passes could take len x merges steps. The symbols are a list (ids[k]
// at byte position k, next and prev positions), and a min-heap holds every
// adjacent pair that is a merge, keyed (rank, position of its left symbol).
// The top is the lowest rank, leftmost first; it is skipped if its left
// symbol was merged away or the pair there is no longer that rank's. That is
// merge_passes' order: a merge of rank r makes only pairs that hold the new id
// 256 + r, whose ranks are above r (a merge refers to earlier ids), so the
// pairs of rank r are merged left to right before any other. llama.cpp's BPE
// is this algorithm. Returns the number of ids (compacted to the front of
// ids), or 0 when out of memory (the caller then runs merge_passes).
typedef struct { uint32_t rank, pos; } PairEntry;

static int entry_before(PairEntry a, PairEntry b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void entry_push(PairEntry *heap, size_t *n, PairEntry e) {
    size_t i = (*n)++;
    for (; i > 0 && entry_before(e, heap[(i - 1) / 2]); i = (i - 1) / 2) heap[i] = heap[(i - 1) / 2];
    heap[i] = e;
}

static PairEntry entry_pop(PairEntry *heap, size_t *n) {
    PairEntry top = heap[0], last = heap[--*n];
    size_t i = 0;
    for (size_t c; (c = 2 * i + 1) < *n; i = c) {
        if (c + 1 < *n && entry_before(heap[c + 1], heap[c])) c++;
        if (!entry_before(heap[c], last)) break;
        heap[i] = heap[c];
    }
    heap[i] = last;
    return top;
}

static size_t merge_heap(const Tokenizer *tok, const BpeInternal *in, const uint8_t *s, size_t len, uint32_t *ids) {
    const uint32_t NONE = UINT32_MAX;
    if (len >= NONE) return 0;   // positions are uint32
    uint32_t *next = malloc(len * sizeof *next), *prev = malloc(len * sizeof *prev);
    // at most len - 1 pairs at the start, and each merge pushes at most two
    PairEntry *heap = malloc(3 * len * sizeof *heap);
    if (!next || !prev || !heap) { free(next); free(prev); free(heap); return 0; }
    size_t n_heap = 0;
    for (size_t k = 0; k < len; k++) {
        ids[k] = tok->byte_id[s[k]];
        next[k] = k + 1 < len ? (uint32_t)(k + 1) : NONE;
        prev[k] = k > 0 ? (uint32_t)(k - 1) : NONE;
    }
    for (size_t k = 0; k + 1 < len; k++) {
        const uint32_t *r = u64map_get(&in->rank, pair_key(ids[k], ids[k + 1]));
        if (r) entry_push(heap, &n_heap, (PairEntry){*r, (uint32_t)k});
    }
    while (n_heap > 0) {
        PairEntry e = entry_pop(heap, &n_heap);
        uint32_t l = e.pos, r = next[l];   // a merged-away symbol has next == prev == its own position
        if (r == NONE || r == l) continue;
        const uint32_t *rank = u64map_get(&in->rank, pair_key(ids[l], ids[r]));
        if (!rank || *rank != e.rank) continue;
        ids[l] = 256 + e.rank;
        next[l] = next[r];
        if (next[r] != NONE) prev[next[r]] = l;
        next[r] = prev[r] = r;
        if (prev[l] != NONE && (rank = u64map_get(&in->rank, pair_key(ids[prev[l]], ids[l]))))
            entry_push(heap, &n_heap, (PairEntry){*rank, prev[l]});
        if (next[l] != NONE && (rank = u64map_get(&in->rank, pair_key(ids[l], ids[next[l]]))))
            entry_push(heap, &n_heap, (PairEntry){*rank, l});
    }
    size_t m = 0;   // the list from position 0 (never merged away: it has no left neighbour)
    for (uint32_t k = 0; k != NONE; k = next[k]) ids[m++] = ids[k];
    free(next); free(prev); free(heap);
    return m;
}

static size_t encode_piece(const Tokenizer *tok, const BpeInternal *in, const uint8_t *s, size_t len, uint32_t *ids) {
    size_t m = len > BPE_MAX_PIECE ? merge_heap(tok, in, s, len, ids) : 0;
    return m > 0 ? m : merge_passes(tok, in, s, len, ids);
}

static CacheSlot *cache_find(BpeInternal *in, const uint8_t *s, int len, uint64_t h) {
    size_t mask = in->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        CacheSlot *c = &in->slots[i];
        if (c->key_len == 0) return c;
        if (c->hash == h && c->key_len == len && memcmp(in->keys + c->key_off, s, len) == 0) return c;
    }
}

// The cache only saves time: when memory for it runs out, encoding goes on
// without caching more pieces (the ids are the same either way).
static int cache_grow(BpeInternal *in) {
    size_t new_cap = in->cap ? 2 * in->cap : 4096;
    CacheSlot *slots = calloc(new_cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < in->cap; i++)
        if (in->slots[i].key_len) {
            size_t mask = new_cap - 1, j = in->slots[i].hash & mask;
            while (slots[j].key_len) j = (j + 1) & mask;
            slots[j] = in->slots[i];
        }
    free(in->slots);
    in->slots = slots;
    in->cap = new_cap;
    return 0;
}

static int cache_insert(BpeInternal *in, CacheSlot *slot, const uint8_t *s, int len, uint64_t h,
                        const uint32_t *ids, int n_ids) {
    if (in->keys_n + len > in->keys_cap) {
        size_t cap = 2 * (in->keys_n + len) + 4096;
        uint8_t *keys = realloc(in->keys, cap);
        if (!keys) return -1;
        in->keys = keys;
        in->keys_cap = cap;
    }
    if (in->ids_n + n_ids > in->ids_cap) {
        size_t cap = 2 * (in->ids_n + n_ids) + 4096;
        uint32_t *ids_new = realloc(in->ids, cap * sizeof *ids_new);
        if (!ids_new) return -1;
        in->ids = ids_new;
        in->ids_cap = cap;
    }
    *slot = (CacheSlot){h, (uint32_t)in->keys_n, (uint32_t)in->ids_n, (uint16_t)len, (uint16_t)n_ids};
    memcpy(in->keys + in->keys_n, s, len);
    memcpy(in->ids + in->ids_n, ids, n_ids * sizeof *ids);
    in->keys_n += len;
    in->ids_n += n_ids;
    in->n++;
    return 0;
}

size_t bpe_encode(const Tokenizer *tok, const uint8_t *text, size_t n, uint32_t *out) {
    BpeInternal *in = tok->internal;
    int caching = in->cap > 0 || cache_grow(in) == 0;
    size_t n_out = 0;
    for (size_t i = 0; i < n;) {
        size_t j = pretok_piece_end(tok->pretok, text, n, i), len = j - i;
        if (!caching || len > BPE_MAX_PIECE) {   // a long piece is rare: not cached
            n_out += encode_piece(tok, in, text + i, len, out + n_out);
            i = j;
            continue;
        }
        uint64_t h = hash_bytes(text + i, len);
        CacheSlot *slot = cache_find(in, text + i, (int)len, h);
        if (slot->key_len) {
            memcpy(out + n_out, in->ids + slot->ids_off, slot->n_ids * sizeof *out);
            n_out += slot->n_ids;
        } else {
            int m = (int)encode_piece(tok, in, text + i, len, out + n_out);
            if (in->n < CACHE_MAX_ENTRIES) {
                if (2 * (in->n + 1) > in->cap) {
                    if (cache_grow(in) != 0) caching = 0;
                    else slot = cache_find(in, text + i, (int)len, h);
                }
                if (caching && cache_insert(in, slot, text + i, (int)len, h, out + n_out, m) != 0) caching = 0;
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
