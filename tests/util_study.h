// util_study.h: the directory the tests of the comparison scripts run in: a
// corpus of grammar lines (learnable in a few dozen steps) tokenised with a
// 300-token vocabulary into DIR/data, and DIR/quick.ini, a one-layer model
// that trains for 12 steps on it. Run from the repository root with ./prepare
// built.
#ifndef ROPELAB_TESTS_UTIL_STUDY_H
#define ROPELAB_TESTS_UTIL_STUDY_H

#include <stdio.h>
#include <unistd.h>

#include "util_shell.h"

// Fills dir (size bytes) with /tmp/ropelab_NAME_PID and makes it as above,
// with LINES lines of corpus. 0, or -1.
static inline int make_quick_study(char *dir, size_t size, const char *name, int lines) {
    snprintf(dir, size, "/tmp/ropelab_%s_%d", name, (int)getpid());
    if (run_shell("rm -rf %s && mkdir -p %s && for i in $(seq 1 %d); do echo \"psalm $((i%%7)): the $((i*5%%9)) "
                  "servants of the lord sang $((i%%4)) songs at the gate of the city.\"; done > %s/corpus.txt && "
                  "./prepare --vocab-size 300 --val-fraction 0.1 --out-dir %s/data %s/corpus.txt >/dev/null 2>&1",
                  dir, dir, lines, dir, dir, dir))
        return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/quick.ini", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "[model]\nn_layer = 1\nn_head = 2\nd_model = 16\nblock_size = 16\n"
               "[data]\ntokenizer = %s/data/tokenizer.bin\ntrain_file = %s/data/train.bin\n"
               "val_file = %s/data/val.bin\n"
               "[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 2\nbatch_size = 4\n"
               "[run]\nsteps = 12\neval_every = 4\neval_batches = 2\nsave_every = 6\nthreads = 1\n",
            dir, dir, dir);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
