// safetensors.c: reading and writing safetensors files (see safetensors.h).
// The JSON header is built and parsed with cJSON; every number, range and
// size is checked before any tensor is handed out, so a corrupt file gives
// one clear error line and never a crash.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/fs.h"
#include "format/safetensors.h"

#include "common/atomic_file.h"

static const char *const DTYPE_NAMES[] = {"F32", "I32", "I64", "U8", "F16", "BF16"};
static const size_t DTYPE_SIZES[] = {4, 4, 8, 1, 2, 2};
enum { N_DTYPES = (int)(sizeof DTYPE_SIZES / sizeof DTYPE_SIZES[0]) };

const char *st_dtype_name(StDtype d) { return DTYPE_NAMES[d]; }
size_t st_dtype_size(StDtype d) { return DTYPE_SIZES[d]; }

static int dtype_from_name(const char *s, StDtype *d) {
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(s, DTYPE_NAMES[i]) == 0) { *d = (StDtype)i; return 0; }
    return -1;
}

/* ---------------------------------------------------------------- writing */

static int write_all(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

static char *build_header(const StTensorOut *t, int n, const StMeta *meta, int n_meta, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[i].key, meta[i].value);
    }
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_AddObjectToObject(root, t[i].name);
        cJSON_AddStringToObject(o, "dtype", st_dtype_name(t[i].dtype));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
            numel *= (size_t)t[i].shape[d];
        }
        size_t nbytes = numel * st_dtype_size(t[i].dtype);
        cJSON *offs = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + nbytes)));
        offset += nbytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return NULL;
    // pad with spaces to a multiple of 8 so the data starts aligned
    size_t raw = strlen(json), padded = (raw + 7) / 8 * 8;
    char *h = realloc(json, padded + 1);
    if (!h) { free(json); return NULL; }
    memset(h + raw, ' ', padded - raw);
    h[padded] = '\0';
    *len = padded;
    return h;
}

int st_write(const char *path, const StTensorOut *t, int n, const StMeta *meta, int n_meta,
             AtomicMode mode, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS || !t[i].name || !t[i].name[0] ||
            strcmp(t[i].name, "__metadata__") == 0) {
            snprintf(err, errlen, "%s: tensor %d has a bad name or rank", path, i);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(t[i].name, t[j].name) == 0) {
                snprintf(err, errlen, "%s: tensor %s given twice", path, t[i].name);
                return -1;
            }
    }
    size_t hlen = 0;
    char *header = build_header(t, n, meta, n_meta, &hlen);
    if (!header) { snprintf(err, errlen, "%s: out of memory building the header", path); return -1; }
    AtomicFile af;
    FILE *f = atomic_open(&af, path, mode, err, errlen);
    if (!f) { free(header); return -1; }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    int ok = write_all(f, len8, 8) && write_all(f, header, hlen);
    for (int i = 0; ok && i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        ok = write_all(f, t[i].data, numel * st_dtype_size(t[i].dtype));
    }
    free(header);
    return atomic_commit(&af, ok, err, errlen);
}

/* ---------------------------------------------------------------- reading */

struct StFile {
    char *path;
    FILE *fp;               // open from st_open_header until st_close: st_read_tensor reads through it
    uint64_t data_start;    // 8 + N: where the data section begins in the file
    unsigned char *buf;     // st_open: the data section (file bytes 8 + N ..), read after the header checked
    StTensor *tensors;
    uint64_t *begin;        // each tensor's first byte, relative to the data section
    int n_tensors;
    char **meta_keys, **meta_values;
    int n_meta;
};

void st_close(StFile *f) {
    if (!f) return;
    if (f->fp) fclose(f->fp);
    free(f->begin);
    for (int i = 0; i < f->n_meta; i++) { free(f->meta_keys[i]); free(f->meta_values[i]); }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->tensors);
    free(f->buf);
    free(f->path);
    free(f);
}

int st_num_tensors(const StFile *f) { return f->n_tensors; }
const StTensor *st_tensor_at(const StFile *f, int i) { return (i >= 0 && i < f->n_tensors) ? &f->tensors[i] : NULL; }
const char *st_path(const StFile *f) { return f->path; }

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

// A JSON number that is a non-negative integer below 2^53 (exact in a double).
static int json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return -1;
    double v = item->valuedouble;
    if (!(v >= 0.0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v) return -1;
    *out = (uint64_t)v;
    return 0;
}

typedef struct { uint64_t begin, end; int index; } Range;

static int cmp_range(const void *a, const void *b) {
    const Range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : (x->end > y->end);
}

// Parses one tensor entry of the header into t (data offsets into r).
static int parse_tensor(const cJSON *o, StTensor *t, Range *r, const char *path, char *err, size_t errlen) {
    const char *name = o->string;
    if (!name[0]) {   // st_write refuses one too: no message could name it
        snprintf(err, errlen, "%s: the header holds a tensor with an empty name (\"\")", path);
        return -1;
    }
    if (strlen(name) >= sizeof t->name) {
        snprintf(err, errlen, "%s: tensor name too long (%.40s...)", path, name);
        return -1;
    }
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f) {   // would break the one-line messages that name it
            snprintf(err, errlen, "%s: a tensor name holds control character 0x%02x", path, *c);
            return -1;
        }
    snprintf(t->name, sizeof t->name, "%s", name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(o, "data_offsets");
    if (!cJSON_IsObject(o) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs)) {
        snprintf(err, errlen, "%s: tensor %s lacks dtype, shape or data_offsets", path, name);
        return -1;
    }
    if (dtype_from_name(dtype->valuestring, &t->dtype) != 0) {
        snprintf(err, errlen, "%s: tensor %s has unsupported dtype %s", path, name, dtype->valuestring);
        return -1;
    }
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS) {
        snprintf(err, errlen, "%s: tensor %s has %d dims (at most %d supported)", path, name, ndim, ST_MAX_DIMS);
        return -1;
    }
    t->ndim = ndim;
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        uint64_t s;
        if (json_uint(cJSON_GetArrayItem(shape, d), &s) != 0 || s > ((uint64_t)1 << 40)) {
            snprintf(err, errlen, "%s: tensor %s has a bad shape entry", path, name);
            return -1;
        }
        t->shape[d] = (int64_t)s;
        numel *= s;
        if (numel > ((uint64_t)1 << 44)) {
            snprintf(err, errlen, "%s: tensor %s is impossibly large", path, name);
            return -1;
        }
    }
    uint64_t b, e;
    if (cJSON_GetArraySize(offs) != 2 || json_uint(cJSON_GetArrayItem(offs, 0), &b) != 0 ||
        json_uint(cJSON_GetArrayItem(offs, 1), &e) != 0 || b > e) {
        snprintf(err, errlen, "%s: tensor %s has bad data_offsets", path, name);
        return -1;
    }
    t->nbytes = (size_t)(numel * st_dtype_size(t->dtype));
    if (e - b != t->nbytes) {
        snprintf(err, errlen, "%s: tensor %s has data_offsets [%llu, %llu] (%llu bytes) but its shape needs %zu bytes",
                 path, name, (unsigned long long)b, (unsigned long long)e,
                 (unsigned long long)(e - b), t->nbytes);
        return -1;
    }
    r->begin = b;
    r->end = e;
    return 0;
}

static int parse_metadata(StFile *f, const cJSON *meta, char *err, size_t errlen) {
    if (!cJSON_IsObject(meta)) {
        snprintf(err, errlen, "%s: __metadata__ is not an object", f->path);
        return -1;
    }
    int n = cJSON_GetArraySize(meta);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_values = calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_values) { snprintf(err, errlen, "%s: out of memory", f->path); return -1; }
    const cJSON *item;
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item)) {
            snprintf(err, errlen, "%s: metadata value of %s is not a string", f->path, item->string);
            return -1;
        }
        f->meta_keys[f->n_meta] = strdup(item->string);
        f->meta_values[f->n_meta] = strdup(item->valuestring);
        f->n_meta++;
    }
    return 0;
}

// Every byte of the data section belongs to exactly one tensor.
static int check_ranges(StFile *f, Range *r, int n, uint64_t data_size, char *err, size_t errlen) {
    uint64_t covered = 0, max_end = 0;
    int max_i = 0;
    for (int i = 0; i < n; i++) {
        covered += r[i].end - r[i].begin;
        if (r[i].end > max_end) { max_end = r[i].end; max_i = i; }
    }
    if (max_end > data_size) {
        if (covered > data_size)
            snprintf(err, errlen, "%s: file is truncated (header says %llu bytes of data, file has %llu)",
                     f->path, (unsigned long long)covered, (unsigned long long)data_size);
        else
            snprintf(err, errlen, "%s: tensor %s has data_offsets out of range (end %llu, data is %llu bytes)",
                     f->path, f->tensors[max_i].name, (unsigned long long)max_end,
                     (unsigned long long)data_size);
        return -1;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].begin < pos) {
            snprintf(err, errlen, "%s: tensors %s and %s overlap", f->path,
                     f->tensors[r[i - 1].index].name, f->tensors[r[i].index].name);
            return -1;
        }
        if (r[i].begin > pos) {
            snprintf(err, errlen, "%s: bytes %llu..%llu of the data belong to no tensor", f->path,
                     (unsigned long long)pos, (unsigned long long)r[i].begin);
            return -1;
        }
        pos = r[i].end;
    }
    if (pos != data_size) {
        snprintf(err, errlen, "%s: %llu bytes after the last tensor belong to no tensor", f->path,
                 (unsigned long long)(data_size - pos));
        return -1;
    }
    return 0;
}

// Parses and checks the header against a data section of data_size bytes:
// the tensors' names, dtypes, shapes and where each begins (f->begin).
static int parse_header(StFile *f, const char *json, size_t len, uint64_t data_size, char *err, size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long where = (at && at >= json && at <= json + len) ? (long)(at - json) : -1;
        snprintf(err, errlen, "%s: header is not valid JSON (error near byte %ld)", f->path, where);
        return -1;
    }
    int rc = -1;
    Range *ranges = NULL;
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "%s: header is not a JSON object", f->path);
        goto done;
    }
    int n_items = cJSON_GetArraySize(root);
    f->tensors = calloc((size_t)n_items + 1, sizeof(StTensor));
    f->begin = calloc((size_t)n_items + 1, sizeof(uint64_t));
    ranges = calloc((size_t)n_items + 1, sizeof(Range));
    if (!f->tensors || !f->begin || !ranges) { snprintf(err, errlen, "%s: out of memory", f->path); goto done; }
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (f->meta_keys) { snprintf(err, errlen, "%s: __metadata__ given twice", f->path); goto done; }
            if (parse_metadata(f, item, err, errlen) != 0) goto done;
            continue;
        }
        int k = f->n_tensors;
        if (parse_tensor(item, &f->tensors[k], &ranges[k], f->path, err, errlen) != 0) goto done;
        if (st_find(f, item->string)) {
            snprintf(err, errlen, "%s: tensor %s appears twice in the header", f->path, item->string);
            goto done;
        }
        ranges[k].index = k;
        f->begin[k] = ranges[k].begin;
        f->n_tensors++;
    }
    if (check_ranges(f, ranges, f->n_tensors, data_size, err, errlen) != 0) goto done;
    rc = 0;
done:
    free(ranges);
    cJSON_Delete(root);
    return rc;
}

// Reads n bytes at the stream's position; a short read is a read error, or
// the file shrinking since its size was taken.
static int read_exact(FILE *fp, void *dst, size_t n, const char *path, char *err, size_t errlen) {
    if (n == 0 || fread(dst, 1, n, fp) == n) return 0;
    snprintf(err, errlen, "%s: read error (%s)", path, ferror(fp) ? strerror(errno) : "file shrank");
    return -1;
}

// In file order, each step sized only by what the steps before checked:
//   1. the 8-byte length N, checked against ST_MAX_HEADER and the file's
//      real size S (from fstat, not from anything the file says);
//   2. the N header bytes, parsed and checked against a data section of
//      S - 8 - N bytes (parse_header: every tensor's range inside it, the
//      ranges covering it exactly).
// A file with a bad header costs at most N <= ST_MAX_HEADER bytes of
// memory and reading, however large the file. No tensor byte is read here:
// the file stays open for st_read_tensor (or st_open's whole read).
int st_open_header(StFile **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    StFile *f = calloc(1, sizeof(StFile));
    if (!f || !(f->path = strdup(path))) { free(f); snprintf(err, errlen, "%s: out of memory", path); return -1; }
    long long file_size;
    if (!(f->fp = fopen_regular_file(path, &file_size, err, errlen))) {
        st_close(f);
        return -1;
    }
    char *header = NULL;
    int rc = -1;
    if (file_size < 8) {
        snprintf(err, errlen, "%s: file too short for a safetensors header (%lld bytes)", path, file_size);
        goto done;
    }
    unsigned char len8[8];
    if (read_exact(f->fp, len8, 8, path, err, errlen) != 0) goto done;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen > ST_MAX_HEADER) {
        snprintf(err, errlen, "%s: header length %llu is more than any ropelab file has (at most %u bytes); not read",
                 path, (unsigned long long)hlen, ST_MAX_HEADER);
        goto done;
    }
    if (hlen < 2 || hlen > (uint64_t)file_size - 8) {
        snprintf(err, errlen, "%s: bad header length %llu (file has %lld bytes)", path,
                 (unsigned long long)hlen, file_size);
        goto done;
    }
    header = malloc((size_t)hlen + 1);   // + a NUL that cJSON never needs but may look at
    if (!header) {
        snprintf(err, errlen, "%s: out of memory for a header of %llu bytes", path, (unsigned long long)hlen);
        goto done;
    }
    if (read_exact(f->fp, header, (size_t)hlen, path, err, errlen) != 0) goto done;
    header[hlen] = '\0';
    f->data_start = 8 + hlen;
    if (parse_header(f, header, (size_t)hlen, (uint64_t)file_size - f->data_start, err, errlen) != 0) goto done;
    rc = 0;
done:
    free(header);
    if (rc != 0) {
        st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int st_open(StFile **out, const char *path, char *err, size_t errlen) {
    StFile *f;
    if (st_open_header(&f, path, err, errlen) != 0) return -1;
    uint64_t data_size = 0;
    for (int i = 0; i < f->n_tensors; i++) data_size += f->tensors[i].nbytes;
    f->buf = (size_t)data_size == data_size ? malloc(data_size > 0 ? (size_t)data_size : 1) : NULL;
    if (!f->buf) {
        snprintf(err, errlen, "%s: out of memory for %llu bytes of tensor data", path, (unsigned long long)data_size);
        st_close(f);
        return -1;
    }
    if (read_exact(f->fp, f->buf, (size_t)data_size, path, err, errlen) != 0) {   // right after the header
        st_close(f);
        return -1;
    }
    for (int i = 0; i < f->n_tensors; i++) f->tensors[i].data = f->buf + f->begin[i];
    *out = f;
    return 0;
}

// nbytes bytes of tensor t, from byte `at` of its data, into dst.
static int read_bytes(const StFile *f, const StTensor *t, size_t at, size_t nbytes, void *dst, char *err,
                      size_t errlen) {
    if (t->data) {   // st_open read the data section already
        memcpy(dst, (const char *)t->data + at, nbytes);
        return 0;
    }
    int fd = fileno(f->fp);
    off_t start = (off_t)(f->data_start + f->begin[t - f->tensors] + at);
    for (size_t done = 0; done < nbytes;) {
        ssize_t got = pread(fd, (char *)dst + done, nbytes - done, start + (off_t)done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            snprintf(err, errlen, "%s: read error in tensor %s (%s)", f->path, t->name,
                     got < 0 ? strerror(errno) : "file shrank");
            return -1;
        }
        done += (size_t)got;
    }
    return 0;
}

int st_read_tensor(const StFile *f, const StTensor *t, void *dst, char *err, size_t errlen) {
    return read_bytes(f, t, 0, t->nbytes, dst, err, errlen);
}

// IEEE binary16 -> float, exactly: the exponent rebiased (15 -> 127), the
// 10 fraction bits moved up; a subnormal (fraction x 2^-24) is a normal float.
static float f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, fraction = h & 0x3FFu, u;
    if (exponent == 0x1F) u = sign | 0x7F800000u | fraction << 13;   // infinity, NaN
    else if (exponent > 0) u = sign | (exponent + 112) << 23 | fraction << 13;
    else {
        float v = (float)fraction * 0x1p-24f;   // zero or a subnormal: exact
        memcpy(&u, &v, sizeof u);
        u |= sign;
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// bfloat16 -> float: the top 16 bits of a float.
static float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

int st_read_floats(const StFile *f, const StTensor *t, size_t first, size_t n, float *dst, char *err,
                   size_t errlen) {
    size_t size = st_dtype_size(t->dtype), numel = t->nbytes / size;
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
        snprintf(err, errlen, "%s: tensor %s has dtype %s; F32, F16 and BF16 are read as floats", f->path, t->name,
                 st_dtype_name(t->dtype));
        return -1;
    }
    if (first > numel || n > numel - first) {
        snprintf(err, errlen, "%s: elements %zu.. of tensor %s are outside its %zu", f->path, first, t->name, numel);
        return -1;
    }
    // The 16-bit values land in dst's first half, then are widened from the
    // last down: value i is read (bytes 2i, 2i+1) before float i (bytes 4i..4i+3)
    // overwrites anything not yet read.
    if (read_bytes(f, t, first * size, n * size, dst, err, errlen) != 0) return -1;
    const unsigned char *raw = (const unsigned char *)dst;
    for (size_t i = n; t->dtype != ST_F32 && i-- > 0;) {
        uint16_t h = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);   // little-endian
        dst[i] = t->dtype == ST_F16 ? f16_to_float(h) : bf16_to_float(h);
    }
    return 0;
}
