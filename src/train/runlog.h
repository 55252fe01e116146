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
#include <sys/types.h>

#include "common/meter.h"

//
// Writing: a row goes to an in-memory queue, and every call writes the whole
// queue at the end of the last row known to be whole on disk (truncating
// any half-written row first). A failed write (disk full, I/O error) keeps
// the rows queued and is retried at the next row, so a passing failure
// leaves no gap and no spliced line; runlog_flush says whether rows are
// still only in memory, and the trainer saves no checkpoint newer than the log.

typedef struct {
    int fd;
    off_t good_size;             // bytes of whole rows on disk
    char *queue;                 // rows not yet on disk
    size_t queue_len, queue_cap;
    int n_queued, first_queued;  // how many, and the step of the first
    int last_step;               // step of the last row handed in (-1: none)
    char path[1024];
} RunLog;

// resume_step < 0: a new log (header only). Otherwise the existing log is cut
// (atomically) after the row of resume_step, and must hold every row 0..resume_step.
int runlog_open(RunLog *log, const char *path, int resume_step, char *err, size_t errlen);
// NAN for any value means "not measured" and leaves the field empty. Queues
// the row and writes the queue: 0 when every row is on disk, -1 (err says
// why) when rows remain queued for the next try.
int runlog_row(RunLog *log, int step, float train_loss, float val_loss, float lr, float grad_norm,
               double tokens_per_s, double elapsed_s, char *err, size_t errlen);
// Tries to write the queue again (0: nothing left queued).
int runlog_flush(RunLog *log, char *err, size_t errlen);
// Closes the file; rows still queued are lost (the caller reports them).
void runlog_close(RunLog *log);

// Progress: "step 120/600 | loss 3.4521 | val 3.5012 | 3100 tok/s | ETA 1m32s"
// (val: the latest validation loss) on the programs' progress meter
// (common/meter.h): on a terminal one line rewritten in place (at most 4 times
// a second, and at every evaluation); otherwise a plain line at every
// evaluation; nothing when quiet.
typedef struct {
    Meter meter;
    int steps;
} Progress;

void progress_init(Progress *p, int quiet, int steps);
// val_loss: the latest validation loss (NAN if none yet); evaluated: measured at this step.
void progress_update(Progress *p, int step, float train_loss, float val_loss, int evaluated,
                     double tokens_per_s, double eta_s);
// Ends the \r line (if any), left on screen, so a message can follow on its own line.
void progress_break(Progress *p);

#endif
