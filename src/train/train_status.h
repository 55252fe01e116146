// train_status.h: ./train's exit statuses, also what a run's steps return
// (trainer.c, train_loop.c):
//   0   finished (or --debug-state written)
//   1   an input or output problem (missing or bad tokenizer/token file, disk full, ...)
//   2   a bad configuration (reported before any work starts)
//   3   the loss, validation loss or gradient norm became NaN or Inf; the last
//       checkpoint on disk is the last good one
//   4   several processes (mpirun): the ranks' weights differ (dist.h)
//   130 / 143 / 138  stopped by SIGINT / SIGTERM / SIGUSR1 (mpirun's clean stop)
//       after saving a checkpoint at the end of the current step (continue with
//       --resume RUN_DIR)
#ifndef ROPELAB_TRAIN_STATUS_H
#define ROPELAB_TRAIN_STATUS_H

enum { TRAIN_OK = 0, TRAIN_EIO = 1, TRAIN_ECONFIG = 2, TRAIN_EDIVERGED = 3 };

#endif
