// gguf.c: the GGUF version 3 writer (format in gguf.h).
#include "format/gguf.h"

#include <stdio.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/meter.h"

// GGUF's value types (ggml's enum gguf_type).
enum { T_UINT32 = 4, T_INT32 = 5, T_FLOAT32 = 6, T_BOOL = 7, T_STRING = 8, T_ARRAY = 9 };
enum { GGML_TYPE_F32 = 0 };

// Little-endian writers; *ok becomes 0 at the first failed write.
static void put(FILE *f, const void *p, size_t n, int *ok) { *ok = *ok && fwrite(p, 1, n, f) == n; }
static void put_u32(FILE *f, uint32_t v, int *ok) { put(f, &v, 4, ok); }   // ropelab builds on little-endian
static void put_u64(FILE *f, uint64_t v, int *ok) { put(f, &v, 8, ok); }   // machines only (docs/FORMAT.md)
static void put_str(FILE *f, const char *s, int *ok) { put_u64(f, strlen(s), ok); put(f, s, strlen(s), ok); }
static void put_zeros(FILE *f, size_t n, int *ok) {
    static const char zeros[GGUF_ALIGNMENT];
    put(f, zeros, n, ok);
}

static size_t align_up(size_t n) { return (n + GGUF_ALIGNMENT - 1) / GGUF_ALIGNMENT * GGUF_ALIGNMENT; }

static size_t tensor_bytes(const GgufTensor *t) {
    size_t n = sizeof(float);
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    return n;
}

static void put_kv(FILE *f, const GgufKv *kv, int *ok) {
    put_str(f, kv->key, ok);
    switch (kv->kind) {
    case GGUF_KV_U32: put_u32(f, T_UINT32, ok); put_u32(f, kv->u32, ok); break;
    case GGUF_KV_F32: put_u32(f, T_FLOAT32, ok); put(f, &kv->f32, 4, ok); break;
    case GGUF_KV_BOOL: {
        uint8_t b = kv->boolean != 0;
        put_u32(f, T_BOOL, ok);
        put(f, &b, 1, ok);
        break;
    }
    case GGUF_KV_STRING: put_u32(f, T_STRING, ok); put_str(f, kv->str, ok); break;
    case GGUF_KV_STRINGS:
        put_u32(f, T_ARRAY, ok); put_u32(f, T_STRING, ok); put_u64(f, kv->n, ok);
        for (size_t i = 0; i < kv->n; i++) put_str(f, kv->strs[i], ok);
        break;
    case GGUF_KV_I32S:
        put_u32(f, T_ARRAY, ok); put_u32(f, T_INT32, ok); put_u64(f, kv->n, ok);
        put(f, kv->i32s, kv->n * sizeof(int32_t), ok);
        break;
    }
}

int gguf_write(const char *path, const GgufKv *kv, int n_kv, const GgufTensor *tensors, int n_tensors,
               AtomicMode mode, Meter *meter, char *err, size_t errlen) {
    for (int i = 0; i < n_tensors; i++) {   // what ggml refuses to load, refused before writing
        const GgufTensor *t = &tensors[i];
        if (strlen(t->name) == 0 || t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) {
            snprintf(err, errlen, "%s: tensor %d ('%s') has %d dims (1..%d) or no name", path, i, t->name,
                     t->n_dims, GGUF_MAX_DIMS);
            return -1;
        }
    }
    AtomicFile af;
    FILE *f = atomic_open(&af, path, mode, err, errlen);
    if (!f) return -1;
    int ok = 1;
    put(f, "GGUF", 4, &ok);
    put_u32(f, 3, &ok);
    put_u64(f, (uint64_t)n_tensors, &ok);
    put_u64(f, (uint64_t)n_kv, &ok);
    for (int i = 0; i < n_kv; i++) put_kv(f, &kv[i], &ok);
    size_t offset = 0;   // in the data section
    for (int i = 0; i < n_tensors; i++) {
        const GgufTensor *t = &tensors[i];
        put_str(f, t->name, &ok);
        put_u32(f, (uint32_t)t->n_dims, &ok);
        for (int d = 0; d < t->n_dims; d++) put_u64(f, t->ne[d], &ok);
        put_u32(f, GGML_TYPE_F32, &ok);
        put_u64(f, offset, &ok);
        offset = align_up(offset + tensor_bytes(t));
    }
    long here = ftell(f);
    ok = ok && here >= 0;
    if (ok) put_zeros(f, align_up((size_t)here) - (size_t)here, &ok);
    // the data, in pieces of at most 16 MB: a progress line for a large file
    const size_t piece = (size_t)16 << 20;
    long long done = 0;
    for (int i = 0; i < n_tensors && ok; i++) {
        size_t n = tensor_bytes(&tensors[i]);
        for (size_t at = 0; at < n && ok; at += piece) {
            size_t len = n - at < piece ? n - at : piece;
            put(f, (const char *)tensors[i].data + at, len, &ok);
            done += (long long)len;
            if (meter) meter_update(meter, "writing", done >> 20, (long long)(offset >> 20), "MiB");
        }
        put_zeros(f, align_up(n) - n, &ok);
    }
    return atomic_commit(&af, ok, err, errlen);
}
