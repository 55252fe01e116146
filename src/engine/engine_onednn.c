// engine_onednn.c: the engine of engine.h on oneDNN: the linear layers'
// products here, one matmul primitive per product, in fp32 or in bf16;
// attention's in onednn_attention.c.
//
// The three products as oneDNN matmuls, dst (M,N) = src (M,K) . wei (K,N),
// all row-major ("ab"); "ba" is a transposed view of the same bytes:
//
//   op    dst            src                  wei                      K
//   FWD   out (N,OC)     inp (N,C)            W^T (C,OC): W as "ba"    C    (+ bias (1,OC))
//   DINP  dinp (N,C)     dout (N,OC)          W (OC,C)                 OC
//   DW    dW (OC,C)      dout^T (OC,N) "ba"   inp (N,C)                N    (+= : a `sum` post-op)
//
// db (OC) += sum_n dout[n,:] is the fp32 loop the OpenBLAS engine runs (bias_grad,
// engine.c); in bf16 the same pass also rounds dout.
//
// bf16: src and wei are rounded to bf16 (to nearest even), their products
// are exact in fp32 and summed in fp32; dst and bias are fp32. The
// activations are rounded into the engine's own buffers: dout once per
// backward, for both DINP and DW; inp once per forward, into a copy kept
// per weight (InputCopy, found by W's address) from which backward's DW
// reads. So backward never reads the model's fp32 inp (Engine.keeps_inputs),
// and the model keeps one layer's linear inputs instead of L.
//
// Weights are found by address (a parameter's, which never moves) and
// registered at first use. A product's wei is the fp32 parameter itself
// (fp32: oneDNN packs blocks of it inside each call) or a copy made from it
// by a oneDNN reorder: bf16 keeps two (W^T for FWD, W for DINP) in the
// blocked layout oneDNN picks for format `any` at LAYOUT_REF_ROWS rows, and
// creates every primitive with that layout, so that one copy serves every
// N and no product packs its weights again. (The tests' layouts,
// engine_testing.h, add fp32 packed copies and one plain row-major bf16
// copy read both ways.) weights_changed bumps a generation counter; a copy
// older than it is made again at its next use.
//
// Primitives are created at the first call of a shape and kept, one per
// (op, N, C, OC, bias or not, thread count), with memory objects whose data
// pointers are set per call; oneDNN's scratchpad is ours (user mode), one
// for every primitive (they run one at a time), grown as shapes need it. A
// call after the first of its shape creates nothing and allocates nothing of ours.
//
// Threads: Debian's oneDNN runs on OpenMP, on the program's pool. A
// primitive runs on the thread count it was created for (at most the
// current one), hence that count in its key: after omp_set_num_threads(n)
// each shape gets a primitive for n. The engine is called outside parallel
// regions (inside one, a primitive runs on the calling thread alone).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>

#include "engine/engine_create.h"
#include "engine/engine_shared.h"
#include "engine/kernels.h"
#include "engine/engine_testing.h"
#include "engine/onednn.h"

#define LAYOUT_REF_ROWS 1024   // rows of the product the packed layout is chosen for

enum { OP_FWD, OP_DINP, OP_DW };
static const char *const op_names[] = {"forward", "dinp", "dW"};

// One weight copy: a weight's B operand for one op, in the engine's type and layout.
typedef struct {
    dnnl_memory_t mem;        // owns its buffer; NULL until first made
    unsigned generation;      // e->generation when last made from the master
} WeightCopy;

typedef struct {
    const float *master;            // W (OC,C) fp32: the model's parameter, never written here
    int OC, C;
    dnnl_memory_t master_view[2];   // the master as [OP_FWD] W^T (C,OC) "ba", [OP_DINP] W (OC,C) "ab"
    WeightCopy copy[2];             // PACKED: [OP_FWD], [OP_DINP]; PLAIN bf16: [OP_DINP] only
    dnnl_memory_t plain_fwd_view;   // PLAIN bf16: copy[OP_DINP]'s bytes read as W^T (C,OC) "ba"
} Weight;

// bf16: the inp of the last linear_forward of weight W, rounded, found by W's address.
typedef struct {
    const float *W;                 // the weight whose input this is
    const float *x;                 // the fp32 activation it was rounded from
    int N, C;                       // its shape when last rounded (0, 0: holds nothing)
    uint16_t *bf16;                 // (N,C)
    size_t bytes;
} InputCopy;

// A cached matmul primitive and its memory objects (data pointers set per call).
typedef struct {
    int op, N, C, OC, has_bias, n_threads;   // the key
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst, bias;            // bias NULL: none
    dnnl_memory_t act_wei;                   // OP_DW: its wei operand is inp, an activation
    dnnl_memory_t scratchpad;                // NULL: none needed
} Matmul;

// The packed layout oneDNN chose for the wei operand of op at (C, OC).
typedef struct {
    int op, C, OC;
    dnnl_memory_desc_t md;
} PackedLayout;

// A cached reorder master -> copy.
typedef struct {
    dnnl_memory_desc_t from, to;
    int n_threads;
    dnnl_primitive_t prim;
    dnnl_memory_t scratchpad;
} Reorder;

typedef struct {
    Engine base;
    int bf16;
    WeightLayout layout;            // resolved: PACKED or PLAIN
    dnnl_data_type_t dt;            // type of the products' inputs: dnnl_f32 or dnnl_bf16
    dnnl_cpu_isa_t isa;
    dnnl_engine_t dnnl;
    dnnl_stream_t stream;
    Weight *weights;                // registered at first use, found by address
    int n_weights, cap_weights;
    Matmul **matmuls;               // pointers: entries stay put while the array grows
    int n_matmuls, cap_matmuls;
    PackedLayout *layouts;
    int n_layouts, cap_layouts;
    Reorder **reorders;
    int n_reorders, cap_reorders;
    InputCopy *inputs;              // bf16: the linear layers' inputs rounded, one per weight
    int n_inputs, cap_inputs;
    void *dout_bf16;                // dout (N,OC) rounded to bf16
    size_t dout_bf16_bytes;
    void *scratchpad;               // oneDNN's scratchpad, shared by every primitive
    size_t scratchpad_bytes;
    unsigned generation;            // bumped by weights_changed
    long repacks;
    OnednnAttention *attention;     // attention's products
    char msg[256];                  // the message being built by a failing call
} OnednnEngine;

#define set_err(e, ...) onednn_message((e)->msg, sizeof (e)->msg, __VA_ARGS__)

#define TRY(what, call) ONEDNN_TRY(e->msg, "oneDNN ", what, call)

// Room for `need` elements of `size` bytes in arr (capacity *cap): returns
// the array, perhaps moved, or NULL if out of memory (arr then untouched).
static void *grow(void *arr, int *cap, int need, size_t size) {
    if (need <= *cap) return arr;
    int cap_new = *cap ? 2 * *cap : 8;
    while (cap_new < need) cap_new *= 2;
    void *p = realloc(arr, (size_t)cap_new * size);
    if (p) *cap = cap_new;
    return p;
}

// A plain 2-D descriptor: rows x cols, "ab" row-major or "ba" (its transpose's bytes).
static dnnl_status_t md2(dnnl_memory_desc_t *md, int rows, int cols, dnnl_data_type_t dt,
                         dnnl_format_tag_t tag) {
    dnnl_dims_t dims = {rows, cols};
    return dnnl_memory_desc_init_by_tag(md, 2, dims, dt, tag);
}

/* ---- packed layouts, reorders, weight copies ---- */

// The layout oneDNN picks for the wei operand of op (OP_FWD: W^T (C,OC);
// OP_DINP: W (OC,C)) when given format `any`, at LAYOUT_REF_ROWS rows.
static int layout_get(OnednnEngine *e, int op, int C, int OC, dnnl_memory_desc_t *md) {
    for (int i = 0; i < e->n_layouts; i++) {
        PackedLayout *l = &e->layouts[i];
        if (l->op == op && l->C == C && l->OC == OC) { *md = l->md; return 0; }
    }
    int K = op == OP_FWD ? C : OC, Nout = op == OP_FWD ? OC : C;
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    TRY("descriptor", md2(&src_md, LAYOUT_REF_ROWS, K, e->dt, dnnl_ab));
    TRY("descriptor", md2(&wei_md, K, Nout, e->dt, dnnl_format_tag_any));
    TRY("descriptor", md2(&dst_md, LAYOUT_REF_ROWS, Nout, dnnl_f32, dnnl_ab));
    TRY("matmul descriptor", dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md));
    TRY("matmul primitive descriptor", dnnl_primitive_desc_create(&pd, &desc, NULL, e->dnnl, NULL));
    const dnnl_memory_desc_t *chosen = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (!chosen) { set_err(e, "oneDNN: no weights layout"); goto fail; }
    PackedLayout *layouts = grow(e->layouts, &e->cap_layouts, e->n_layouts + 1, sizeof *layouts);
    if (!layouts) { set_err(e, "out of memory"); goto fail; }
    e->layouts = layouts;
    e->layouts[e->n_layouts++] = (PackedLayout){.op = op, .C = C, .OC = OC, .md = *chosen};
    *md = *chosen;
    dnnl_primitive_desc_destroy(pd);
    return 0;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    return -1;
}

static void reorder_destroy(Reorder *r) {
    if (!r) return;
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->scratchpad) dnnl_memory_destroy(r->scratchpad);
    free(r);
}

// The reorder from -> to for the current thread count, created at first need.
static Reorder *reorder_get(OnednnEngine *e, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
    int n_threads = omp_get_max_threads();
    for (int i = 0; i < e->n_reorders; i++) {
        Reorder *r = e->reorders[i];
        if (r->n_threads == n_threads && dnnl_memory_desc_equal(&r->from, from) &&
            dnnl_memory_desc_equal(&r->to, to))
            return r;
    }
    Reorder *r = calloc(1, sizeof *r);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (!r) { set_err(e, "out of memory"); return NULL; }
    r->from = *from;
    r->to = *to;
    r->n_threads = n_threads;
    TRY("attributes", dnnl_primitive_attr_create(&attr));
    TRY("attributes", dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    TRY("reorder primitive descriptor",
        dnnl_reorder_primitive_desc_create(&pd, from, e->dnnl, to, e->dnnl, attr));
    TRY("reorder primitive", dnnl_primitive_create(&r->prim, pd));
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sp_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (sp_bytes > 0) {
        TRY("scratchpad memory", dnnl_memory_create(&r->scratchpad, sp, e->dnnl, DNNL_MEMORY_NONE));
        if (grow_buffer(&e->scratchpad, &e->scratchpad_bytes, sp_bytes) != 0) { set_err(e, "out of memory"); goto fail; }
    }
    Reorder **reorders = grow(e->reorders, &e->cap_reorders, e->n_reorders + 1, sizeof *reorders);
    if (!reorders) { set_err(e, "out of memory"); goto fail; }
    e->reorders = reorders;
    e->reorders[e->n_reorders++] = r;
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return r;
fail:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    reorder_destroy(r);
    return NULL;
}

// (Re-)makes copy c of weight w from its master: one reorder, fp32 (W or
// W^T, plain) -> the copy's type and layout (bf16: rounded to nearest even).
static int weight_copy_make(OnednnEngine *e, Weight *w, int c) {
    WeightCopy *cp = &w->copy[c];
    if (!cp->mem) {   // first use: the copy's buffer
        dnnl_memory_desc_t md;
        if (e->layout == WEIGHTS_PACKED) {
            if (layout_get(e, c, w->C, w->OC, &md) != 0) return -1;
        } else {      // PLAIN bf16: W (OC,C) row-major, c == OP_DINP
            TRY("descriptor", md2(&md, w->OC, w->C, dnnl_bf16, dnnl_ab));
        }
        TRY("weight copy memory", dnnl_memory_create(&cp->mem, &md, e->dnnl, DNNL_MEMORY_ALLOCATE));
        if (e->layout == WEIGHTS_PLAIN) {   // the same bytes read as W^T (C,OC) for forward
            dnnl_memory_desc_t view_md;
            void *bytes;
            TRY("descriptor", md2(&view_md, w->C, w->OC, dnnl_bf16, dnnl_ba));
            TRY("weight copy memory", dnnl_memory_get_data_handle(cp->mem, &bytes));
            TRY("weight copy memory", dnnl_memory_create(&w->plain_fwd_view, &view_md, e->dnnl, bytes));
        }
    }
    const dnnl_memory_desc_t *from_md, *to_md;
    TRY("memory descriptor", dnnl_memory_get_memory_desc(w->master_view[c], &from_md));
    TRY("memory descriptor", dnnl_memory_get_memory_desc(cp->mem, &to_md));
    Reorder *r = reorder_get(e, from_md, to_md);
    if (!r) return -1;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, w->master_view[c]}, {DNNL_ARG_TO, cp->mem}};
    int n_args = 2;
    if (r->scratchpad) {
        TRY("scratchpad memory", dnnl_memory_set_data_handle(r->scratchpad, e->scratchpad));
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, r->scratchpad};
    }
    TRY("reorder of a weight", dnnl_primitive_execute(r->prim, e->stream, n_args, args));
    TRY("stream wait", dnnl_stream_wait(e->stream));
    cp->generation = e->generation;
    e->repacks++;
    return 0;
fail:
    return -1;
}

// The memory object holding weight w's B operand for op (OP_FWD or OP_DINP),
// its copy re-made first if stale.
static int weight_operand(OnednnEngine *e, Weight *w, int op, dnnl_memory_t *operand) {
    if (e->layout == WEIGHTS_PLAIN && e->dt == dnnl_f32) {   // the master itself
        *operand = w->master_view[op];
        return 0;
    }
    int c = e->layout == WEIGHTS_PLAIN ? OP_DINP : op;       // the copy holding it
    if (!w->copy[c].mem || w->copy[c].generation != e->generation)
        if (weight_copy_make(e, w, c) != 0) return -1;
    *operand = e->layout == WEIGHTS_PLAIN && op == OP_FWD ? w->plain_fwd_view : w->copy[c].mem;
    return 0;
}

/* ---- matmul primitives ---- */

static void matmul_destroy(Matmul *m) {
    if (!m) return;
    if (m->prim) dnnl_primitive_destroy(m->prim);
    dnnl_memory_t mems[] = {m->src, m->dst, m->bias, m->act_wei, m->scratchpad};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(m);
}

// Creates m's primitive (m's key filled in) and its memory objects, and
// grows the engine's buffers to what this shape needs.
static int matmul_create(OnednnEngine *e, Matmul *m) {
    int N = m->N, C = m->C, OC = m->OC;
    dnnl_data_type_t dt = e->dt;
    dnnl_memory_desc_t src_md, wei_md, dst_md, bias_md;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (m->op == OP_FWD) {           // out (N,OC) = inp (N,C) . W^T (C,OC) + bias (1,OC)
        TRY("descriptor", md2(&src_md, N, C, dt, dnnl_ab));
        if (e->layout == WEIGHTS_PACKED) {
            if (layout_get(e, OP_FWD, C, OC, &wei_md) != 0) goto fail;
        } else {
            TRY("descriptor", md2(&wei_md, C, OC, dt, dnnl_ba));
        }
        TRY("descriptor", md2(&dst_md, N, OC, dnnl_f32, dnnl_ab));
        TRY("descriptor", md2(&bias_md, 1, OC, dnnl_f32, dnnl_ab));
    } else if (m->op == OP_DINP) {   // dinp (N,C) = dout (N,OC) . W (OC,C)
        TRY("descriptor", md2(&src_md, N, OC, dt, dnnl_ab));
        if (e->layout == WEIGHTS_PACKED) {
            if (layout_get(e, OP_DINP, C, OC, &wei_md) != 0) goto fail;
        } else {
            TRY("descriptor", md2(&wei_md, OC, C, dt, dnnl_ab));
        }
        TRY("descriptor", md2(&dst_md, N, C, dnnl_f32, dnnl_ab));
    } else {                         // dW (OC,C) += dout^T (OC,N) . inp (N,C)
        TRY("descriptor", md2(&src_md, OC, N, dt, dnnl_ba));
        TRY("descriptor", md2(&wei_md, N, C, dt, dnnl_ab));
        TRY("descriptor", md2(&dst_md, OC, C, dnnl_f32, dnnl_ab));
    }
    TRY("attributes", dnnl_primitive_attr_create(&attr));
    TRY("attributes", dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (m->op == OP_DW) {            // dst = 1.0 * dst + product: the gradient accumulates
        TRY("post-ops", dnnl_post_ops_create(&post_ops));
        TRY("post-ops", dnnl_post_ops_append_sum(post_ops, 1.0f));
        TRY("post-ops", dnnl_primitive_attr_set_post_ops(attr, post_ops));
    }
    TRY("matmul descriptor", dnnl_matmul_desc_init(&desc, &src_md, &wei_md, m->has_bias ? &bias_md : NULL, &dst_md));
    TRY("matmul primitive descriptor", dnnl_primitive_desc_create(&pd, &desc, attr, e->dnnl, NULL));
    TRY("matmul primitive", dnnl_primitive_create(&m->prim, pd));
    TRY("memory", dnnl_memory_create(&m->src, &src_md, e->dnnl, DNNL_MEMORY_NONE));
    TRY("memory", dnnl_memory_create(&m->dst, &dst_md, e->dnnl, DNNL_MEMORY_NONE));
    if (m->has_bias) TRY("memory", dnnl_memory_create(&m->bias, &bias_md, e->dnnl, DNNL_MEMORY_NONE));
    if (m->op == OP_DW) TRY("memory", dnnl_memory_create(&m->act_wei, &wei_md, e->dnnl, DNNL_MEMORY_NONE));
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sp_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (sp_bytes > 0) TRY("memory", dnnl_memory_create(&m->scratchpad, sp, e->dnnl, DNNL_MEMORY_NONE));
    // the buffers this shape needs: scratchpad, and the bf16 activations it reads
    int fail_oom = grow_buffer(&e->scratchpad, &e->scratchpad_bytes, sp_bytes) != 0;
    if (dt == dnnl_bf16) {
        if (m->op != OP_FWD)   // (DW's inp is forward's copy: input_copy)
            fail_oom |= grow_buffer(&e->dout_bf16, &e->dout_bf16_bytes, (size_t)N * OC * sizeof(uint16_t)) != 0;
    }
    if (fail_oom) { set_err(e, "out of memory for the matmul buffers"); goto fail; }
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    dnnl_primitive_attr_destroy(attr);
    dnnl_primitive_desc_destroy(pd);
    return 0;
fail:;
    char why[sizeof e->msg];
    snprintf(why, sizeof why, "%s", e->msg);
    set_err(e, "%s (%s product, N=%d C=%d OC=%d)", why, op_names[m->op], N, C, OC);
    if (post_ops) dnnl_post_ops_destroy(post_ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return -1;
}

// The primitive for this product at the current thread count, created at
// the first call of its shape.
static Matmul *matmul_get(OnednnEngine *e, int op, int N, int C, int OC, int has_bias) {
    int n_threads = omp_get_max_threads();
    for (int i = 0; i < e->n_matmuls; i++) {
        Matmul *m = e->matmuls[i];
        if (m->op == op && m->N == N && m->C == C && m->OC == OC && m->has_bias == has_bias &&
            m->n_threads == n_threads)
            return m;
    }
    Matmul **matmuls = grow(e->matmuls, &e->cap_matmuls, e->n_matmuls + 1, sizeof *matmuls);
    if (matmuls) e->matmuls = matmuls;
    Matmul *m = matmuls ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        set_err(e, "out of memory");
        return NULL;
    }
    *m = (Matmul){.op = op, .N = N, .C = C, .OC = OC, .has_bias = has_bias, .n_threads = n_threads};
    if (matmul_create(e, m) != 0) {
        matmul_destroy(m);
        return NULL;
    }
    e->matmuls[e->n_matmuls++] = m;
    return m;
}

// Executes m: dst = src . wei (+ bias) (DW: dst += ...). The wei operand is
// a weight's memory object (FWD, DINP) or, for DW, the activation act_wei.
static int matmul_run(OnednnEngine *e, Matmul *m, const void *src, dnnl_memory_t wei,
                      const void *act_wei, float *dst, const float *bias) {
    dnnl_exec_arg_t args[5];
    int n = 0;
    TRY("memory", dnnl_memory_set_data_handle(m->src, (void *)src));
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m->src};
    if (act_wei) {
        TRY("memory", dnnl_memory_set_data_handle(m->act_wei, (void *)act_wei));
        wei = m->act_wei;
    }
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wei};
    TRY("memory", dnnl_memory_set_data_handle(m->dst, dst));
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m->dst};
    if (m->bias) {
        TRY("memory", dnnl_memory_set_data_handle(m->bias, (void *)bias));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m->bias};
    }
    if (m->scratchpad) {
        TRY("memory", dnnl_memory_set_data_handle(m->scratchpad, e->scratchpad));
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m->scratchpad};
    }
    TRY("matmul execution", dnnl_primitive_execute(m->prim, e->stream, n, args));
    TRY("stream wait", dnnl_stream_wait(e->stream));
    return 0;
fail:;
    char why[sizeof e->msg];
    snprintf(why, sizeof why, "%s", e->msg);
    set_err(e, "%s (%s product, N=%d C=%d OC=%d)", why, op_names[m->op], m->N, m->C, m->OC);
    return -1;
}

/* ---- the linear layers' inputs in bf16 ---- */

// The rounded copy of W's input: found by W (NULL: none yet), or found or
// registered and grown to N*C for x (input_copy; NULL if out of memory).
static InputCopy *input_find(OnednnEngine *e, const float *W) {
    for (int i = 0; i < e->n_inputs; i++)
        if (e->inputs[i].W == W) return &e->inputs[i];
    return NULL;
}

static InputCopy *input_copy(OnednnEngine *e, const float *W, const float *x, int N, int C) {
    InputCopy *c = input_find(e, W);
    if (!c) {
        InputCopy *inputs = grow(e->inputs, &e->cap_inputs, e->n_inputs + 1, sizeof *inputs);
        if (!inputs) return NULL;
        e->inputs = inputs;
        c = &e->inputs[e->n_inputs++];
        *c = (InputCopy){.W = W};
    }
    c->x = x;
    c->N = c->C = 0;   // holds nothing until it is filled
    if (grow_buffer((void **)&c->bf16, &c->bytes, (size_t)N * C * sizeof(uint16_t)) != 0) return NULL;
    return c;
}

/* ---- the engine ---- */

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "unknown";
    }
}

// The ISA values are bit sets: avx512_core_amx contains avx512_core_bf16,
// which contains avx512_core.
static int isa_has_avx512(dnnl_cpu_isa_t isa) {
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

int engine_onednn_has_avx512(void) { return isa_has_avx512(dnnl_get_effective_cpu_isa()); }

static void describe(OnednnEngine *e, int fused_attention) {
    const dnnl_version_t *v = dnnl_version();
    const char *weights = e->layout == WEIGHTS_PACKED ? "2 packed copies per weight"
                          : e->dt == dnnl_f32         ? "read in place"
                                                      : "1 plain bf16 copy per weight";
    int emulated = e->bf16 && (e->isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16;
    snprintf(e->base.describe, sizeof e->base.describe,
             "onednn %s%s (oneDNN %d.%d.%d, isa %s), weights %s; attention's products on oneDNN%s",
             e->bf16 ? "bf16" : "fp32", emulated ? " emulated: no native bf16 on this CPU, slower than fp32" : "",
             v->major, v->minor, v->patch, isa_name(e->isa), weights,
             fused_attention ? ", fused: blocks of 64 query rows x 64 keys, online softmax" : "");
}

// The registered weight at address W (OC,C), registered now if new; NULL (message in e->msg) on failure.
static Weight *weight_get(OnednnEngine *e, const float *W, int OC, int C) {
    for (int i = 0; i < e->n_weights; i++)
        if (e->weights[i].master == W && e->weights[i].OC == OC && e->weights[i].C == C) return &e->weights[i];
    Weight *weights = grow(e->weights, &e->cap_weights, e->n_weights + 1, sizeof *weights);
    if (!weights) {
        set_err(e, "out of memory");
        return NULL;
    }
    e->weights = weights;
    Weight *w = &e->weights[e->n_weights];
    *w = (Weight){.master = W, .OC = OC, .C = C};
    dnnl_memory_desc_t md;   // the master as an fp32 operand or reorder source
    TRY("descriptor", md2(&md, C, OC, dnnl_f32, dnnl_ba));   // W^T (C,OC)
    TRY("memory", dnnl_memory_create(&w->master_view[OP_FWD], &md, e->dnnl, (void *)W));
    TRY("descriptor", md2(&md, OC, C, dnnl_f32, dnnl_ab));   // W (OC,C)
    TRY("memory", dnnl_memory_create(&w->master_view[OP_DINP], &md, e->dnnl, (void *)W));
    e->n_weights++;
    return w;
fail:;
    char why[sizeof e->msg];
    snprintf(why, sizeof why, "%s", e->msg);
    set_err(e, "%s (weight %d x %d)", why, OC, C);
    if (w->master_view[OP_FWD]) dnnl_memory_destroy(w->master_view[OP_FWD]);
    if (w->master_view[OP_DINP]) dnnl_memory_destroy(w->master_view[OP_DINP]);
    return NULL;
}

// out (N,OC) = inp (N,C) . W^T (C,OC) + bias
static void linear_forward(Engine *base, float *out, const float *inp, const float *W, const float *bias,
                           int N, int C, int OC) {
    OnednnEngine *e = (OnednnEngine *)base;
    if (N == 0) return;
    Weight *w = weight_get(e, W, OC, C);
    Matmul *m = w ? matmul_get(e, OP_FWD, N, C, OC, bias != NULL) : NULL;
    dnnl_memory_t wei;
    if (!m || weight_operand(e, w, OP_FWD, &wei) != 0) {
        engine_fail(base, "%s", e->msg);
        return;
    }
    const void *src = inp;
    if (e->dt == dnnl_bf16) {   // inp rounded, and kept for backward's dW (keeps_inputs)
        InputCopy *c = input_copy(e, W, inp, N, C);
        if (!c) {
            engine_fail(base, "out of memory for the bf16 copy of a (%d, %d) input", N, C);
            return;
        }
        to_bf16(c->bf16, inp, (size_t)N * C);
        c->N = N;
        c->C = C;
        src = c->bf16;
    }
    if (matmul_run(e, m, src, wei, NULL, out, bias) != 0) engine_fail(base, "%s", e->msg);
}

static void linear_backward(Engine *base, float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *W, int N, int C, int OC) {
    OnednnEngine *e = (OnednnEngine *)base;
    if (N == 0) return;
    // the primitives first: at a new shape they size the bf16 buffers
    Weight *w = weight_get(e, W, OC, C);
    Matmul *m_dinp = NULL, *m_dw = NULL;
    dnnl_memory_t wei = NULL;
    int ok = w != NULL;
    if (ok && dinp) ok = (m_dinp = matmul_get(e, OP_DINP, N, C, OC, 0)) && weight_operand(e, w, OP_DINP, &wei) == 0;
    if (ok && dweight) ok = (m_dw = matmul_get(e, OP_DW, N, C, OC, 0)) != NULL;
    if (!ok) {
        engine_fail(base, "%s", e->msg);
        return;
    }
    const void *dout_src = dout, *inp_src = inp;
    if (e->dt == dnnl_bf16 && (dinp || dweight)) {   // dout rounded once for both products
        if (dbias)   // in the pass that sums it into db
            bias_grad(dbias, e->dout_bf16, dout, N, OC);
        else
            to_bf16(e->dout_bf16, dout, (size_t)N * OC);
        dout_src = e->dout_bf16;
        if (dweight) {   // forward's rounding of inp (keeps_inputs: inp itself may be overwritten)
            const InputCopy *c = input_find(e, W);
            if (!(c && c->x == inp && c->N == N && c->C == C)) {
                engine_fail(base, "linear backward (%d x %d weight, %d rows): no forward of this weight and "
                            "input to take dW from", OC, C, N);
                return;
            }
            inp_src = c->bf16;
        }
    } else if (dbias) {
        bias_grad(dbias, NULL, dout, N, OC);
    }
    // dinp (N,C) = dout (N,OC) . W (OC,C);  dW (OC,C) += dout^T (OC,N) . inp (N,C)
    if ((dinp && matmul_run(e, m_dinp, dout_src, wei, NULL, dinp, NULL) != 0) ||
        (dweight && matmul_run(e, m_dw, dout_src, NULL, inp_src, dweight, NULL) != 0)) {
        engine_fail(base, "%s", e->msg);
        return;
    }
}

static void attention_forward(Engine *base, float *out, float *lse, const float *qkv, const float *bias,
                              int B, int T, int C, int H) {
    OnednnEngine *e = (OnednnEngine *)base;
    if (onednn_attention_forward(e->attention, out, lse, qkv, bias, omp_get_max_threads(), B, T, C, H) != 0)
        engine_fail(base, "%s", onednn_attention_error(e->attention));
}

static void attention_backward(Engine *base, float *dqkv, float *dbias, const float *dout, const float *qkv,
                               const float *out, const float *lse, const float *bias, int B, int T, int C, int H) {
    OnednnEngine *e = (OnednnEngine *)base;
    if (onednn_attention_backward(e->attention, dqkv, dbias, dout, qkv, out, lse, bias, omp_get_max_threads(), B, T,
                                  C, H) != 0)
        engine_fail(base, "%s", onednn_attention_error(e->attention));
}

static void weights_changed(Engine *base) { ((OnednnEngine *)base)->generation++; }

void engine_onednn_stats(const Engine *base, OnednnStats *s) {
    const OnednnEngine *e = (const OnednnEngine *)base;
    memset(s, 0, sizeof *s);
    s->repacks = e->repacks;
    s->primitives = e->n_matmuls;
    for (int i = 0; i < e->n_weights; i++)
        for (int c = 0; c < 2; c++)
            if (e->weights[i].copy[c].mem) {
                const dnnl_memory_desc_t *md;
                if (dnnl_memory_get_memory_desc(e->weights[i].copy[c].mem, &md) == dnnl_success)
                    s->weight_copy_bytes += dnnl_memory_desc_get_size(md);
            }
    s->scratch_bytes = e->dout_bf16_bytes + e->scratchpad_bytes;
    for (int i = 0; i < e->n_inputs; i++) s->scratch_bytes += e->inputs[i].bytes;
}

size_t engine_onednn_bytes_for(const EngineShapes *s, int bf16, int fused_attention, int n_threads) {
    size_t C = s->C, F = s->F, FC = s->FC, V = s->V, L = s->L, N = s->B > 0 ? (size_t)s->B * s->T : 1;
    size_t bytes = 0;
    if (bf16) {
        // the weight copies (WEIGHTS_PACKED, bf16's default): of every linear weight of
        // each layer (c_attn 3C x C, attn c_proj C x C, c_fc FC x C, mlp c_proj C x F) and
        // of the head's wte (V x C), before the padding of oneDNN's blocked layout: forward's,
        // and backward's (made at its first use)
        size_t weights = V * C + L * (3 * C * C + C * C + FC * C + C * F);
        bytes += (s->backward ? 2 : 1) * weights * sizeof(uint16_t);
        // the rounded inputs (input_copy), one per weight: N rows of C (c_attn, attn
        // c_proj, c_fc), F (mlp c_proj), and the head's rows of C
        size_t in_c = grow_buffer_bytes(N * C * sizeof(uint16_t)), in_f = grow_buffer_bytes(N * F * sizeof(uint16_t));
        size_t head_rows = s->B > 0 ? (size_t)s->head_rows : 1;
        bytes += L * (3 * in_c + in_f) + grow_buffer_bytes(head_rows * C * sizeof(uint16_t));
        if (s->backward) {   // dout_bf16: the widest output gradient, the head's rows of V or N rows of 3C or FC
            size_t widest = N * (3 * C > FC ? 3 * C : FC);
            if (head_rows * V > widest) widest = head_rows * V;
            bytes += grow_buffer_bytes(widest * sizeof(uint16_t));
        }
    }
    if (s->B > 0)
        bytes += onednn_attention_bytes_for(bf16, fused_attention, s->B, s->T, s->C, s->H, n_threads, s->backward);
    return bytes;
}

static size_t bytes(const Engine *base) {
    const OnednnEngine *e = (const OnednnEngine *)base;
    OnednnStats s;
    engine_onednn_stats(base, &s);
    return s.weight_copy_bytes + s.scratch_bytes + onednn_attention_bytes(e->attention);
}

int engine_onednn_prepack(Engine *base, const float *W, int OC, int C) {
    OnednnEngine *e = (OnednnEngine *)base;
    Weight *w = weight_get(e, W, OC, C);
    dnnl_memory_t unused;
    if (!w || weight_operand(e, w, OP_FWD, &unused) != 0 || weight_operand(e, w, OP_DINP, &unused) != 0) {
        engine_fail(base, "%s", e->msg);
        return -1;
    }
    return 0;
}

static void engine_free(Engine *base) {
    OnednnEngine *e = (OnednnEngine *)base;
    if (!e) return;
    for (int i = 0; i < e->n_weights; i++) {
        Weight *w = &e->weights[i];
        dnnl_memory_t mems[] = {w->master_view[0], w->master_view[1], w->copy[0].mem, w->copy[1].mem,
                                w->plain_fwd_view};
        for (size_t j = 0; j < sizeof mems / sizeof mems[0]; j++)
            if (mems[j]) dnnl_memory_destroy(mems[j]);
    }
    for (int i = 0; i < e->n_inputs; i++) free(e->inputs[i].bf16);
    free(e->inputs);
    for (int i = 0; i < e->n_matmuls; i++) matmul_destroy(e->matmuls[i]);
    for (int i = 0; i < e->n_reorders; i++) reorder_destroy(e->reorders[i]);
    onednn_attention_free(e->attention);
    free(e->weights);
    free(e->matmuls);
    free(e->layouts);
    free(e->reorders);
    free(e->dout_bf16);
    free(e->scratchpad);
    if (e->stream) dnnl_stream_destroy(e->stream);
    if (e->dnnl) dnnl_engine_destroy(e->dnnl);
    free(e);
}

int engine_onednn_create_with_layout(Engine **out, int bf16, int fused_attention, WeightLayout layout, char *err,
                                     size_t errlen) {
    *out = NULL;
    if (layout != WEIGHTS_DEFAULT && layout != WEIGHTS_PACKED && layout != WEIGHTS_PLAIN) {
        snprintf(err, errlen, "unknown weight layout %d", (int)layout);
        return -1;
    }
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    // With native bf16 dot products (avx512_core_bf16, amx) oneDNN computes
    // bf16 x bf16 -> fp32 in hardware; on a plain AVX-512 core it emulates them
    // (each bf16 widened to fp32, the same exact products and fp32 sums), so the
    // numbers keep bf16's rounding of the inputs but the speed is fp32's or
    // below. Below AVX-512 oneDNN has no bf16 products.
    if (bf16 && !isa_has_avx512(isa)) {
        snprintf(err, errlen, "bf16 matmuls need AVX-512 (native bf16 dot products: avx512_core_bf16 or amx; "
                 "emulated: avx512_core); oneDNN dispatches to %s on this CPU: use fp32", isa_name(isa));
        return -1;
    }
    OnednnEngine *e = calloc(1, sizeof *e);
    if (!e) { snprintf(err, errlen, "out of memory"); return -1; }
    e->base = (Engine){.linear_forward = linear_forward, .linear_backward = linear_backward,
                       .attention_forward = attention_forward, .attention_backward = attention_backward,
                       .weights_changed = weights_changed, .bytes = bytes, .free = engine_free,
                       .keeps_inputs = bf16, .attention_reads_out = fused_attention != 0};
    e->bf16 = bf16;
    e->dt = bf16 ? dnnl_bf16 : dnnl_f32;
    e->layout = layout != WEIGHTS_DEFAULT ? layout : bf16 ? WEIGHTS_PACKED : WEIGHTS_PLAIN;
    e->isa = isa;
    e->generation = 1;   // copies start at 0: stale
    TRY("engine", dnnl_engine_create(&e->dnnl, dnnl_cpu, 0));
    TRY("stream", dnnl_stream_create(&e->stream, e->dnnl, dnnl_stream_default_flags));
    if (onednn_attention_create(&e->attention, bf16, fused_attention, e->msg, sizeof e->msg) != 0) goto fail;
    describe(e, fused_attention);
    *out = &e->base;
    return 0;
fail:
    snprintf(err, errlen, "%s", e->msg);
    engine_free(&e->base);
    return -1;
}

int engine_onednn_create(Engine **out, int bf16, int fused_attention, char *err, size_t errlen) {
    return engine_onednn_create_with_layout(out, bf16, fused_attention, WEIGHTS_DEFAULT, err, errlen);
}
