// gguf.h: writing GGUF files, the single-file model format llama.cpp loads
// (GGUF version 3, as ggml's docs/gguf.md specifies it). All integers and
// floats little-endian:
//
//   magic "GGUF", version uint32 = 3, tensor count uint64, key-value count uint64
//   key-values:    key (string), value type uint32, value
//   tensor infos:  name (string), n_dims uint32, ne[0..n_dims-1] uint64 (ne[0] varies
//                  fastest), ggml type uint32 (0 = F32), offset uint64 into the data section
//   padding to the alignment (32 bytes, general.alignment's default), then the data
//   section: each tensor at its offset, every offset a multiple of 32
//
// where a string is its length uint64 then its bytes (no terminator) and an
// array is its element type uint32, its count uint64, then the elements.
// Only the value types the exporter uses are here.
#ifndef ROPELAB_GGUF_H
#define ROPELAB_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/atomic_file.h"
#include "common/meter.h"

#define GGUF_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 63   // ggml's GGML_MAX_NAME (64) with its terminator

typedef enum { GGUF_KV_U32, GGUF_KV_F32, GGUF_KV_BOOL, GGUF_KV_STRING, GGUF_KV_STRINGS, GGUF_KV_I32S } GgufKvKind;

typedef struct {              // one key-value: key and the field of its kind
    const char *key;
    GgufKvKind kind;
    uint32_t u32;
    float f32;
    int boolean;
    const char *str;
    const char *const *strs;  // GGUF_KV_STRINGS: n strings (NUL-terminated)
    const int32_t *i32s;      // GGUF_KV_I32S: n values
    size_t n;
} GgufKv;

typedef struct {              // one F32 tensor
    char name[GGUF_MAX_NAME + 1];
    int n_dims;
    uint64_t ne[GGUF_MAX_DIMS];   // ne[0] varies fastest: a row-major [rows, cols] matrix is ne = {cols, rows}
    const float *data;
} GgufTensor;

// Writes the file atomically (common/atomic_file.h): a failure leaves PATH as
// it was; mode says whether an existing PATH is replaced. 0, or -1 with
// "path: problem" in err. meter (or NULL): progress of the tensors' data, in MiB.
int gguf_write(const char *path, const GgufKv *kv, int n_kv, const GgufTensor *tensors, int n_tensors,
               AtomicMode mode, Meter *meter, char *err, size_t errlen);

#endif
