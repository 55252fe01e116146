// machine.c: the machine description of a run (see machine.h).
#include "common/machine.h"

#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/blas_cpu.h"

#ifndef ROPELAB_BUILD_FLAGS   // set by the Makefile for this file
#define ROPELAB_BUILD_FLAGS "unknown"
#endif

// The value of the first /proc/cpuinfo line "KEY<tabs>: value", or "".
static void cpuinfo_value(const char *key, char *out, size_t n) {
    out[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 || (line[klen] != '\t' && line[klen] != ' ' && line[klen] != ':')) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        v += v[1] == ' ' ? 2 : 1;
        snprintf(out, n, "%s", v);
        out[strcspn(out, "\n")] = 0;
        break;
    }
    fclose(f);
}

void machine_describe(FILE *f) {
    char name[256], family[32], model[32], flags[8192];
    cpuinfo_value("model name", name, sizeof name);
    cpuinfo_value("cpu family", family, sizeof family);
    cpuinfo_value("model", model, sizeof model);
    cpuinfo_value("flags", flags, sizeof flags);
    fprintf(f, "cpu = %s (family %s, model %s)\n", name[0] ? name : "unknown", family, model);
    fprintf(f, "cpu_features =");
    static const char *const wanted[] = {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"};
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        size_t w = strlen(wanted[i]);
        for (const char *p = flags; (p = strstr(p, wanted[i])); p += w)
            if ((p == flags || p[-1] == ' ') && (p[w] == ' ' || p[w] == 0)) {
                fprintf(f, " %s", wanted[i]);
                break;
            }
    }
    fprintf(f, "\n");
    const char *config = openblas_get_config();
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    fprintf(f, "openblas = %s\n", config ? config : "unknown");
    fprintf(f, "openblas_kernels = %s\n", blas_kernels());
    fprintf(f, "openblas_coretype = %s\n", coretype ? coretype : "");
    fprintf(f, "build = gcc %s; %s\n", __VERSION__, ROPELAB_BUILD_FLAGS);
}
