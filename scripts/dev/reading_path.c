// reading_path.c: the driver of `make reading-path` (scripts/dev/reading_path.py
// prints its table). It builds the default model (configs/small.ini), runs one
// training step on each engine asked for (reference, openblas, onednn), and,
// during a second step, records
// every function the forward, the loss and the backward enter, in the order
// they are first entered: the library is compiled for it with
// -finstrument-functions, which calls __cyg_profile_func_enter on every
// function entry (inlined ones included). The first step is not traced: an
// engine sizes its scratch there, once, and the path is the step as it
// repeats. Output, per engine: "engine NAME AUTO DESCRIPTION" (AUTO: 1 if
// matmul = auto picks it on this CPU) then one line per function, its address
// (resolved by the script with addr2line).
//
//   build/reading-path/reading_path [reference|openblas|onednn ...]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt.h"
#include "train/options.h"

#define MAX_FUNCTIONS 4096
static void *entered[MAX_FUNCTIONS];
static int n_entered, tracing, lock;

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    if (!__atomic_load_n(&tracing, __ATOMIC_RELAXED)) return;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {}   // OpenMP's threads enter functions too
    int seen = 0;
    for (int i = 0; i < n_entered && !seen; i++) seen = entered[i] == fn;
    if (!seen && n_entered < MAX_FUNCTIONS) entered[n_entered++] = fn;
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site) { (void)fn; (void)site; }

static int step(GPT *m, const int *tokens, const int *targets, int B, int T) {
    char err[512];
    float loss;
    if (gpt_forward(m, tokens, targets, B, T, &loss, err, sizeof err) != 0 ||
        gpt_backward(m, 1.0f, err, sizeof err) != 0) {
        fprintf(stderr, "reading_path: %s\n", err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    TrainOptions opt;
    GPTConfig cfg;
    char err[1024];
    options_defaults(&opt);
    if (options_load_file(&opt, "configs/small.ini", err, sizeof err) != 0 ||
        options_model_config(&opt, 2048, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "reading_path: %s\n", err);
        return 1;
    }
    const int B = 2, T = opt.model.block_size;   // the path does not depend on the batch's size
    int *tokens = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
    for (int i = 0; i < B * T; i++) tokens[i] = (i * 7919) % 2048, targets[i] = (i * 104729 + 1) % 2048;
    for (int a = 1; a < argc; a++) {
        GPTMatmul matmul;
        GPTPrecision precision;
        const char *choice;
        GPT *m;
        if (options_engine(argv[a], "fp32", 0, &matmul, &precision, &choice, err, sizeof err) != 0 ||
            gpt_create(&m, &cfg, 1, err, sizeof err) != 0 ||
            gpt_set_matmul(m, matmul, precision, GPT_ATTENTION_BLOCKED, err, sizeof err) != 0 ||
            gpt_alloc_activations(m, B, T, err, sizeof err) != 0) {
            fprintf(stderr, "reading_path: %s\n", err);
            return 1;
        }
        if (step(m, tokens, targets, B, T) != 0) return 1;
        gpt_zero_grad(m);   // (the optimizer's business, not the passes')
        n_entered = 0;
        tracing = 1;
        int rc = step(m, tokens, targets, B, T);
        tracing = 0;
        if (rc != 0) return 1;
        GPTMatmul auto_matmul;
        options_engine("auto", "fp32", 0, &auto_matmul, &precision, NULL, err, sizeof err);
        printf("engine %s %d %s\n", argv[a], auto_matmul == matmul, gpt_matmul_describe(m));
        for (int i = 0; i < n_entered; i++) printf("%p\n", entered[i]);
        gpt_free(m);
    }
    free(tokens);
    free(targets);
    return 0;
}
