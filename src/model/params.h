// params.h: the parameter table and its buffers (params.c), and a model
// built on them without training buffers (gpt.c), for gpt.c and the
// weights file's loader (src/format/weights_file.c).
#ifndef ROPELAB_PARAMS_H
#define ROPELAB_PARAMS_H

#include "model/gpt_internal.h"

// params.c
int params_build_table(GPT *m, char *err, size_t errlen);  // the table (entries, offsets) only
int params_alloc(GPT *m, int with_grads, char *err, size_t errlen);   // buffers and named pointers
size_t params_buffer_bytes(size_t n);                      // the bytes of one buffer of n parameters
void params_init(GPT *m, uint64_t seed);
void params_free(GPT *m);
// gpt.c: a model's description (config, scheme, parameter table) without
// any buffer, to check a file against before allocating (gpt_load); and a
// whole model with uninitialised parameters, with a gradient buffer or
// (with_grads 0: a model read to evaluate, sample or export) without.
int gpt_describe(GPT **model, const GPTConfig *cfg, char *err, size_t errlen);
int gpt_create_uninit(GPT **model, const GPTConfig *cfg, int with_grads, char *err, size_t errlen);

#endif
