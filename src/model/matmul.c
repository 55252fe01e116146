// matmul.c: the linear layer (PyTorch nn.Linear: weight [out, in]) on
// OpenBLAS cblas_sgemm. Row-major throughout; transposes are sgemm flags,
// never copies.
//
//   forward:  out (N,OC)  = inp (N,C) . W^T (C,OC) + b
//   backward: dinp (N,C)  = dout (N,OC) . W (OC,C)
//             dW (OC,C)  += dout^T (OC,N) . inp (N,C)
//             db (OC)    += sum_n dout[n,:]
//
// sgemm is called outside our own parallel regions, so OpenBLAS (OpenMP
// build) uses all threads for it.
#include <string.h>

#include <cblas.h>

#include "model/layers.h"

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    float beta = 0.0f;
    if (bias) {  // start every row from the bias, then let sgemm add inp W^T
        #pragma omp parallel for
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C,
                1.0f, inp, C, weight, C, beta, out, OC);
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC,
                    1.0f, dout, OC, weight, C, 0.0f, dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N,
                1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (!dbias) return;
    // Column sums, split over blocks of output columns: each thread owns its
    // columns and adds the rows in order (deterministic, no races).
    enum { BLOCK = 64 };
    int n_blocks = (OC + BLOCK - 1) / BLOCK;
    #pragma omp parallel for
    for (int blk = 0; blk < n_blocks; blk++) {
        int o0 = blk * BLOCK, o1 = o0 + BLOCK < OC ? o0 + BLOCK : OC;
        float acc[BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *g = dout + (size_t)n * OC;
            for (int o = o0; o < o1; o++) acc[o - o0] += g[o];
        }
        for (int o = o0; o < o1; o++) dbias[o] += acc[o - o0];
    }
}
