// matmul_auto.c: matmul = auto in fp32, measured (matmul_auto.h).
#include "train/matmul_auto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "train/options.h"

// Rounds after the warm-ups: the shared machines measured drift by 10-25%
// over minutes and single passes scatter by about 10% (PERFORMANCE.md), so
// each engine's fastest of a few passes, alternated so that both see the
// same drift. On a 2-core machine shared with a 2-thread job, 3 rounds chose
// the slower engine for configs/small.ini (1.6x apart) in 1 of 5 starts, 5
// rounds in none of 5. The trial is 2 x (1 + TRIAL_ROUNDS) passes, about 6
// training steps.
#define TRIAL_ROUNDS 5

int matmul_auto_chooses(const char *matmul, const char *precision, int reproducible) {
    return strcmp(matmul, "auto") == 0 && strcmp(precision, "fp32") == 0 && !reproducible;
}

int matmul_auto_can_measure(void) {
    GPTEngine *e;
    char err[256];
    if (gpt_engine_make(GPT_MATMUL_ONEDNN, GPT_FP32, GPT_ATTENTION_BLOCKED, &e, err, sizeof err) != 0) return 0;
    gpt_engine_free(e);
    return 1;
}

// One forward and backward of the trial's batch; its wall time in *seconds.
static int timed_pass(GPT *m, const int *inputs, const int *targets, int B, int T, double *seconds, char *err,
                      size_t errlen) {
    double t0 = clock_seconds();
    float loss;
    if (gpt_forward(m, inputs, targets, B, T, &loss, err, errlen) != 0 || gpt_backward(m, 1.0f, err, errlen) != 0)
        return -1;
    *seconds = clock_seconds() - t0;
    return 0;
}

int matmul_auto_time(GPT *m, GPTAttention attention, int B, int T, double ms[2], char *err, size_t errlen) {
    const size_t BT = (size_t)B * T, V = (size_t)gpt_config(m)->vocab_size;
    int *inputs = malloc(2 * BT * sizeof(int)), *targets = inputs ? inputs + BT : NULL;
    GPTEngine *spare = NULL;   // the engine not running the model: oneDNN, then each in turn
    int rc = -1;
    if (!inputs) {
        snprintf(err, errlen, "out of memory for matmul = auto's trial batch");
        return -1;
    }
    // Any tokens do: an engine's time does not depend on the values. A
    // multiplicative hash spreads them over the vocabulary as text would.
    for (size_t i = 0; i < BT; i++) {
        inputs[i] = (int)(i * 2654435761u % V);
        targets[i] = (int)((i + 1) * 2654435761u % V);
    }
    ms[GPT_MATMUL_OPENBLAS] = ms[GPT_MATMUL_ONEDNN] = INFINITY;
    if (gpt_set_matmul(m, GPT_MATMUL_OPENBLAS, GPT_FP32, attention, err, errlen) != 0 ||
        gpt_engine_make(GPT_MATMUL_ONEDNN, GPT_FP32, attention, &spare, err, errlen) != 0)
        goto done;
    // Passes 0 and 1 warm OpenBLAS and oneDNN up; then A B A B ...: pass i
    // runs on OpenBLAS when i is even, oneDNN when odd, swapped in before it.
    for (int i = 0; i < 2 * (1 + TRIAL_ROUNDS); i++) {
        GPTMatmul on = i % 2 ? GPT_MATMUL_ONEDNN : GPT_MATMUL_OPENBLAS;
        double s;
        if ((i > 0 && gpt_engine_swap(m, &spare, err, errlen) != 0) ||
            timed_pass(m, inputs, targets, B, T, &s, err, errlen) != 0)
            goto done;
        if (i >= 2 && 1e3 * s < ms[on]) ms[on] = 1e3 * s;
    }
    rc = 0;
done:
    free(inputs);
    gpt_engine_free(spare);
    // No trace in the run: the parameters were only read, the gradients go
    // back to zero, and the engines go (their scratch and primitives; the
    // caller makes the chosen one afresh). The activations hold the last
    // pass's values, as after any training step: no pass reads one it has
    // not written (a resume, which starts from zeroed ones, is exact).
    if (gpt_set_matmul(m, GPT_MATMUL_OPENBLAS, GPT_FP32, attention, err, errlen) != 0) rc = -1;
    gpt_zero_grad(m);
    return rc;
}

GPTMatmul matmul_auto_pick(const double ms[2], int hooked, char *line, size_t n) {
    GPTMatmul pick = ms[GPT_MATMUL_ONEDNN] < ms[GPT_MATMUL_OPENBLAS] ? GPT_MATMUL_ONEDNN : GPT_MATMUL_OPENBLAS;
    GPTMatmul other = pick == GPT_MATMUL_ONEDNN ? GPT_MATMUL_OPENBLAS : GPT_MATMUL_ONEDNN;
    snprintf(line, n, "matmul = auto: %s fp32 (measured per forward+backward: %s %.2f ms, %s %.2f ms%s)",
             options_matmul_name(pick), options_matmul_name(pick), ms[pick], options_matmul_name(other), ms[other],
             hooked ? ", as the test hook says" : "");
    return pick;
}
