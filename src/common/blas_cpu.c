// blas_cpu.c: re-executes the program with OPENBLAS_CORETYPE=Haswell when
// OpenBLAS fell back to its SSE3 "Prescott" kernels on a CPU that has AVX2
// and FMA (see blas_cpu.h). Nothing else is changed: a value of
// OPENBLAS_CORETYPE that is already set is kept, and so is any core OpenBLAS
// recognised by itself (Haswell, SkylakeX, Cooperlake, Zen ...).
#include "common/blas_cpu.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void blas_use_native_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("ROPELAB_NO_BLAS_REEXEC")) return;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0) return;
    __builtin_cpu_init();
    // OpenBLAS did not recognise this CPU (a model newer than the OpenBLAS
    // build, or a virtual CPU reporting a generic model), so any choice here
    // is a guess. Haswell's kernels need AVX2 and FMA, the two features
    // checked here. An AVX-512 kernel set (SkylakeX, Cooperlake) is not
    // guessed: it needs more features than these, and AVX-512 kernels
    // are where OpenBLAS has had wrong results (e.g. the AVX-512 DGEMM kernel
    // of 0.3.4-0.3.6, OpenBLAS issue 2182; DYNAMIC_ARCH builds made on a
    // machine without AVX-512, issue 2986).
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    const char *better = "Haswell";
    // Setting the variable first also guarantees at most one re-exec.
    if (setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    execv("/proc/self/exe", argv);
}

const char *blas_kernels(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

static int has_avx2_fma(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void blas_use_reproducible_kernels(char **argv) {
    if (strcasecmp(blas_kernels(), BLAS_REPRODUCIBLE_KERNELS) == 0 || !has_avx2_fma()) return;
    // A variable already naming the set means the re-exec happened and
    // OpenBLAS ignored it: never a second time.
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (set && strcasecmp(set, BLAS_REPRODUCIBLE_KERNELS) == 0) return;
    if (setenv("OPENBLAS_CORETYPE", BLAS_REPRODUCIBLE_KERNELS, 1) != 0) return;
    execv("/proc/self/exe", argv);
}

int blas_reproducible_check(char *err, size_t errlen) {
    if (strcasecmp(blas_kernels(), BLAS_REPRODUCIBLE_KERNELS) == 0) return 0;
    if (!has_avx2_fma())
        snprintf(err, errlen, "reproducible = 1 needs a CPU with AVX2 and FMA (OpenBLAS's %s kernels); this one "
                 "lacks them", BLAS_REPRODUCIBLE_KERNELS);
    else
        snprintf(err, errlen, "reproducible = 1 needs OpenBLAS's %s kernels, but OpenBLAS runs its %s kernels "
                 "(run with OPENBLAS_CORETYPE=%s)", BLAS_REPRODUCIBLE_KERNELS, blas_kernels(),
                 BLAS_REPRODUCIBLE_KERNELS);
    return -1;
}
