// bench_memory.c: a training run's memory and the longest context that fits,
// from the program's own accounting: footprint_train (src/train/footprint.h),
// the figure ./train checks before it allocates, built on gpt_memory. No
// training and no timing: the figures are the accounting's (bench_model
// compares it with the peak RSS of real steps: `--seq-len T`).
//
//   build/bench_memory [--config S|M|L (default: M, then L)] [--mem-gib 16] [--threads N (default: all cores)]
//                      [--pos rope] [--gpt2]
//
// Per config (bench/util_bench.h: M at B 8, L at B 4, block_size = T) and
// setup (OpenBLAS fp32 blocked and fused, oneDNN fp32 blocked and fused,
// oneDNN bf16 blocked), one record:
//
//   memory config=M engine=openblas precision=fp32 attention=blocked pos=rope B=8 T=256 threads=2
//     state_mb= act_mb= engine_mb= total_mb=     the footprint at the config's T, MiB: state (parameters,
//                                                gradients, AdamW's m and v, the scheme's tables),
//                                                activations, the engine's buffers
//     token_b= token_state_b= token_act_b= token_engine_b=
//                                                what one more token of context (T + 1, at this B)
//                                                adds, bytes: the slope of the footprint between T
//                                                and 2T, and its parts
//     token_layers_b= token_logits_b= token_other_b=
//                                                of token_act_b: the L layers' saved tensors (the
//                                                accounting with L layers less the one with L - 1,
//                                                times L), the logits (B,T,V) (the same with V - 16
//                                                vocabulary entries, times V / 16), the rest
//                                                (embedding output, ln_f, cross-entropy, the
//                                                backward's one-layer scratch)
//     today_mb= longest_t_today= today_x= limit_today=
//                                                the largest T whose footprint fits in "today's
//                                                memory": the same engine and precision with the
//                                                blocked attention at the config's T (so 1.00x for
//                                                blocked by construction); today_x = longest / T;
//                                                limit: budget, or the model's refusal of T + 1
//     budget_gib= longest_t_budget= budget_x= limit_budget=
//                                                the same in a fixed budget (--mem-gib)
//     recompute_token_b= recompute_t_today= recompute_t_budget=
//                                                an estimate, not the program's: activation
//                                                recomputation keeping only each layer's input (one
//                                                (B,T,C) fp32 tensor) and one layer's saved tensors
//                                                at a time (the model's, and the engine's per layer:
//                                                bf16's kept rounded inputs), the rest as is; the
//                                                longest T then, extrapolated linearly from the
//                                                footprint at T
//
// and per config and engine with both attentions, the ratio asked for:
//
//   memory_fused config=M engine=openblas precision=fp32 longest_t_blocked_today= longest_t_fused_today=
//     ratio_today= longest_t_blocked_budget= longest_t_fused_budget= ratio_budget= budget_gib=
//
// With --gpt2, instead: GPT-2 124M's shape (12 layers, width 768, 12 heads,
// 50,257 tokens, learned positions, block_size 1024) at T = 1024, per
// program (./eval's forward passes, ./sample's KV cache of 1024 positions, a
// fine-tune step of ./train --init-from with AdamW), batch (1, 8), engine
// (OpenBLAS fp32, oneDNN fp32) and logits (whole: all B*T positions at once,
// logits_rows = B*T; chunked: the default, logits_rows = 0; ./sample decodes
// one row at a time), one record:
//
//   memory_gpt2 program=finetune engine=openblas B=8 T=1024 logits=chunked logits_rows=320
//     total_mb= state_mb= act_mb= logits_mb= engine_mb= work_mb=
//                                                the footprint, MiB (what ./train, ./eval or ./sample
//                                                checks before allocating); state: parameters, their
//                                                gradients and AdamW's moments (./train only: ./eval's and
//                                                ./sample's model has no gradients) and the position
//                                                table; act: activations (./eval's: one layer's, no
//                                                backward buffers); logits: the head's buffer
//                                                (logits_rows x V floats); work: the KV cache
//
// The longest T is a binary search over T with footprint_train (the
// footprint grows with T; a T the model refuses, gpt_check_batch's or the
// block_size limit, ends the search there).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "train/footprint.h"
#include "util_bench.h"

typedef struct { GPTMatmul matmul; GPTPrecision precision; GPTAttention attention; } Setup;
static const Setup SETUPS[] = {
    {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_BLOCKED}, {GPT_MATMUL_OPENBLAS, GPT_FP32, GPT_ATTENTION_FUSED},
    {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_BLOCKED},   {GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_FUSED},
    {GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED},
};
enum { N_SETUPS = sizeof SETUPS / sizeof SETUPS[0] };

static const char *matmul_name(GPTMatmul m) { return m == GPT_MATMUL_ONEDNN ? "onednn" : "openblas"; }
static const char *precision_name(GPTPrecision p) { return p == GPT_BF16 ? "bf16" : "fp32"; }
static const char *attention_name(GPTAttention a) { return a == GPT_ATTENTION_FUSED ? "fused" : "blocked"; }
static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

typedef struct {
    const BenchConfig *bc;   // the config whose longest T is sought
    PosKind pos;
    int threads;
} Ctx;

// footprint_train of config bc trained on windows of T tokens (block_size T) at bc->B, on setup s with
// AdamW: 0, or -1 with the model's refusal in err.
static int footprint_at(const Ctx *x, const BenchConfig *bc, int T, Setup s, Footprint *f, char *err,
                        size_t errlen) {
    BenchConfig at = *bc;
    at.T = T;
    GPTConfig cfg = bench_model_config(&at, x->pos);
    GPTWorkload w = {.matmul = s.matmul, .precision = s.precision, .attention = s.attention, .B = at.B, .T = T,
                     .n_threads = x->threads};
    return footprint_train(f, &cfg, &w, 1, err, errlen);
}

// The largest T whose footprint is at most budget bytes (0: none); why: "budget", or the model's
// refusal of the first T beyond it.
static int longest_t(const Ctx *x, Setup s, double budget, char *why, size_t whylen) {
    char err[256];
    Footprint f;
    snprintf(why, whylen, "budget");
    // fits(T): 1 fits, 0 over the budget, -1 refused (err)
    #define FITS(T) (footprint_at(x, x->bc, (T), s, &f, err, sizeof err) != 0 ? -1 : (double)f.bytes <= budget)
    int lo = 0, hi = x->bc->T, r;   // lo fits (or is 0), hi does not
    if ((r = FITS(hi)) == 1)   // doubling: the model refuses T beyond 65536 (block_size) long before 2^29
        do { lo = hi; hi *= 2; } while ((r = FITS(hi)) == 1 && hi < (1 << 29));
    int r_hi = r;
    char err_hi[256];
    snprintf(err_hi, sizeof err_hi, "%s", err);
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if ((r = FITS(mid)) == 1) lo = mid;
        else { hi = mid; r_hi = r; snprintf(err_hi, sizeof err_hi, "%s", err); }
    }
    #undef FITS
    if (r_hi < 0 && lo > 0) snprintf(why, whylen, "%s", err_hi);   // (lo 0: not even T = 2 fits)
    return lo;
}

// The footprint's growth per token of context, from T to 2T, of config bc: whole, and its parts.
typedef struct { double total, state, act, engine; } Slope;
static int slope(const Ctx *x, const BenchConfig *bc, Setup s, Slope *out) {
    char err[256];
    Footprint a, b;
    int T = bc->T;
    if (footprint_at(x, bc, T, s, &a, err, sizeof err) != 0 || footprint_at(x, bc, 2 * T, s, &b, err, sizeof err) != 0) {
        fprintf(stderr, "bench_memory: config %s: %s\n", bc->name, err);
        return -1;
    }
    out->total = ((double)b.bytes - a.bytes) / T;
    out->act = ((double)b.model.activations - a.model.activations) / T;
    out->engine = ((double)b.model.engine - a.model.engine) / T;
    out->state = out->total - out->act - out->engine;
    return 0;
}

// The record's value of a limit: budget, or the refusal double-quoted (bench_report.py splits like a shell).
static void print_limit(const char *key, const char *why) {
    printf(" %s=\"", key);
    for (const char *p = why; *p; p++) printf(p[0] == '"' || p[0] == '\\' ? "\\%c" : "%c", *p);
    printf("\"");
}

static int bench_config(const BenchConfig *bc, PosKind pos, int threads, double budget_gib) {
    Ctx x = {bc, pos, threads};
    double budget = budget_gib * 1024.0 * 1024.0 * 1024.0;
    int T = bc->T;
    int longest_today[N_SETUPS], longest_budget[N_SETUPS];
    for (int i = 0; i < N_SETUPS; i++) {
        Setup s = SETUPS[i];
        Setup today_setup = {s.matmul, s.precision, GPT_ATTENTION_BLOCKED};
        char err[256], why_today[256], why_budget[256];
        Footprint f, today;
        Slope sl, sl_l, sl_v;
        if (footprint_at(&x, bc, T, s, &f, err, sizeof err) != 0 ||
            footprint_at(&x, bc, T, today_setup, &today, err, sizeof err) != 0) {
            fprintf(stderr, "bench_memory: config %s: %s\n", bc->name, err);
            return 1;
        }
        BenchConfig less_l = *bc, less_v = *bc;   // one layer less; 16 vocabulary entries less
        less_l.L--;
        less_v.V -= 16;
        if (slope(&x, bc, s, &sl) != 0 || slope(&x, &less_l, s, &sl_l) != 0 || slope(&x, &less_v, s, &sl_v) != 0)
            return 1;
        double layers = bc->L * (sl.act - sl_l.act), logits = bc->V / 16.0 * (sl.act - sl_v.act);
        double layers_engine = bc->L * (sl.engine - sl_l.engine);   // bf16: the kept rounded inputs
        double state = (double)f.bytes - f.model.activations - f.model.engine;
        longest_today[i] = longest_t(&x, s, (double)today.bytes, why_today, sizeof why_today);
        longest_budget[i] = longest_t(&x, s, budget, why_budget, sizeof why_budget);
        // recomputation: per layer only its input, B C floats a token of context, and one layer's set
        // (the model's and the engine's)
        double per_layer = layers + layers_engine;
        double recompute = sl.total - per_layer + bc->L * 4.0 * bc->B * bc->C + per_layer / bc->L;
        double fixed = (double)f.bytes - T * sl.total;   // what does not grow with T
        printf("memory config=%s engine=%s precision=%s attention=%s pos=%s B=%d T=%d threads=%d "
               "state_mb=%.1f act_mb=%.1f engine_mb=%.1f total_mb=%.1f "
               "token_b=%.0f token_state_b=%.0f token_act_b=%.0f token_engine_b=%.0f "
               "token_layers_b=%.0f token_logits_b=%.0f token_other_b=%.0f "
               "today_mb=%.1f longest_t_today=%d today_x=%.2f",
               bc->name, matmul_name(s.matmul), precision_name(s.precision), attention_name(s.attention),
               pos_kind_name(pos), bc->B, T, threads, mib(state), mib(f.model.activations), mib(f.model.engine),
               mib(f.bytes), sl.total, sl.state, sl.act, sl.engine, layers, logits, sl.act - layers - logits,
               mib(today.bytes), longest_today[i], (double)longest_today[i] / T);
        print_limit("limit_today", why_today);
        printf(" budget_gib=%g longest_t_budget=%d budget_x=%.2f", budget_gib, longest_budget[i],
               (double)longest_budget[i] / T);
        print_limit("limit_budget", why_budget);
        printf(" recompute_token_b=%.0f recompute_t_today=%.0f recompute_t_budget=%.0f\n", recompute,
               fmax(0.0, floor(((double)today.bytes - fixed) / recompute)), fmax(0.0, floor((budget - fixed) / recompute)));
    }
    for (int i = 0; i < N_SETUPS; i++) {   // each fused setup against the blocked one of its engine
        if (SETUPS[i].attention != GPT_ATTENTION_FUSED) continue;
        int b = -1;
        for (int j = 0; j < N_SETUPS; j++)
            if (SETUPS[j].attention == GPT_ATTENTION_BLOCKED && SETUPS[j].matmul == SETUPS[i].matmul &&
                SETUPS[j].precision == SETUPS[i].precision)
                b = j;
        if (b < 0) continue;
        printf("memory_fused config=%s engine=%s precision=%s B=%d T=%d threads=%d longest_t_blocked_today=%d "
               "longest_t_fused_today=%d ratio_today=%.3f budget_gib=%g longest_t_blocked_budget=%d "
               "longest_t_fused_budget=%d ratio_budget=%.3f\n",
               bc->name, matmul_name(SETUPS[i].matmul), precision_name(SETUPS[i].precision), bc->B, T, threads,
               longest_today[b], longest_today[i], (double)longest_today[i] / longest_today[b], budget_gib,
               longest_budget[b], longest_budget[i], (double)longest_budget[i] / longest_budget[b]);
    }
    fflush(stdout);
    return 0;
}

// GPT-2 124M's shape at T = 1024 (see the top): the records for one program.
static int bench_gpt2(int threads) {
    static const GPTMatmul engines[] = {GPT_MATMUL_OPENBLAS, GPT_MATMUL_ONEDNN};
    static const char *const programs[] = {"eval", "sample", "finetune"};
    const int T = 1024;
    GPTConfig cfg = {.n_layer = 12, .n_head = 12, .d_model = 768, .vocab_size = 50257, .block_size = T,
                     .pos = POS_LEARNED};
    gc_config_defaults(&cfg);
    cfg.pos = POS_LEARNED;
    printf("# memory_gpt2: GPT-2 124M's shape (L 12, C 768, H 12, V 50257, learned, block_size %d), threads=%d\n",
           T, threads);
    for (int p = 0; p < 3; p++)
        for (int e = 0; e < 2; e++)
            for (int B = 1; B <= 8; B += 7)
                for (int chunked = 1; chunked >= 0; chunked--) {
                    if (p == 1 && (B > 1 || !chunked)) continue;   // ./sample: one row at a time, no batch
                    GPTWorkload w = {.matmul = engines[e], .precision = GPT_FP32, .attention = GPT_ATTENTION_BLOCKED,
                                     .B = p == 1 ? 0 : B, .T = T, .n_threads = threads,
                                     .logits_rows = chunked ? 0 : B * T};
                    Footprint f;
                    char err[256];
                    int rc = p == 0 ? footprint_eval(&f, &cfg, &w, err, sizeof err)
                           : p == 1 ? footprint_sample(&f, &cfg, &w, T, err, sizeof err)
                                    : footprint_train(&f, &cfg, &w, 1, err, sizeof err);
                    if (rc != 0) {
                        fprintf(stderr, "bench_memory: GPT-2 %s: %s\n", programs[p], err);
                        return 1;
                    }
                    // the logits' rows: what the accounting chose (the activations with V - 16 entries less
                    // tell the logits' share: rows x 16 floats)
                    GPTConfig less = cfg;
                    less.vocab_size -= 16;
                    Footprint g;
                    int rows = 1;
                    if (p != 1) {
                        rc = p == 0 ? footprint_eval(&g, &less, &w, err, sizeof err)
                                    : footprint_train(&g, &less, &w, 1, err, sizeof err);
                        if (rc != 0) { fprintf(stderr, "bench_memory: GPT-2 %s: %s\n", programs[p], err); return 1; }
                        rows = (int)((f.model.activations - g.model.activations) / (16 * sizeof(float)));
                    }
                    double state = (double)f.model.params + f.model.grads + f.model.pos_tables + f.adamw;
                    printf("memory_gpt2 program=%s engine=%s B=%d T=%d logits=%s logits_rows=%d total_mb=%.1f "
                           "state_mb=%.1f act_mb=%.1f logits_mb=%.1f engine_mb=%.1f work_mb=%.1f\n",
                           programs[p], matmul_name(engines[e]), p == 1 ? 1 : B, T,
                           p == 1 ? "one-row" : chunked ? "chunked" : "whole",
                           rows, mib(f.bytes), mib(state), mib(f.model.activations),
                           mib((double)rows * cfg.vocab_size * sizeof(float)), mib(f.model.engine), mib(f.work));
                }
    fflush(stdout);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: bench_memory [--config S|M|L (default: M, then L)] [--mem-gib 16] "
                    "[--threads N (default: all cores)] [--pos rope] [--gpt2]\n");
}

int main(int argc, char **argv) {
    const char *config = NULL, *pos_name = "rope";
    double mem_gib = 16.0;
    int threads = 0, gpt2 = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--config")) { config = v; i++; }
        else if (v && !strcmp(a, "--mem-gib")) { mem_gib = atof(v); i++; }
        else if (v && !strcmp(a, "--threads")) { threads = atoi(v); i++; }
        else if (v && !strcmp(a, "--pos")) { pos_name = v; i++; }
        else if (!strcmp(a, "--gpt2")) gpt2 = 1;
        else { usage(); return 2; }
    }
    const BenchConfig *one = config ? bench_config_named(config) : NULL;
    PosKind pos;
    if ((config && !one) || !(mem_gib > 0) || threads < 0 || pos_kind_from_name(pos_name, &pos) != 0) {
        usage();
        return 2;
    }
    if (threads == 0) threads = omp_get_num_procs();   // the engines' scratch is per thread
    if (gpt2) return bench_gpt2(threads);
    printf("# memory: footprint_train (src/train/footprint.h) of a training run, threads=%d, budget %g GiB\n",
           threads, mem_gib);
    if (one) return bench_config(one, pos, threads, mem_gib);
    return bench_config(bench_config_named("M"), pos, threads, mem_gib) |
           bench_config(bench_config_named("L"), pos, threads, mem_gib);
}
