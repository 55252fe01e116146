// engine_testing.h: TEST-ONLY. The oneDNN engine's knobs and counters that
// only the tests and benchmarks (tests/) use; no program includes this
// header, and the model chooses its engines through engine_create.h alone
// (engine_onednn_create: the weight layout of each precision's default).
#ifndef ROPELAB_ENGINE_TESTING_H
#define ROPELAB_ENGINE_TESTING_H

#include <stddef.h>

#include "engine/engine_create.h"

// Where the oneDNN engine reads the weights from (engine_onednn_create: fp32 PLAIN,
// bf16 PACKED; WEIGHTS_DEFAULT picks that):
//   WEIGHTS_PACKED  two copies per weight (W^T for forward, W for dinp) in the blocked
//                   layout oneDNN chooses (memory format `any`)
//   WEIGHTS_PLAIN   fp32: the parameter itself, no copy (oneDNN packs blocks of it inside
//                   each call); bf16: one row-major bf16 copy of W, read as W^T by forward
typedef enum { WEIGHTS_DEFAULT, WEIGHTS_PACKED, WEIGHTS_PLAIN } WeightLayout;
int engine_onednn_create_with_layout(Engine **e, int bf16, int fused_attention, WeightLayout layout, char *err,
                                     size_t errlen);

typedef struct {
    long repacks;              // weight copies made from the parameters so far
    int primitives;            // linear matmul primitives created (one per op, shape, thread count)
    size_t weight_copy_bytes;  // memory held by weight copies
    size_t scratch_bytes;      // activations in bf16 + oneDNN's scratchpad (linear layers)
} OnednnStats;
void engine_onednn_stats(const Engine *e, OnednnStats *stats);
// Brings both copies of weight W (OC,C) up to date now (forward and backward do it on use).
int engine_onednn_prepack(Engine *e, const float *W, int OC, int C);

#endif
