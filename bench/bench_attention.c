// bench_attention.c: do attention's matrix products gain from oneDNN, from
// bf16, from the fused attention? One causal attention forward + backward at
// the model shapes of configs S and M, five ways, alternating in each round:
//
//   fp32-openblas         engine_openblas.c (cblas_sgemm): the model with the OpenBLAS engine
//   fp32-openblas-fused   the same engine's fused attention: --attention=fused
//   fp32-onednn           onednn_attention.c in fp32: the model with --matmul=onednn
//   fp32-onednn-fused     the same, fused: --matmul=onednn --attention=fused
//   bf16-onednn           onednn_attention.c in bf16: the model with --precision=bf16 (blocked only)
//
//   build/bench_attention [--config S|M|both] [--rounds 9] [--threads N (default: all cores)]
//
// Configs S and M (util_bench.h, as bench_model.c): head dim D = 32 in both;
// no bias table (rope, learned, sinusoidal).
// Data: qkv and dout N(0,1) (scores of sd 1: a softmax neither flat nor
// one-hot). Correctness is tested in tests/test_model_attention.c;
// here the largest difference from fp32-openblas, relative to its largest
// value, is printed beside the times as a sanity figure.
//
// Timing: 2 warm-up rounds, then --rounds rounds of the five in turn; per
// variant the median ms of forward, backward and both, the model GFLOP/s
// (bench_model.c's count: forward 4 B C T(T+1)/2, backward twice that), and
// the speed-up = median over rounds of fp32-openblas's time / the variant's
// in the same round. A model step runs this once per layer (L = 4 on S, 6
// on M).
//
// Output, one key=value line per measurement:
//   attention config=M variant=bf16-onednn fwd_bwd_ms=... fwd_ms=... bwd_ms=... gflops=...
//             threads=2 rounds=9 speedup_vs_fp32_openblas=... max_rel_diff=...
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include "common/blas_cpu.h"
#include "common/rng.h"
#include "common/threads.h"
#include "engine/engine_create.h"
#include "util_bench.h"

enum { MAX_ROUNDS = 101, N_VARIANTS = 5, BF16 = N_VARIANTS - 1 };   // bf16 last: left out without native bf16
static const char *const variant_names[N_VARIANTS] = {"fp32-openblas", "fp32-openblas-fused", "fp32-onednn",
                                                      "fp32-onednn-fused", "bf16-onednn"};
static const int variant_fused[N_VARIANTS] = {0, 1, 0, 1, 0};


static float *alloc_floats(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p) { fprintf(stderr, "bench_attention: out of memory\n"); exit(1); }
    return p;
}

static double max_rel_diff(const float *x, const float *ref, size_t n) {
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)x[i] - ref[i]));
        m = fmax(m, fabs((double)ref[i]));
    }
    return d / m;
}

typedef struct { float *out, *lse, *dqkv; } Outputs;

// One forward + backward on engine e; times in *tf, *tb; 0, or -1 with the engine's message in err.
static int run(Engine *e, const BenchConfig *c, Outputs *o, const float *qkv, const float *dout, double *tf,
               double *tb, char *err, size_t errlen) {
    double t0 = now_s();
    e->attention_forward(e, o->out, o->lse, qkv, NULL, c->B, c->T, c->C, c->H);
    double t1 = now_s();
    e->attention_backward(e, o->dqkv, NULL, dout, qkv, o->out, o->lse, NULL, c->B, c->T, c->C, c->H);
    *tf = t1 - t0;
    *tb = now_s() - t1;
    return engine_failed(e, err, errlen);
}

static int bench_config(const BenchConfig *c, int rounds, int n_threads, int have_bf16) {
    const size_t n_qkv = (size_t)c->B * c->T * 3 * c->C, n_out = (size_t)c->B * c->T * c->C;
    float *qkv = alloc_floats(n_qkv), *dout = alloc_floats(n_out);
    Rng rng;
    rng_seed(&rng, 1234);
    for (size_t i = 0; i < n_qkv; i++) qkv[i] = (float)rng_normal(&rng);
    for (size_t i = 0; i < n_out; i++) dout[i] = (float)rng_normal(&rng);
    Engine *engine[N_VARIANTS] = {NULL};
    Outputs o[N_VARIANTS];
    char err[256];
    int n_variants = have_bf16 ? N_VARIANTS : N_VARIANTS - 1;
    for (int v = 0; v < n_variants; v++) {
        o[v] = (Outputs){alloc_floats(n_out), alloc_floats((size_t)c->B * c->H * c->T), alloc_floats(n_qkv)};
        if ((v < 2 ? engine_openblas_create(&engine[v], variant_fused[v], err, sizeof err)
                   : engine_onednn_create(&engine[v], v == BF16, variant_fused[v], err, sizeof err)) != 0) {
            fprintf(stderr, "bench_attention: %s\n", err);
            return 1;
        }
    }
    double flops = 3.0 * 4.0 * c->B * (double)c->C * c->T * (c->T + 1) / 2.0;
    printf("# attention config=%s B=%d T=%d C=%d H=%d threads=%d model_gflop_fwd_bwd=%.4f\n", c->name, c->B,
           c->T, c->C, c->H, n_threads, flops / 1e9);
    static double fwd[N_VARIANTS][MAX_ROUNDS], bwd[N_VARIANTS][MAX_ROUNDS], tot[N_VARIANTS][MAX_ROUNDS];
    static double ratio[N_VARIANTS][MAX_ROUNDS];
    for (int r = -2; r < rounds; r++)
        for (int v = 0; v < n_variants; v++) {
            double tf, tb;
            if (run(engine[v], c, &o[v], qkv, dout, &tf, &tb, err, sizeof err) != 0) {
                fprintf(stderr, "bench_attention: %s\n", err);
                return 1;
            }
            if (r < 0) continue;
            fwd[v][r] = tf;
            bwd[v][r] = tb;
            tot[v][r] = tf + tb;
        }
    for (int v = 0; v < n_variants; v++) {
        for (int r = 0; r < rounds; r++) ratio[v][r] = tot[0][r] / tot[v][r];
        double t = median(tot[v], rounds);
        double diff = fmax(max_rel_diff(o[v].out, o[0].out, n_out), max_rel_diff(o[v].dqkv, o[0].dqkv, n_qkv));
        printf("attention config=%s variant=%s fwd_bwd_ms=%.3f fwd_ms=%.3f bwd_ms=%.3f gflops=%.2f threads=%d "
               "rounds=%d speedup_vs_fp32_openblas=%.3f max_rel_diff=%.2e\n",
               c->name, variant_names[v], t * 1e3, median(fwd[v], rounds) * 1e3, median(bwd[v], rounds) * 1e3,
               flops / t / 1e9, n_threads, rounds, median(ratio[v], rounds), diff);
    }
    fflush(stdout);
    for (int v = 0; v < n_variants; v++) {
        engine[v]->free(engine[v]);
        free(o[v].out); free(o[v].lse); free(o[v].dqkv);
    }
    free(qkv); free(dout);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: bench_attention [--config S|M|both] [--rounds 9] [--threads N (default: all cores)]\n");
}

int main(int argc, char **argv) {
    blas_use_native_kernels(argv);
    const char *config = "both";
    int rounds = 9, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--config")) { config = v; i++; }
        else if (v && !strcmp(a, "--rounds")) { rounds = atoi(v); i++; }
        else if (v && !strcmp(a, "--threads")) { threads = atoi(v); i++; }
        else { usage(); return 2; }
    }
    int use_s = !strcmp(config, "S") || !strcmp(config, "both");
    int use_m = !strcmp(config, "M") || !strcmp(config, "both");
    if ((!use_s && !use_m) || rounds < 1 || rounds > MAX_ROUNDS || threads < 0) { usage(); return 2; }
    int n_threads = threads_set(threads);
    const dnnl_version_t *ver = dnnl_version();
    int have_bf16 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    // (without native bf16, oneDNN's emulated bf16 is correct but not a speed figure worth a row)
    const char *core = openblas_get_corename();
    printf("# openblas core=%s onednn=%d.%d.%d native_bf16=%d threads=%d\n", core ? core : "?", ver->major,
           ver->minor, ver->patch, have_bf16, n_threads);
    if (!have_bf16) printf("# no native bf16 on this CPU: the bf16 variant is not run\n");
    int rc = 0;
    if (use_s) rc |= bench_config(&CONFIGS[0], rounds, n_threads, have_bf16);
    if (use_m) rc |= bench_config(&CONFIGS[1], rounds, n_threads, have_bf16);
    return rc;
}
