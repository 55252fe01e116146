// train_main.c: ./train, reads the configuration and runs training (see
// docs/TRAINING.md and ./train --help).
#include <stdio.h>

#include "common/blas_cpu.h"
#include "train/options.h"
#include "train/trainer.h"

int main(int argc, char **argv) {
    blas_use_native_kernels(argv);
    TrainOptions opt;
    TrainArgs args;
    char err[1024];
    if (options_parse_args(argc, argv, &opt, &args, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_ECONFIG;
    }
    if (args.help) {
        options_print_help(stdout);
        return TRAIN_OK;
    }
    return train_run(&opt, &args);
}
