// footprint.h: what each program needs in memory, worked out from its
// configuration before its first large allocation, and checked there
// against what this machine, the process's cgroup and ulimit -v leave
// (common/memory.h): the one check of a program's whole need (./train,
// ./eval, ./sample, ./export), made before anything large exists. The
// allocations themselves check again, each its own part alone (mem_check in
// params.c: parameters and gradients; gpt.c: the activations; adamw.c: the
// moments), re-reading the limits each time, so a caller that skipped this
// check is still refused before the allocation. Each figure is the sum of the bytes the program's allocations
// will take, from the functions those allocations size themselves with
// (gpt_memory, kv_cache_bytes, gguf_model_bytes, hf_model_bytes, adamw_bytes), so the
// estimate cannot drift from them. Weights files and checkpoints are read
// tensor by tensor into buffers counted here (weights_file.h), and a Hugging
// Face directory through one buffer of 256 KiB (format/hf_read.h), so
// reading one adds nothing. A buffer freed
// before another is allocated counts as the larger of the two (the peak),
// not as their sum. Not counted: the program itself and its libraries
// (already in use when the check is made, so already out of what is left),
// oneDNN's own scratchpads and primitives, and buffers below a megabyte or
// so (the tokenizer, the parameter table, a sampler's V floats).
#ifndef ROPELAB_TRAIN_FOOTPRINT_H
#define ROPELAB_TRAIN_FOOTPRINT_H

#include <stddef.h>

#include "model/gpt.h"

typedef struct {
    size_t bytes;      // the peak: what must fit
    GPTMemory model;   // the model's buffers (gpt_memory)
    size_t adamw;      // ./train: AdamW's moments
    size_t work;       // ./sample's KV cache, ./export's tensors
    char what[256];    // what needs it, for the message: "the model's N parameters, ..."
} Footprint;

// ./train: the model, its gradients, activations for w's batches and the
// engine's buffers (w->backward is taken as 1), and (with_adamw; not for
// --debug-state) AdamW's moments.
int footprint_train(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, int with_adamw, char *err,
                    size_t errlen);
// ./train with matmul = auto measured (matmul_auto.h), its engine not known
// yet: footprint_train's for whichever of OpenBLAS and oneDNN fp32 needs more,
// or, where larger, the trial's: both engines held at once, before AdamW's
// moments exist.
int footprint_train_auto(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, char *err, size_t errlen);
// ./eval: the model loaded from a weights file (its configuration from
// gpt_load_probe), then activations and the engine for w's forward passes.
int footprint_eval(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, char *err, size_t errlen);
// ./sample: the model loaded on w's engine (no batch), then a KV cache of max_len positions.
int footprint_sample(Footprint *f, const GPTConfig *cfg, const GPTWorkload *w, int max_len, char *err,
                     size_t errlen);
// ./export: the model loaded, then the tensors the export makes for
// context_length (0: block_size): rope's permuted c_attn, the position table.
int footprint_export(Footprint *f, const GPTConfig *cfg, int context_length, char *err, size_t errlen);
// ./export --format hf: the model loaded, then its transposed or permuted tensors.
int footprint_export_hf(Footprint *f, const GPTConfig *cfg, char *err, size_t errlen);

// f->bytes against the limits (mem_check_processes: `processes` such
// processes on this machine, the ranks of an MPI run). 0, or -1 with the
// one-line refusal in err.
int footprint_check(const Footprint *f, int processes, char *err, size_t errlen);

#endif
