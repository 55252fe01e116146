// fuzz_safetensors.c: st_open on arbitrary bytes, then every tensor and the
// contract's metadata keys are walked (every data byte read, so a pointer
// outside the file is caught by AddressSanitizer).
// Checked: st_open's documented validation (names unique, bytes = shape x
// dtype size, the tensors cover the data section exactly).
#include "fuzz_util.h"

#include <string.h>

#include "format/safetensors.h"

int fuzz_safetensors_one(const uint8_t *data, size_t size) {
    char err[512];
    StFile *f;
    if (st_open(&f, fuzz_write_file(data, size), err, sizeof err) != 0) return 0;
    uint64_t hlen = 0;   // st_open accepted it, so the 8-byte length is there
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)data[i] << (8 * i);
    uint64_t covered = 0;
    volatile uint8_t sink = 0;
    int n = st_num_tensors(f);
    for (int i = 0; i < n; i++) {
        const StTensor *t = st_tensor_at(f, i);
        if (!t || st_find(f, t->name) != t) fuzz_fail("safetensors", "tensor names are not unique");
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) fuzz_fail("safetensors", "rank out of range");
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (numel * st_dtype_size(t->dtype) != t->nbytes) fuzz_fail("safetensors", "bytes do not match the shape");
        for (size_t j = 0; j < t->nbytes; j++) sink ^= ((const uint8_t *)t->data)[j];
        covered += t->nbytes;
    }
    if (st_tensor_at(f, -1) || st_tensor_at(f, n)) fuzz_fail("safetensors", "st_tensor_at out of range");
    if (8 + hlen + covered != size) fuzz_fail("safetensors", "tensors do not cover the data exactly");
    static const char *const keys[] = {"format", "pos", "n_layer", "d_model", "vocab_size", "step", "data_rng"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *v = st_meta(f, keys[k]);
        if (v) sink ^= (uint8_t)strlen(v);
    }
    (void)sink;
    st_close(f);
    return 0;
}

FUZZ_TARGET(fuzz_safetensors_one)
