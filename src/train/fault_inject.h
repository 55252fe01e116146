// fault_inject.h: the test build's fault injection for ./train, in one place.
//
// The tests of ./train need failures on cue: a crash in the middle of a
// save, a log write that fails, a Ctrl-C at a given step, ranks whose weights
// drift apart. Each hook below is set by an environment variable. They exist
// only in the test build of ./train, build/test-programs/train (the Makefile
// compiles the files that include this header again with
// -DROPELAB_FAULT_INJECTION; tests/util_run.h: TRAIN_WITH_FAULTS). In every
// other build the hooks are static inline no-ops returning constants, which
// the compiler removes with the code they guard: the shipped ./train reads no
// ROPELAB_TEST_* variable and holds none of their names
// (tests/test_train_hardening.c checks its bytes).
//
// Include from .c files only (the Makefile finds the files to compile again
// by grepping the sources for this include).
#ifndef ROPELAB_TRAIN_FAULT_INJECT_H
#define ROPELAB_TRAIN_FAULT_INJECT_H

#include "model/gpt.h"
#include "format/safetensors.h"
#include "format/weights_file.h"

#ifdef ROPELAB_FAULT_INJECTION

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ROPELAB_TEST_LOG_FAIL="A-B" (tests/test_train_hardening.c, log.csv rows
// never lost nor doubled): every write of the log queue fails while the
// newest row's step is in A..B, after writing half of the bytes, as a disk
// that fills up mid-row would. Returns whether the write of the queue whose
// newest row is last_step must fail (runlog.c writes the half and sets ENOSPC).
static inline int fault_log_write_fails(int last_step) {
    const char *hook = getenv("ROPELAB_TEST_LOG_FAIL");
    int a, b;
    return hook && sscanf(hook, "%d-%d", &a, &b) == 2 && last_step >= a && last_step <= b;
}

// ROPELAB_TEST_CRASH_IN_SAVE=K (tests/test_train_run.c, test_train_mpi.c and
// test_train_hardening.c: a kill in the middle of a save loses nothing): the
// process dies in the middle of writing the checkpoint of step K, as a kill
// would: half of a temporary PATH.tmp.crash0 is on disk, PATH itself is
// untouched. The arguments are checkpoint_save's for gpt_save_with.
static inline void fault_crash_in_save(const char *path, int step, GPT *model, const StTensorOut *t, int n,
                                       const StMeta *meta, int n_meta) {
    const char *hook = getenv("ROPELAB_TEST_CRASH_IN_SAVE");
    if (!hook || atoi(hook) != step) return;
    char full[1200], tmp[1200], err[256];
    snprintf(full, sizeof full, "%s.crashtest", path);
    snprintf(tmp, sizeof tmp, "%s.tmp.crash0", path);
    if (gpt_save_with(model, full, t, n, meta, n_meta, ATOMIC_REPLACE, err, sizeof err) == 0) {
        FILE *in = fopen(full, "rb"), *out = fopen(tmp, "wb");
        if (in && out) {
            fseek(in, 0, SEEK_END);
            long half = ftell(in) / 2;
            fseek(in, 0, SEEK_SET);
            for (long i = 0; i < half; i++) fputc(fgetc(in), out);
        }
        if (in) fclose(in);
        if (out) fclose(out);
        remove(full);
    }
    fprintf(stderr, "ROPELAB_TEST_CRASH_IN_SAVE: dying while writing %s\n", tmp);
    _exit(1);
}

// ROPELAB_TEST_CRASH_BETWEEN_SAVES=K (tests/test_train_hardening.c: a kill
// between the checkpoint and the model leaves nothing stale after --resume):
// train_loop.c's save() of step K dies after the checkpoint is written and
// before model.safetensors is, as a kill at that moment would.
static inline void fault_crash_between_saves(int step) {
    const char *hook = getenv("ROPELAB_TEST_CRASH_BETWEEN_SAVES");
    if (!hook || atoi(hook) != step) return;
    fprintf(stderr, "ROPELAB_TEST_CRASH_BETWEEN_SAVES: dying after the checkpoint of step %d\n", step);
    _exit(1);
}

// ROPELAB_TEST_SIGINT_AT_STEP=k (tests/test_train_run.c, test_train_hardening.c,
// test_train_bf16.c, test_train_mpi.c): train_loop.c raises SIGINT after step k,
// exactly as a Ctrl-C during that step would. With several processes only the
// last rank gets it (test_train_mpi.c: the ranks must agree to stop).
// Returns k, or -1 (never).
static inline int fault_sigint_step(void) {
    const char *s = getenv("ROPELAB_TEST_SIGINT_AT_STEP");
    return s ? atoi(s) : -1;
}

// ROPELAB_TEST_PERTURB_AT_STEP=k (tests/test_train_mpi.c): train_loop.c adds 1
// to the first weight on the last rank after step k (with several processes
// only), so the check of identical weights must stop the run. Both ranks then
// apply the same averaged update to weights 1 apart: weight decay shrinks the
// gap by a factor (1 - lr wd) per step and rounding moves it by ulps, so it
// cannot vanish before the next check, whatever kernels compute the products
// (a one-ulp flip can round away). Returns k, or -1 (never).
static inline int fault_perturb_step(void) {
    const char *s = getenv("ROPELAB_TEST_PERTURB_AT_STEP");
    return s ? atoi(s) : -1;
}

// ROPELAB_TEST_AUTO_ISA=avx512|avx2 (tests/test_train_run.c): answers
// matmul = auto's one question, whether oneDNN runs AVX-512 kernels, in the
// CPU's place (cpu_answer), so that both sides of the rule run on any
// machine. 1 or 0; -1 for another value; *hooked = 1 when the hook answered.
static inline int fault_auto_has_avx512(int cpu_answer, int *hooked) {
    const char *isa = getenv("ROPELAB_TEST_AUTO_ISA");
    *hooked = isa && isa[0];
    if (!*hooked) return cpu_answer;
    return strcmp(isa, "avx512") == 0 ? 1 : strcmp(isa, "avx2") == 0 ? 0 : -1;
}

// ROPELAB_TEST_AUTO_MS="openblas=A,onednn=B" (tests/test_train_run.c,
// test_train_mpi.c): the times matmul = auto's trial measured
// (matmul_auto_time, ms per forward+backward) are replaced by A and B after
// the trial ran for real, so that either choice is made on any machine and a
// trial that left a trace in the run would show. swap (trainer.c: the last of
// several processes) exchanges the two, so that its own times would choose the
// other engine and only rank 0's, shared, keep the processes on one.
// 1 when the hook answered, -1 for another form, 0 when unset.
static inline int fault_auto_ms(double ms[2], int swap) {
    const char *hook = getenv("ROPELAB_TEST_AUTO_MS");
    double a, b;
    if (!hook || !hook[0]) return 0;
    if (sscanf(hook, "openblas=%lf,onednn=%lf", &a, &b) != 2) return -1;
    ms[GPT_MATMUL_OPENBLAS] = swap ? b : a;
    ms[GPT_MATMUL_ONEDNN] = swap ? a : b;
    return 1;
}

#else  // the shipped programs: no hook, nothing read, nothing compiled in

static inline int fault_log_write_fails(int last_step) { return 0; }
static inline void fault_crash_in_save(const char *path, int step, GPT *model, const StTensorOut *t, int n,
                                       const StMeta *meta, int n_meta) {}
static inline void fault_crash_between_saves(int step) {}
static inline int fault_sigint_step(void) { return -1; }
static inline int fault_perturb_step(void) { return -1; }
static inline int fault_auto_has_avx512(int cpu_answer, int *hooked) { *hooked = 0; return cpu_answer; }
static inline int fault_auto_ms(double ms[2], int swap) { return 0; }

#endif
#endif
