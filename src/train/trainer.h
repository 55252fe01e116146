// trainer.h: a whole training run (and the --debug-state pass), as ./train
// runs it. train_run returns ./train's exit status (train_status.h).
#ifndef ROPELAB_TRAIN_TRAINER_H
#define ROPELAB_TRAIN_TRAINER_H

#include "train/options.h"
#include "train/train_status.h"

int train_run(const TrainOptions *opt, const TrainArgs *args);

#endif
