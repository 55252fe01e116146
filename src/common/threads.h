// threads.h: one pool of threads for our OpenMP loops and OpenBLAS.
//
// ropelab links Debian's OpenMP build of OpenBLAS, so BLAS calls made outside
// our parallel regions use the same OpenMP threads, and a BLAS call made
// inside one of our parallel regions runs single-threaded: no
// oversubscription. Setting both counts together keeps them in step.
#ifndef ROPELAB_THREADS_H
#define ROPELAB_THREADS_H

#include <cblas.h>
#include <omp.h>

// n <= 0: all cores. Returns the count in use.
static inline int threads_set(int n) {
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    return n;
}

#endif
