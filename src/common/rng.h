// rng.h: the one random number generator of ropelab (header-only).
//
// splitmix64 for seeding and hashing, xoshiro256** for the stream. A stream
// is 4 x uint64 of state, so it can be saved in a checkpoint and restored to
// continue exactly (the data loader does that for exact resume).
//
// Every parameter tensor draws from its own stream, seeded from the run seed
// and the tensor's name (rng_seed_named), so two runs that differ only in the
// positional scheme start with bit-identical values in every tensor they share.
#ifndef ROPELAB_RNG_H
#define ROPELAB_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } Rng;

static inline uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void rng_seed(Rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

// FNV-1a hash of a name, mixed with the seed: one independent stream per name.
static inline void rng_seed_named(Rng *r, uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    rng_seed(r, seed ^ h);
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// xoshiro256**: next 64 random bits.
static inline uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rng_rotl(s[3], 45);
    return result;
}

// Uniform in [0, 1) with 53 random bits.
static inline double rng_uniform(Rng *r) { return (rng_u64(r) >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n) (n > 0), by rejection so there is no modulo bias.
static inline uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do { x = rng_u64(r); } while (x >= limit);
    return x % n;
}

// Standard normal by Box-Muller (one value per call; simple and exact enough).
static inline double rng_normal(Rng *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
