// matmul_auto.h: matmul = auto in fp32, measured. Which of OpenBLAS and
// oneDNN fp32 trains a model faster depends on the CPU and on the model's
// shapes (on an AMX Xeon oneDNN won on M and lost on L: docs/PERFORMANCE.md),
// so no rule on the CPU alone is right everywhere. ./train times the run's own
// model on both before step 0 and keeps the faster for the run's life (its
// checkpoint records it: a resume measures nothing); build/bench_model
// --auto reports the same trial for a config's shapes.
//
// Where there is one candidate nothing is measured: bf16 runs only on oneDNN,
// the reproducible mode only on OpenBLAS, a named engine is itself, and
// where oneDNN fp32 cannot run OpenBLAS is left (options_engine's rule then
// answers, as it does for ./eval and ./sample).
#ifndef ROPELAB_TRAIN_MATMUL_AUTO_H
#define ROPELAB_TRAIN_MATMUL_AUTO_H

#include <stddef.h>

#include "model/gpt.h"

// Whether these keys leave matmul = auto an engine to choose: matmul auto,
// precision fp32, reproducible 0.
int matmul_auto_chooses(const char *matmul, const char *precision, int reproducible);
// Whether both candidates run here (a oneDNN fp32 engine can be made).
int matmul_auto_can_measure(void);

// The trial: forward and backward of the model on one fixed batch of B x T
// tokens (not the data's: no loader or random stream is used), on OpenBLAS
// and on oneDNN fp32 with the attention given, at the current thread count.
// One pass each to warm up (scratch, oneDNN's primitives), then rounds that
// alternate the two, each engine's fastest pass kept: ms[GPT_MATMUL_OPENBLAS]
// and ms[GPT_MATMUL_ONEDNN], in milliseconds. The two engines are held at
// once (footprint_train_auto counts them). The model must have gradients and
// activations for (B, T); its parameters are only read, its gradients left
// zero, its activations as a training step leaves them, its engine a fresh
// OpenBLAS one: the caller sets the engine chosen (gpt_set_matmul). 0, or -1
// with a message.
int matmul_auto_time(GPT *model, GPTAttention attention, int B, int T, double ms[2], char *err, size_t errlen);

// The faster of the trial's two (OpenBLAS on a tie), and the line that says
// so, for the start line and machine.txt: "matmul = auto: onednn fp32
// (measured per forward+backward: onednn 41.20 ms, openblas 47.90 ms)";
// hooked: the times came from the test build's hook, which the line then says.
GPTMatmul matmul_auto_pick(const double ms[2], int hooked, char *line, size_t n);

#endif
