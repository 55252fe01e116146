// blas_cpu.h: makes OpenBLAS use the kernels the CPU supports.
//
// OpenBLAS picks its kernels once, when the library is loaded, from the CPU
// model number. On CPUs newer than the OpenBLAS build (or virtual CPUs that
// report a generic model) it falls back to "Prescott", SSE3-only kernels that
// are about 3x slower here, although the CPU has AVX2 or AVX-512. The only
// switch is the OPENBLAS_CORETYPE environment variable, read at load time, so
// a program that wants the fast kernels must set it and start itself again.
#ifndef ROPELAB_COMMON_BLAS_CPU_H
#define ROPELAB_COMMON_BLAS_CPU_H

#include <stddef.h>

// If OPENBLAS_CORETYPE is unset, OpenBLAS chose Prescott and the CPU has
// AVX2+FMA: sets the variable to Haswell
// and re-executes /proc/self/exe with the same argv. Returns if nothing needs
// doing or the re-exec failed (the program then runs with the slow kernels).
// Call it first thing in main. ROPELAB_NO_BLAS_REEXEC=1 turns it off.
void blas_use_native_kernels(char **argv);

// The kernel set every reproducible run uses (train's reproducible = 1):
// Haswell's, the one OpenBLAS set that every x86-64 CPU with AVX2 and FMA
// runs, so the same products round the same on all of them.
#define BLAS_REPRODUCIBLE_KERNELS "Haswell"
// The kernel set OpenBLAS runs ("Haswell", "SkylakeX", "Zen", ...).
const char *blas_kernels(void);
// If OpenBLAS runs another set than BLAS_REPRODUCIBLE_KERNELS and the CPU
// has AVX2 and FMA: sets OPENBLAS_CORETYPE to it and re-executes
// /proc/self/exe with the same argv, once. Returns if nothing needs doing or
// it cannot be done (blas_reproducible_check then says why).
void blas_use_reproducible_kernels(char **argv);
// 0 if OpenBLAS runs BLAS_REPRODUCIBLE_KERNELS; else -1 and one line in err.
int blas_reproducible_check(char *err, size_t errlen);

#endif
