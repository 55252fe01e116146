// machine.c: the machine description of a run (see machine.h).
#include "common/machine.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/blas_cpu.h"

#ifndef ROPELAB_BUILD_FLAGS   // set by the Makefile for this file
#define ROPELAB_BUILD_FLAGS "unknown"
#endif

// The CPU as the code that picks kernels sees it: the cpuid instruction (which
// OpenBLAS, oneDNN and glibc's libm ask), not /proc/cpuinfo (which an emulator
// such as qemu-user leaves as the host's).
static void cpu_brand(char *out, size_t n) {
    unsigned r[12], max = __get_cpuid_max(0x80000000u, NULL);
    out[0] = 0;
    if (max < 0x80000004u) return;
    for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    char brand[49];
    memcpy(brand, r, 48);
    brand[48] = 0;
    const char *b = brand;
    while (*b == ' ') b++;
    snprintf(out, n, "%s", b);
    for (size_t k = strlen(out); k > 0 && out[k - 1] == ' '; k--) out[k - 1] = 0;
}

void machine_describe(FILE *f) {
    char name[64];
    cpu_brand(name, sizeof name);
    unsigned a = 0, b = 0, c = 0, d = 0;
    __get_cpuid(1, &a, &b, &c, &d);
    // display family and model (Intel SDM and AMD APM: the extended fields count
    // when the base family is 15, and for the model also when it is 6)
    unsigned family = (a >> 8) & 0xF, model = (a >> 4) & 0xF;
    if (family == 0xF) family += (a >> 20) & 0xFF;
    if (family == 0xF + ((a >> 20) & 0xFF) || family == 6) model += ((a >> 16) & 0xF) << 4;
    fprintf(f, "cpu = %s (family %u, model %u)\n", name[0] ? name : "unknown", family, model);
    // leaf 7: subleaf 1 EAX bit 5 AVX512_BF16, subleaf 0 EDX bit 22 AMX_BF16
    unsigned l7a = 0, l7b = 0, l7c = 0, l7d = 0, s1a = 0, s1b = 0, s1c = 0, s1d = 0;
    __cpuid_count(7, 0, l7a, l7b, l7c, l7d);
    __cpuid_count(7, 1, s1a, s1b, s1c, s1d);
    __builtin_cpu_init();
    fprintf(f, "cpu_features =%s%s%s%s%s\n", __builtin_cpu_supports("avx2") ? " avx2" : "",
            __builtin_cpu_supports("fma") ? " fma" : "", __builtin_cpu_supports("avx512f") ? " avx512f" : "",
            __builtin_cpu_supports("avx512f") && (s1a >> 5 & 1) ? " avx512_bf16" : "", (l7d >> 22 & 1) ? " amx_bf16" : "");
    const char *config = openblas_get_config();
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    fprintf(f, "openblas = %s\n", config ? config : "unknown");
    fprintf(f, "openblas_kernels = %s\n", blas_kernels());
    fprintf(f, "openblas_coretype = %s\n", coretype ? coretype : "");
    fprintf(f, "build = gcc %s; %s\n", __VERSION__, ROPELAB_BUILD_FLAGS);
}
