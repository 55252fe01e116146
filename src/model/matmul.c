// matmul.c: the linear layer (PyTorch nn.Linear: weight [out, in]) on
// OpenBLAS cblas_sgemm. Row-major throughout; transposes are sgemm flags,
// never copies.
//
//   forward:  out (N,OC)  = inp (N,C) . W^T (C,OC) + b
//   backward: dinp (N,C)  = dout (N,OC) . W (OC,C)
//             dW (OC,C)  += dout^T (OC,N) . inp (N,C)
//             db (OC)    += sum_n dout[n,:]
//
// Threads: each product is split into one slice per OpenMP thread, and each
// thread runs a single-threaded sgemm on its slice (OpenBLAS's OpenMP build
// runs a call made inside a parallel region on the calling thread). The
// forward and dinp are split by rows n, dW and db by output rows o, so every
// slice is a whole, independent product: no two threads write the same
// element and nobody waits for anybody until the region ends. The
// alternative, one sgemm call on all threads, makes OpenBLAS partition the
// product itself and synchronise its threads inside every call (they wait
// with sched_yield), which is slower at these shapes (docs/PERFORMANCE.md
// has the measurement). Slicing also lets the bias copy and the bias
// gradient run in the same parallel region as the product, on the same rows.
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "model/layers.h"

// Thread t's share [*lo, *hi) of n rows, in multiples of 16 rows (whole
// register tiles of the sgemm kernel); the last share takes the rest.
static void thread_slice(int n, int *lo, int *hi) {
    int t = omp_get_thread_num(), n_threads = omp_get_num_threads();
    int per = ((n + n_threads - 1) / n_threads + 15) / 16 * 16;
    *lo = t * per < n ? t * per : n;
    *hi = (t + 1) * per < n ? (t + 1) * per : n;
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    #pragma omp parallel
    {
        int n0, n1;
        thread_slice(N, &n0, &n1);
        if (n1 > n0) {
            float beta = 0.0f;
            if (bias) {   // start every row from the bias, then let sgemm add inp W^T
                for (int n = n0; n < n1; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
                beta = 1.0f;
            }
            // out[n0:n1] (rows, OC) = inp[n0:n1] (rows, C) . W^T (C, OC) (+ bias)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n1 - n0, OC, C,
                        1.0f, inp + (size_t)n0 * C, C, weight, C, beta, out + (size_t)n0 * OC, OC);
        }
    }
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    #pragma omp parallel
    {
        int n0, n1, o0, o1;
        thread_slice(N, &n0, &n1);
        thread_slice(OC, &o0, &o1);
        // dinp[n0:n1] (rows, C) = dout[n0:n1] (rows, OC) . W (OC, C)
        if (dinp && n1 > n0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n1 - n0, C, OC,
                        1.0f, dout + (size_t)n0 * OC, OC, weight, C, 0.0f, dinp + (size_t)n0 * C, C);
        if (o1 > o0) {
            // dW[o0:o1] (outs, C) += dout[:, o0:o1]^T (outs, N) . inp (N, C)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, C, N,
                        1.0f, dout + o0, OC, inp, C, 1.0f, dweight + (size_t)o0 * C, C);
            // db[o0:o1] += column sums of dout, rows added in order (deterministic)
            if (dbias)
                for (int n = 0; n < N; n++) {
                    const float *g = dout + (size_t)n * OC;
                    #pragma omp simd
                    for (int o = o0; o < o1; o++) dbias[o] += g[o];
                }
        }
    }
}
