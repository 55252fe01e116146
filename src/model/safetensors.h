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

typedef enum { ST_F32, ST_I32, ST_I64, ST_U8 } StDtype;
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
// directory. On any failure PATH is untouched and the temporary is removed.
int st_write(const char *path, const StTensorOut *tensors, int n_tensors,
             const StMeta *meta, int n_meta, char *err, size_t errlen);

typedef struct {            // a tensor read from a file
    char name[128];
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data;       // points into the loaded data section (may be unaligned: memcpy it out)
} StTensor;

typedef struct StFile StFile;
// Reads and validates the file: header length at most 100 MB and within the
// file's size, valid JSON, known dtypes, shapes matching byte ranges, ranges
// inside the data, non-overlapping and covering it exactly (so a truncated
// file is caught). Only the header is read before it is validated; the data
// section is then allocated and read whole (the tensors point into it), so
// a bad header is refused without reading or allocating the file's size.
int st_open(StFile **file, const char *path, char *err, size_t errlen);
// The same checks, reading only the header: metadata, names, dtypes and
// shapes are there, every tensor's data is NULL (a cheap look at a large file).
int st_open_header(StFile **file, const char *path, char *err, size_t errlen);
void st_close(StFile *file);
// The memory st_open takes for this file beyond its header: the data
// section, read whole (the sum of its tensors' sizes); known from the header alone.
size_t st_data_bytes(const StFile *file);
int st_num_tensors(const StFile *file);
const StTensor *st_tensor_at(const StFile *file, int i);
const StTensor *st_find(const StFile *file, const char *name); // NULL if absent
const char *st_meta(const StFile *file, const char *key);      // NULL if absent
const char *st_path(const StFile *file);

#endif
