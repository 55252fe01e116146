// model_overrides.h: the length keys of a trained model given on the command
// line of ./eval, ./sample and ./export (--rope_scaling=yarn --rope_scaling_factor=4
// ...): the model's table says which keys those are (ModelKey.length_key),
// so a new one needs no change here.
#ifndef ROPELAB_TRAIN_MODEL_OVERRIDES_H
#define ROPELAB_TRAIN_MODEL_OVERRIDES_H

#include <stddef.h>
#include <stdio.h>

#include "model/gpt.h"

#define MODEL_OVERRIDES_MAX 16
typedef struct {
    int n;
    int key[MODEL_OVERRIDES_MAX];           // index in the model-key table
    const char *value[MODEL_OVERRIDES_MAX];  // points into argv
} ModelOverrides;

// Takes every --KEY=VALUE (or --KEY VALUE; '-' may stand for '_') whose KEY is
// a length key other than block_size out of argv (argc shrinks), checking
// each value with the table. 0, or -1 with "--KEY: problem".
int model_overrides_take(int *argc, char **argv, ModelOverrides *o, char *err, size_t errlen);
// The same for a program's main: on error prints "prog: message" and exits 2.
void model_overrides_take_or_exit(const char *prog, int *argc, char **argv, ModelOverrides *o);
// Applies them to a loaded model (gpt_reconfigure). 0, or -1 with a message.
int model_overrides_apply(GPT *model, const ModelOverrides *o, char *err, size_t errlen);
// Usage lines listing the keys, for --help.
void model_overrides_usage(FILE *out);

#endif
