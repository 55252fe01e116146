// onednn_attention.c: the oneDNN engine's attention: engine_openblas.c's
// blocked causal attention with its five matrix products on oneDNN matmul
// primitives (fp32, or bf16 inputs with fp32 accumulation). The maths is
// engine_reference.c's; per (batch, head) and block of query rows I = i0..i1-1
// against keys J = 0..i1-1:
//
//   product        dst (rows x cols)         src                 wei               attributes
//   PR_S           S (rows, keys)            Q_I (rows, D)       K_J^T (D, keys)   x scale
//   PR_Y           Y_I (rows, D)             P (rows, keys)      V_J (keys, D)
//   PR_DP          dP (rows, keys)           dY_I (rows, D)      V_J^T (D, keys)
//   PR_DQ          dQ_I (rows, D)            dS (rows, keys)     K_J (keys, D)     x scale
//   PR_DK          dK_J (keys, D) +=         dS^T (keys, rows)   Q_I (rows, D)     x scale, sum
//   PR_DV          dV_J (keys, D) +=         P^T (keys, rows)    dY_I (rows, D)    sum
//
// "x scale" is an output scale (dst = scale * product, sgemm's alpha) and
// "sum" a sum post-op (dst = product + dst, sgemm's beta = 1), so each is
// the same operation as the OpenBLAS engine's cblas_sgemm call. Between the
// products run that engine's own loops (attention_block_probs, _dscores).
//
// Layout. fp32: every operand is read and written in place through strides
// (dnnl_memory_desc_init_by_strides): head h of q is the (T, D) matrix at
// qkv + h*D with row stride 3C, K^T and V^T are (D, keys) views with strides
// (1, 3C), transposes of the P and dS blocks likewise; out, dq, dk, dv are
// written where the model keeps them. oneDNN 2.6.3 runs such strided
// operands on its gemm-based kernel.
// bf16: every operand is dense, so that oneDNN runs its brgemm kernel (the
// one that uses AMX where the CPU has it). Its gemm-based bf16 kernel applies
// an output scale or a sum in a scalar loop after the product, which made
// attention 2x slower than fp32 on an AMX CPU (docs/PERFORMANCE.md). q, k, v
// and dY are rounded once per call into head-major copies, (B, 3, H, T, D)
// and (B, H, T, D), so each head's q, k, v and dY is a dense (T, D) matrix
// (the copy is the rounding pass, which reads and writes every element
// anyway); Y and dQ of a block are written to the thread's dense (rows, D)
// scratch and copied to out and dqkv after their product, dK and dV summed
// over the blocks in its dense (T, D) scratch and copied at the head's end.
// In the operand table below this is only a change of the strides Q3 and QC
// to D.
//
// bf16: q, k, v (and dY) are rounded to bf16 once per call for the whole
// tensor; P and dS are rounded per block, after the fp32 loops that make
// them, into the thread's scratch. The scores, lse, P, dS and every output
// stay fp32. Nothing positional is rounded: rope has rotated q and k in fp32
// before, and t5/alibi's bias is added in fp32.
//
// Primitives: one per product and block shape (rows, keys), created for a
// sequence length T, model width C, heads H and a thread count at the first
// call that needs them (a "plan", kept; up to MAX_PLANS of them, the least
// recently used dropped first) while one thread is the count in force: they
// run inside our parallel loop over (batch, head) pairs, where oneDNN (on
// the same OpenMP runtime) runs each on the calling thread. Primitive
// objects are shared by the threads; each thread has its own memory objects
// (data handles set per call), scratchpad (user mode: the primitive keeps
// none of its own, which makes concurrent execution safe) and stream.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>

#include "engine/engine.h"
#include "engine/engine_shared.h"
#include "engine/kernels.h"
#include "engine/onednn.h"

#define MAX_PLANS 8   // (T, C, H, threads) plans kept; the least recently used is dropped for a new one

enum { PR_S, PR_Y, PR_DP, PR_DQ, PR_DK, PR_DV, N_PROD };
enum { M_SRC, M_WEI, M_DST, M_SP, N_MEM };
// The key blocks a query block's products see: blocked, all its keys at once
// (ALL_KEYS); fused, the blocks of nb keys below the diagonal block
// (KEYS_BELOW, cols = nb) and the diagonal block (KEYS_DIAGONAL, cols = rows).
enum { ALL_KEYS = 0, KEYS_BELOW = 0, KEYS_DIAGONAL = 1 };
static const char *const prod_names[N_PROD] = {"QK^T", "PV", "dY V^T", "dS K", "dS^T Q", "P^T dY"};

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t md[N_MEM];   // src, weights, dst, scratchpad
    size_t sp_bytes;
} Prod;

typedef struct {                    // what one thread does not share
    dnnl_stream_t stream;
    dnnl_memory_t *mem;             // [n_blocks][n_kinds][N_PROD][N_MEM]; [M_SP] NULL: no scratchpad
    void *scratchpad;
    float *f32;                     // 2 nb T: P, then dP / dS (fp32); fused: 2 nb nb + 2 nb (and the rows' values)
    uint16_t *b16;                  // bf16 only, 2 nb T: P, dS rounded
    float *heads;                   // bf16 only, (nb + 2T) D: Y_I or dQ_I (nb, D), dK and dV (T, D)
} Slot;

typedef struct {
    int T, C, H, n_threads;         // the key
    int D, nb, n_blocks;
    int n_kinds;                    // key blocks per query block's shape: 1 (ALL_KEYS), fused 2 (KEYS_BELOW, _DIAGONAL)
    int q_stride, y_stride;         // row strides of q, k, v, dq, dk, dv (fp32 3C) and y, dy (fp32 C); bf16: D
    float scale;                    // 1/sqrt(D)
    Prod *prod;                     // [n_blocks][n_kinds][N_PROD]
    Slot *slot;                     // [n_threads]
} Plan;

struct OnednnAttention {
    int bf16;
    int fused;                      // 1: the fused attention, 0: the blocked one
    dnnl_data_type_t dt;            // of the products' inputs
    size_t es;                      // its size in bytes
    dnnl_engine_t dnnl;
    Plan *plans[MAX_PLANS];
    int n_plans;
    uint16_t *qkv16, *dy16;         // bf16: qkv (B,T,3C), dout (B,T,C) rounded
    size_t qkv16_bytes, dy16_bytes; // their capacities
    char err[256];
};

#define set_err(ae, ...) onednn_message((ae)->err, sizeof (ae)->err, __VA_ARGS__)

#define TRY(what, call) ONEDNN_TRY(ae->err, "oneDNN attention ", what, call)

static void *alloc64(size_t bytes) { return aligned_alloc(64, grow_buffer_bytes(bytes)); }

// Floats of a slot's bf16 head scratch: Y_I or dQ_I (nb, D), then dK and dV (T, D); 0 in fp32.
static size_t heads_floats(int bf16, int nb, int T, int D) {
    return bf16 ? ((size_t)nb + 2 * (size_t)T) * D : 0;
}

// Floats of a slot's fp32 scratch: P and dP (attention_scratch_floats), fused its own.
static size_t f32_floats(int fused, int T) {
    return fused ? attention_fused_scratch_floats(T) : attention_scratch_floats(T);
}

// A slot's buffers but its scratchpad (oneDNN's to size): fp32 P and dP
// (f32_floats), in bf16 also their rounding and the head scratch.
static size_t slot_bytes(int bf16, int fused, int T, int D) {
    size_t scratch = f32_floats(fused, T), heads = heads_floats(bf16, attention_block_rows(T), T, D);
    return grow_buffer_bytes(scratch * sizeof(float)) +
           (bf16 ? grow_buffer_bytes(scratch * sizeof(uint16_t)) + grow_buffer_bytes(heads * sizeof(float)) : 0);
}

static void block_shape(const Plan *pl, int blk, int *i0, int *rows, int *keys) {
    *i0 = blk * pl->nb;
    *rows = pl->T - *i0 < pl->nb ? pl->T - *i0 : pl->nb;
    *keys = *i0 + *rows;
}

// The keys (columns of S and P) of query block blk's products of this kind.
static int kind_cols(const Plan *pl, int blk, int kind) {
    int i0, rows, keys;
    block_shape(pl, blk, &i0, &rows, &keys);
    if (pl->n_kinds == 1) return keys;   // ALL_KEYS
    return kind == KEYS_DIAGONAL ? rows : pl->nb;
}

static dnnl_status_t md_strided(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t row_stride,
                                int64_t col_stride, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols}, strides = {row_stride, col_stride};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

// The operands of each product as (rows, cols, row stride, column stride),
// in symbols resolved per block: R = the block's query rows, K = its keys,
// D = head dim; strides Q3 = 3C (qkv and dqkv), QC = C (out and dout),
// KS = keys (a P or dS block), 1.
enum { X_R, X_K, X_D, X_Q3, X_QC, X_KS, X_1 };
static const signed char operands[N_PROD][3][4] = {   // src, wei, dst
    [PR_S]  = {{X_R, X_D, X_Q3, X_1}, {X_D, X_K, X_1, X_Q3}, {X_R, X_K, X_KS, X_1}},
    [PR_Y]  = {{X_R, X_K, X_KS, X_1}, {X_K, X_D, X_Q3, X_1}, {X_R, X_D, X_QC, X_1}},
    [PR_DP] = {{X_R, X_D, X_QC, X_1}, {X_D, X_K, X_1, X_Q3}, {X_R, X_K, X_KS, X_1}},
    [PR_DQ] = {{X_R, X_K, X_KS, X_1}, {X_K, X_D, X_Q3, X_1}, {X_R, X_D, X_Q3, X_1}},
    [PR_DK] = {{X_K, X_R, X_1, X_KS}, {X_R, X_D, X_Q3, X_1}, {X_K, X_D, X_Q3, X_1}},
    [PR_DV] = {{X_K, X_R, X_1, X_KS}, {X_R, X_D, X_QC, X_1}, {X_K, X_D, X_Q3, X_1}},
};

// The primitive of product p for block (rows, keys) of plan pl.
static int prod_create(OnednnAttention *ae, const Plan *pl, Prod *pr, int p, int rows, int keys) {
    const int64_t value[] = {[X_R] = rows, [X_K] = keys, [X_D] = pl->D, [X_Q3] = pl->q_stride,
                             [X_QC] = pl->y_stride, [X_KS] = keys, [X_1] = 1};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t desc;
    for (int m = M_SRC; m <= M_DST; m++) {   // inputs in the engine's type, dst fp32
        const signed char *o = operands[p][m];
        TRY("descriptor", md_strided(&pr->md[m], value[o[0]], value[o[1]], value[o[2]], value[o[3]],
                                     m == M_DST ? dnnl_f32 : ae->dt));
    }
    TRY("attributes", dnnl_primitive_attr_create(&attr));
    TRY("attributes", dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (p == PR_S || p == PR_DQ || p == PR_DK)
        TRY("output scale", dnnl_primitive_attr_set_output_scales(attr, 1, 0, &pl->scale));
    // dK, dV are sums over query blocks; fused, Y_I and dQ_I are sums over key blocks too
    if (p == PR_DK || p == PR_DV || (ae->fused && (p == PR_Y || p == PR_DQ))) {
        TRY("post-ops", dnnl_post_ops_create(&post_ops));
        TRY("post-ops", dnnl_post_ops_append_sum(post_ops, 1.0f));
        TRY("post-ops", dnnl_primitive_attr_set_post_ops(attr, post_ops));
    }
    TRY("matmul descriptor", dnnl_matmul_desc_init(&desc, &pr->md[M_SRC], &pr->md[M_WEI], NULL, &pr->md[M_DST]));
    TRY("matmul primitive descriptor", dnnl_primitive_desc_create(&pd, &desc, attr, ae->dnnl, NULL));
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pr->sp_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (pr->sp_bytes) pr->md[M_SP] = *sp;
    TRY("matmul primitive", dnnl_primitive_create(&pr->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    dnnl_primitive_attr_destroy(attr);
    return 0;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return -1;
}

static void plan_free(Plan *pl) {
    if (!pl) return;
    if (pl->slot)
        for (int t = 0; t < pl->n_threads; t++) {
            Slot *sl = &pl->slot[t];
            if (sl->mem)
                for (int i = 0; i < pl->n_blocks * pl->n_kinds * N_PROD * N_MEM; i++)
                    if (sl->mem[i]) dnnl_memory_destroy(sl->mem[i]);
            if (sl->stream) dnnl_stream_destroy(sl->stream);
            free(sl->mem);
            free(sl->scratchpad);
            free(sl->f32);
            free(sl->b16);
            free(sl->heads);
        }
    if (pl->prod)
        for (int i = 0; i < pl->n_blocks * pl->n_kinds * N_PROD; i++)
            if (pl->prod[i].prim) dnnl_primitive_destroy(pl->prod[i].prim);
    free(pl->slot);
    free(pl->prod);
    free(pl);
}

// The plan for (T, C, H, n_threads): found, or created (dropping the least recently used if full).
static Plan *plan_get(OnednnAttention *ae, int T, int C, int H, int n_threads) {
    for (int i = 0; i < ae->n_plans; i++) {
        Plan *hit = ae->plans[i];
        if (hit->T == T && hit->C == C && hit->H == H && hit->n_threads == n_threads) {
            // to the end: the least recently used is dropped first
            memmove(ae->plans + i, ae->plans + i + 1, (ae->n_plans - 1 - i) * sizeof *ae->plans);
            ae->plans[ae->n_plans - 1] = hit;
            return hit;
        }
    }
    Plan *pl = calloc(1, sizeof *pl);
    if (!pl) { set_err(ae, "out of memory"); return NULL; }
    pl->T = T;
    pl->C = C;
    pl->H = H;
    pl->n_threads = n_threads;
    pl->D = C / H;
    pl->q_stride = ae->bf16 ? pl->D : 3 * C;
    pl->y_stride = ae->bf16 ? pl->D : C;
    pl->scale = 1.0f / sqrtf((float)pl->D);
    pl->nb = attention_block_rows(T);
    pl->n_blocks = (T + pl->nb - 1) / pl->nb;
    pl->n_kinds = ae->fused ? 2 : 1;
    const int n_prods = pl->n_blocks * pl->n_kinds * N_PROD;
    pl->prod = calloc((size_t)n_prods, sizeof *pl->prod);
    pl->slot = calloc(n_threads, sizeof *pl->slot);
    if (!pl->prod || !pl->slot) { set_err(ae, "out of memory"); goto fail; }
    int saved = omp_get_max_threads(), ok = 1;
    omp_set_num_threads(1);   // each primitive runs on one thread, inside our loop
    size_t sp_max = 0;
    for (int blk = 0; ok && blk < pl->n_blocks; blk++) {
        int i0, rows, keys;
        block_shape(pl, blk, &i0, &rows, &keys);
        for (int kind = 0; ok && kind < pl->n_kinds; kind++)
            for (int p = 0; ok && p < N_PROD; p++) {
                Prod *pr = &pl->prod[(blk * pl->n_kinds + kind) * N_PROD + p];
                ok = prod_create(ae, pl, pr, p, rows, kind_cols(pl, blk, kind)) == 0;
                if (ok && pr->sp_bytes > sp_max) sp_max = pr->sp_bytes;
            }
    }
    omp_set_num_threads(saved);
    if (!ok) goto fail;
    size_t scratch = f32_floats(ae->fused, T), heads = heads_floats(ae->bf16, pl->nb, T, pl->D);
    for (int t = 0; t < n_threads; t++) {
        Slot *sl = &pl->slot[t];
        TRY("stream", dnnl_stream_create(&sl->stream, ae->dnnl, dnnl_stream_default_flags));
        sl->mem = calloc((size_t)n_prods * N_MEM, sizeof *sl->mem);
        sl->scratchpad = sp_max ? alloc64(sp_max) : NULL;
        sl->f32 = alloc64(scratch * sizeof(float));
        sl->b16 = ae->bf16 ? alloc64(scratch * sizeof(uint16_t)) : NULL;
        sl->heads = ae->bf16 ? alloc64(heads * sizeof(float)) : NULL;
        if (!sl->mem || (sp_max && !sl->scratchpad) || !sl->f32 || (ae->bf16 && (!sl->b16 || !sl->heads))) {
            set_err(ae, "out of memory");
            goto fail;
        }
        for (int i = 0; i < n_prods; i++)
            for (int m = 0; m < N_MEM; m++)
                if (m != M_SP || pl->prod[i].sp_bytes)
                    TRY("memory", dnnl_memory_create(&sl->mem[i * N_MEM + m], &pl->prod[i].md[m], ae->dnnl,
                                                     DNNL_MEMORY_NONE));
    }
    if (ae->n_plans == MAX_PLANS) {
        plan_free(ae->plans[0]);
        memmove(ae->plans, ae->plans + 1, (MAX_PLANS - 1) * sizeof *ae->plans);
        ae->n_plans--;
    }
    ae->plans[ae->n_plans++] = pl;
    return pl;
fail:
    plan_free(pl);
    return NULL;
}

int onednn_attention_create(OnednnAttention **out, int bf16, int fused, char *err, size_t errlen) {
    *out = NULL;
    OnednnAttention *ae = calloc(1, sizeof *ae);
    if (!ae) { snprintf(err, errlen, "out of memory"); return -1; }
    ae->bf16 = bf16;
    ae->fused = fused;
    ae->dt = bf16 ? dnnl_bf16 : dnnl_f32;
    ae->es = bf16 ? 2 : 4;
    TRY("engine", dnnl_engine_create(&ae->dnnl, dnnl_cpu, 0));
    *out = ae;
    return 0;
fail:
    snprintf(err, errlen, "%s", ae->err);
    free(ae);
    return -1;
}

void onednn_attention_free(OnednnAttention *ae) {
    if (!ae) return;
    for (int i = 0; i < ae->n_plans; i++) plan_free(ae->plans[i]);
    free(ae->qkv16);
    free(ae->dy16);
    if (ae->dnnl) dnnl_engine_destroy(ae->dnnl);
    free(ae);
}

const char *onednn_attention_error(const OnednnAttention *ae) { return ae->err; }

size_t onednn_attention_bytes(const OnednnAttention *ae) {
    if (!ae) return 0;
    size_t bytes = ae->qkv16_bytes + ae->dy16_bytes;
    for (int i = 0; i < ae->n_plans; i++) {
        const Plan *pl = ae->plans[i];
        size_t sp_max = 0;
        for (int j = 0; j < pl->n_blocks * pl->n_kinds * N_PROD; j++)
            if (pl->prod[j].sp_bytes > sp_max) sp_max = pl->prod[j].sp_bytes;
        bytes += pl->n_threads * (grow_buffer_bytes(sp_max) + slot_bytes(ae->bf16, ae->fused, pl->T, pl->D));
    }
    return bytes;
}

size_t onednn_attention_bytes_for(int bf16, int fused, int B, int T, int C, int H, int n_threads, int backward) {
    size_t BT = (size_t)B * T;
    size_t bytes = (size_t)n_threads * slot_bytes(bf16, fused, T, C / H);
    if (bf16) bytes += grow_buffer_bytes(BT * 3 * C * sizeof(uint16_t));                 // qkv16
    if (bf16 && backward) bytes += grow_buffer_bytes(BT * (size_t)C * sizeof(uint16_t));   // dy16
    return bytes;
}

// x (B,T,parts*C), parts = 3 (qkv) or 1 (dY), rounded to bf16 into y
// head-major: part p, head h of batch row b is the dense (T, D) matrix at
// ((b*parts + p)*H + h) T D of y.
static void to_bf16_head_major(uint16_t *y, const float *x, int parts, int B, int T, int C, int H) {
    const size_t D = C / H, HT = (size_t)H * T;
    #pragma omp parallel for schedule(static)
    for (long bt = 0; bt < (long)B * T; bt++) {   // row (b, t) of x: parts*H segments of D
        const long b = bt / T, t = bt % T;
        const float *row = x + (size_t)bt * parts * C;
        for (int ph = 0; ph < parts * H; ph++) {   // part p = ph / H, head h = ph % H
            uint16_t *dst = y + ((size_t)b * parts * HT + (size_t)ph * T + t) * D;
            const float *src = row + (size_t)ph * D;
            bf16_round_n(dst, src, D);
        }
    }
}

// The products' view of x (B,T,parts*C): x itself (fp32), or x rounded into
// *buf head-major (bf16, to_bf16_head_major).
static const void *operand(OnednnAttention *ae, uint16_t **buf, size_t *have, const float *x, int parts, int B,
                           int T, int C, int H) {
    if (!ae->bf16) return x;
    const size_t n = (size_t)B * T * parts * C;
    if (grow_buffer((void **)buf, have, n * sizeof **buf) != 0) { set_err(ae, "out of memory"); return NULL; }
    to_bf16_head_major(*buf, x, parts, B, T, C, H);
    return *buf;
}

// Rows 0..rows-1 of a dense (rows, D) fp32 block into rows of dst with row stride ld.
// (A loop, not memcpy: the rows are short, D floats, and a call per row cost more than the copy.)
static void copy_rows(float *dst, size_t ld, const float *src, int rows, int D) {
    for (int r = 0; r < rows; r++) {
        float *y = dst + r * ld;
        const float *x = src + (size_t)r * D;
        #pragma omp simd
        for (int d = 0; d < D; d++) y[d] = x[d];
    }
}

// The first failure inside a parallel loop, reported after it.
typedef struct { dnnl_status_t st; int prod; } Failure;

static int failed(OnednnAttention *ae, const Failure *f, const char *pass) {
    if (f->st == dnnl_success) return 0;
    set_err(ae, "oneDNN attention %s, product %s: %s", pass, prod_names[f->prod], dnnl_status2str(f->st));
    return -1;
}

static dnnl_status_t execute(const Plan *pl, Slot *sl, int i, const void *src, const void *wei, float *dst) {
    dnnl_memory_t *m = sl->mem + i * N_MEM;
    dnnl_status_t st;
    if ((st = dnnl_memory_set_data_handle(m[M_SRC], (void *)src)) != dnnl_success) return st;
    if ((st = dnnl_memory_set_data_handle(m[M_WEI], (void *)wei)) != dnnl_success) return st;
    if ((st = dnnl_memory_set_data_handle(m[M_DST], dst)) != dnnl_success) return st;
    dnnl_exec_arg_t args[N_MEM] = {{DNNL_ARG_SRC, m[M_SRC]}, {DNNL_ARG_WEIGHTS, m[M_WEI]},
                                   {DNNL_ARG_DST, m[M_DST]}, {DNNL_ARG_SCRATCHPAD, m[M_SP]}};
    int n_args = 3;
    if (m[M_SP]) {
        if ((st = dnnl_memory_set_data_handle(m[M_SP], sl->scratchpad)) != dnnl_success) return st;
        n_args = 4;
    }
    if ((st = dnnl_primitive_execute(pl->prod[i].prim, sl->stream, n_args, args)) != dnnl_success)
        return st;
    return dnnl_stream_wait(sl->stream);
}

// Product p of block blk (and its key block's kind) on slot sl: dst = src . wei (with its
// attributes). 0, or -1 with the failure recorded in *fail (the first one of the pass).
static int run(const Plan *pl, Slot *sl, int blk, int kind, int p, const void *src, const void *wei, float *dst,
               Failure *fail) {
    dnnl_status_t st = execute(pl, sl, (blk * pl->n_kinds + kind) * N_PROD + p, src, wei, dst);
    if (st == dnnl_success) return 0;
    #pragma omp critical(onednn_attention_failure)
    if (fail->st == dnnl_success) { fail->st = st; fail->prod = p; }
    return -1;
}

// Rows 0..rows-1 of an fp32 block (rows, keys) into its bf16 copy.
static void round_block(uint16_t *y, const float *x, int rows, int keys) {
    bf16_round_n(y, x, (size_t)rows * keys);
}

// Where head h of batch row b starts in a (B,T,width) tensor, in elements
// (qkv and dqkv: width 3C, q there, k at +C, v at +2C; out and dout: width C).
static size_t head_at(int b, int h, int T, size_t width, int D) { return (size_t)b * T * width + (size_t)h * D; }

// The same in the products' view: fp32 the tensor itself (head_at), bf16 the
// head-major copy (operand()), where part p of head h is at ((b*parts + p)*H + h) T D.
static size_t head_op_at(const OnednnAttention *ae, const Plan *pl, int b, int h, int parts) {
    if (!ae->bf16) return head_at(b, h, pl->T, (size_t)parts * pl->C, pl->D);
    return (((size_t)b * parts * pl->H) + h) * pl->T * pl->D;
}

// The task of one (batch b, head h) pair, bh = b H + h, run by the calling
// thread: its slot, its head's q, k, v in the products' view of qkv (es bytes
// each), and its row of the distance bias (H,T), or NULL.
typedef struct {
    Slot *sl;
    int b, h, bh;
    const char *q, *k, *v;
    const float *bias_h;
} HeadTask;

static HeadTask head_task(const OnednnAttention *ae, const Plan *pl, const char *qkv_op, const float *bias, int bh) {
    HeadTask t = {.sl = &pl->slot[omp_get_thread_num()], .b = bh / pl->H, .h = bh % pl->H, .bh = bh};
    t.bias_h = bias ? bias + (size_t)t.h * pl->T : NULL;
    // the next part (k after q, v after k): fp32 C columns on, bf16 H heads of (T, D) on
    size_t es = ae->es, part = ae->bf16 ? (size_t)pl->H * pl->T * pl->D : (size_t)pl->C;
    t.q = qkv_op + head_op_at(ae, pl, t.b, t.h, 3) * es;
    t.k = t.q + part * es;
    t.v = t.q + 2 * part * es;
    return t;
}

/* ---- one head, blocked: query blocks against all their keys ---- */

// Its columns of out (T, D of C), its row of lse (T)
static void head_forward(const OnednnAttention *ae, const Plan *pl, const HeadTask *t, float *out, float *lse,
                         Failure *fail) {
    const int T = pl->T, C = pl->C;
    const size_t es = ae->es;
    float *o = out + head_at(t->b, t->h, T, C, pl->D), *s = t->sl->f32;
    const void *p_op = ae->bf16 ? (const void *)t->sl->b16 : (const void *)s;
    for (int blk = 0; blk < pl->n_blocks; blk++) {
        int i0, rows, keys;
        block_shape(pl, blk, &i0, &rows, &keys);
        if (run(pl, t->sl, blk, ALL_KEYS, PR_S, t->q + (size_t)i0 * pl->q_stride * es, t->k, s, fail)) return;
        attention_block_probs(s, i0, rows, keys, t->bias_h, NULL, lse + (size_t)t->bh * T);
        if (ae->bf16) round_block(t->sl->b16, s, rows, keys);
        float *y = ae->bf16 ? t->sl->heads : o + (size_t)i0 * C;   // bf16: dense, then into out
        if (run(pl, t->sl, blk, ALL_KEYS, PR_Y, p_op, t->v, y, fail)) return;
        if (ae->bf16) copy_rows(o + (size_t)i0 * C, C, y, rows, pl->D);
    }
}

// Its backward: dY's head in dy_op (the products' view of dout) -> its columns of
// dqkv (overwritten), its row of dbias (T) += (if non-NULL)
static void head_backward(const OnednnAttention *ae, const Plan *pl, const HeadTask *t, float *dqkv, float *dbias,
                          const char *dy_op, const float *lse, Failure *fail) {
    const int T = pl->T, C = pl->C, D = pl->D, nb = pl->nb;
    const size_t C3 = 3 * (size_t)C, es = ae->es;
    Slot *sl = t->sl;
    const char *dy = dy_op + head_op_at(ae, pl, t->b, t->h, 1) * es;
    float *dq = dqkv + head_at(t->b, t->h, T, C3, D), *dk = dq + C, *dv = dq + 2 * C;
    // where the products write dQ_I, dK, dV: fp32 dqkv itself; bf16 the
    // thread's dense scratch, copied into dqkv after (dQ_I) or at the end (dK, dV)
    float *dq_blk = ae->bf16 ? sl->heads : NULL;
    float *dk_sum = ae->bf16 ? sl->heads + (size_t)nb * D : dk;
    float *dv_sum = ae->bf16 ? sl->heads + ((size_t)nb + T) * D : dv;
    float *dbias_bh = dbias ? dbias + (size_t)t->bh * T : NULL;
    float *p = sl->f32, *dp = p + (size_t)nb * T;   // probabilities, then their gradient
    uint16_t *p16 = sl->b16, *ds16 = ae->bf16 ? sl->b16 + (size_t)nb * T : NULL;
    const void *p_op = ae->bf16 ? (const void *)p16 : (const void *)p;
    const void *ds_op = ae->bf16 ? (const void *)ds16 : (const void *)dp;
    // dk, dv of this head are sums over query blocks (sum post-op): from zero
    if (ae->bf16) {
        memset(dk_sum, 0, 2 * (size_t)T * D * sizeof(float));   // dk_sum, dv_sum: adjacent
    } else {
        zero_rows(dk, C3, T, D);
        zero_rows(dv, C3, T, D);
    }
    for (int blk = 0; blk < pl->n_blocks; blk++) {
        int i0, rows, keys;
        block_shape(pl, blk, &i0, &rows, &keys);
        const char *q_i = t->q + (size_t)i0 * pl->q_stride * es, *dy_i = dy + (size_t)i0 * pl->y_stride * es;
        float *dq_i = ae->bf16 ? dq_blk : dq + (size_t)i0 * C3;
        if (run(pl, sl, blk, ALL_KEYS, PR_S, q_i, t->k, p, fail)) return;
        attention_block_probs(p, i0, rows, keys, t->bias_h, lse + (size_t)t->bh * T, NULL);
        if (ae->bf16) round_block(p16, p, rows, keys);
        if (run(pl, sl, blk, ALL_KEYS, PR_DP, dy_i, t->v, dp, fail)) return;
        attention_block_dscores(dp, p, i0, rows, keys, dbias_bh);
        if (ae->bf16) round_block(ds16, dp, rows, keys);
        if (run(pl, sl, blk, ALL_KEYS, PR_DQ, ds_op, t->k, dq_i, fail)) return;
        if (ae->bf16) copy_rows(dq + (size_t)i0 * C3, C3, dq_i, rows, D);
        if (run(pl, sl, blk, ALL_KEYS, PR_DK, ds_op, q_i, dk_sum, fail)) return;
        if (run(pl, sl, blk, ALL_KEYS, PR_DV, p_op, dy_i, dv_sum, fail)) return;
    }
    if (ae->bf16) {
        copy_rows(dk, C3, dk_sum, T, D);
        copy_rows(dv, C3, dv_sum, T, D);
    }
}

/* ---- one head, fused ----
 *
 * attention_fused.c's fused attention on these primitives: per query block I
 * and key block J <= I, the products of the table above with keys J alone
 * (cols = nb below the diagonal block, rows on it), Y_I and dQ_I summed over
 * the key blocks by a sum post-op into rows zeroed first, between them the
 * loops of kernels.h (the online softmax's step and end; the key block's P
 * and dS with rho_i = dY_i . Y_i). fp32: the operands in place, as above.
 * bf16: q, k, v and dY in the head-major bf16 copies, each P and dS rounded
 * after its fp32 loop; Y_I and dQ_I summed in the thread's dense fp32 rows
 * (the online softmax rescales Y_I there, in fp32), dK and dV in its dense
 * (T, D) sums, and each copied into out or dqkv when whole. The statistics
 * (running max and sum, lse, rho) are fp32 throughout; rho reads the
 * forward's fp32 output and dY, not their roundings. */

// Its columns of out (T, D of C), its row of lse (T)
static void fused_head_forward(const OnednnAttention *ae, const Plan *pl, const HeadTask *t, float *out, float *lse,
                               Failure *fail) {
    const int T = pl->T, C = pl->C, D = pl->D, nb = pl->nb;
    const size_t es = ae->es;
    Slot *sl = t->sl;
    float *s = sl->f32, *row_max = s + (size_t)nb * nb, *row_sum = row_max + nb;
    const void *p_op = ae->bf16 ? (const void *)sl->b16 : (const void *)s;
    float *o = out + head_at(t->b, t->h, T, C, D);
    const size_t ldy = ae->bf16 ? (size_t)D : (size_t)C;   // Y_I's row stride where the products sum it
    for (int blk = 0; blk < pl->n_blocks; blk++) {
        int i0, rows, keys;
        block_shape(pl, blk, &i0, &rows, &keys);
        const char *q_i = t->q + (size_t)i0 * pl->q_stride * es;
        float *y = ae->bf16 ? sl->heads : o + (size_t)i0 * C;   // Y_I (rows, D)
        zero_rows(y, ldy, rows, D);
        for (int j0 = 0; j0 <= i0; j0 += nb) {
            int kind = j0 < i0 ? KEYS_BELOW : KEYS_DIAGONAL, cols = kind_cols(pl, blk, kind);
            const char *k_j = t->k + (size_t)j0 * pl->q_stride * es, *v_j = t->v + (size_t)j0 * pl->q_stride * es;
            if (run(pl, sl, blk, kind, PR_S, q_i, k_j, s, fail)) return;
            attention_online_probs(s, i0, rows, j0, cols, t->bias_h, row_max, row_sum, y, ldy, D);
            if (ae->bf16) round_block(sl->b16, s, rows, cols);
            if (run(pl, sl, blk, kind, PR_Y, p_op, v_j, y, fail)) return;
        }
        attention_online_finish(y, ldy, D, rows, row_max, row_sum, lse + (size_t)t->bh * T + i0);
        if (ae->bf16) copy_rows(o + (size_t)i0 * C, C, y, rows, D);
    }
}

// Its backward: dout, out (B,T,C) the forward's (fp32), dY's head in dy_op
// (the products' view of dout) -> its columns of dqkv (overwritten), its row
// of dbias (T) += (if non-NULL)
static void fused_head_backward(const OnednnAttention *ae, const Plan *pl, const HeadTask *t, float *dqkv,
                                float *dbias, const float *dout, const char *dy_op, const float *out,
                                const float *lse, Failure *fail) {
    const int T = pl->T, C = pl->C, D = pl->D, nb = pl->nb;
    const size_t C3 = 3 * (size_t)C, es = ae->es;
    Slot *sl = t->sl;
    const char *dy = dy_op + head_op_at(ae, pl, t->b, t->h, 1) * es;
    const float *dy_h = dout + head_at(t->b, t->h, T, C, D), *y_h = out + head_at(t->b, t->h, T, C, D);
    float *dq = dqkv + head_at(t->b, t->h, T, C3, D), *dk = dq + C, *dv = dq + 2 * C;
    float *dbias_bh = dbias ? dbias + (size_t)t->bh * T : NULL;
    float *p = sl->f32, *dp = p + (size_t)nb * nb, *rho = dp + (size_t)nb * nb;
    uint16_t *p16 = sl->b16, *ds16 = ae->bf16 ? sl->b16 + (size_t)nb * nb : NULL;
    const void *p_op = ae->bf16 ? (const void *)p16 : (const void *)p;
    const void *ds_op = ae->bf16 ? (const void *)ds16 : (const void *)dp;
    // where the products sum dQ_I, dK, dV: fp32 dqkv itself (row stride 3C); bf16 the
    // thread's dense scratch (row stride D), copied into dqkv when whole
    const size_t ld = ae->bf16 ? (size_t)D : C3;
    float *dq_acc = ae->bf16 ? sl->heads : NULL;
    float *dk_sum = ae->bf16 ? sl->heads + (size_t)nb * D : dk;
    float *dv_sum = ae->bf16 ? sl->heads + ((size_t)nb + T) * D : dv;
    zero_rows(dk_sum, ld, T, D);   // sums over the query blocks
    zero_rows(dv_sum, ld, T, D);
    for (int blk = 0; blk < pl->n_blocks; blk++) {
        int i0, rows, keys;
        block_shape(pl, blk, &i0, &rows, &keys);
        const char *q_i = t->q + (size_t)i0 * pl->q_stride * es, *dy_i = dy + (size_t)i0 * pl->y_stride * es;
        float *dq_i = ae->bf16 ? dq_acc : dq + (size_t)i0 * C3;
        attention_row_dots(rho, dy_h + (size_t)i0 * C, y_h + (size_t)i0 * C, C, rows, D);
        zero_rows(dq_i, ld, rows, D);   // a sum over the key blocks
        for (int j0 = 0; j0 <= i0; j0 += nb) {
            int kind = j0 < i0 ? KEYS_BELOW : KEYS_DIAGONAL, cols = kind_cols(pl, blk, kind);
            const char *k_j = t->k + (size_t)j0 * pl->q_stride * es, *v_j = t->v + (size_t)j0 * pl->q_stride * es;
            if (run(pl, sl, blk, kind, PR_S, q_i, k_j, p, fail)) return;
            attention_key_block_probs(p, i0, rows, j0, cols, t->bias_h, lse + (size_t)t->bh * T);
            if (ae->bf16) round_block(p16, p, rows, cols);
            if (run(pl, sl, blk, kind, PR_DP, dy_i, v_j, dp, fail)) return;
            attention_key_block_dscores(dp, p, i0, rows, j0, cols, rho, dbias_bh);
            if (ae->bf16) round_block(ds16, dp, rows, cols);
            if (run(pl, sl, blk, kind, PR_DQ, ds_op, k_j, dq_i, fail)) return;
            if (run(pl, sl, blk, kind, PR_DK, ds_op, q_i, dk_sum + (size_t)j0 * ld, fail)) return;
            if (run(pl, sl, blk, kind, PR_DV, p_op, dy_i, dv_sum + (size_t)j0 * ld, fail)) return;
        }
        if (ae->bf16) copy_rows(dq + (size_t)i0 * C3, C3, dq_i, rows, D);
    }
    if (ae->bf16) {
        copy_rows(dk, C3, dk_sum, T, D);
        copy_rows(dv, C3, dv_sum, T, D);
    }
}

/* ---- the two passes: one (batch, head) pair a task ---- */

// What a pass starts with: the plan and the products' view of qkv (*qkv_op); NULL on failure.
static Plan *begin(OnednnAttention *ae, const char **qkv_op, const float *qkv, int n_threads, int B, int T, int C,
                   int H) {
    if (omp_in_parallel() || n_threads < 1 || B < 1 || T < 1) {   // the plans and buffers are not shared safely
        set_err(ae, "oneDNN attention: called inside a parallel region or with %d threads, B %d, T %d",
                n_threads, B, T);
        return NULL;
    }
    Plan *pl = plan_get(ae, T, C, H, n_threads);
    if (!pl) return NULL;
    *qkv_op = operand(ae, &ae->qkv16, &ae->qkv16_bytes, qkv, 3, B, T, C, H);
    return *qkv_op ? pl : NULL;
}

// qkv (B,T,3C), bias (H,T) or NULL -> out (B,T,C), lse (B,H,T)
int onednn_attention_forward(OnednnAttention *ae, float *out, float *lse, const float *qkv, const float *bias,
                             int n_threads, int B, int T, int C, int H) {
    const char *qkv_op;
    Plan *pl = begin(ae, &qkv_op, qkv, n_threads, B, T, C, H);
    if (!pl) return -1;
    Failure fail = {dnnl_success, 0};
    #pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const HeadTask t = head_task(ae, pl, qkv_op, bias, bh);
        if (ae->fused) fused_head_forward(ae, pl, &t, out, lse, &fail);
        else head_forward(ae, pl, &t, out, lse, &fail);
    }
    return failed(ae, &fail, "forward");
}

// dout, out (B,T,C) the forward's -> dqkv (B,T,3C) (overwritten), dbias (B,H,T) += (if non-NULL)
int onednn_attention_backward(OnednnAttention *ae, float *dqkv, float *dbias, const float *dout, const float *qkv,
                              const float *out, const float *lse, const float *bias, int n_threads, int B, int T,
                              int C, int H) {
    const char *qkv_op;
    Plan *pl = begin(ae, &qkv_op, qkv, n_threads, B, T, C, H);
    const char *dy_op = pl ? operand(ae, &ae->dy16, &ae->dy16_bytes, dout, 1, B, T, C, H) : NULL;
    if (!dy_op) return -1;
    Failure fail = {dnnl_success, 0};
    #pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; bh++) {
        const HeadTask t = head_task(ae, pl, qkv_op, bias, bh);
        if (ae->fused) fused_head_backward(ae, pl, &t, dqkv, dbias, dout, dy_op, out, lse, &fail);
        else head_backward(ae, pl, &t, dqkv, dbias, dy_op, lse, &fail);
    }
    return failed(ae, &fail, "backward");
}
