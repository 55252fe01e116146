// blas_cpu.c: re-exec with OPENBLAS_CORETYPE when OpenBLAS misdetects the CPU
// (see blas_cpu.h).
#include "common/blas_cpu.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void blas_use_native_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("ROPELAB_NO_BLAS_REEXEC")) return;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0) return;
    __builtin_cpu_init();
    // Haswell (AVX2 + FMA) kernels, not SkylakeX: where this workplace sets
    // OPENBLAS_CORETYPE it sets an AVX2 type, because older OpenBLAS builds
    // compute wrong results or crash with their AVX-512 kernels on newer CPUs.
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    const char *better = "Haswell";
    // Setting the variable first also guarantees at most one re-exec.
    if (setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    execv("/proc/self/exe", argv);
}
