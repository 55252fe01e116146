// runlog.h: the run's log.csv and the progress line on stderr.
//
// log.csv has one row per step:
//   step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s
// step k is the state after k updates: train_loss, lr and grad_norm belong
// to the k-th update (its batch loss before the update), val_loss is measured
// after it (empty when not evaluated at that step). Row 0 holds only the
// validation loss of the initial weights. A resumed run keeps the rows up to
// its checkpoint and appends.
#ifndef ROPELAB_TRAIN_RUNLOG_H
#define ROPELAB_TRAIN_RUNLOG_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;
} RunLog;

// resume_step < 0: a new log (header only). Otherwise the existing log is cut
// (atomically) after the last row whose step is <= resume_step.
int runlog_open(RunLog *log, const char *path, int resume_step, char *err, size_t errlen);
// NAN for any value means "not measured" and leaves the field empty.
void runlog_row(RunLog *log, int step, float train_loss, float val_loss, float lr, float grad_norm,
                double tokens_per_s, double elapsed_s);
void runlog_close(RunLog *log);

// Progress: on a terminal one line rewritten with \r every step; otherwise a
// plain line at every evaluation; nothing when quiet.
typedef struct {
    int quiet, is_tty, steps;
    int line_open;   // a \r line is on screen and needs a newline before other output
} Progress;

void progress_init(Progress *p, int quiet, int steps);
// val_loss: the latest validation loss (NAN if none yet); evaluated: measured at this step.
void progress_update(Progress *p, int step, float train_loss, float val_loss, int evaluated,
                     double tokens_per_s, double eta_s);
// Ends the \r line (if any) so a message can follow on its own line.
void progress_break(Progress *p);

#endif
