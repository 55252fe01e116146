// train_main.c: ./train, reads the configuration and runs training (see
// docs/TRAINING.md and ./train --help). Under mpirun (`mpirun -np N ./train
// ...`) every rank runs this; see dist.h.
#include <stdio.h>
#include <string.h>

#include "common/blas_cpu.h"
#include "common/cli.h"
#include "train/dist.h"
#include "train/options.h"
#include "train/trainer.h"

// Rank 0 reads the command line and the config file (or RUN_DIR/config.ini)
// and hands every rank the result: all ranks train with one configuration,
// and only rank 0's machine needs the run directory. Without MPI this is
// options_parse_args. Returns 0 or an exit status (agreed by every rank).
static int parse_args_on_rank0(int argc, char **argv, TrainOptions *opt, TrainArgs *args) {
    char err[ERR_MAX];
    int rc = TRAIN_OK;
    if (dist_rank() == 0 && options_parse_args(argc, argv, opt, args, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        rc = TRAIN_ECONFIG;
    }
    if (dist_size() == 1 || (rc = dist_agree(rc)) != TRAIN_OK) return rc;
    struct { int help, quiet, overwrite, resume, debug_state, init_from; } flags = {
        args->help, args->quiet, args->overwrite, args->resume_dir != NULL, args->debug_state != NULL,
        args->init_from != NULL};
    dist_bcast(&flags, sizeof flags);
    dist_bcast(opt, sizeof *opt);   // plain data: numbers and fixed-size strings
    if (dist_rank() != 0) {
        memset(args, 0, sizeof *args);
        args->help = flags.help;
        args->quiet = flags.quiet;
        args->overwrite = flags.overwrite;
        args->resume_dir = flags.resume ? opt->out_dir : NULL;
        args->debug_state = flags.debug_state ? "(written by rank 0)" : NULL;
        args->init_from = flags.init_from ? "(read by rank 0)" : NULL;
    }
    return TRAIN_OK;
}

// reproducible = 1 needs OpenBLAS's Haswell kernels, which it takes only from
// the environment when it is loaded: the command line and config file are
// read once here, before MPI starts, to know whether to start again with
// OPENBLAS_CORETYPE set. Errors are left to the real reading below.
static void reproducible_kernels(int argc, char **argv) {
    TrainOptions opt;
    TrainArgs args;
    char err[ERR_MAX];
    if (options_parse_args(argc, argv, &opt, &args, err, sizeof err) == 0 && opt.reproducible)
        blas_use_reproducible_kernels(argv);
}

int main(int argc, char **argv) {
    cli_start();
    reproducible_kernels(argc, argv);   // these two may re-execute the program: before MPI starts
    blas_use_native_kernels(argv);
    TrainOptions opt;
    TrainArgs args;
    char err[ERR_MAX];
    if (dist_init(&argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    int rc = parse_args_on_rank0(argc, argv, &opt, &args);
    if (rc == TRAIN_OK && args.help) {
        if (dist_rank() == 0) {
            options_print_help(stdout);
            dist_print_help(stdout);   // this build under mpirun: with Open MPI, or "MPI: not built"
        }
    } else if (rc == TRAIN_OK) {
        rc = train_run(&opt, &args);
    }
    dist_finalize();
    return rc;
}
