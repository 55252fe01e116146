// train_loop.h: the state of a training run (Trainer), which trainer.c sets
// up (data, model, run directory) and train_loop.c trains: the loop and
// --debug-state's one pass. Internal to src/train/; ./train calls train_run
// (trainer.h).
#ifndef ROPELAB_TRAIN_LOOP_H
#define ROPELAB_TRAIN_LOOP_H

#include "data/data_record.h"
#include "data/loader.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/options.h"
#include "train/runlog.h"

typedef struct {
    const TrainOptions *opt;
    const TrainArgs *args;
    int vocab_size;
    GPT *model;
    DataLoader train, val;
    int train_open, val_open;
    AdamW adamw;
    RunLog log;
    int log_open;
    int lock_fd;                     // flock'ed RUN_DIR/train.lock, -1 if none
    Progress progress;
    TrainState state;
    DataRecord data;                 // the three data files with their checksums (main process)
    RunRecord record;                // what the checkpoint keeps of the run: its keys and data checksums
    int config_pending;              // --resume with changed keys: config.ini is rewritten at the first save
    char path_ckpt[OPT_STR_MAX + 64], path_model[OPT_STR_MAX + 64];
    char path_log[OPT_STR_MAX + 64], path_config[OPT_STR_MAX + 64];
    float *val_losses;               // eval_batches: the loss of each validation batch
    GPTMatmul matmul;                // the engine of the products (options_matmul, then matmul = auto's choice)
    GPTPrecision precision;
    GPTAttention attention;
    int matmul_trial;                // matmul = auto is measured before step 0 (matmul_auto.h)
    char matmul_auto[16];            // this start's auto choice in fp32 for the checkpoint ("" none: keep the record)
    char matmul_choice[256];         // what the key matmul chose and why, for the start line and machine.txt
} Trainer;

// SIGINT/SIGTERM (and, under mpirun, SIGUSR1) stop the loop at the end of the step, with a checkpoint.
void install_signal_handlers(void);
// --debug-state: one forward and backward on the first training batch, written to the file. An exit status.
int run_debug_state(Trainer *t);
// The steps from t->state.step to opt->steps, with their log rows, evaluations and checkpoints. An exit status.
int train_loop(Trainer *t);

#endif
