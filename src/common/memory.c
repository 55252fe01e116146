// memory.c: available memory and the allocation check (see memory.h).
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "common/memory.h"

size_t mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
            }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return SIZE_MAX;
    if ((unsigned long)pages > SIZE_MAX / (unsigned long)page) return SIZE_MAX;
    return (size_t)pages * (size_t)page;
}

// "15.2 GB", or "512.0 MB" below 1 GB (decimal units: 1 GB = 10^9 bytes).
static void format_bytes(char *buf, size_t n, size_t bytes) {
    if (bytes >= 1000000000u) snprintf(buf, n, "%.1f GB", (double)bytes / 1e9);
    else snprintf(buf, n, "%.1f MB", (double)bytes / 1e6);
}

int mem_check(size_t need, const char *what, char *err, size_t errlen) {
    size_t have = mem_available_bytes();
    if (need <= have) return 0;
    char need_s[32], have_s[32];
    format_bytes(need_s, sizeof need_s, need);
    format_bytes(have_s, sizeof have_s, have);
    snprintf(err, errlen, "%s need %s; this machine has %s available", what, need_s, have_s);
    return -1;
}
