// bench_linear.c: the linear layers' three products on each engine
// (src/engine/engine.h) at the model shapes of configs S and M (or L, or all three): GFLOP/s of forward,
// dinp and dW, median and best over interleaved rounds, and the cost of
// re-making the weight copies after an optimizer step.
//
//   build/bench_linear [--config S|M|L|both|all] [--rounds 11] [--threads 2] [--min-ms 20]
//                      (both: S and M, the default; all: S, M and L)
//                      [--engines openblas-fp32,onednn-bf16,...]
//
// Engines (columns):
//   openblas-fp32        engine_openblas.c (cblas_sgemm, slices of 64 rows): the baseline
//   onednn-fp32          oneDNN fp32, weights read in place (packed inside each call)
//   onednn-fp32-packed   oneDNN fp32, two packed fp32 copies per weight
//   onednn-bf16          oneDNN bf16, two packed bf16 copies per weight (W^T, W)
//   onednn-bf16-plain    oneDNN bf16, one row-major bf16 copy per weight
// The last two answer "two packed copies or one": the packed pair costs
// twice the re-pack and memory, the plain copy makes oneDNN pack panels of
// it inside every forward and dinp call.
//
// Shapes: N = B*T rows (S: 32*128 = 4096, M: 8*256 = 2048, L: 4*1024 = 4096) and, per layer,
// C -> OC: c_attn C -> 3C, attn.c_proj C -> C, c_fc C -> 4C, mlp.c_proj
// 4C -> C (each L times per step), the tied head C -> V (once; no bias).
// FLOPs of each product: 2 N C OC.
//   forward  out = inp W^T + b          e->linear_forward
//   dinp     dinp = dout W              e->linear_backward(dinp, NULL, NULL)
//   dW       dW += dout^T inp           e->linear_backward(NULL, dW, NULL)
//   repack   weights_changed + prepack  every copy of one weight re-made
// bf16 timings include rounding the activations to bf16 (part of the cost).
//
// Method: one warm-up round (primitives created, copies made, repetition
// counts fixed so one sample takes >= --min-ms), then --rounds rounds; in
// each round every (layer, product) is timed on every engine in turn, in
// forward order on even rounds and reverse order on odd ones (A B C, C B A),
// so the drift of a shared machine falls on all engines alike. Reported:
// median and best GFLOP/s, and the median over rounds of each engine's time
// ratio to openblas-fp32 in the same round.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>
#include <omp.h>

#include "common/blas_cpu.h"
#include "common/threads.h"
#include "engine/engine_create.h"
#include "engine/engine_testing.h"
#include "util_bench.h"

typedef struct {
    const char *name;
    int onednn, bf16;
    WeightLayout layout;
} EngineSpec;

static const EngineSpec ENGINES[] = {
    {"openblas-fp32", 0, 0, WEIGHTS_DEFAULT},
    {"onednn-fp32", 1, 0, WEIGHTS_PLAIN},
    {"onednn-fp32-packed", 1, 0, WEIGHTS_PACKED},
    {"onednn-bf16", 1, 1, WEIGHTS_PACKED},
    {"onednn-bf16-plain", 1, 1, WEIGHTS_PLAIN},
};
enum { MAX_ENGINES = sizeof ENGINES / sizeof ENGINES[0] };


enum { OP_FWD, OP_DINP, OP_DW, OP_REPACK, N_OPS };
static const char *const OP_NAMES[N_OPS] = {"forward", "dinp", "dW", "repack"};
enum { N_LAYERS = 5, MAX_ROUNDS = 101 };

typedef struct {
    const char *name;
    int C, OC, has_bias, per_step;         // per_step: how many such layers a step runs
    float *inp, *W, *b, *out, *dout, *dinp, *dW;
    int reps[N_OPS][MAX_ENGINES];          // calls per sample
    size_t copy_bytes[MAX_ENGINES];        // memory of this weight's copies
    double sec[N_OPS][MAX_ENGINES][MAX_ROUNDS];   // seconds per call
} Layer;

static double best(const double *x, int n) {
    double b = x[0];
    for (int i = 1; i < n; i++) b = x[i] < b ? x[i] : b;
    return b;
}

static float *filled(size_t n, unsigned seed) {   // uniform in [-0.5, 0.5)
    float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!x) { fprintf(stderr, "out of memory\n"); exit(1); }
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    return x;
}

// One call of product op of layer ly on engine e; exits on failure.
static void run_once(Engine *e, Layer *ly, int op, int N) {
    if (op == OP_FWD) e->linear_forward(e, ly->out, ly->inp, ly->W, ly->has_bias ? ly->b : NULL, N, ly->C, ly->OC);
    else if (op == OP_DINP) e->linear_backward(e, ly->dinp, NULL, NULL, ly->dout, ly->inp, ly->W, N, ly->C, ly->OC);
    else if (op == OP_DW) e->linear_backward(e, NULL, ly->dW, NULL, ly->dout, ly->inp, ly->W, N, ly->C, ly->OC);
    else {
        e->weights_changed(e);
        engine_onednn_prepack(e, ly->W, ly->OC, ly->C);
    }
    char err[256];
    if (engine_failed(e, err, sizeof err) != 0) {
        fprintf(stderr, "%s %s: %s\n", ly->name, OP_NAMES[op], err);
        exit(1);
    }
}

static double time_calls(Engine *e, Layer *ly, int op, int N, int reps) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++) run_once(e, ly, op, N);
    return (now_s() - t0) / reps;
}

static int has_copies(const EngineSpec *s) { return s->onednn && (s->bf16 || s->layout == WEIGHTS_PACKED); }

static Engine *engine_for(const EngineSpec *s) {
    Engine *e = NULL;
    char err[256];
    if ((s->onednn ? engine_onednn_create_with_layout(&e, s->bf16, 0, s->layout, err, sizeof err)
                   : engine_openblas_create(&e, 0, err, sizeof err)) != 0) {
        fprintf(stderr, "%s: %s\n", s->name, err);
        exit(1);
    }
    return e;
}

// The bytes of weight copies an engine holds (0 for OpenBLAS).
static size_t copy_bytes(const Engine *e, const EngineSpec *s) {
    if (!s->onednn) return 0;
    OnednnStats st;
    engine_onednn_stats(e, &st);
    return st.weight_copy_bytes;
}

static void bench_config(const BenchConfig *cfg, const int *use, int n_use, int rounds, double min_s) {
    int N = cfg->B * cfg->T, C = cfg->C;   // rows: the batch's tokens
    Layer layers[N_LAYERS] = {
        {.name = "c_attn", .C = C, .OC = 3 * C, .has_bias = 1, .per_step = cfg->L},
        {.name = "attn.c_proj", .C = C, .OC = C, .has_bias = 1, .per_step = cfg->L},
        {.name = "c_fc", .C = C, .OC = 4 * C, .has_bias = 1, .per_step = cfg->L},
        {.name = "mlp.c_proj", .C = 4 * C, .OC = C, .has_bias = 1, .per_step = cfg->L},
        {.name = "head", .C = C, .OC = cfg->V, .has_bias = 0, .per_step = 1},
    };
    Engine *engines[MAX_ENGINES] = {0};
    for (int j = 0; j < n_use; j++) engines[j] = engine_for(&ENGINES[use[j]]);
    for (int l = 0; l < N_LAYERS; l++) {
        Layer *ly = &layers[l];
        size_t nin = (size_t)N * ly->C, nout = (size_t)N * ly->OC, nw = (size_t)ly->OC * ly->C;
        ly->inp = filled(nin, 1 + l);
        ly->W = filled(nw, 11 + l);
        ly->b = filled(ly->OC, 21 + l);
        ly->dout = filled(nout, 31 + l);
        ly->out = filled(nout, 41 + l);
        ly->dinp = filled(nin, 51 + l);
        ly->dW = filled(nw, 61 + l);
    }
    // warm-up round: primitives and copies made, repetitions fixed
    for (int l = 0; l < N_LAYERS; l++) {
        Layer *ly = &layers[l];
        for (int j = 0; j < n_use; j++) {
            size_t before = copy_bytes(engines[j], &ENGINES[use[j]]);
            for (int op = 0; op < N_OPS; op++) {
                if (op == OP_REPACK && !has_copies(&ENGINES[use[j]])) { ly->reps[op][j] = 0; continue; }
                run_once(engines[j], ly, op, N);
                double t = time_calls(engines[j], ly, op, N, 1);
                int reps = (int)ceil(min_s / (t > 1e-7 ? t : 1e-7));
                ly->reps[op][j] = reps < 1 ? 1 : reps > 100000 ? 100000 : reps;
            }
            ly->copy_bytes[j] = copy_bytes(engines[j], &ENGINES[use[j]]) - before;
        }
    }
    for (int r = 0; r < rounds; r++)
        for (int l = 0; l < N_LAYERS; l++)
            for (int op = 0; op < N_OPS; op++)
                for (int k = 0; k < n_use; k++) {
                    int j = r % 2 == 0 ? k : n_use - 1 - k;   // A B C, then C B A
                    Layer *ly = &layers[l];
                    if (ly->reps[op][j] == 0) continue;
                    ly->sec[op][j][r] = time_calls(engines[j], ly, op, N, ly->reps[op][j]);
                }

    printf("\n## config %s: N = %d rows, C = %d, V = %d, L = %d; %d threads, %d rounds\n", cfg->name, N, C,
           cfg->V, cfg->L, omp_get_max_threads(), rounds);
    printf("GFLOP/s, median / best; [x] = median over rounds of the time ratio openblas-fp32 / engine\n\n");
    printf("| layer | C -> OC | product |");
    for (int j = 0; j < n_use; j++) printf(" %s |", ENGINES[use[j]].name);
    printf("\n|---|---|---|");
    for (int j = 0; j < n_use; j++) printf("---|");
    printf("\n");
    int base = -1;   // the openblas column, if measured
    for (int j = 0; j < n_use; j++)
        if (!ENGINES[use[j]].onednn) base = j;
    for (int l = 0; l < N_LAYERS; l++)
        for (int op = 0; op < OP_REPACK; op++) {
            Layer *ly = &layers[l];
            double flop = 2.0 * N * ly->C * ly->OC;
            printf("| %s | %d -> %d | %s |", ly->name, ly->C, ly->OC, OP_NAMES[op]);
            for (int j = 0; j < n_use; j++) {
                const double *t = ly->sec[op][j];
                printf(" %.1f / %.1f", flop / median(t, rounds) / 1e9, flop / best(t, rounds) / 1e9);
                if (base >= 0 && j != base) {
                    double ratio[MAX_ROUNDS];
                    for (int r = 0; r < rounds; r++) ratio[r] = ly->sec[op][base][r] / t[r];
                    printf(" [%.2fx]", median(ratio, rounds));
                }
                printf(" |");
            }
            printf("\n");
        }

    printf("\nPer training step of the whole model (one micro-batch of N rows; each layer kind times its\n"
           "count), ms from the medians; re-pack = every weight's copies re-made once per optimizer step:\n\n");
    printf("| engine | forward | dinp | dW | fwd + bwd | re-pack (all weights) | weight copies MiB |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int j = 0; j < n_use; j++) {
        double ms[N_OPS] = {0};
        for (int l = 0; l < N_LAYERS; l++)
            for (int op = 0; op < N_OPS; op++)
                if (layers[l].reps[op][j] > 0) ms[op] += 1e3 * layers[l].per_step * median(layers[l].sec[op][j], rounds);
        double copy_mib = 0;   // the whole model's weight copies
        for (int l = 0; l < N_LAYERS; l++) copy_mib += layers[l].per_step * (double)layers[l].copy_bytes[j] / (1 << 20);
        printf("| %s | %.2f | %.2f | %.2f | %.2f |", ENGINES[use[j]].name, ms[OP_FWD], ms[OP_DINP], ms[OP_DW],
               ms[OP_FWD] + ms[OP_DINP] + ms[OP_DW]);
        if (has_copies(&ENGINES[use[j]])) printf(" %.2f |", ms[OP_REPACK]);
        else printf(" - |");
        printf(" %.2f |\n", copy_mib);
    }
    for (int j = 0; j < n_use; j++) engines[j]->free(engines[j]);
    for (int l = 0; l < N_LAYERS; l++) {
        Layer *ly = &layers[l];
        free(ly->inp); free(ly->W); free(ly->b); free(ly->out); free(ly->dout); free(ly->dinp); free(ly->dW);
    }
}

static void usage(void) {
    fprintf(stderr, "usage: bench_linear [--config S|M|L|both|all (both = S and M)] [--rounds 11] [--threads 2] [--min-ms 20]\n"
                    "                    [--engines name,name,...]   (engines:");
    for (int j = 0; j < MAX_ENGINES; j++) fprintf(stderr, " %s", ENGINES[j].name);
    fprintf(stderr, ")\n");
}

int main(int argc, char **argv) {
    blas_use_native_kernels(argv);
    const char *config = "both", *engine_list = NULL;
    int rounds = 11, threads = 2;
    double min_ms = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--config")) { config = v; i++; }
        else if (v && !strcmp(a, "--rounds")) { rounds = atoi(v); i++; }
        else if (v && !strcmp(a, "--threads")) { threads = atoi(v); i++; }
        else if (v && !strcmp(a, "--min-ms")) { min_ms = atof(v); i++; }
        else if (v && !strcmp(a, "--engines")) { engine_list = v; i++; }
        else { usage(); return 2; }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || min_ms <= 0) { usage(); return 2; }
    int use[MAX_ENGINES], n_use = 0;
    for (int j = 0; j < MAX_ENGINES; j++) {
        const char *name = ENGINES[j].name, *hit = engine_list ? strstr(engine_list, name) : NULL;
        size_t len = strlen(name);
        // a whole entry of the comma-separated list ("onednn-bf16" is not "onednn-bf16-plain")
        while (hit && !((hit == engine_list || hit[-1] == ',') && (hit[len] == '\0' || hit[len] == ',')))
            hit = strstr(hit + 1, name);
        if (!engine_list || hit) use[n_use++] = j;
    }
    if (n_use == 0) { usage(); return 2; }
    threads_set(threads);
    const char *core = openblas_get_corename();
    double load[3] = {0};
    if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("# bench_linear %s; %d threads; openblas core %s; load average %.2f %.2f %.2f "
           "(a busy machine makes every number here unreliable)\n",
           when, omp_get_max_threads(), core ? core : "?", load[0], load[1], load[2]);
    for (int j = 0; j < n_use; j++) {
        Engine *e = engine_for(&ENGINES[use[j]]);
        printf("# %-20s %s\n", ENGINES[use[j]].name, e->describe);
        e->free(e);
    }
    if (strcmp(config, "both") && strcmp(config, "all") && !bench_config_named(config)) { usage(); return 2; }
    for (int i = 0; i < N_CONFIGS; i++)
        if (!strcmp(config, "all") || !strcmp(config, CONFIGS[i].name)
            || (!strcmp(config, "both") && (!strcmp(CONFIGS[i].name, "S") || !strcmp(CONFIGS[i].name, "M"))))
            bench_config(&CONFIGS[i], use, n_use, rounds, min_ms / 1e3);
    return 0;
}
