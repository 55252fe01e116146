// util_bench.h: what the benchmarks (bench/bench_*.c) share: the model
// configurations S, M and L, the model's configuration made from one, their
// size formulas (parameters, model FLOPs, memory), the clock and the median.
#ifndef ROPELAB_UTIL_BENCH_H
#define ROPELAB_UTIL_BENCH_H

#include "common/clock.h"
#include "model/gpt.h"
#include "../tests/util_gradcheck.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The benchmark configurations: layers, width, heads, window, batch, vocabulary.
// The one home of these sizes for C; scripts/torch/torch_baseline.py's PRESETS
// is the one for Python, and bench.sh checks that the two agree
// (build/bench_model --list-configs) before it measures anything.
//   S, M  the shapes of the comparison's default and medium setups
//         (configs/compare.ini, compare-medium.ini), with their own batches
//   L     GPT-2 small's shape (12 layers, width 768, 12 heads, T 1024) with
//         M's vocabulary of 4096 instead of GPT-2's 50257: the head is 3.1 M
//         parameters instead of 38.6 M, so 88.2 M in all, not 124 M. B = 4:
//         by the formulas below 1.31 GiB of state and 2.46 GiB of activations
//         (3.77 GiB), about 4.3 GiB with the bf16 engine's weight copies and
//         scratch; PyTorch, which also stores each layer's (B, H, T, T)
//         attention probabilities (12 x 192 MiB at B = 4), needs an
//         estimated 1.5-2x that. B = 8 doubles the activations (ropelab
//         6.2 GiB, PyTorch an estimated 12-16 GiB): too close to a 24 GB
//         machine's limit beside other work, so B = 4.
typedef struct { const char *name; int L, C, H, T, B, V; } BenchConfig;
static const BenchConfig CONFIGS[] = {
    {"S", 4, 128, 4, 128, 32, 2048},
    {"M", 6, 256, 8, 256, 8, 4096},
    {"L", 12, 768, 12, 1024, 4, 4096},
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

// The config named name, or NULL.
static inline const BenchConfig *bench_config_named(const char *name) {
    for (int i = 0; name && i < N_CONFIGS; i++)
        if (!strcmp(name, CONFIGS[i].name)) return &CONFIGS[i];
    return NULL;
}

// The model of config c with scheme pos (every other key at its default),
// trained on windows of c->T tokens (block_size = T): what bench_model trains
// and bench_memory accounts for.
static inline GPTConfig bench_model_config(const BenchConfig *c, PosKind pos) {
    GPTConfig cfg = {.n_layer = c->L, .n_head = c->H, .d_model = c->C, .vocab_size = c->V, .block_size = c->T,
                     .pos = pos};
    gc_config_defaults(&cfg);
    cfg.pos = pos;
    return cfg;
}

// Parameters of the gpt2 block with rope (no positional tensor; learned adds
// T C, t5 its bucket table): wte V C (tied head), per layer ln_1 2C, c_attn
// 3C^2 + 3C, attn.c_proj C^2 + C, ln_2 2C, c_fc 4C^2 + 4C, mlp.c_proj 4C^2 + C,
// and ln_f 2C.
static inline double bench_params(const BenchConfig *c) {
    double C = c->C;
    return (double)c->V * C + c->L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
}

// Model FLOPs per training step (the usual "6N" count, made exact here):
//   forward matmuls   2 * B*T * (L * 12 C^2 + V C)        (c_attn 3C^2, attn c_proj C^2,
//                                                         c_fc 4C^2, mlp c_proj 4C^2; tied head V C)
//   forward attention 2 * 2 * B * L * C * T(T+1)/2        (q.k and p.v over the causal triangle)
//   training step     3 x forward                         (backward = 2 x forward)
// Recomputation in backward (attention scores) is not counted: it is not
// model work, so it lowers the utilisation instead of inflating it.
// Of which the linear layers' and the head's products, and attention's.
static inline double bench_linear_flops_per_step(const BenchConfig *c) {
    double BT = (double)c->B * c->T;
    return 3.0 * 2.0 * BT * (12.0 * c->L * c->C * c->C + (double)c->V * c->C);
}
static inline double bench_attention_flops_per_step(const BenchConfig *c) {
    return 3.0 * 4.0 * c->B * c->L * (double)c->C * c->T * (c->T + 1) / 2.0;
}
static inline double bench_flops_per_step(const BenchConfig *c) {
    return bench_linear_flops_per_step(c) + bench_attention_flops_per_step(c);
}

// Bytes of the training state: parameters, gradients, AdamW's m and v, fp32.
static inline double bench_state_bytes(const BenchConfig *c) { return 16.0 * bench_params(c); }

// Bytes of the activations by docs/MODEL.md's formula (gpt2 block, rope: no
// bias table): per token C (encoded) + L (16 C + 4 + H) + C + 4 + V (ln_f, its
// stats, logits, CE) + 10 C + H (backward scratch) floats, and 2 ints (tokens,
// targets). keeps_inputs (an engine that keeps the linear inputs, bf16): of
// the 16 C per layer, the linear inputs ln1, atty, ln2 and fch_act (7 C) are
// held once, so L (9 C + 4 + H) + 7 C. The model's Activations.bytes is the
// exact figure (alignment included).
static inline double bench_activation_bytes(const BenchConfig *c, int keeps_inputs) {
    double C = c->C, inputs = 7.0 * C;
    double layers = keeps_inputs ? c->L * (16.0 * C - inputs + 4 + c->H) + inputs : c->L * (16.0 * C + 4 + c->H);
    double per_token = C + layers + C + 4 + c->V + 10.0 * C + c->H;
    return (double)c->B * c->T * (4.0 * per_token + 2.0 * sizeof(int));
}

// Seconds on a monotonic clock: the program's one clock (common/clock.h).
static inline double now_s(void) { return clock_seconds(); }

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median of x (n >= 1 values); x is left as it was (NaN if out of memory).
static inline double median(const double *x, int n) {
    double *s = malloc(n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

#endif
