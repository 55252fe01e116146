// hashmap.h: the small hash tables of the data layer (header-only, internal).
//
// U64Map maps a 64-bit key to a 32-bit value by open addressing with linear
// probing; the capacity is a power of two and the table doubles at 50% load.
// The key UINT64_MAX marks an empty slot and cannot be stored (token-pair keys
// are (left << 32) | right with ids < 2^31, so they never collide with it).
// Entries are never removed: BPE only ever adds pairs and ranks.
//
// hash_bytes is FNV-1a over a byte string followed by a final mix; it keys the
// word tables of training and the word cache of encoding.
#ifndef ROPELAB_DATA_HASHMAP_H
#define ROPELAB_DATA_HASHMAP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U64MAP_EMPTY UINT64_MAX

static inline uint64_t hash_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return hash_mix64(h ^ n);
}

typedef struct {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;   // cap is a power of two
} U64Map;

// 0, or -1 (and an empty map that u64map_free accepts) when out of memory.
static inline int u64map_init(U64Map *m, size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    m->keys = malloc(cap * sizeof(uint64_t));
    m->vals = malloc(cap * sizeof(uint32_t));
    m->cap = cap;
    m->n = 0;
    if (!m->keys || !m->vals) {
        free(m->keys); free(m->vals);
        memset(m, 0, sizeof *m);
        return -1;
    }
    memset(m->keys, 0xff, cap * sizeof(uint64_t));
    return 0;
}

static inline void u64map_free(U64Map *m) {
    free(m->keys); free(m->vals);
    memset(m, 0, sizeof *m);
}

// Pointer to the value of key, or NULL if absent.
static inline uint32_t *u64map_get(const U64Map *m, uint64_t key) {
    size_t mask = m->cap - 1, i = hash_mix64(key) & mask;
    while (m->keys[i] != U64MAP_EMPTY) {
        if (m->keys[i] == key) return &m->vals[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

static inline int u64map_grow(U64Map *m);

// Pointer to the value of key; inserts key with value val first if absent
// (*inserted tells which). The pointer is valid until the next insert.
// NULL when the table had to grow and memory ran out (the map is unchanged).
static inline uint32_t *u64map_put(U64Map *m, uint64_t key, uint32_t val, int *inserted) {
    if (2 * (m->n + 1) > m->cap && u64map_grow(m) != 0) return NULL;
    size_t mask = m->cap - 1, i = hash_mix64(key) & mask;
    while (m->keys[i] != U64MAP_EMPTY) {
        if (m->keys[i] == key) { if (inserted) *inserted = 0; return &m->vals[i]; }
        i = (i + 1) & mask;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    if (inserted) *inserted = 1;
    return &m->vals[i];
}

static inline int u64map_grow(U64Map *m) {
    U64Map bigger;
    if (u64map_init(&bigger, m->cap) != 0) return -1;   // capacity 2 * old cap
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != U64MAP_EMPTY) u64map_put(&bigger, m->keys[i], m->vals[i], NULL);
    u64map_free(m);
    *m = bigger;
    return 0;
}

#endif
