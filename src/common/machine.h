// machine.h: what a run ran on, written beside its log (RUN_DIR/machine.txt)
// so that a log can be matched to the CPU, kernels and build that made it.
#ifndef ROPELAB_MACHINE_H
#define ROPELAB_MACHINE_H

#include <stdio.h>

// Writes "key = value" lines: cpu (model name, family, model), cpu_features
// (those the products depend on: avx2 fma avx512f avx512_bf16 amx_bf16),
// openblas (its build configuration), openblas_kernels (the set it runs),
// openblas_coretype (the environment's OPENBLAS_CORETYPE, empty if unset),
// build (compiler and the flags this program was compiled with).
void machine_describe(FILE *f);

#endif
