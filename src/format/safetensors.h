// safetensors.h: reading and writing safetensors files.
//
// Format: 8-byte little-endian header length N, then N bytes of JSON
//   {"__metadata__": {"key": "value", ...},
//    "name": {"dtype": "F32", "shape": [a, b], "data_offsets": [begin, end]}, ...}
// then the raw little-endian tensor data; offsets are relative to the end of
// the header. The JSON is parsed with cJSON (Debian's libcjson).
#ifndef ROPELAB_SAFETENSORS_H
#define ROPELAB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/atomic_file.h"

// F16 and BF16 are read (st_read_floats: Hugging Face's half-precision weights), not written by ropelab.
typedef enum { ST_F32, ST_I32, ST_I64, ST_U8, ST_F16, ST_BF16 } StDtype;
const char *st_dtype_name(StDtype d);  // "F32", ...
size_t st_dtype_size(StDtype d);

#define ST_MAX_DIMS 4

typedef struct StTensorOut { // a tensor to write
    const char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;       // product(shape) * dtype size bytes
} StTensorOut;

typedef struct { const char *key, *value; } StMeta;

// Writes the file atomically: a unique PATH.tmp.XXXXXX, fsync, rename over PATH, fsync of the
// directory. On any failure PATH is untouched and the temporary is removed. mode:
// whether an existing PATH is replaced (common/atomic_file.h).
int st_write(const char *path, const StTensorOut *tensors, int n_tensors,
             const StMeta *meta, int n_meta, AtomicMode mode, char *err, size_t errlen);

typedef struct {            // a tensor read from a file
    char name[128];
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data;       // st_open: points into the loaded data section (may be unaligned: memcpy
                            // it out); st_open_header: NULL (st_read_tensor reads it)
} StTensor;

// The longest header ropelab reads, 4 MiB: over twice what the largest file
// it writes needs. That file is the training checkpoint of the largest
// model, three tensors (the weights, two AdamW moments) per parameter
// tensor, and the model has at most 1 (wte) + 2 (the scheme's,
// POS_MAX_PARAMS) + 12 per layer x 256 layers (n_layer's maximum,
// model/config.c) + 2 (ln_f) = 3,077 of them: 9,231 tensors. One entry, as
// st_write prints it,
//   "NAME":{"dtype":"F32","shape":[A,B],"data_offsets":[X,Y]},
// is 49 bytes of fixed text, a name of at most 8 ("adamw.m.") + 63
// (ParamEntry's), two dims of at most 8 digits (2^24 tokens; widths are
// smaller) and a comma, and two offsets below 3 x 4 x 2^34 bytes (a model
// has under 2^34 parameters), 12 digits each: at most 49 + 71 + 17 + 24 =
// 161 bytes, under 256. With 8 KB for __metadata__ (under 64 keys and
// values of under 128 bytes), 9,231 x 256 + 8,192 = 2.4 MB. A larger length
// is refused from the file's first 8 bytes, before anything is allocated or
// read (the reference implementation allows 100 MB, which a junk file would
// cost in memory and reading). tests/test_model_safetensors.c writes the
// largest checkpoint (narrow, so its numbers are short) and finds its header
// within a quarter of this.
#define ST_MAX_HEADER (4u << 20)

typedef struct StFile StFile;
// Reads and validates the header only: header length at most ST_MAX_HEADER and
// within the file's size, valid JSON, known dtypes, shapes matching byte
// ranges, ranges inside the data, non-overlapping and covering it exactly (so
// a truncated file is caught). Metadata, names, dtypes and shapes are then
// there and no tensor byte has been read or allocated, whatever the file's
// size: a reader checks what it needs first, then reads each tensor it uses
// with st_read_tensor. The file stays open until st_close.
int st_open_header(StFile **file, const char *path, char *err, size_t errlen);
// The same, then the whole data section is allocated and read (every
// tensor's data points into it): for generic files read whole (debug states, tests).
int st_open(StFile **file, const char *path, char *err, size_t errlen);
// Tensor t of file (t from st_find or st_tensor_at): its nbytes bytes into dst.
// A read that comes short (the file shrank since it was opened) is an error.
int st_read_tensor(const StFile *file, const StTensor *t, void *dst, char *err, size_t errlen);
// Elements first .. first + n - 1 (in storage order) of an F32, F16 or BF16
// tensor t, as floats into dst: a 16-bit value is widened exactly (every F16
// and BF16 value is a float). -1 for another dtype, a range outside the
// tensor, or a short read. Needs no buffer but dst: a part of a large tensor
// is read through a small one (format/hf_read.c).
int st_read_floats(const StFile *file, const StTensor *t, size_t first, size_t n, float *dst, char *err,
                   size_t errlen);
void st_close(StFile *file);
int st_num_tensors(const StFile *file);
const StTensor *st_tensor_at(const StFile *file, int i);
const StTensor *st_find(const StFile *file, const char *name); // NULL if absent
const char *st_meta(const StFile *file, const char *key);      // NULL if absent
const char *st_path(const StFile *file);

#endif
