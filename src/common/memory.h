// memory.h: the memory this machine can still give, and the one check made
// before every large allocation of the model (parameters and gradients,
// activations), so that a model or a batch that cannot fit is refused up
// front, with its size, instead of being allocated and then swapping or
// being killed part-way.
#ifndef ROPELAB_MEMORY_H
#define ROPELAB_MEMORY_H

#include <stddef.h>

// Bytes that can be allocated now without swapping: MemAvailable from
// /proc/meminfo (free memory plus the page cache and slabs the kernel can
// reclaim), or where that cannot be read, the physical memory
// (sysconf(_SC_PHYS_PAGES) x page size); SIZE_MAX if neither is known.
size_t mem_available_bytes(void);

// 0 if need bytes fit in mem_available_bytes(); else -1 with
// "WHAT need 15.2 GB; this machine has 22.9 GB available" in err.
int mem_check(size_t need, const char *what, char *err, size_t errlen);

#endif
