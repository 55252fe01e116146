// test_model_engines.c: the whole model on every engine against the
// reference engine (engine_reference.c): the same loss up to float rounding, for
// every positional scheme (the list in gpt.h), with a tolerance derived for
// each forward; and the engine seam itself (the model tells the engine when
// the parameters are written; an engine's failure is the pass's error).
//
// The tolerance, derived from the probabilistic model of rounding errors
// (Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019): every floating-point
// operation returns op(x)(1 + d) with the d independent, of mean zero and
// |d| <= u (u = 2^-24; u_b = 2^-8 for an input rounded to bf16). To first
// order a float evaluation of the loss is L + sum_r c_r d_r, c_r the value
// the r-th rounding multiplies times dloss/d(that value). By Hoeffding's
// inequality |sum_r c_r d_r| <= lambda u sqrt(sum_r c_r^2) but with
// probability 2 exp(-lambda^2 / 2); the engine's and the reference's
// roundings are independent, so with lambda = 6 (a chance of 3e-8 to fail
// by accident)
//   |L_e - L_ref| <= 6 u sqrt(S_e + S_ref),   S = sum_r c_r^2 / u^2 (its roundings in units of u).
// S is bounded from what backward sees, per product, by a probe engine that
// wraps the reference engine (dout = dloss/d(output), dinp, dqkv, the
// reference's products on absolute values):
//   linear out = inp W^T + b, K = C: K products and K+1 additions per element,
//     each rounding a value <= P + |b| (P = |inp| |W|^T):  (K+2) (g_out (P + |b|))^2
//   its input (a LayerNorm's output, whose row sums over C round coherently
//     for the whole row, or GELU's: a few roundings):  (C+8) (sum_c |g_inp inp|)^2 per row
//   attention, per row i (D head dim, S_i = scale ||q_i|| max ||k_j|| + max |bias|
//     >= |s_ij|, M_i = ||dy_i|| max ||v_j|| >= |dy_i.v_j| = |dP_ij|; dloss/ds_ij =
//     dS_ij = p_ij (dP_ij - rho_i), so sum_j dS_ij^2 <= max_j p_ij times the variance
//     of dP under p <= M_i^2; dloss/dp_ij p_ij <= p_ij M_i):
//     y's sums: (T+2) (g_y sum_j p_ij |v_j|)^2; the scores (D+2 roundings each, and
//     the subtraction of the max): (D+4) M_i^2 S_i^2; exp (relative EXP_ERR, not u),
//     the row sum and the division: ((EXP_ERR/u)^2 + T + 4) M_i^2; rope's rotation of
//     q and k before (a few roundings): 8 sum (g_qkv qkv)^2
//   bf16, on top, in units of u_b: every input of a linear layer and of
//     attention rounded once, c = x dloss/dx: sum (inp g_inp)^2 + sum (W dW)^2
//     + sum (qkv g_qkv)^2, and P rounded where it enters P V: sum_i M_i^2.
//   the fused attention (OpenBLAS, oneDNN fp32), on top: row i's keys come in n_i = i/nb + 1
//     blocks, and each block after the first rescales the row's running sum and
//     output by exp(m - m'): an exp (EXP_ERR), a subtraction of maxima (u |m - m'|
//     <= 2u S_i on the factor) and the products (a few u); the factor multiplies
//     terms of p-weight <= 1 in y and l, whose dloss/d(term) is p_ij (dP_ij - rho_i),
//     so |c| <= 2 M_i: (n_i - 1) 4 M_i^2 ((EXP_ERR/u)^2 + 4 S_i^2 + 4).
// The residual adds and the embedding (one rounding each, against at least
// 34 of a product of K = 32) are left out. The bound must be able to fail:
// a 1% change of one weight matrix moves the loss by more than the fp32
// bound, and the bf16 engine's losses are outside it, in root mean square
// over the models (bf16 really rounds).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "engine/engine_shared.h"
#include "engine/kernels.h"
#include "model/gpt_internal.h"
#include "model/params.h"
#include "util_engine.h"
#include "util_gradcheck.h"

/* ---- the probe: the reference engine, summing each product's c_r^2 ---- */

enum { MAX_FRAMES = 64 };
typedef struct {
    Engine base;
    Engine *ref;
    const float *bias[MAX_FRAMES];   // each forward product's bias (NULL: none or attention), undone in reverse
    int n_frames;
    double S, S_bf16;                // sum c^2 in units of u^2 (fp32) and of u_b^2 (bf16's input roundings)
    double S_fused;                  // the fused attention's own roundings, on top of S (units of u^2)
} Probe;

static void push(Probe *p, const float *b) {
    assert_true(p->n_frames < MAX_FRAMES);
    p->bias[p->n_frames++] = b;
}

static const float *pop(Probe *p) {
    assert_true(p->n_frames > 0);
    return p->bias[--p->n_frames];
}

static void probe_linear_forward(Engine *e, float *out, const float *inp, const float *W, const float *b,
                                 int N, int C, int OC) {
    Probe *p = (Probe *)e;
    p->ref->linear_forward(p->ref, out, inp, W, b, N, C, OC);
    push(p, b);
}

static void probe_linear_backward(Engine *e, float *dinp, float *dW, float *db, const float *dout, const float *inp,
                                  const float *W, int N, int C, int OC) {
    Probe *p = (Probe *)e;
    const float *b = pop(p);
    float *dWc = calloc((size_t)OC * C, sizeof(float));   // this call's share of dW: dloss/dW
    p->ref->linear_backward(p->ref, dinp, dW, db, dout, inp, W, N, C, OC);
    p->ref->linear_backward(p->ref, NULL, dWc, NULL, dout, inp, W, N, C, OC);
    float *ia = ue_abs_copy(inp, (size_t)N * C), *wa = ue_abs_copy(W, (size_t)OC * C), *P = malloc((size_t)N * OC * 4);
    p->ref->linear_forward(p->ref, P, ia, wa, NULL, N, C, OC);
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            double c = dout[(size_t)n * OC + o] * (P[(size_t)n * OC + o] + (b ? fabs(b[o]) : 0));
            p->S += (C + 2.0) * c * c;
        }
        double row = 0;
        for (int k = 0; dinp && k < C; k++) {
            double c = (double)dinp[(size_t)n * C + k] * inp[(size_t)n * C + k];
            row += fabs(c);
            p->S_bf16 += c * c;
        }
        p->S += (C + 8.0) * row * row;
    }
    for (size_t i = 0; i < (size_t)OC * C; i++) p->S_bf16 += ((double)W[i] * dWc[i]) * ((double)W[i] * dWc[i]);
    free(dWc); free(ia); free(wa); free(P);
}

static void probe_attention_forward(Engine *e, float *out, float *lse, const float *qkv, const float *bias,
                                    int B, int T, int C, int H) {
    Probe *p = (Probe *)e;
    p->ref->attention_forward(p->ref, out, lse, qkv, bias, B, T, C, H);
    push(p, NULL);
}

static double norm(const float *x, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)x[d] * x[d];
    return sqrt(s);
}

static void probe_attention_backward(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                                     const float *out, const float *lse, const float *bias, int B, int T, int C, int H) {
    Probe *p = (Probe *)e;
    pop(p);
    p->ref->attention_backward(p->ref, dqkv, dbias, dout, qkv, out, lse, bias, B, T, C, H);
    const int D = C / H, nb = attention_block_rows(T);
    const size_t C3 = 3 * (size_t)C, n_out = (size_t)B * T * C;
    const double scale = 1.0 / sqrt((double)D), eu = EXP_ERR / U32;
    // sum_j p_ij |v_j|: the reference's forward with v replaced by |v|
    float *qkv2 = ue_copy(qkv, 3 * n_out), *yv = malloc(n_out * 4), *lse2 = malloc((size_t)B * H * T * 4);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int c = 0; c < C; c++) qkv2[r * C3 + 2 * C + c] = fabsf(qkv[r * C3 + 2 * C + c]);
    p->ref->attention_forward(p->ref, yv, lse2, qkv2, bias, B, T, C, H);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            double Km = 0, Vm = 0, Bm = 0;
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * C3 + h * D;
                const float *dy = dout + ((size_t)b * T + i) * C + h * D, *y = yv + ((size_t)b * T + i) * C + h * D;
                Km = fmax(Km, norm(q + C, D));
                Vm = fmax(Vm, norm(q + 2 * C, D));
                if (bias) Bm = fmax(Bm, fabs(bias[h * T + i]));
                double S = scale * norm(q, D) * Km + Bm, M = norm(dy, D) * Vm;
                for (int d = 0; d < D; d++) p->S += (T + 2.0) * ((double)dy[d] * y[d]) * ((double)dy[d] * y[d]);
                p->S += (D + 4.0) * M * M * S * S + (eu * eu + T + 4.0) * M * M;
                p->S_bf16 += M * M;
                p->S_fused += (double)(i / nb) * 4 * M * M * (eu * eu + 4 * S * S + 4);
            }
        }
    for (size_t i = 0; i < 3 * n_out; i++) {
        double c = (double)dqkv[i] * qkv[i];
        p->S += 8 * c * c;
        p->S_bf16 += c * c;
    }
    free(qkv2); free(yv); free(lse2);
}

static void probe_free(Engine *e) {
    Probe *p = (Probe *)e;
    p->ref->free(p->ref);
    free(p);
}

static Probe *probe_create(void) {
    Probe *p = calloc(1, sizeof *p);
    p->base = (Engine){.linear_forward = probe_linear_forward, .linear_backward = probe_linear_backward,
                       .attention_forward = probe_attention_forward, .attention_backward = probe_attention_backward,
                       .free = probe_free};
    snprintf(p->base.describe, sizeof p->base.describe, "probe");
    p->ref = ue_reference();
    return p;
}

/* ---- the tests ---- */

enum { B = 4, T = 16, V = 64 };          // the batch of every test but the long one
enum { B_LONG = 1, T_LONG = 150 };       // attention in several blocks of 64 (rows and keys), the last partial

static GPT *make_block_model_for(PosKind pos, BlockKind block, int batch_size, int seq_len) {
    GPTConfig cfg = {.n_layer = 2, .n_head = 2, .d_model = 32, .vocab_size = V, .block_size = seq_len,
                     .block = block};
    gc_config_defaults(&cfg);
    cfg.pos = pos;
    if (pos == POS_T5) { cfg.t5_num_buckets = 8; cfg.t5_max_distance = 12; }
    char err[256];
    GPT *m;
    assert_int_equal(gpt_create(&m, &cfg, 5, err, sizeof err), 0);
    gc_randomize_params(m, 6);   // O(1) weights: attention far from uniform, every path carries signal
    assert_int_equal(gpt_alloc_activations(m, batch_size, seq_len, err, sizeof err), 0);
    return m;
}
static GPT *make_block_model(PosKind pos, BlockKind block) { return make_block_model_for(pos, block, B, T); }
static GPT *make_model(PosKind pos) { return make_block_model(pos, BLOCK_GPT2); }

static void batch_of(int *inp, int *tgt, int n) {
    for (int i = 0; i < n; i++) { inp[i] = (i * 37 + 11) % V; tgt[i] = (i * 13 + 5) % V; }
}
static void batch(int *inp, int *tgt) { batch_of(inp, tgt, B * T); }

// The model's loss on the engine in force, for a batch of (batch_size, seq_len).
static float loss_for(GPT *m, int batch_size, int seq_len) {
    int *inp = malloc((size_t)batch_size * seq_len * sizeof(int)), *tgt = malloc((size_t)batch_size * seq_len * sizeof(int));
    batch_of(inp, tgt, batch_size * seq_len);
    float loss = gc_forward(m, inp, tgt, batch_size, seq_len);
    free(inp);
    free(tgt);
    return loss;
}
static float loss_of(GPT *m) { return loss_for(m, B, T); }

// The reference's loss, and the bounds on |L_engine - L_ref| for an fp32
// engine (bound[0]), the bf16 engine (bound[1]) and OpenBLAS with the fused
// attention (bound[2]), from the probe's forward and backward.
#define LAMBDA 6.0
enum { BOUND_FP32, BOUND_BF16, BOUND_FUSED, N_BOUNDS };
static float probe_bound(GPT *m, int batch_size, int seq_len, double bound[N_BOUNDS]) {
    Engine *saved = m->engine;
    Probe *p = probe_create();
    m->engine = &p->base;
    gpt_zero_grad(m);
    float loss = loss_for(m, batch_size, seq_len);
    gc_backward(m, 1.0f);
    assert_int_equal(p->n_frames, 0);   // every product undone, in reverse order
    bound[BOUND_FP32] = LAMBDA * U32 * sqrt(2 * p->S);
    bound[BOUND_BF16] = LAMBDA * sqrt(2 * U32 * U32 * p->S + U16 * U16 * p->S_bf16);
    bound[BOUND_FUSED] = LAMBDA * U32 * sqrt(2 * p->S + p->S_fused);
    p->base.free(&p->base);
    m->engine = saved;
    return loss;
}

typedef struct { GPTMatmul matmul; GPTPrecision precision; GPTAttention attention; const char *name; } EngineChoice;
static const EngineChoice engines[] = {
    {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_BLOCKED, "openblas"},
    {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_FUSED, "openblas fused"},
    {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_BLOCKED, "onednn fp32"},
    {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_FUSED, "onednn fused"},
    {GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, "onednn bf16"},
    {GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_FUSED, "onednn bf16 fused"},
};

// What every_scheme gathers over its models: the largest |diff| / bound of each
// kind, and the bf16 engine's |diff| / (the fp32 bound), squared and summed.
typedef struct {
    double worst[N_BOUNDS];
    double bf16_over_fp32_sq;
    int n_bf16;
} Tally;

// Every engine's loss for m against the reference's, for a batch of
// (batch_size, seq_len), into *tally.
static void engines_case(GPT *m, int batch_size, int seq_len, Tally *tally) {
    char err[256];
    double bound[N_BOUNDS];
    float ref = probe_bound(m, batch_size, seq_len, bound);
    assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_REFERENCE, GPT_FP32, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    assert_true(loss_for(m, batch_size, seq_len) == ref);   // the probe is the reference
    for (size_t ei = 0; ei < sizeof engines / sizeof engines[0]; ei++) {
        const EngineChoice *ec = &engines[ei];
        int kind = ec->precision == GPT_BF16 ? BOUND_BF16 : ec->attention == GPT_ATTENTION_FUSED ? BOUND_FUSED
                                                                                                 : BOUND_FP32;
        if (gpt_set_matmul(m, ec->matmul, ec->precision, ec->attention, err, sizeof err) != 0) {
            printf("    %s: skipped (%s)\n", ec->name, err);
            continue;
        }
        float loss = loss_for(m, batch_size, seq_len);
        double diff = fabs((double)loss - ref), ratio = diff / bound[kind];
        printf("    %-14s loss %.7f, reference %.7f: |diff| %.2e, bound %.2e (%.3f of it)\n", ec->name, loss, ref,
               diff, bound[kind], ratio);
        assert_true(diff <= bound[kind]);
        tally->worst[kind] = fmax(tally->worst[kind], ratio);
        if (kind == BOUND_BF16) {
            tally->bf16_over_fp32_sq += (diff / bound[BOUND_FP32]) * (diff / bound[BOUND_FP32]);
            tally->n_bf16++;
        }
    }
    // the bound has teeth: a 1% change of one weight matrix moves the loss by more
    assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_REFERENCE, GPT_FP32, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    const ParamEntry *w = gpt_find_param(m, "h.1.mlp.c_fc.weight");
    float *p = gpt_params(m) + w->offset;
    for (size_t i = 0; i < w->numel; i++) p[i] *= 1.01f;
    double moved = fabs((double)loss_for(m, batch_size, seq_len) - ref);
    printf("    c_fc.weight x 1.01 in layer 1: the loss moves by %.2e (%.1f x the fp32 bound, %.1f x the fused one)\n",
           moved, moved / bound[BOUND_FP32], moved / bound[BOUND_FUSED]);
    assert_true(moved > bound[BOUND_FP32] && moved > bound[BOUND_FUSED]);
}

// engines_case for every scheme on both blocks, batches of (batch_size, seq_len).
static void every_scheme(int batch_size, int seq_len) {
    Tally tally = {0};
    for (int kb = 0; kb < 2 * POS_COUNT; kb++) {
        int k = kb % POS_COUNT;
        BlockKind block = kb < POS_COUNT ? BLOCK_GPT2 : BLOCK_LLAMA;
        GPT *m = make_block_model_for((PosKind)k, block, batch_size, seq_len);
        printf("  pos=%s block=%s T=%d\n", pos_kind_name((PosKind)k), block == BLOCK_LLAMA ? "llama" : "gpt2", seq_len);
        engines_case(m, batch_size, seq_len, &tally);
        gpt_free(m);
    }
    printf("worst |diff| / bound: fp32 %.3f, bf16 %.3f, fused %.3f\n", tally.worst[BOUND_FP32],
           tally.worst[BOUND_BF16], tally.worst[BOUND_FUSED]);
    // bf16 really rounds: its loss moves by more than fp32 rounding can. One
    // model's difference is a sum of signed errors and may cancel by chance
    // (on an AVX-512 BF16 CPU two of the 24 models fell below the fp32 bound,
    // one at 1e-5), so the test is on the root mean square over the models:
    // for differences ~ N(0, sigma) with sigma near 20 fp32 bounds (the rms
    // there, over the 24 models of the blocked and the fused bf16 attention:
    // 20 and 26), the rms of 24 falls below one bound with probability
    // P(chi2_24 < 24/400), below 1e-30. Without bf16 (no AVX-512) nothing to test.
    if (tally.n_bf16 > 0) {
        double rms = sqrt(tally.bf16_over_fp32_sq / tally.n_bf16);
        printf("bf16: rms over %d models of |diff| / the fp32 bound: %.1f (> 1: it rounds)\n", tally.n_bf16, rms);
        assert_true(rms > 1.0);
    }
}

static void test_loss_against_reference(void **s) { every_scheme(B, T); }

// The same at T = 150: attention in three blocks of query rows and, fused, of
// keys (the online softmax's rescaling runs).
static void test_loss_against_reference_long(void **s) { every_scheme(B_LONG, T_LONG); }

// Every write to the parameters goes through gpt_params, which tells the
// engine: the bf16 engine's forward after a write is, bit for bit, a fresh
// engine's on the new weights, with no other call. (A pointer kept from
// before a forward and written through afterwards is not seen: the copies
// stay as they were, which is why gpt.h says to take it again.)
static void test_written_weights_reach_the_engine(void **s) {
    (void)s;
    ue_skip_without_bf16();
    GPT *m = make_model(POS_ROPE);
    char err[256];
    assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    float before = loss_of(m);   // the bf16 copies are made here
    const ParamEntry *w = gpt_find_param(m, "h.0.attn.c_attn.weight");
    float *p = gpt_params(m) + w->offset;
    for (size_t i = 0; i < w->numel; i++) p[i] = -p[i];
    float after = loss_of(m);
    assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    float fresh = loss_of(m);
    printf("  loss %.7f; c_attn.weight negated: %.7f, a fresh engine %.7f\n", before, after, fresh);
    assert_true(after == fresh && after != before);
    for (size_t i = 0; i < w->numel; i++) p[i] = -p[i];   // through the old pointer: not seen
    float stale = loss_of(m);
    printf("  written back through a pointer taken before the forward: %.7f (stale copies)\n", stale);
    assert_true(stale == fresh);
    gpt_params(m);
    assert_true(loss_of(m) == before);
    gpt_free(m);
}

// An engine that keeps its linear inputs (bf16, Engine.keeps_inputs) lets
// the model hold ln1, atty, ln2 and the MLP activation's output for one
// layer instead of L (gpt_alloc_activations): (L-1) B T (3C + F) floats
// fewer, and not one bit of the loss or of any gradient changes against the
// same engine with every layer's inputs kept.
static void test_shared_inputs(void **s) {
    (void)s;
    ue_skip_without_bf16();
    for (int bi = 0; bi < 2; bi++) {
        BlockKind block = bi ? BLOCK_LLAMA : BLOCK_GPT2;
        GPT *m = make_block_model(POS_ROPE, block);   // sized for OpenBLAS: every layer's inputs
        const GPTConfig *c = gpt_config(m);
        size_t full = m->acts.bytes, n = gpt_num_params(m);
        char err[256];
        assert_int_equal(gpt_set_matmul(m, GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
        assert_true(m->engine->keeps_inputs && m->acts.layer[0].ln1 == m->acts.layer[1].ln1);   // laid out again
        size_t shared = m->acts.bytes;
        size_t want = (size_t)(c->n_layer - 1) * B * T * (3 * c->d_model + gpt_mlp_hidden(c)) * sizeof(float);
        printf("  block=%s: activations %zu -> %zu bytes (%zu fewer, (L-1) B T (3C + F) floats: %zu)\n",
               bi ? "llama" : "gpt2", full, shared, full - shared, want);
        assert_int_equal(full - shared, want);   // every slice here is a multiple of 16 floats
        float *g = malloc(n * sizeof(float));
        int inp[B * T], tgt[B * T];
        batch(inp, tgt);
        gpt_zero_grad(m);
        float loss_shared = gc_forward(m, inp, tgt, B, T);
        gc_backward(m, 1.0f);
        memcpy(g, gpt_grads(m), n * sizeof(float));
        m->engine->keeps_inputs = 0;   // the same engine, every layer's inputs kept
        assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), 0);
        assert_int_equal(m->acts.bytes, full);
        gpt_zero_grad(m);
        float loss_full = gc_forward(m, inp, tgt, B, T);
        gc_backward(m, 1.0f);
        assert_true(loss_full == loss_shared);
        assert_memory_equal(gpt_grads(m), g, n * sizeof(float));
        m->engine->keeps_inputs = 1;
        free(g);
        gpt_free(m);
    }
}

// The head and the loss in chunks of positions (gpt_set_logits_rows): the
// logits buffer holds one chunk. On the reference engine, whose weight
// gradient adds the rows in order whatever the calls (engine_reference.c),
// every gradient is the same bits as in one chunk and the loss the same float
// (its double sum is only associated otherwise), for chunks of any size (7).
// On OpenBLAS, chunks of 64 positions cut where its slices of 64 rows do, so
// the logits and the head's input gradient are the same bits; only wte's
// gradient sums its rows in one more sgemm per chunk: within fp32 rounding,
// |d| <= 2 g(BT) sum_n |dlogits[n,v]| |lnf[n,c]| per element (the two
// evaluations of one sum of BT products, Higham 3.1), the sum computed here
// in double from the forward's logits.
static void chunked_case(GPTMatmul matmul, int batch_size, int seq_len, int rows) {
    char err[256];
    GPT *m = make_block_model_for(POS_ROPE, BLOCK_GPT2, batch_size, seq_len);
    assert_int_equal(gpt_set_matmul(m, matmul, GPT_FP32, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    const GPTConfig *c = gpt_config(m);
    const int BT = batch_size * seq_len;
    size_t n = gpt_num_params(m), whole = m->acts.bytes;
    assert_int_equal(m->acts.logits_rows, BT);   // the small vocabulary: one chunk
    int *inp = malloc(BT * sizeof(int)), *tgt = malloc(BT * sizeof(int));
    for (int i = 0; i < BT; i++) inp[i] = (i * 7 + 3) % c->vocab_size, tgt[i] = (i * 13 + 1) % c->vocab_size;
    float *g = malloc(n * sizeof(float));
    gpt_zero_grad(m);
    float loss_whole = gc_forward(m, inp, tgt, batch_size, seq_len);
    // S[v,c] = sum_n |dlogits[n,v]| |lnf[n,c]|, dlogits = (softmax - onehot) / BT from the forward's logits
    const int V = c->vocab_size, C = c->d_model;
    double *S = calloc((size_t)V * C, sizeof(double));
    for (int r = 0; r < BT; r++) {
        const float *z = m->acts.logits + (size_t)r * V, *x = m->acts.lnf + (size_t)r * C;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, z[v]);
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        for (int v = 0; v < V; v++) {
            double dl = fabs(exp(z[v] - mx) / sum - (v == tgt[r])) / BT;
            for (int k = 0; k < C; k++) S[(size_t)v * C + k] += dl * fabs(x[k]);
        }
    }
    gc_backward(m, 1.0f);
    memcpy(g, gpt_grads(m), n * sizeof(float));
    gpt_set_logits_rows(m, rows);
    assert_int_equal(gpt_alloc_activations(m, batch_size, seq_len, err, sizeof err), 0);
    assert_int_equal(m->acts.logits_rows, rows);
    size_t fewer = whole - m->acts.bytes;
    size_t want = (((size_t)BT * c->vocab_size + 15) / 16 - ((size_t)rows * c->vocab_size + 15) / 16) * 16 *
                  sizeof(float);
    printf("  %s, B*T = %d: logits of %d positions at a time: activations %zu bytes fewer (%zu)\n",
           matmul == GPT_MATMUL_REFERENCE ? "reference" : "openblas", BT, rows, fewer, want);
    assert_int_equal(fewer, want);
    gpt_zero_grad(m);
    float loss_chunked = gc_forward(m, inp, tgt, batch_size, seq_len);
    gc_backward(m, 1.0f);
    assert_true(loss_chunked == loss_whole);
    const ParamEntry *wte = gpt_find_param(m, "wte");
    double worst = 0, gamma = ue_gamma(BT);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)gpt_grads(m)[i] - g[i]);
        if (matmul == GPT_MATMUL_REFERENCE || i < wte->offset || i >= wte->offset + wte->numel) {
            if (d != 0) fail_msg("gradient %zu: %.9g chunked, %.9g whole", i, gpt_grads(m)[i], g[i]);
        } else {
            worst = fmax(worst, d / (2 * gamma * S[i - wte->offset] + 1e-30));
        }
    }
    if (matmul != GPT_MATMUL_REFERENCE) printf("    wte's gradient: worst |chunked - whole| / bound %.3g\n", worst);
    assert_true(worst <= 1);
    free(g); free(inp); free(tgt); free(S);
    gpt_free(m);
}

static void test_chunked_head(void **s) {
    (void)s;
    chunked_case(GPT_MATMUL_REFERENCE, B, T, 7);
    chunked_case(GPT_MATMUL_OPENBLAS, B_LONG, T_LONG, 64);
}

// A model without gradients (gpt_load's, to evaluate) keeps one layer's
// activations and no backward buffers (gpt_alloc_activations): each layer
// writes over the last. Its forward reads the same values in the same order,
// so its losses are the same bits as the training layout's, every scheme,
// both blocks, every engine this CPU runs; its backward is refused.
static void test_forward_only(void **s) {
    (void)s;
    char err[256];
    for (int block = 0; block < 2; block++)
        for (int pos = 0; pos < POS_COUNT; pos++)
            for (size_t ei = 0; ei < sizeof engines / sizeof engines[0]; ei++) {
                const EngineChoice *ec = &engines[ei];
                GPT *m = make_block_model((PosKind)pos, block ? BLOCK_LLAMA : BLOCK_GPT2), *run;
                assert_int_equal(gpt_create_uninit(&run, gpt_config(m), 0, err, sizeof err), 0);
                assert_null(gpt_grads(run));
                memcpy(gpt_params(run), gpt_params(m), gpt_num_params(m) * sizeof(float));
                if (gpt_set_matmul(m, ec->matmul, ec->precision, ec->attention, err, sizeof err) != 0) {
                    printf("  %s: skipped (%s)\n", ec->name, err);
                    gpt_free(m);
                    gpt_free(run);
                    continue;
                }
                assert_int_equal(gpt_set_matmul(run, ec->matmul, ec->precision, ec->attention, err, sizeof err), 0);
                assert_int_equal(gpt_alloc_activations(m, B, T, err, sizeof err), 0);
                assert_int_equal(gpt_alloc_activations(run, B, T, err, sizeof err), 0);
                assert_true(run->acts.bytes < m->acts.bytes);
                assert_null(run->acts.dres);
                float trained = loss_of(m), alone = loss_of(run);
                if (trained != alone || memcmp(gpt_losses(m), gpt_losses(run), B * T * sizeof(float)) != 0)
                    fail_msg("pos=%s %s %s: loss %.9g forward-only, %.9g with the training layout",
                             pos_kind_name((PosKind)pos), block ? "llama" : "gpt2", ec->name, alone, trained);
                assert_int_equal(gpt_backward(run, 1.0f, err, sizeof err), -1);
                assert_non_null(strstr(err, "without gradients"));
                if (pos == 0 && block == 0)
                    printf("  %s: activations %zu bytes forward-only, %zu for training\n", ec->name,
                           run->acts.bytes, m->acts.bytes);
                gpt_free(m);
                gpt_free(run);
            }
}

// An engine's failure is the pass's error, named once, and the next pass runs.
static void fail_linear(Engine *e, float *out, const float *inp, const float *W, const float *b, int N, int C, int OC) {
    engine_fail(e, "the probe fails (%d x %d)", N, OC);
}
static void test_engine_failure_is_the_pass_error(void **s) {
    (void)s;
    GPT *m = make_model(POS_T5);
    Engine *saved = m->engine;
    Probe *failing = probe_create();   // the reference with a failing linear forward
    failing->base.linear_forward = fail_linear;
    m->engine = &failing->base;
    int inp[B * T], tgt[B * T];
    batch(inp, tgt);
    char err[256];
    float loss;
    assert_int_equal(gpt_forward(m, inp, tgt, B, T, &loss, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_string_equal(err, "the probe fails (64 x 96)");   // the first failure: c_attn of layer 0
    assert_int_equal(gpt_backward(m, 1.0f, err, sizeof err), -1);   // nothing to backpropagate
    assert_int_equal(gpt_forward(m, inp, tgt, B, T, &loss, err, sizeof err), -1);   // each pass says it again
    failing->base.free(&failing->base);
    m->engine = saved;
    assert_int_equal(gpt_forward(m, inp, tgt, B, T, &loss, err, sizeof err), 0);
    gpt_free(m);
}

int main(void) {
    omp_set_num_threads(1);   // tiny model
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_against_reference),
        cmocka_unit_test(test_loss_against_reference_long),
        cmocka_unit_test(test_written_weights_reach_the_engine),
        cmocka_unit_test(test_engine_failure_is_the_pass_error),
        cmocka_unit_test(test_shared_inputs),
        cmocka_unit_test(test_chunked_head),
        cmocka_unit_test(test_forward_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
