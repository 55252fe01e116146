// memory.h: the memory this process can still take, and the one check a
// program makes of its whole need (src/train/footprint.h) before its first
// large allocation, so that work that cannot fit is refused up front, in one
// line naming the figure and the limit, instead of swapping or being killed
// part-way (by the kernel's or the container's OOM killer, or a failed
// allocation under ulimit -v).
//
// Three limits, the smallest wins:
//   machine   MemAvailable of /proc/meminfo: free memory plus the page cache
//             and slabs the kernel can reclaim (the physical memory where
//             that cannot be read)
//   cgroup    the process's memory cgroup (/proc/self/cgroup) and each of its
//             parents up to the mount's root: v2 memory.max minus
//             memory.current (/sys/fs/cgroup/PATH), v1 memory.limit_in_bytes
//             minus memory.usage_in_bytes (/sys/fs/cgroup/memory/PATH); the
//             inactive file cache counted in that usage (memory.stat:
//             inactive_file, v1 total_inactive_file) is given back, since the
//             kernel reclaims it before it kills anything
//   address   RLIMIT_AS (ulimit -v) minus the address space in use (VmSize
//             of /proc/self/status)
// A limit that cannot be read is not applied. The environment variable
// ROPELAB_CGROUP_ROOT=DIR makes the cgroup files DIR/proc/self/cgroup and
// DIR/sys/fs/cgroup/... (the tests' fake cgroups).
#ifndef ROPELAB_MEMORY_H
#define ROPELAB_MEMORY_H

#include <stddef.h>

typedef enum { MEM_LIMIT_NONE, MEM_LIMIT_MACHINE, MEM_LIMIT_CGROUP, MEM_LIMIT_ADDRESS } MemLimitKind;

typedef struct {
    MemLimitKind kind;   // NONE: nothing known, left = SIZE_MAX
    size_t left;         // the bytes this limit leaves the process
    char file[320];      // where it was read (cgroup: the limit's file)
} MemLimit;

// Each limit alone; 0 if it applies (filled in), -1 if not (l untouched).
int mem_limit_machine(MemLimit *l);
// root: "" for the system's own files, else the directory standing for /.
int mem_limit_cgroup(MemLimit *l, const char *root);
int mem_limit_address(MemLimit *l);
// The smallest of the three (the cgroup's root from ROPELAB_CGROUP_ROOT).
void mem_limit(MemLimit *l);

// 0 if need bytes fit the smallest limit; else -1 and in err one line,
//   "WHAT need 15.2 GB; this machine has 12.9 GB available (MemAvailable, /proc/meminfo)"
//   "WHAT need 15.2 GB; the cgroup's memory limit leaves 600.0 MB (/sys/fs/cgroup/memory.max)"
//   "WHAT need 15.2 GB; the address-space limit leaves 600.0 MB (RLIMIT_AS, ulimit -v)"
// (a figure of 1 GB or more in GB, a smaller one in MB, one decimal)
// processes > 1: that many processes on this machine need need bytes each
// (the machine's and the cgroup's limits are checked against their sum, the
// address-space limit, which is each process's own, against need).
int mem_check(size_t need, const char *what, char *err, size_t errlen);
int mem_check_processes(size_t need, int processes, const char *what, char *err, size_t errlen);

// "15.2 GB", or "512.0 MB" below 1 GB (decimal units: 1 GB = 10^9 bytes).
void mem_format_bytes(char *buf, size_t n, size_t bytes);

#endif
