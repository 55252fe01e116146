// bench_model.c: training speed of the model (forward, backward, AdamW) on
// random tokens, on each matmul engine (gpt_set_matmul: openblas fp32,
// onednn fp32 or bf16), its FLOP utilisation against a measured peak of that
// engine, its memory (peak RSS against the program's own accounting), and a
// RoPE micro-benchmark. Run by bench/bench.sh (`make bench`).
//
//   build/bench_model --config S|M|L --pos rope [--matmul openblas|onednn] [--precision fp32|bf16]
//                     [--attention blocked|fused]
//                     [--steps 10] [--warmup 2] [--threads 2]
//                     [--peak-gflops X] [--batch B (default: the config's)]
//                     [--seq-len T (default: the config's; block_size T too)]
//   build/bench_model --peak            sgemm peak, square 1024..2048, same threads, and
//                                       the linear engine's forward at model-like shapes
//   build/bench_model --peak --matmul onednn --precision fp32|bf16
//                                       that engine's peak: its forward at the same shapes
//   build/bench_model --rope-micro      RoPE: block-diagonal matrix vs elementwise
//   build/bench_model --compare-schemes --config M [--matmul ..] [--precision ..]
//                                       the four schemes' step times, interleaved step by
//                                       step in one process, then the work each scheme
//                                       adds, kernel by kernel
//   build/bench_model --auto --config M [--pos P] [--threads N]
//                                       what ./train's matmul = auto chooses for the config's
//                                       model, B and T: its trial (matmul_auto_time,
//                                       src/train/matmul_auto.h), nothing trained
//   build/bench_model --list-configs    the configs (bench/util_bench.h) with their
//                                       parameters, model FLOPs per step and memory by
//                                       docs/MODEL.md's formula, one bench_config line each
//
// Profiling the steady state: with PERF_CTL_FIFO set to the control fifo of a
// `perf record -D -1 --control fifo:FIFO` run, the model benchmark writes
// "enable" to it after the warm-up steps, so the profile holds the timed
// steps and none of the set-up (bench/profile.sh).
//
// Every run (but --list-configs) first prints `# openblas core=... config=... threads=N`;
// --auto then `# auto fp32 = ENGINE (CHOICE)`, the engine the default ./train (matmul = auto)
// runs for that config here, by the trainer's own trial. bench.sh records both.
//
// One machine-readable line per measurement (key=value), read by bench.sh.
// The matmul engine's records carry engine= (openblas, onednn) and precision=
// (fp32, bf16), so bench_report.py can tell the setups apart.
//
// Model FLOPs per training step: bench_flops_per_step (bench/util_bench.h),
// 3 x forward, forward = 2 B T (12 L C^2 + V C) + 2 B L C T (T+1).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cblas.h>
#include <omp.h>

#include "common/blas_cpu.h"
#include "common/rng.h"
#include "common/threads.h"
#include "model/gpt.h"
#include "model/gpt_internal.h"
#include "../tests/util_gradcheck.h"
#include "util_bench.h"
#include "engine/engine_create.h"
#include "model/pos_maths.h"
#include "train/adamw.h"
#include "train/matmul_auto.h"

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;   // Linux: kilobytes
}

// Best median GFLOP/s of C = A B over square sizes 1024..2048 (all threads).
static double sgemm_peak(int reps) {
    static const int sizes[] = {1024, 1536, 2048};
    double best = 0.0;
    for (int si = 0; si < 3; si++) {
        int n = sizes[si];
        float *a = malloc((size_t)n * n * sizeof(float)), *b = malloc((size_t)n * n * sizeof(float)),
              *c = malloc((size_t)n * n * sizeof(float));
        if (!a || !b || !c) { free(a); free(b); free(c); continue; }
        for (size_t i = 0; i < (size_t)n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
        double t[16];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            t[r] = now_s() - t0;
        }
        double gf = 2.0 * n * n * (double)n / median(t, reps) / 1e9;
        printf("sgemm n=%d threads=%d gflops=%.1f\n", n, omp_get_max_threads(), gf);
        if (gf > best) best = gf;
        free(a); free(b); free(c);
    }
    return best;
}

// The peak of a matmul engine, measured as the model uses it: its linear
// forward product out (N,OC) = inp (N,C) W^T + b, in the engine's default
// weight layout (the one gpt_set_matmul uses: fp32 reads W in place, bf16
// from packed bf16 copies, made once before the timing as after an optimizer
// step; rounding the input to bf16 is part of every bf16 call, as in the
// model), at N = 2048 rows and four large model-like shapes C -> OC:
// 1024 -> 1024, 1024 -> 4096 (c_fc-like), 4096 -> 1024 (mlp.c_proj-like),
// 2048 -> 2048. The median of `reps` calls per shape (after one untimed call
// that creates the primitive and the copies), the best shape's, all threads.
// Returns 0 if the engine cannot be created (message on stderr).
static double linear_peak(GPTMatmul matmul, GPTPrecision precision, int reps) {
    const char *engine_name = matmul == GPT_MATMUL_ONEDNN ? "onednn" : "openblas";
    const char *precision_s = precision == GPT_BF16 ? "bf16" : "fp32";
    static const int shapes[][2] = {{1024, 1024}, {1024, 4096}, {4096, 1024}, {2048, 2048}};
    enum { N = 2048 };
    double best = 0.0;
    for (int si = 0; si < 4; si++) {
        int C = shapes[si][0], OC = shapes[si][1];
        float *inp = malloc((size_t)N * C * sizeof(float)), *W = malloc((size_t)OC * C * sizeof(float)),
              *b = malloc((size_t)OC * sizeof(float)), *out = malloc((size_t)N * OC * sizeof(float));
        char err[256];
        Engine *e = NULL;   // a weight stays registered while its engine lives: one engine per shape
        int rc = !inp || !W || !b || !out ? -1
                 : matmul == GPT_MATMUL_ONEDNN ? engine_onednn_create(&e, precision == GPT_BF16, 0, err, sizeof err)
                                               : engine_openblas_create(&e, 0, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "bench_model: %s\n", !inp || !W || !b || !out ? "out of memory" : err);
            free(inp); free(W); free(b); free(out);
            return 0.0;   // e.g. bf16 on a CPU without native bf16 dot products
        }
        if (si == 0)
            printf("matmul_engine engine=%s precision=%s describe=\"%s\"\n", engine_name, precision_s, e->describe);
        for (size_t i = 0; i < (size_t)N * C; i++) inp[i] = (float)(i % 7) * 0.1f - 0.3f;
        for (size_t i = 0; i < (size_t)OC * C; i++) W[i] = (float)(i % 5) * 0.01f - 0.02f;
        for (int i = 0; i < OC; i++) b[i] = 0.01f * (float)(i % 3);
        double t[16];
        e->linear_forward(e, out, inp, W, b, N, C, OC);   // primitive and copies made
        int ok = engine_failed(e, err, sizeof err) == 0;
        for (int r = 0; ok && r < reps; r++) {
            double t0 = now_s();
            e->linear_forward(e, out, inp, W, b, N, C, OC);
            t[r] = now_s() - t0;
            ok = engine_failed(e, err, sizeof err) == 0;
        }
        if (ok) {
            double gf = 2.0 * N * (double)C * OC / median(t, reps) / 1e9;
            printf("linear engine=%s precision=%s n=%d c=%d oc=%d threads=%d gflops=%.1f\n",
                   engine_name, precision_s, N, C, OC, omp_get_max_threads(), gf);
            if (gf > best) best = gf;
        } else {
            fprintf(stderr, "bench_model: %s %s forward %d -> %d: %s\n", engine_name, precision_s, C, OC, err);
        }
        e->free(e);
        free(inp); free(W); free(b); free(out);
    }
    return best;
}

// RoPE on the q and k head vectors of config M (B=8, H=8, T=256, D=32, q and
// k: N = 2 B H T vectors; vector n sits at position n % T), three ways:
//   matrix:      u' = R_m u with R_m the D x D block-diagonal rotation of
//                RoFormer eq. (34), stored dense as the paper writes it,
//                one matrix-vector product per head vector (2 D^2 FLOPs)
//   matrix-sgemm the same products batched per position m with sgemm: the
//                vectors at position m form a (N/T, D) matrix (row stride T*D)
//   elementwise: u'[2i], u'[2i+1] from cos/sin tables (3 D FLOPs; the model)
// Backward applies R_m^T (the matrix transposed / the rotation by -angle).
static void rope_micro(int reps) {
    enum { T = 256, D = 32, N = 2 * 8 * 8 * T, HALF = D / 2 };
    float *cs = malloc(sizeof(float) * T * HALF), *sn = malloc(sizeof(float) * T * HALF);
    float *R = calloc((size_t)T * D * D, sizeof(float));
    float *u = malloc(sizeof(float) * N * D), *w = malloc(sizeof(float) * N * D),
          *w2 = malloc(sizeof(float) * N * D), *e = malloc(sizeof(float) * N * D);
    GPTConfig rope = {.n_layer = 1, .n_head = 1, .d_model = D, .vocab_size = 4, .block_size = T, .pos = POS_ROPE};
    gc_config_defaults(&rope);
    rope_build_tables(cs, sn, T, &rope);
    for (int m = 0; m < T; m++)
        for (int i = 0; i < HALF; i++) {
            float *r = R + (size_t)m * D * D, c = cs[m * HALF + i], s = sn[m * HALF + i];
            r[(2 * i) * D + 2 * i] = c;      r[(2 * i) * D + 2 * i + 1] = -s;
            r[(2 * i + 1) * D + 2 * i] = s;  r[(2 * i + 1) * D + 2 * i + 1] = c;
        }
    Rng rng;
    rng_seed(&rng, 7);
    for (size_t i = 0; i < (size_t)N * D; i++) u[i] = (float)rng_normal(&rng);
    double t_mat[2][16], t_gemm[2][16], t_elem[2][16], max_diff = 0.0;
    for (int r = 0; r < reps; r++)
        for (int dir = 0; dir < 2; dir++) {   // 0 forward (R), 1 backward (R^T)
            double t0 = now_s();
            #pragma omp parallel for
            for (int n = 0; n < N; n++) {
                const float *Rm = R + (size_t)(n % T) * D * D, *x = u + (size_t)n * D;
                float *y = w + (size_t)n * D;
                if (dir == 0)
                    for (int a = 0; a < D; a++) {
                        float acc = 0.0f;
                        for (int b = 0; b < D; b++) acc += Rm[a * D + b] * x[b];
                        y[a] = acc;
                    }
                else
                    for (int a = 0; a < D; a++) {
                        float acc = 0.0f;
                        for (int b = 0; b < D; b++) acc += Rm[b * D + a] * x[b];
                        y[a] = acc;
                    }
            }
            t_mat[dir][r] = now_s() - t0;
            t0 = now_s();
            #pragma omp parallel for
            for (int m = 0; m < T; m++)   // Y_m (N/T, D) = U_m R_m^T (forward) or U_m R_m (backward)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, dir ? CblasNoTrans : CblasTrans, N / T, D, D,
                            1.0f, u + (size_t)m * D, T * D, R + (size_t)m * D * D, D, 0.0f,
                            w2 + (size_t)m * D, T * D);
            t_gemm[dir][r] = now_s() - t0;
            memcpy(e, u, sizeof(float) * N * D);   // elementwise works in place
            t0 = now_s();
            #pragma omp parallel for
            for (int n = 0; n < N; n++) {
                int m = n % T;
                if (dir) rope_rotate_back(e + (size_t)n * D, cs + m * HALF, sn + m * HALF, D);
                else rope_rotate(e + (size_t)n * D, cs + m * HALF, sn + m * HALF, D);
            }
            t_elem[dir][r] = now_s() - t0;
            for (size_t i = 0; i < (size_t)N * D; i++) {
                double d = fmax(fabs((double)e[i] - w[i]), fabs((double)e[i] - w2[i]));
                if (d > max_diff) max_diff = d;
            }
        }
    const char *dir_name[2] = {"forward", "backward"};
    for (int dir = 0; dir < 2; dir++) {
        double tm = median(t_mat[dir], reps) * 1e3, tg = median(t_gemm[dir], reps) * 1e3,
               te = median(t_elem[dir], reps) * 1e3;
        printf("rope_micro dir=%s vectors=%d head_dim=%d matrix_ms=%.3f matrix_sgemm_ms=%.3f "
               "elementwise_ms=%.3f matrix_flops=%d elementwise_flops=%d speedup=%.1f speedup_sgemm=%.1f\n",
               dir_name[dir], N, D, tm, tg, te, 2 * D * D, 3 * D, tm / te, tg / te);
    }
    printf("rope_micro max_abs_diff=%.2e\n", max_diff);
    free(cs); free(sn); free(R); free(u); free(w); free(w2); free(e);
}

// The names of an engine as records print them (engine=openblas precision=fp32).
static const char *matmul_name(GPTMatmul m) { return m == GPT_MATMUL_ONEDNN ? "onednn" : "openblas"; }
static const char *precision_label(GPTPrecision p) { return p == GPT_BF16 ? "bf16" : "fp32"; }

// The attention kernels of every model made here (--attention; the "# matmul" line names them).
static GPTAttention bench_attention = GPT_ATTENTION_BLOCKED;

// A model of config bc on matmul engine (mm, prec), activations sized for
// (B, T); NULL with a message on stderr if it cannot be made.
static GPT *bench_gpt(const BenchConfig *bc, PosKind pos, GPTMatmul mm, GPTPrecision prec) {
    GPTConfig cfg = bench_model_config(bc, pos);
    char err[256];
    GPT *model = NULL;
    if (gpt_create(&model, &cfg, 1337, err, sizeof err) != 0 ||
        gpt_set_matmul(model, mm, prec, bench_attention, err, sizeof err) != 0 ||
        gpt_alloc_activations(model, bc->B, bc->T, err, sizeof err) != 0) {
        fprintf(stderr, "bench_model: %s\n", err);
        gpt_free(model);
        return NULL;
    }
    return model;
}

// The time a step spends inside the engine: the linear layers' and the
// head's products with what the engine does around them (bf16: rounding
// their inputs; the bias gradients), and attention (its products and the
// softmax between them). TimedEngine wraps the model's engine and adds up
// the wall time of its calls; the rest of a step (embedding, LayerNorm,
// GELU, residuals, cross-entropy, the positional hooks; AdamW is timed
// apart) is the model's own fp32 work. Timing adds two clock reads per call
// (about 30 calls a step) and changes no result.
enum { TIMED_LINEAR, TIMED_ATTENTION };
typedef struct {
    Engine base;
    Engine *inner;
    double seconds[2];   // inside the inner engine since the last reset: [TIMED_LINEAR], [TIMED_ATTENTION]
} TimedEngine;

// Times one call of the inner engine `in` and passes its failure, if any, up to e,
// where the model looks for it (engine_failed).
#define TIMED(kind, call)                                                           \
    do {                                                                            \
        TimedEngine *te = (TimedEngine *)e;                                         \
        double t0_ = now_s();                                                       \
        call;                                                                       \
        te->seconds[kind] += now_s() - t0_;                                         \
        if (in->err[0]) {                                                           \
            if (!e->err[0]) memcpy(e->err, in->err, sizeof e->err);                 \
            in->err[0] = '\0';                                                      \
        }                                                                           \
    } while (0)

static void timed_linear_forward(Engine *e, float *out, const float *inp, const float *W, const float *b, int N,
                                 int C, int OC) {
    Engine *in = ((TimedEngine *)e)->inner;
    TIMED(TIMED_LINEAR, in->linear_forward(in, out, inp, W, b, N, C, OC));
}
static void timed_linear_backward(Engine *e, float *dinp, float *dW, float *db, const float *dout, const float *inp,
                                  const float *W, int N, int C, int OC) {
    Engine *in = ((TimedEngine *)e)->inner;
    TIMED(TIMED_LINEAR, in->linear_backward(in, dinp, dW, db, dout, inp, W, N, C, OC));
}
static void timed_attention_forward(Engine *e, float *out, float *lse, const float *qkv, const float *bias, int B,
                                    int T, int C, int H) {
    Engine *in = ((TimedEngine *)e)->inner;
    TIMED(TIMED_ATTENTION, in->attention_forward(in, out, lse, qkv, bias, B, T, C, H));
}
static void timed_attention_backward(Engine *e, float *dqkv, float *dbias, const float *dout, const float *qkv,
                                     const float *out, const float *lse, const float *bias, int B, int T, int C,
                                     int H) {
    Engine *in = ((TimedEngine *)e)->inner;
    TIMED(TIMED_ATTENTION, in->attention_backward(in, dqkv, dbias, dout, qkv, out, lse, bias, B, T, C, H));
}
static void timed_weights_changed(Engine *e) {
    Engine *in = ((TimedEngine *)e)->inner;
    if (in->weights_changed) in->weights_changed(in);
}
static size_t timed_bytes(const Engine *e) {
    const Engine *in = ((const TimedEngine *)e)->inner;
    return in->bytes ? in->bytes(in) : 0;
}

// Puts te between the model and its engine (undo with timed_engine_remove before gpt_free).
static void timed_engine_insert(TimedEngine *te, GPT *model) {
    Engine *in = model->engine;
    *te = (TimedEngine){.inner = in};
    te->base = (Engine){.linear_forward = timed_linear_forward, .linear_backward = timed_linear_backward,
                        .attention_forward = timed_attention_forward,
                        .attention_backward = timed_attention_backward,
                        .weights_changed = in->weights_changed ? timed_weights_changed : NULL,
                        .bytes = timed_bytes, .free = NULL, .keeps_inputs = in->keeps_inputs};
    memcpy(te->base.describe, in->describe, sizeof te->base.describe);
    model->engine = &te->base;
}
static void timed_engine_remove(TimedEngine *te, GPT *model) { model->engine = te->inner; }

// Tells a waiting `perf record` (PERF_CTL_FIFO, above) to start sampling.
static void perf_enable(void) {
    const char *fifo = getenv("PERF_CTL_FIFO");
    if (!fifo || !*fifo) return;
    FILE *f = fopen(fifo, "w");
    if (!f || fputs("enable\n", f) == EOF || fclose(f) != 0) {
        fprintf(stderr, "bench_model: cannot write to PERF_CTL_FIFO %s\n", fifo);
        exit(1);
    }
}

static int run_model(const BenchConfig *bc, PosKind pos, GPTMatmul mm, GPTPrecision prec, int steps, int warmup,
                     double peak) {
    GPT *model = bench_gpt(bc, pos, mm, prec);
    if (!model) return 1;
    const char *attention = matmul_name(mm);   // where attention's products run: the engine's own
    printf("# matmul %s\n", gpt_matmul_describe(model));
    TimedEngine timed;
    timed_engine_insert(&timed, model);
    size_t n_params = gpt_num_params(model);
    AdamWConfig acfg = {0.9f, 0.95f, 1e-8f, 0.1f};
    AdamW opt;
    if (adamw_init(&opt, &acfg, n_params, NULL, 0) != 0) { fprintf(stderr, "bench_model: out of memory\n"); return 1; }
    const ParamEntry *entries;
    int n_entries = gpt_param_entries(model, &entries);
    int BT = bc->B * bc->T;
    int *tok = malloc((size_t)(BT + bc->B) * sizeof(int)), *inp = malloc(BT * sizeof(int)),
        *tgt = malloc(BT * sizeof(int));
    Rng rng;
    rng_seed(&rng, 42);
    double *fwd = malloc(steps * sizeof(double)), *bwd = malloc(steps * sizeof(double)),
           *upd = malloc(steps * sizeof(double)), *tot = malloc(steps * sizeof(double)),
           *lin = malloc(steps * sizeof(double)), *att = malloc(steps * sizeof(double));
    float loss_first = 0.0f, loss_last = 0.0f;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) perf_enable();
        for (int i = 0; i < BT + bc->B; i++) tok[i] = (int)rng_below(&rng, (uint64_t)bc->V);
        for (int b = 0; b < bc->B; b++)   // windows of T+1 tokens: targets are inputs shifted by one
            for (int t = 0; t < bc->T; t++) {
                inp[b * bc->T + t] = tok[b * (bc->T + 1) + t];
                tgt[b * bc->T + t] = tok[b * (bc->T + 1) + t + 1];
            }
        double t0 = now_s();
        timed.seconds[TIMED_LINEAR] = timed.seconds[TIMED_ATTENTION] = 0.0;
        gpt_zero_grad(model);
        float loss = gc_forward(model, inp, tgt, bc->B, bc->T);
        double t1 = now_s();
        gc_backward(model, 1.0f);
        double t2 = now_s();
        float *g = gpt_grads(model);
        double norm = grad_global_norm(g, n_params);   // as ./train does: norm, clip, update
        grad_clip(g, n_params, norm, 1.0f);
        adamw_step(&opt, gpt_params(model), g, entries, n_entries, 3e-4f, s + 1);   // bf16 copies re-made at the
                                                                                    // next forward (timed there)
        double t3 = now_s();
        if (s == 0) loss_first = loss;
        loss_last = loss;
        if (s >= warmup) {
            int k = s - warmup;
            fwd[k] = t1 - t0; bwd[k] = t2 - t1; upd[k] = t3 - t2; tot[k] = t3 - t0;
            lin[k] = timed.seconds[TIMED_LINEAR]; att[k] = timed.seconds[TIMED_ATTENTION];
        }
    }
    double rss = peak_rss_mb();
    double step = median(tot, steps);
    double acct_state = 4.0 * 4.0 * n_params / (1024.0 * 1024.0);   // params, grads, m, v
    double acct_act = model->acts.bytes / (1024.0 * 1024.0);
    // the engine's own: weight copies (bf16: two per weight) and scratch (inputs in bf16, oneDNN's scratchpad)
    double acct_matmul = model->engine->bytes(model->engine) / (1024.0 * 1024.0);
    double flops = bench_flops_per_step(bc), gflops = flops / step / 1e9;
    // the share of a step inside the engine, and the engine's own rates: every model FLOP is a
    // product's, so flops / (time in the engine) is what the step would reach if the rest were free
    double *share = malloc(steps * sizeof(double));
    for (int k = 0; k < steps; k++) share[k] = (lin[k] + att[k]) / tot[k];
    double linear_s = median(lin, steps), attention_s = median(att, steps), engine_share = median(share, steps);
    free(share);
    timed_engine_remove(&timed, model);
    printf("ropelab config=%s pos=%s engine=%s precision=%s L=%d C=%d H=%d V=%d B=%d T=%d threads=%d "
           "params=%zu tokens_per_s=%.1f ms_per_step=%.2f fwd_ms=%.2f bwd_ms=%.2f opt_ms=%.2f "
           "gflops=%.1f peak_gflops=%.1f mfu=%.3f rss_mb=%.1f state_mb=%.1f act_mb=%.1f matmul_mb=%.1f "
           "rss_ratio=%.2f flops_per_step=%.4g formula_state_mb=%.1f formula_act_mb=%.1f "
           "steps=%d loss_first=%.4f loss_last=%.4f attention=%s engine_share=%.3f "
           "engine_gflops=%.1f linear_ms=%.2f linear_gflops=%.1f attention_ms=%.2f attention_gflops=%.1f\n",
           bc->name, pos_kind_name(pos), matmul_name(mm), precision_label(prec), bc->L, bc->C, bc->H, bc->V,
           bc->B, bc->T, omp_get_max_threads(), n_params, BT / step, step * 1e3, median(fwd, steps) * 1e3,
           median(bwd, steps) * 1e3, median(upd, steps) * 1e3, gflops, peak,
           peak > 0 ? gflops / peak : 0.0, rss, acct_state, acct_act, acct_matmul,
           rss / (acct_state + acct_act + acct_matmul), flops, bench_state_bytes(bc) / (1024.0 * 1024.0),
           bench_activation_bytes(bc, model->engine->keeps_inputs) / (1024.0 * 1024.0), steps, loss_first, loss_last, attention,
           engine_share, flops / (linear_s + attention_s) / 1e9, linear_s * 1e3,
           bench_linear_flops_per_step(bc) / linear_s / 1e9, attention_s * 1e3,
           bench_attention_flops_per_step(bc) / attention_s / 1e9);
    free(fwd); free(bwd); free(upd); free(tot); free(lin); free(att); free(tok); free(inp); free(tgt);
    adamw_free(&opt);
    gpt_free(model);
    return 0;
}

// --auto: the trial ./train runs for matmul = auto (src/train/matmul_auto.h) on
// this config's model, batch and threads, and what it picks.
static int auto_choice(const BenchConfig *bc, PosKind pos) {
    GPT *model = bench_gpt(bc, pos, GPT_MATMUL_OPENBLAS, GPT_FP32);
    if (!model) return 1;
    double ms[2];
    char err[256], line[256];
    int rc = matmul_auto_time(model, bench_attention, bc->B, bc->T, ms, err, sizeof err);
    gpt_free(model);
    if (rc != 0) {
        printf("# auto fp32 = ? (%s)\n", err);
        return 1;
    }
    GPTMatmul pick = matmul_auto_pick(ms, 0, line, sizeof line);
    printf("# auto fp32 = %s (%s)\n", matmul_name(pick), line);
    return 0;
}

// Scheme overhead. A machine's speed can wander over seconds by more than
// the differences between schemes. So all four schemes are built
// in one process and trained in turn, one step each, round-robin (the order
// rotates each step): every scheme sees the same drift. Prints each scheme's
// median step time, the median and quartiles of its step time over
// learned's in the same round, and its fastest step. Single steps still
// scatter by more than those differences, so it then times the work each
// scheme adds, kernel by kernel (scheme_own_ms), which resolves a fraction
// of a percent.
typedef struct {
    GPT *model;
    AdamW opt;
    const ParamEntry *entries;
    int n_entries;
} SchemeRun;

// The work each scheme adds to a training step, timed kernel by kernel on a
// trained model's own buffers: the fastest of `reps` tries (noise only
// ever adds time, and a kernel of a few milliseconds is often not hit
// at all). Per step that is
//   embedding hook forward + backward                        (learned, sinusoidal)
//   L x (q/k rotation forward + backward)                    (rope)
//   bias table + its gradient fold + L x (attention forward and backward
//   with the bias table - the same without it)               (t5)
// The rest of the step is the same code for every scheme.
static double scheme_own_ms(GPT *m, int B, int T, int reps) {
    const PosScheme *ps = m->pos;
    const PosCtx *pc = &m->pos_ctx;
    Activations *a = &m->acts;
    const LayerActs *la = &a->layer[0];   // layer 0's buffers, for every layer's hooks and attention
    int L = m->cfg.n_layer, C = m->cfg.d_model, H = m->cfg.n_head;
    double best_pos = 1e30, best_att = 1e30, best_att_nobias = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (ps->embed_forward) ps->embed_forward(pc, a->encoded, B, T, 0);
        if (ps->embed_backward) ps->embed_backward(pc, a->dres, B, T);
        for (int l = 0; l < L && ps->qk_forward; l++) {
            ps->qk_forward(pc, la->qkv, B, T, 0);
            ps->qk_backward(pc, a->dqkv, B, T);
        }
        if (ps->bias_fill) {
            ps->bias_fill(pc, a->pos_bias, T);
            if (ps->bias_backward) {
                memset(a->dpos_bias, 0, (size_t)B * H * T * sizeof(float));
                ps->bias_backward(pc, a->dpos_bias, B, T);
            }
        }
        double t1 = now_s();
        best_pos = fmin(best_pos, t1 - t0);
        if (!ps->bias_fill) continue;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            double s0 = now_s();
            Engine *e = m->engine;
            e->attention_forward(e, la->atty, la->att_lse, la->qkv, with_bias ? a->pos_bias : NULL, B, T, C, H);
            e->attention_backward(e, a->dqkv, with_bias ? a->dpos_bias : NULL, a->dact, la->qkv, la->atty, la->att_lse,
                                  with_bias ? a->pos_bias : NULL, B, T, C, H);
            double dt = now_s() - s0;
            if (with_bias) best_att = fmin(best_att, dt);
            else best_att_nobias = fmin(best_att_nobias, dt);
        }
    }
    double att_extra = ps->bias_fill ? L * (best_att - best_att_nobias) : 0.0;
    return (best_pos + att_extra) * 1e3;
}

static int compare_schemes(const BenchConfig *bc, GPTMatmul mm, GPTPrecision prec, int steps, int warmup) {
    static const PosKind kinds[] = {POS_LEARNED, POS_ROPE, POS_SINUSOIDAL, POS_T5};
    enum { K = 4 };
    SchemeRun run[K];
    AdamWConfig acfg = {0.9f, 0.95f, 1e-8f, 0.1f};
    for (int k = 0; k < K; k++) {
        run[k].model = bench_gpt(bc, kinds[k], mm, prec);
        if (!run[k].model) return 1;
        if (adamw_init(&run[k].opt, &acfg, gpt_num_params(run[k].model), NULL, 0) != 0) {
            fprintf(stderr, "bench_model: out of memory\n");
            return 1;
        }
        run[k].n_entries = gpt_param_entries(run[k].model, &run[k].entries);
    }
    int BT = bc->B * bc->T;
    int *inp = malloc(BT * sizeof(int)), *tgt = malloc(BT * sizeof(int));
    double (*t)[K] = malloc(sizeof(double[K]) * steps);
    Rng rng;
    rng_seed(&rng, 42);
    for (int s = 0; s < warmup + steps; s++) {
        for (int i = 0; i < BT; i++) { inp[i] = (int)rng_below(&rng, bc->V); tgt[i] = (int)rng_below(&rng, bc->V); }
        for (int kk = 0; kk < K; kk++) {   // the same batch for every scheme, in rotating order
            int k = (s + kk) % K;
            SchemeRun *r = &run[k];
            size_t n = gpt_num_params(r->model);
            double t0 = now_s();
            gpt_zero_grad(r->model);
            gc_forward(r->model, inp, tgt, bc->B, bc->T);
            gc_backward(r->model, 1.0f);
            float *g = gpt_grads(r->model);
            grad_clip(g, n, grad_global_norm(g, n), 1.0f);
            adamw_step(&r->opt, gpt_params(r->model), g, r->entries, r->n_entries, 3e-4f, s + 1);
            if (s >= warmup) t[s - warmup][k] = now_s() - t0;
        }
    }
    // Each round's ratio to learned's step in the same round cancels the
    // machine's slow drift; the median and quartiles of those ratios are the
    // overhead and its spread.
    double fastest[K], col[1000], ratio[1000];
    for (int k = 0; k < K; k++) {
        for (int s = 0; s < steps; s++) { col[s] = t[s][k]; ratio[s] = t[s][k] / t[s][0]; }
        double med = median(col, steps), r_med = median(ratio, steps);
        qsort(col, steps, sizeof *col, cmp_double);       // for the fastest step and the quartiles
        qsort(ratio, steps, sizeof *ratio, cmp_double);
        fastest[k] = col[0];
        printf("scheme_compare config=%s pos=%s engine=%s precision=%s ms_per_step=%.2f vs_learned_pct=%.1f "
               "q1_pct=%.1f q3_pct=%.1f fastest_ms=%.2f steps=%d\n", bc->name, pos_kind_name(kinds[k]),
               matmul_name(mm), precision_label(prec), med * 1e3, 100.0 * (r_med - 1.0),
               100.0 * (ratio[steps / 4] - 1.0), 100.0 * (ratio[(3 * steps) / 4] - 1.0), fastest[k] * 1e3, steps);
    }
    // The same question kernel by kernel (see scheme_own_ms), against
    // learned's fastest step: noise-free enough to resolve a few percent.
    double own_learned = scheme_own_ms(run[0].model, bc->B, bc->T, 30);
    for (int k = 0; k < K; k++) {
        double own = k == 0 ? own_learned : scheme_own_ms(run[k].model, bc->B, bc->T, 30);
        printf("scheme_kernels config=%s pos=%s engine=%s precision=%s own_ms=%.3f learned_own_ms=%.3f "
               "learned_fastest_step_ms=%.2f vs_learned_pct=%.2f\n", bc->name, pos_kind_name(kinds[k]),
               matmul_name(mm), precision_label(prec), own, own_learned, fastest[0] * 1e3,
               100.0 * (own - own_learned) / (fastest[0] * 1e3));
    }
    for (int k = 0; k < K; k++) { adamw_free(&run[k].opt); gpt_free(run[k].model); }
    free(inp); free(tgt); free(t);
    return 0;
}

// One line per config (bench/util_bench.h): its sizes, and by the formulas
// there its parameters (rope), model FLOPs per step and memory (state:
// parameters, gradients, AdamW m and v; activations by docs/MODEL.md), MiB.
// bench.sh records them and checks the sizes against torch_baseline.PRESETS.
static void list_configs(void) {
    for (int i = 0; i < N_CONFIGS; i++) {
        const BenchConfig *c = &CONFIGS[i];
        double st = bench_state_bytes(c) / (1024.0 * 1024.0), act = bench_activation_bytes(c, 0) / (1024.0 * 1024.0);
        double act_bf16 = bench_activation_bytes(c, 1) / (1024.0 * 1024.0);
        printf("bench_config config=%s L=%d C=%d H=%d T=%d B=%d V=%d params=%.0f flops_per_step=%.4g "
               "formula_state_mb=%.1f formula_act_mb=%.1f formula_mb=%.1f formula_act_bf16_mb=%.1f "
               "formula_bf16_mb=%.1f\n", c->name, c->L, c->C, c->H, c->T, c->B, c->V, bench_params(c),
               bench_flops_per_step(c), st, act, st + act, act_bf16, st + act_bf16);
    }
}

static void usage(void) {
    fprintf(stderr, "usage: bench_model --config S|M|L [--pos rope] [--steps 10] [--warmup 2] "
                    "[--threads N] [--peak-gflops X] [--batch B] [--seq-len T] [ENGINE]\n"
                    "       bench_model --compare-schemes --config S|M|L [--steps N] [--threads N] [ENGINE]\n"
                    "       bench_model --peak [--threads N] [ENGINE]\n"
                    "       bench_model --rope-micro [--threads N]\n"
                    "       bench_model --auto --config S|M|L [--pos P] [--threads N] [--batch B] [--seq-len T]\n"
                    "       bench_model --list-configs\n"
                    "ENGINE: --matmul openblas|onednn --precision fp32|bf16 (default openblas fp32;\n"
                    "        bf16 needs onednn) [--attention blocked|fused] (default blocked; fused: fp32)\n");
}

int main(int argc, char **argv) {
    blas_use_native_kernels(argv);
    const char *config = NULL, *pos_name = "rope";
    const char *matmul_arg = "openblas", *precision_arg = "fp32";
    int steps = 10, warmup = 2, threads = 0, do_peak = 0, do_rope = 0, batch = 0, seq_len = 0, do_compare = 0;
    int do_auto = 0;
    double peak = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--peak")) do_peak = 1;
        else if (!strcmp(a, "--list-configs")) { list_configs(); return 0; }
        else if (!strcmp(a, "--rope-micro")) do_rope = 1;
        else if (!strcmp(a, "--compare-schemes")) do_compare = 1;
        else if (!strcmp(a, "--auto")) do_auto = 1;
        else if (v && !strcmp(a, "--config")) { config = v; i++; }
        else if (v && !strcmp(a, "--pos")) { pos_name = v; i++; }
        else if (v && !strcmp(a, "--steps")) { steps = atoi(v); i++; }
        else if (v && !strcmp(a, "--warmup")) { warmup = atoi(v); i++; }
        else if (v && !strcmp(a, "--threads")) { threads = atoi(v); i++; }
        else if (v && !strcmp(a, "--peak-gflops")) { peak = atof(v); i++; }
        else if (v && !strcmp(a, "--batch")) { batch = atoi(v); i++; }
        else if (v && !strcmp(a, "--seq-len")) { seq_len = atoi(v); i++; }
        else if (v && !strcmp(a, "--matmul")) { matmul_arg = v; i++; }
        else if (v && !strcmp(a, "--precision")) { precision_arg = v; i++; }
        else if (v && !strcmp(a, "--attention") && (!strcmp(v, "blocked") || !strcmp(v, "fused"))) {
            bench_attention = !strcmp(v, "fused") ? GPT_ATTENTION_FUSED : GPT_ATTENTION_BLOCKED;
            i++;
        }
        else { usage(); return 2; }
    }
    GPTMatmul mm = !strcmp(matmul_arg, "onednn") ? GPT_MATMUL_ONEDNN : GPT_MATMUL_OPENBLAS;
    GPTPrecision prec = !strcmp(precision_arg, "bf16") ? GPT_BF16 : GPT_FP32;
    if ((strcmp(matmul_arg, "onednn") && strcmp(matmul_arg, "openblas")) ||
        (strcmp(precision_arg, "bf16") && strcmp(precision_arg, "fp32")) ||
        (mm == GPT_MATMUL_OPENBLAS && prec == GPT_BF16)) {
        usage();
        return 2;
    }
    threads_set(threads);
    const char *core = openblas_get_corename();
    printf("# openblas core=%s config=%s threads=%d\n", core ? core : "?", openblas_get_config(),
           omp_get_max_threads());
    if (do_peak) {
        // OpenBLAS: the square sgemm peak is its reference; its linear forward at the
        // oneDNN shapes is printed beside it, so the engines can be compared shape for shape.
        if (mm == GPT_MATMUL_OPENBLAS) printf("sgemm_peak gflops=%.1f\n", sgemm_peak(5));
        double lp = linear_peak(mm, prec, 5);
        if (lp <= 0) return 1;
        printf("linear_peak engine=%s precision=%s n=2048 gflops=%.1f\n", matmul_name(mm), precision_label(prec), lp);
        return 0;
    }
    if (do_rope) { rope_micro(9); return 0; }
    const BenchConfig *bc = bench_config_named(config);
    PosKind pos;
    if (!bc || pos_kind_from_name(pos_name, &pos) != 0 || steps < 1 || steps > 1000 || warmup < 0) {
        usage();
        return 2;
    }
    if (do_compare) return compare_schemes(bc, mm, prec, steps, warmup);
    BenchConfig custom = *bc;
    if (batch > 0) custom.B = batch;   // smaller batches for profiling under valgrind
    if (seq_len > 0) custom.T = seq_len;   // longer windows: memory against the accounting (bench_memory)
    if (do_auto) return auto_choice(&custom, pos);
    return run_model(&custom, pos, mm, prec, steps, warmup, peak);
}
