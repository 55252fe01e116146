// smallgemm.c: C = alpha A B (+ C) for the small products inside attention.
//
// Why not cblas_sgemm: attention does, per (batch, head) and block of 64
// query rows, products like (64 x 32)(32 x 256) whose FLOPs take ~10 us, and
// OpenBLAS spends about as long again on each call's setup and packing
// (measured here: ~30 GFLOP/s on these shapes against ~80 on large ones, one
// thread). This kernel has no setup and no packing; it keeps a 4 x 2VL tile
// of C in registers (8 vectors of VL floats, VL = the SIMD width the build
// targets: 16 with AVX-512, 8 with AVX2, 4 otherwise) and streams A and B
// through it:
//   for k: b = B[k, j..j+2VL-1];  for each of the 4 rows r: c[r] += A[r, k] * b
// A is addressed by two strides, A(i, k) = A[i*sai + k*sak], so the same
// kernel computes A B (sai = lda, sak = 1) and A^T B (sai = 1, sak = lda)
// without a transposed copy. B and C are row-major. Rows and columns that do
// not fill a tile go through a plain scalar loop.
//
// The pragma lets GCC fuse c += a*b into one FMA instruction: ISO C mode
// (-std=c11) otherwise forbids contracting across the expression, which
// would double the instruction count of the inner loop.
#pragma GCC optimize("fp-contract=fast")
#include <string.h>

#include "model/layers.h"

#if defined(__AVX512F__)
#define VL 16
#elif defined(__AVX__)
#define VL 8
#else
#define VL 4
#endif
typedef float vec __attribute__((vector_size(VL * sizeof(float))));   // one SIMD register

static inline __attribute__((always_inline)) vec vload(const float *p) { vec v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void vstore(float *p, vec v) { memcpy(p, &v, sizeof v); }

// C (M,N) = alpha A (M,K) B (K,N) + (accumulate ? C : 0)
void smallgemm(int M, int N, int K, float alpha, const float *A, size_t sai, size_t sak,
               const float *B, size_t ldb, float *C, size_t ldc, int accumulate) {
    int M4 = M - M % 4, NT = N - N % (2 * VL);   // tiled rows and columns
    for (int i = 0; i < M4; i += 4) {
        const float *a0 = A + i * sai, *a1 = a0 + sai, *a2 = a1 + sai, *a3 = a2 + sai;
        for (int j = 0; j < NT; j += 2 * VL) {
            vec c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
            for (int k = 0; k < K; k++) {
                const float *b = B + k * ldb + j;
                vec b0 = vload(b), b1 = vload(b + VL);
                size_t ka = k * sak;
                c00 += a0[ka] * b0; c01 += a0[ka] * b1;
                c10 += a1[ka] * b0; c11 += a1[ka] * b1;
                c20 += a2[ka] * b0; c21 += a2[ka] * b1;
                c30 += a3[ka] * b0; c31 += a3[ka] * b1;
            }
            vec acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++) {
                    float *c = C + (size_t)(i + r) * ldc + j + VL * h;
                    vec v = alpha * acc[r][h];
                    vstore(c, accumulate ? v + vload(c) : v);
                }
        }
    }
    // the edges: columns NT.. of the tiled rows, then the rows M4..
    for (int i = 0; i < M; i++)
        for (int j = i < M4 ? NT : 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += A[i * sai + k * sak] * B[k * ldb + j];
            float *c = C + (size_t)i * ldc + j;
            *c = alpha * acc + (accumulate ? *c : 0.0f);
        }
}
