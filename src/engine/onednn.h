// onednn.h: what the oneDNN engine's two files share: the error macro and
// messages, the bf16 rounding of activations (bf16.h's, on the pool), and the attention half's
// interface.
//
//   engine_onednn.c     the Engine: linear layers (weights and their copies,
//                       matmul primitives), and the calls into the attention half
//   onednn_attention.c  attention's five products per block on matmul primitives
#ifndef ROPELAB_ONEDNN_H
#define ROPELAB_ONEDNN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "engine/bf16.h"

// Runs a oneDNN call; on failure writes "PREFIX<what>: <status>" into the
// char array msg and jumps to the calling function's `fail` label (which
// cleans up and returns -1). Each file defines TRY(what, call) with its msg.
#define ONEDNN_TRY(msg, prefix, what, call)                                                   \
    do {                                                                                      \
        dnnl_status_t st_ = (call);                                                           \
        if (st_ != dnnl_success) {                                                            \
            snprintf((msg), sizeof(msg), "%s%s: %s", (prefix), (what), dnnl_status2str(st_)); \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

// printf into the message buffer buf (n bytes) of a oneDNN file's state.
static inline void onednn_message(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void onednn_message(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

// x (n) -> y (n) bf16. On the pool from 64K elements (below that, starting
// the threads costs more than the conversion).
static inline void to_bf16(uint16_t *y, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) y[i] = bf16_round(x[i]);
}

// onednn_attention.c: the Engine's attention_forward/backward (engine.h) on
// oneDNN, with n_threads threads; 0 or -1 with the message in onednn_attention_error.
typedef struct OnednnAttention OnednnAttention;
// fused 1: the fused attention (key blocks, online softmax; fp32 or bf16), 0: the blocked one.
int onednn_attention_create(OnednnAttention **ae, int bf16, int fused, char *err, size_t errlen);
void onednn_attention_free(OnednnAttention *ae);
const char *onednn_attention_error(const OnednnAttention *ae);
size_t onednn_attention_bytes(const OnednnAttention *ae);   // its buffers; 0 for NULL
// The same before it runs, but for oneDNN's scratchpads (engine_create.h's EngineShapes).
size_t onednn_attention_bytes_for(int bf16, int fused, int B, int T, int C, int H, int n_threads, int backward);
int onednn_attention_forward(OnednnAttention *ae, float *out, float *lse, const float *qkv, const float *bias,
                             int n_threads, int B, int T, int C, int H);
int onednn_attention_backward(OnednnAttention *ae, float *dqkv, float *dbias, const float *dout, const float *qkv,
                              const float *out, const float *lse, const float *bias, int n_threads, int B, int T,
                              int C, int H);

#endif
