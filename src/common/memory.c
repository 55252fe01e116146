// memory.c: the limits on the memory this process can take, and the check
// (see memory.h).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/memory.h"

// The value after "key" (then spaces or a colon) on a line of a "key value"
// file (/proc/meminfo, /proc/self/status, memory.stat), times unit; 0, or -1
// if the file or the key is missing.
static int read_keyed(const char *path, const char *key, size_t unit, size_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    size_t klen = strlen(key);
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (strncmp(line, key, klen) == 0 && (line[klen] == ' ' || line[klen] == ':') &&
            sscanf(line + klen + 1, " %llu", &v) == 1) {
            *out = v > SIZE_MAX / unit ? SIZE_MAX : (size_t)v * unit;
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

// A cgroup file holding one number, or "max" (v2: no limit, *out = SIZE_MAX); 0 or -1.
static int read_number(const char *path, size_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char word[64] = "";
    int ok = fscanf(f, "%63s", word) == 1;
    fclose(f);
    if (!ok) return -1;
    if (strcmp(word, "max") == 0) { *out = SIZE_MAX; return 0; }
    char *end;
    unsigned long long v = strtoull(word, &end, 10);
    if (*end || end == word) return -1;
    *out = v > SIZE_MAX ? SIZE_MAX : (size_t)v;
    return 0;
}

int mem_limit_machine(MemLimit *l) {
    size_t bytes;
    if (read_keyed("/proc/meminfo", "MemAvailable", 1024, &bytes) == 0) {
        *l = (MemLimit){.kind = MEM_LIMIT_MACHINE, .left = bytes};
        snprintf(l->file, sizeof l->file, "MemAvailable, /proc/meminfo");
        return 0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return -1;
    *l = (MemLimit){.kind = MEM_LIMIT_MACHINE,
                    .left = (unsigned long)pages > SIZE_MAX / (unsigned long)page ? SIZE_MAX
                                                                                  : (size_t)pages * (size_t)page};
    snprintf(l->file, sizeof l->file, "physical memory");
    return 0;
}

// v1's "no limit" is the largest page counter, about 2^63; anything above 2^62 is taken as none.
#define CGROUP_V1_UNLIMITED ((size_t)1 << 62)

// The cgroup directory dir's room (limit minus usage, plus the inactive file
// cache), if it sets a limit: kept in *l when smaller than what l holds.
static void cgroup_dir(MemLimit *l, const char *dir, int v2) {
    char path[sizeof l->file], usage_path[sizeof l->file + 32], stat_path[sizeof l->file + 32];
    // a directory too long to name its files in l->file is a limit that cannot be read: not applied
    if (snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes") >= (int)sizeof path)
        return;
    snprintf(usage_path, sizeof usage_path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    snprintf(stat_path, sizeof stat_path, "%s/memory.stat", dir);
    size_t limit, usage = 0, inactive = 0;
    if (read_number(path, &limit) != 0 || limit == SIZE_MAX || (!v2 && limit >= CGROUP_V1_UNLIMITED)) return;
    read_number(usage_path, &usage);   // unreadable: 0
    read_keyed(stat_path, v2 ? "inactive_file" : "total_inactive_file", 1, &inactive);
    size_t used = usage > inactive ? usage - inactive : 0;
    size_t left = limit > used ? limit - used : 0;
    if (l->kind == MEM_LIMIT_NONE || left < l->left) {
        l->kind = MEM_LIMIT_CGROUP;
        l->left = left;
        snprintf(l->file, sizeof l->file, "%s", path);
    }
}

// The cgroup at base + cg and every parent up to base.
static void cgroup_walk(MemLimit *l, const char *base, const char *cg, int v2) {
    char dir[sizeof l->file];
    int n = snprintf(dir, sizeof dir, "%s%s", base, cg);
    if (n < 0 || (size_t)n >= sizeof dir) return;
    size_t base_len = strlen(base);
    while (strlen(dir) > base_len && dir[strlen(dir) - 1] == '/') dir[strlen(dir) - 1] = 0;
    for (;;) {
        cgroup_dir(l, dir, v2);
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= base_len || !slash || (size_t)(slash - dir) < base_len) break;
        *slash = 0;
    }
}

int mem_limit_cgroup(MemLimit *out, const char *root) {
    char path[sizeof out->file];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    MemLimit l = {.kind = MEM_LIMIT_NONE, .left = SIZE_MAX};
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        // "ID:CONTROLLERS:PATH": v2 is "0::PATH"; v1's memory hierarchy lists "memory" among its controllers
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/') continue;
        *c1 = *c2 = 0;
        const char *controllers = c1 + 1, *cg = c2 + 1;
        char base[sizeof out->file];
        if (strcmp(line, "0") == 0 && controllers[0] == 0) {
            snprintf(base, sizeof base, "%s/sys/fs/cgroup", root);
            cgroup_walk(&l, base, cg, 1);
            continue;
        }
        char list[256], *save = NULL;
        snprintf(list, sizeof list, "%s", controllers);
        for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
            if (strcmp(name, "memory") == 0) {
                snprintf(base, sizeof base, "%s/sys/fs/cgroup/memory", root);
                cgroup_walk(&l, base, cg, 0);
            }
    }
    fclose(f);
    if (l.kind == MEM_LIMIT_NONE) return -1;
    *out = l;
    return 0;
}

int mem_limit_address(MemLimit *l) {
    struct rlimit r;
    size_t in_use = 0;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return -1;
    read_keyed("/proc/self/status", "VmSize", 1024, &in_use);   // unreadable: 0
    size_t cap = r.rlim_cur > SIZE_MAX ? SIZE_MAX : (size_t)r.rlim_cur;
    *l = (MemLimit){.kind = MEM_LIMIT_ADDRESS, .left = cap > in_use ? cap - in_use : 0};
    snprintf(l->file, sizeof l->file, "RLIMIT_AS, ulimit -v");
    return 0;
}

static void keep_smaller(MemLimit *l, const MemLimit *other) {
    if (l->kind == MEM_LIMIT_NONE || other->left < l->left) *l = *other;
}

// The machine's and the cgroup's limit (shared by every process on the
// machine, or in the cgroup) and the address-space limit (each process's own).
static void limits(MemLimit *shared, MemLimit *own) {
    *shared = (MemLimit){.kind = MEM_LIMIT_NONE, .left = SIZE_MAX};
    *own = *shared;
    MemLimit l;
    const char *root = getenv("ROPELAB_CGROUP_ROOT");
    if (mem_limit_machine(&l) == 0) keep_smaller(shared, &l);
    if (mem_limit_cgroup(&l, root ? root : "") == 0) keep_smaller(shared, &l);
    if (mem_limit_address(&l) == 0) keep_smaller(own, &l);
}

void mem_limit(MemLimit *l) {
    MemLimit own;
    limits(l, &own);
    if (own.kind != MEM_LIMIT_NONE) keep_smaller(l, &own);
}

void mem_format_bytes(char *buf, size_t n, size_t bytes) {
    if (bytes >= 1000000000u) snprintf(buf, n, "%.1f GB", (double)bytes / 1e9);
    else snprintf(buf, n, "%.1f MB", (double)bytes / 1e6);
}

static int refuse(size_t need, const MemLimit *l, const char *what, char *err, size_t errlen) {
    char need_s[32], left_s[32];
    mem_format_bytes(need_s, sizeof need_s, need);
    mem_format_bytes(left_s, sizeof left_s, l->left);
    if (l->kind == MEM_LIMIT_MACHINE)
        snprintf(err, errlen, "%s need %s; this machine has %s available (%s)", what, need_s, left_s, l->file);
    else if (l->kind == MEM_LIMIT_CGROUP)
        snprintf(err, errlen, "%s need %s; the cgroup's memory limit leaves %s (%s)", what, need_s, left_s, l->file);
    else
        snprintf(err, errlen, "%s need %s; the address-space limit leaves %s (%s)", what, need_s, left_s, l->file);
    return -1;
}

int mem_check_processes(size_t need, int processes, const char *what, char *err, size_t errlen) {
    MemLimit shared, own;
    limits(&shared, &own);
    size_t n = processes > 1 ? (size_t)processes : 1;
    size_t all = need > SIZE_MAX / n ? SIZE_MAX : need * n;
    int own_refuses = own.kind != MEM_LIMIT_NONE && need > own.left;
    int shared_refuses = shared.kind != MEM_LIMIT_NONE && all > shared.left;
    if (own_refuses && (!shared_refuses || own.left <= shared.left)) return refuse(need, &own, what, err, errlen);
    if (shared_refuses) return refuse(all, &shared, what, err, errlen);
    return 0;
}

int mem_check(size_t need, const char *what, char *err, size_t errlen) {
    return mem_check_processes(need, 1, what, err, errlen);
}
