// trainer.c: the training run. Setup (tokenizer -> vocab_size, the model's
// rules, data loaders, then the model; the run directory, locked, new or
// resumed), then the loop: per step, grad_accum forward/backward passes,
// global-norm clipping, AdamW at the scheduled learning rate, a log row,
// validation and checkpoints on schedule. Under mpirun, N processes train
// one model data-parallel: the dist_* calls (dist.h) say where they meet
// (sums across processes, agreement on errors and on stopping, the main
// process that owns the files); alone each is what one process does.
#include "train/trainer.h"

#include "common/threads.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/blas_cpu.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/fs.h"
#include "data/bpe.h"
#include "data/loader.h"
#include "format/weights_file.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/dist.h"
#include "train/fault_inject.h"
#include "train/footprint.h"
#include "train/run_dir.h"
#include "train/runlog.h"
#include "train/schedule.h"

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
    const char *matmul_choice;       // what the key matmul chose and why (options_engine)
} Trainer;

static volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) { stop_signal = sig; }

// SIGINT/SIGTERM only set a flag; the loop saves at the end of the step.
// SA_RESETHAND: a second Ctrl-C kills at once (the checkpoint files are
// written atomically, so that is safe too).
static void install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    // Under mpirun, Ctrl-C makes mpirun send SIGTERM to every rank and SIGKILL
    // one second later; SIGUSR1 it forwards to every rank and leaves alone, so
    // `kill -USR1 MPIRUN_PID` stops at the end of the step with a checkpoint.
    if (dist_launched()) sigaction(SIGUSR1, &sa, NULL);
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void trainer_free(Trainer *t) {
    if (t->train_open) loader_close(&t->train);
    if (t->val_open) loader_close(&t->val);
    if (t->model) gpt_free(t->model);
    adamw_free(&t->adamw);
    if (t->log_open) runlog_close(&t->log);
    if (t->lock_fd >= 0) close(t->lock_fd);   // releases the flock
    data_record_free(&t->data);
    free(t->val_losses);
}

// --resume: the checkpoint's header against this configuration (the keys
// that fix the model and data: config_hash), then the data files against the
// run's record in it (config.ini's keys were checked against it as they were
// read: options_check_record). A record written by an older ./train is
// absent: then only the hash is checked. Returns an exit status.
static int check_run_record(Trainer *t, const char *ckpt) {
    const TrainOptions *opt = t->opt;
    char err[ERR_MAX];
    static RunRecord saved;   // 8 KB
    TrainState probe = {.config_hash = options_model_hash(opt), .world_size = dist_size()};
    if (checkpoint_check(ckpt, &probe, err, sizeof err) != 0 || checkpoint_read_record(ckpt, &saved, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    unsigned long long was[DATA_N_FILES];
    if (saved.data[0] && strcmp(saved.data, t->record.data) != 0) {
        if (sscanf(saved.data, "tokenizer %16llx train %16llx val %16llx", &was[0], &was[1], &was[2]) != 3) {
            fprintf(stderr, "%s: metadata run_data is not 'tokenizer HEX train HEX val HEX'\n", ckpt);
            return TRAIN_EIO;
        }
        for (int i = 0; i < DATA_N_FILES; i++)
            if (was[i] != t->data.files[i].fnv1a) {
                fprintf(stderr, "%s: FNV-1a %016llx, not the file the run trained on (%016llx, run_data in %s): the "
                        "data changed since the run started; resume it on its own data\n", t->data.files[i].path,
                        (unsigned long long)t->data.files[i].fnv1a, was[i], ckpt);
                return TRAIN_EIO;
            }
    }
    t->config_pending = !opt->resume_recorded || opt->resume_changes[0];
    return TRAIN_OK;
}

// Everything that does not write: tokenizer, the model's rules with the real
// vocab_size, the token files (opened and checked before anything large is
// allocated), the run's whole memory need (footprint.h: the model, its
// gradients, AdamW's moments, activations, the engine's buffers), then the model and its
// activations. Returns an exit status.
static int setup_model_and_data(Trainer *t, int need_val) {
    const TrainOptions *opt = t->opt;
    const int B = opt->batch_size, T = opt->model.block_size;
    char err[1024];
    Tokenizer tok;
    if (bpe_load(&tok, opt->tokenizer, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        if (!file_exists(opt->tokenizer))
            fprintf(stderr, "(make the default data with: make run, or scripts/run/data_dir.sh configs/data/kjv.txt)\n");
        return TRAIN_EIO;
    }
    t->vocab_size = tok.vocab_size;
    uint64_t tokenizer_checksum = bpe_checksum(&tok);
    bpe_free(&tok);

    GPTConfig cfg;
    if (options_model_config(opt, t->vocab_size, &cfg, err, sizeof err) != 0 ||
        options_check_batch(opt, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_ECONFIG;
    }
    // The model records its tokenizer, the one the token files were made with
    // where they say so (./prepare's do; llm.c's and older ones do not).
    cfg.tokenizer_checksum = tokenizer_checksum;
    if (loader_open(&t->train, opt->train_file, B, T, opt->seed, t->vocab_size, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    t->train_open = 1;
    if (tokens_check_tokenizer(&t->train.file, tokenizer_checksum, opt->tokenizer, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    loader_set_shard(&t->train, dist_size(), dist_rank());   // this process's B of every N*B windows
    if (need_val) {
        if (loader_open(&t->val, opt->val_file, B, T, opt->seed, t->vocab_size, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        t->val_open = 1;
        if (tokens_check_tokenizer(&t->val.file, tokenizer_checksum, opt->tokenizer, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        t->val_losses = malloc((size_t)opt->eval_batches * sizeof *t->val_losses);
        if (!t->val_losses) {
            fprintf(stderr, "out of memory for %d validation losses\n", opt->eval_batches);
            return TRAIN_EIO;
        }
    }
    // The run's record: its keys and the checksums of its data (run_dir.h).
    if (dist_is_main_process()) {
        if (run_dir_data_record(opt->tokenizer, opt->train_file, opt->val_file, &t->data, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        snprintf(t->record.data, sizeof t->record.data, "tokenizer %016llx train %016llx val %016llx",
                 (unsigned long long)t->data.files[DATA_TOKENIZER].fnv1a,
                 (unsigned long long)t->data.files[DATA_TRAIN].fnv1a, (unsigned long long)t->data.files[DATA_VAL].fnv1a);
        if (options_record(opt, t->record.config, sizeof t->record.config) != 0) {
            fprintf(stderr, "%s: the configuration is longer than a run's record (%d bytes)\n", opt->out_dir,
                    RUN_RECORD_MAX);
            return TRAIN_ECONFIG;
        }
    }
    // --resume: the checkpoint's header must match this configuration before
    // the model it describes is built (a config.ini edited to a larger model
    // is refused here, not after allocating it), and config.ini and the data
    // must be the run's own, as its record in the checkpoint says.
    // setup_run_dir reads the rest.
    char ckpt[OPT_STR_MAX + 64];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", opt->out_dir);
    int resuming = t->args->resume_dir && dist_is_main_process() && file_exists(ckpt);
    if (resuming) {
        int rc = check_run_record(t, ckpt);
        if (rc != TRAIN_OK) return rc;
    }
    GPTMatmul matmul;
    GPTPrecision precision;
    GPTAttention attention;
    if (options_matmul(opt, &matmul, &precision, &attention, &t->matmul_choice, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_ECONFIG;
    }
    // The checkpoint (--resume) and --init-from's weights are read tensor by
    // tensor into buffers already counted (weights_file.h): nothing more.
    Footprint need;
    if (footprint_train(&need, &cfg, B, T, matmul, precision, attention, omp_get_max_threads(), need_val, err,
                        sizeof err) != 0 ||
        footprint_check(&need, dist_processes_on_this_machine(), err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    if (opt->reproducible && blas_reproducible_check(err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_ECONFIG;
    }
    if (gpt_create(&t->model, &cfg, opt->seed, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    // The engine before the activations, which are laid out for it (bf16 keeps fewer).
    if (gpt_set_matmul(t->model, matmul, precision, attention, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);   // e.g. bf16 on a CPU without bf16 dot products
        return TRAIN_ECONFIG;
    }
    if (gpt_alloc_activations(t->model, B, T, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    return TRAIN_OK;
}

// --init-from FILE: the trained weights replace the seed's (the model keys
// must be FILE's but for the length keys), read by the main process and
// given to every process (share_init_weights); AdamW starts from zero. Before
// anything is written: a bad FILE leaves the run directory as it was. Returns
// an exit status on the main process, 0 elsewhere.
static int read_init_weights(Trainer *t) {
    if (!t->args->init_from || !dist_is_main_process()) return TRAIN_OK;
    char err[1024];
    StFile *f;
    if (st_open_header(&f, t->args->init_from, err, sizeof err) != 0) {
        fprintf(stderr, "--init-from: %s\n", err);
        return TRAIN_EIO;
    }
    // A valid file of another model is a configuration error (exit 2); a file
    // that is bad in itself (metadata missing or invalid, a tensor missing, of
    // the wrong shape, not finite) is 1, as for ./eval, ./sample and ./export.
    int rc = gpt_read_params(t->model, f, 1, err, sizeof err);
    st_close(f);
    if (rc == 0) return TRAIN_OK;
    fprintf(stderr, "--init-from: %s\n", err);
    return rc == GPT_FILE_OTHER_MODEL ? TRAIN_ECONFIG : TRAIN_EIO;
}

// --init-from FILE of a rope model, rope_original_length not given: the scalings
// that need the trained length L (yarn, yarn_paper, dynamic) take FILE's, that is
// its rope_original_length, or its block_size when that is 0, not this run's longer
// block_size. Set in *opt before anything is built or written (config.ini holds it);
// the main process reads FILE and every process gets the value. A FILE that cannot
// be read is left to read_init_weights, which reports it.
static void init_from_original_length(TrainOptions *opt, const TrainArgs *args) {
    int k = gpt_model_key_find("rope_original_length");
    if (!args->init_from || opt->model.pos != POS_ROPE || opt->src_line[k] != 0) return;
    int length = 0;
    char err[1024];
    StFile *f;
    GPTConfig src;
    if (dist_is_main_process() && st_open_header(&f, args->init_from, err, sizeof err) == 0) {
        if (gpt_config_from_file(f, &src, err, sizeof err) == 0 && src.pos == POS_ROPE)
            length = src.rope_original_length > 0 ? src.rope_original_length : src.block_size;
        st_close(f);
    }
    dist_bcast(&length, sizeof length);
    if (length > 0) opt->model.rope_original_length = length;
}

static void share_init_weights(Trainer *t) {
    if (t->args->init_from) dist_bcast(gpt_params(t->model), gpt_num_params(t->model) * sizeof(float));
}

// The files the run would write that the command line names or reaches,
// checked by the main process before anything is built (exit status 2): --debug-state
// FILE (not an input of the run, replaced only with --overwrite: common/cli.h),
// and --init-from FILE, which must not be the run directory's model or
// checkpoint, since the run's first save replaces them.
static int check_outputs(const Trainer *t) {
    const TrainOptions *opt = t->opt;
    const TrainArgs *args = t->args;
    char err[1024];
    if (!dist_is_main_process()) return TRAIN_OK;
    if (args->debug_state) {
        const char *inputs[] = {args->config_path, opt->tokenizer, opt->train_file, opt->val_file, args->init_from};
        if (cli_check_output(args->debug_state, args->overwrite, inputs, 5, err, sizeof err) == 0) return TRAIN_OK;
        fprintf(stderr, "%s\n", err);
        return TRAIN_ECONFIG;
    }
    for (int i = 0; args->init_from && i < 2; i++) {
        char path[OPT_STR_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", opt->out_dir, i == 0 ? "model.safetensors" : "checkpoint.safetensors");
        if (fs_same_file(args->init_from, path)) {
            fprintf(stderr, "--init-from %s: is %s, which this run's first save replaces; start from a copy "
                    "of it\n", args->init_from, path);
            return TRAIN_ECONFIG;
        }
    }
    return TRAIN_OK;
}

// --debug-state: one forward and backward on the first training batch (grad_accum 1).
// N processes: each runs its B of the first N*B windows with loss scale 1/N;
// the gradients and losses are summed and the inputs gathered, so the main
// process writes the file one process with batch N*B would write (up to the
// order of float sums).
static int run_debug_state(Trainer *t) {
    const TrainOptions *opt = t->opt;
    char err[1024];
    int B = opt->batch_size, T = opt->model.block_size;
    float loss;
    loader_next_batch(&t->train);
    gpt_zero_grad(t->model);
    if (gpt_forward(t->model, t->train.inputs, t->train.targets, B, T, &loss, err, sizeof err) != 0 ||
        gpt_backward(t->model, dist_grad_scale(1), err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        dist_local_failure();
        return TRAIN_EIO;
    }
    dist_sum_floats(gpt_grads(t->model), gpt_num_params(t->model));
    loss = (float)dist_mean(loss, 1);
    int *inputs = dist_gather_on_main(t->train.inputs, (size_t)B * T);
    int *targets = dist_gather_on_main(t->train.targets, (size_t)B * T);
    int rc = TRAIN_OK;
    if (dist_is_main_process()) {
        GPTMatmul matmul;
        GPTPrecision precision;
        GPTAttention attention;
        options_matmul(t->opt, &matmul, &precision, &attention, NULL, err, sizeof err);   // checked at setup
        if (debug_state_save(t->args->debug_state, t->model, inputs, targets, dist_size() * B, T, loss,
                             precision == GPT_BF16 ? "bf16" : "fp32",
                             matmul == GPT_MATMUL_ONEDNN      ? "onednn"
                             : matmul == GPT_MATMUL_REFERENCE ? "reference"
                                                              : "openblas",
                             t->args->overwrite ? ATOMIC_REPLACE : ATOMIC_NEW, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            rc = TRAIN_EIO;
        } else if (!t->args->quiet) {
            fprintf(stderr, "debug state written to %s (loss %.6f)\n", t->args->debug_state, loss);
        }
    }
    free(inputs);
    free(targets);
    return dist_agree(rc);
}

// RUN_DIR/machine.txt: one block per start of ./train in the directory (new
// or resumed), saying from which step it ran on what CPU, OpenBLAS kernels,
// build, engine and thread count (common/machine.h), and the keys a resume
// changed. A fresh run starts the file again; a resume appends, so a run
// trained on two machines says so.
static int record_machine(Trainer *t, char *err, size_t errlen) {
    char extra[2048];
    snprintf(extra, sizeof extra, "engine = %s\n%s\nthreads = %d\nreproducible = %d\n%s%s%s",
             gpt_matmul_describe(t->model), t->matmul_choice, omp_get_max_threads(), t->opt->reproducible,
             t->opt->resume_changes[0] ? "changed = " : "", t->opt->resume_changes,
             t->opt->resume_changes[0] ? "\n" : "");
    return run_dir_record_machine(t->opt->out_dir, t->state.step, extra, err, errlen);
}

// save() writes the checkpoint, then the model: a kill between the two
// leaves model.safetensors one save older than the checkpoint (or missing,
// or, killed inside its own write, as it was before). On --resume, with the
// checkpoint's weights loaded, a model.safetensors whose weights are not
// exactly those is written again, so that after any kill a resume, even of a
// finished run, leaves the model equal to the last completed step's weights.
// A model.safetensors that is not this run's model at all (another shape or
// configuration, or not a weights file) was put there by someone else: it is
// refused, not replaced.
static int sync_model_with_checkpoint(Trainer *t) {
    char err[1024];
    GPT *saved = NULL;
    size_t n = gpt_num_params(t->model);
    const char *key = NULL;
    int existed = file_exists(t->path_model);
    if (existed) {
        if (gpt_load(&saved, t->path_model, 0, err, sizeof err) != 0 ||
            gpt_config_diff(gpt_config(saved), gpt_config(t->model), 0, &key) != 0) {
            fprintf(stderr, "%s: is not this run's model (%s%s); ./train replaces only its own: move it away and "
                    "resume again\n", t->path_model, saved ? "its key differs: " : err, saved && key ? key : "");
            gpt_free(saved);
            return -1;
        }
    }
    int same = saved && gpt_num_params(saved) == n &&
               memcmp(gpt_params(saved), gpt_params(t->model), n * sizeof(float)) == 0;
    gpt_free(saved);
    if (same) return 0;
    if (gpt_save(t->model, t->path_model, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (!t->args->quiet)
        fprintf(stderr, "%s: %s the weights of checkpoint.safetensors (step %d): a kill between the two saves leaves "
                "it one save behind; written again from the checkpoint\n", t->path_model,
                existed ? "did not hold" : "was missing beside", t->state.step);
    return 0;
}

// The run directory: new (config.ini, fresh log) or resumed (checkpoint, cut
// log). A directory whose run stopped before its first checkpoint holds
// nothing to continue from: it starts again from step 0, with or without --resume.
// Several processes: the main process alone does this (the others only
// allocate the moments; share_run_state gives them its state).
static int setup_run_dir(Trainer *t) {
    const TrainOptions *opt = t->opt;
    char err[1024];
    AdamWConfig acfg = {opt->beta1, opt->beta2, opt->eps, opt->weight_decay};
    if (!dist_is_main_process()) {
        if (adamw_init(&t->adamw, &acfg, gpt_num_params(t->model), err, sizeof err) == 0) return TRAIN_OK;
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    snprintf(t->path_ckpt, sizeof t->path_ckpt, "%s/checkpoint.safetensors", opt->out_dir);
    snprintf(t->path_model, sizeof t->path_model, "%s/model.safetensors", opt->out_dir);
    snprintf(t->path_log, sizeof t->path_log, "%s/log.csv", opt->out_dir);
    snprintf(t->path_config, sizeof t->path_config, "%s/config.ini", opt->out_dir);
    if (make_dirs(opt->out_dir, err, sizeof err) != 0 || run_dir_check_files(opt->out_dir, err, sizeof err) != 0 ||
        run_dir_lock(opt->out_dir, &t->lock_fd, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    run_dir_remove_temporaries(opt->out_dir);

    int have_ckpt = file_exists(t->path_ckpt);
    int resume = t->args->resume_dir != NULL && have_ckpt;
    // Every save writes the checkpoint and the model together, so a model
    // without a checkpoint is a run that saved and whose checkpoint was
    // removed (finished runs are often pruned to their model): there is
    // nothing to continue from, and starting again would replace trained weights.
    if (!have_ckpt && file_exists(t->path_model) && !t->args->overwrite) {
        fprintf(stderr, "%s: holds a trained model.safetensors but no checkpoint.safetensors to continue from; "
                "start over with --overwrite (which replaces the model)\n", opt->out_dir);
        return TRAIN_ECONFIG;
    }
    if (t->args->resume_dir && !have_ckpt && !t->args->quiet)
        fprintf(stderr, "%s: no checkpoint yet (the run stopped before its first save); starting from step 0\n",
                opt->out_dir);
    if (!t->args->resume_dir && !t->args->overwrite) {
        if (have_ckpt) {
            fprintf(stderr, "%s: already holds a run; continue it with --resume %s or start over with --overwrite\n",
                    opt->out_dir, opt->out_dir);
            return TRAIN_ECONFIG;
        }
        if (file_exists(t->path_log) && !t->args->quiet)
            fprintf(stderr, "%s: holds a log but no checkpoint (the run stopped before its first save); "
                    "starting again from step 0\n", opt->out_dir);
    }
    if (adamw_init(&t->adamw, &acfg, gpt_num_params(t->model), err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    t->state.config_hash = options_model_hash(opt);
    t->state.world_size = dist_size();   // checkpoint_load refuses a checkpoint of another number of processes
    if (resume) {
        if (checkpoint_load(t->path_ckpt, t->model, &t->adamw, &t->state, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        loader_set_rng(&t->train, t->state.data_rng);
        if (sync_model_with_checkpoint(t) != 0) return TRAIN_EIO;
        // A finished run (or one asked to stop earlier than it is): nothing
        // to train, so nothing of its record is written (train_run says so).
        if (t->state.step >= opt->steps) return TRAIN_OK;
    } else {
        if (have_ckpt && remove(t->path_ckpt) != 0) {   // --overwrite: an old checkpoint must not be resumed
            fprintf(stderr, "%s: cannot remove: %s\n", t->path_ckpt, strerror(errno));
            return TRAIN_EIO;
        }
        t->state.step = 0;
        t->state.elapsed_s = 0;
    }
    // A new run writes its config.ini and data.txt now; a resume keeps its
    // own, and keys changed on its command line (--steps) go into config.ini
    // at its first save, with the checkpoint that records them (save()), so
    // config.ini never holds a change the checkpoint has not.
    run_dir_lock_note_pid(t->lock_fd);
    char data_path[OPT_STR_MAX + 64];
    snprintf(data_path, sizeof data_path, "%s/data.txt", opt->out_dir);
    int write_data = !resume || !file_exists(data_path);   // (a run of an older ./train has none)
    if ((!resume && options_write_ini(opt, t->path_config, t->vocab_size, err, sizeof err) != 0) ||
        (write_data && data_record_write(&t->data, data_path, ATOMIC_REPLACE, err, sizeof err) != 0) ||
        record_machine(t, err, sizeof err) != 0 ||
        runlog_open(&t->log, t->path_log, resume ? t->state.step : -1, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    t->log_open = 1;
    return TRAIN_OK;
}

// The main process read the checkpoint (if any); every process goes on from
// its step, data stream, weights and AdamW moments (alone: they are its own).
static void share_run_state(Trainer *t) {
    if (dist_size() == 1) return;
    size_t n = gpt_num_params(t->model);
    dist_bcast(&t->state, sizeof t->state);
    if (t->state.step == 0) return;   // a new run: every process has the same initial weights (init_weights)
    dist_bcast(gpt_params(t->model), n * sizeof(float));
    dist_bcast(t->adamw.m, n * sizeof(float));
    dist_bcast(t->adamw.v, n * sizeof(float));
    loader_set_rng(&t->train, t->state.data_rng);   // a new run's stream is the seed's
}

// Mean loss over the fixed validation batches; 0, or -1 with a message.
// N processes share the batches: process r evaluates batches r, r+N, ... and
// leaves 0 in the others' slots; the slots are summed across processes (x + 0
// is exact) and added in batch order, so the mean is, bit for bit, that of one
// process with the same batch_size.
static int evaluate(Trainer *t, float *val) {
    const TrainOptions *opt = t->opt;
    char err[512];
    float *losses = t->val_losses;
    for (int k = 0; k < opt->eval_batches; k++) {
        losses[k] = 0.0f;
        if (!dist_is_mine(k)) continue;
        loader_eval_batch(&t->val, (size_t)k);
        if (gpt_forward(t->model, t->val.inputs, t->val.targets, opt->batch_size, opt->model.block_size,
                        &losses[k], err, sizeof err) != 0) {
            progress_break(&t->progress);
            fprintf(stderr, "%s: validation: %s\n", opt->val_file, err);
            dist_local_failure();
            return -1;
        }
    }
    dist_sum_floats(losses, (size_t)opt->eval_batches);
    double sum = 0.0;
    for (int k = 0; k < opt->eval_batches; k++) sum += losses[k];
    *val = (float)(sum / opt->eval_batches);
    return 0;
}

// Every process must hold the same weights (same start, same summed
// gradients, same update). Checked at every evaluation by a hash of the
// parameters' bits, compared across processes (a few ms; nothing alone).
// 0, or DIST_EDRIFT with a message.
static int check_same_weights(Trainer *t, int step) {
    char err[256];
    if (dist_same_weights(gpt_params(t->model), gpt_num_params(t->model), err, sizeof err) == 0) return 0;
    if (dist_is_main_process()) {
        progress_break(&t->progress);
        fprintf(stderr, "step %d: %s; stopping (see docs/TRAINING.md, \"Several processes\")\n", step, err);
    }
    return DIST_EDRIFT;
}

// A checkpoint is saved only when every log row up to its step is on disk:
// a resumed run cuts the log at the checkpoint's step, so a checkpoint
// newer than the log would leave a gap. Returns 0 or TRAIN_EIO.
static int save(Trainer *t) {
    char err[1024];
    if (runlog_flush(&t->log, err, sizeof err) != 0) {
        progress_break(&t->progress);
        fprintf(stderr, "%s\nstopping: no checkpoint is saved past the log's last row (the last checkpoint "
                "in %s stays; continue with ./train --resume %s)\n", err, t->opt->out_dir, t->opt->out_dir);
        return TRAIN_EIO;
    }
    t->state.data_rng = loader_get_rng(&t->train);
    // A resume's changed keys: config.ini, then the checkpoint that records
    // them (a kill between the two leaves config.ini ahead of the record,
    // which the next --resume names, key by key).
    if (t->config_pending) {
        if (options_write_ini(t->opt, t->path_config, t->vocab_size, err, sizeof err) != 0) {
            progress_break(&t->progress);
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        t->config_pending = 0;
    }
    // The checkpoint first: a kill between the two leaves the model one save
    // behind it, which the next --resume rewrites (sync_model_with_checkpoint).
    int failed = checkpoint_save(t->path_ckpt, t->model, &t->adamw, &t->state, &t->record, err, sizeof err) != 0;
    if (!failed) fault_crash_between_saves(t->state.step);   // test build only
    if (failed || gpt_save(t->model, t->path_model, err, sizeof err) != 0) {
        progress_break(&t->progress);
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    return 0;
}

// Every process sees the same summed loss and gradients, so every process
// stops here at the same step; the main process says so.
static int diverged(Trainer *t, int step, const char *what, double value) {
    if (!dist_is_main_process()) return TRAIN_EDIVERGED;
    progress_break(&t->progress);
    if (file_exists(t->path_ckpt))
        fprintf(stderr, "step %d: %s is %g; stopping (the last checkpoint in %s is from before the divergence; "
                "try a lower lr)\n", step, what, value, t->opt->out_dir);
    else
        fprintf(stderr, "step %d: %s is %g; stopping (no checkpoint was saved before it; try a lower lr)\n",
                step, what, value);
    return TRAIN_EDIVERGED;
}

static const char *signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

// Gradients of one step: grad_accum micro-batches, each backward scaled by
// 1/grad_accum so the sum is the gradient of the mean loss; *loss gets that mean.
// N processes: each backward is scaled by 1/(grad_accum N) and the gradients
// and losses are summed across processes (dist_grads_sum: after the last
// backward), so every process holds the gradient of the mean loss over all
// N x grad_accum micro-batches.
static int accumulate_gradients(Trainer *t, float *loss) {
    const int B = t->opt->batch_size, T = t->opt->model.block_size, accum = t->opt->grad_accum;
    char err[512];
    gpt_zero_grad(t->model);
    double loss_sum = 0.0;
    for (int a = 0; a < accum; a++) {
        float micro;
        loader_next_batch(&t->train);
        if (gpt_forward(t->model, t->train.inputs, t->train.targets, B, T, &micro, err, sizeof err) != 0 ||
            gpt_backward(t->model, dist_grad_scale(accum), err, sizeof err) != 0) {
            progress_break(&t->progress);
            fprintf(stderr, "%s: training batch: %s\n", t->opt->train_file, err);
            dist_local_failure();
            return -1;
        }
        loss_sum += micro;
    }
    dist_grads_sum(gpt_grads(t->model), gpt_num_params(t->model));
    *loss = (float)dist_mean(loss_sum, accum);
    return 0;
}

// One optimizer update (0-based index s). Returns 0, or an exit status.
static int train_step(Trainer *t, int s, float lr, float *loss, double *norm) {
    const ParamEntry *entries;
    int n_entries = gpt_param_entries(t->model, &entries);
    size_t n_params = gpt_num_params(t->model);
    float *grads = gpt_grads(t->model);
    if (accumulate_gradients(t, loss) != 0) return TRAIN_EIO;
    *norm = grad_global_norm(grads, n_params);
    if (!isfinite(*loss)) return diverged(t, s + 1, "the training loss", *loss);
    if (!isfinite(*norm)) return diverged(t, s + 1, "the gradient norm", *norm);
    grad_clip(grads, n_params, *norm, t->opt->grad_clip);
    adamw_step(&t->adamw, gpt_params(t->model), grads, entries, n_entries, lr, s + 1);
    return 0;
}

// Queues a log row; a write that fails is reported once per failure spell
// and retried with the next row (runlog.c). The checkpoint rule in save()
// keeps the log whole across a resume.
static void log_row(Trainer *t, int step, float loss, float val, float lr, float norm, double tok_s,
                    double elapsed, int *failing) {
    char err[1024];
    int rc = runlog_row(&t->log, step, loss, val, lr, norm, tok_s, elapsed, err, sizeof err);
    if (rc != 0 && !*failing) {
        progress_break(&t->progress);
        fprintf(stderr, "%s\n", err);
    }
    if (rc == 0 && *failing && !t->args->quiet) {
        progress_break(&t->progress);
        fprintf(stderr, "%s: the held rows are written (up to step %d)\n", t->path_log, step);
    }
    *failing = rc != 0;
}

static int train_loop(Trainer *t) {
    const TrainOptions *opt = t->opt;
    LrSchedule sched = {opt->lr, opt->min_lr, opt->warmup_steps, opt->steps};
    // every process's tokens (the global batch: processes x batch_size x grad_accum sequences)
    const double tokens_per_step = (double)opt->batch_size * opt->model.block_size * opt->grad_accum * dist_size();
    const int hook_step = fault_sigint_step(), perturb_step = fault_perturb_step();   // test build only; else -1
    double t_begin = clock_seconds(), elapsed0 = t->state.elapsed_s;
    int first_step = t->state.step, log_failing = 0;
    float last_val = NAN;

    progress_init(&t->progress, t->args->quiet, opt->steps);
    if (!t->args->quiet)
        fprintf(stderr, "%s %s: %zu parameters, vocab %d, %.0f tokens per step, %d threads, step %d of %d; %s; %s%s\n",
                first_step ? "resuming" : "training", opt->out_dir, gpt_num_params(t->model), t->vocab_size,
                tokens_per_step, omp_get_max_threads(), first_step, opt->steps, gpt_matmul_describe(t->model),
                t->matmul_choice,
                opt->reproducible ? "; reproducible (OpenBLAS " BLAS_REPRODUCIBLE_KERNELS " kernels)" : "");
    if (!t->args->quiet) dist_print_setup(stderr, opt->batch_size, opt->grad_accum);
    if (first_step == 0) {                   // row 0: the initial weights
        if (evaluate(t, &last_val) != 0) return TRAIN_EIO;
        if (check_same_weights(t, 0) != 0) return DIST_EDRIFT;
        if (!isfinite(last_val) && t->args->init_from) {   // no update yet: the weights, not the lr
            if (dist_is_main_process())
                fprintf(stderr, "--init-from %s: the validation loss of its weights is %g before any update: the "
                        "file's values overflow the model (a bad weights file)\n", t->args->init_from, last_val);
            return TRAIN_EIO;
        }
        if (!isfinite(last_val)) return diverged(t, 0, "the validation loss", last_val);
        if (dist_is_main_process())
            log_row(t, 0, NAN, last_val, NAN, NAN, NAN, elapsed0 + clock_seconds() - t_begin, &log_failing);
        progress_update(&t->progress, 0, NAN, last_val, 1, 0, NAN);
    }
    while (t->state.step < opt->steps) {
        int s = t->state.step;               // 0-based index of this update
        float lr = lr_at_step(&sched, s), loss;
        double norm, t0 = clock_seconds();
        int rc = train_step(t, s, lr, &loss, &norm);
        if (rc) return rc;
        t->state.step = ++s;                 // from here on, s counts updates done
        double step_s = clock_seconds() - t0, tok_s = tokens_per_step / step_s;
        dist_step_done(step_s);              // several processes: the all-reduce's share of the step (summary)
        if (s == perturb_step && dist_size() > 1 && dist_is_last_process()) {   // test build only
            gpt_params(t->model)[0] += 1.0f;
        }

        int evaluated = s == opt->steps || (opt->eval_every > 0 && s % opt->eval_every == 0);
        float val = NAN;
        if (evaluated && evaluate(t, &val) != 0) return TRAIN_EIO;
        if (evaluated && check_same_weights(t, s) != 0) return DIST_EDRIFT;
        if (evaluated && !isfinite(val)) return diverged(t, s, "the validation loss", val);
        if (evaluated) last_val = val;
        double now = clock_seconds();
        t->state.elapsed_s = elapsed0 + now - t_begin;
        if (dist_is_main_process()) log_row(t, s, loss, val, lr, (float)norm, tok_s, t->state.elapsed_s, &log_failing);
        double eta = (now - t_begin) / (s - first_step) * (opt->steps - s);
        progress_update(&t->progress, s, loss, last_val, evaluated, tok_s, eta);

        if (s == hook_step && dist_is_last_process()) raise(SIGINT);
        int sig = dist_agree(stop_signal);   // a signal caught by any process stops every process after this step
        if (s == opt->steps || (opt->save_every > 0 && s % opt->save_every == 0) || sig)
            if (dist_agree(dist_is_main_process() ? save(t) : 0) != 0) return TRAIN_EIO;
        if (sig) {
            if (dist_is_main_process()) {
                progress_break(&t->progress);
                fprintf(stderr, "stopped by %s after step %d; checkpoint saved; continue with %s./train --resume %s\n",
                        signal_name(sig), s, dist_launcher(), opt->out_dir);
            }
            return 128 + sig;
        }
    }
    progress_break(&t->progress);
    if (!t->args->quiet)
        fprintf(stderr, "done: step %d, val loss %.4f, %.1f s; weights in %s\n", t->state.step, last_val,
                t->state.elapsed_s, t->path_model);
    if (!t->args->quiet) dist_print_summary(stderr);
    return TRAIN_OK;
}

int train_run(const TrainOptions *opt_in, const TrainArgs *args) {
    Trainer t;
    memset(&t, 0, sizeof t);
    t.lock_fd = -1;
    TrainOptions run_opt = *opt_in;   // --init-from may fill in rope_original_length
    const TrainOptions *opt = &run_opt;
    init_from_original_length(&run_opt, args);
    t.opt = opt;
    TrainArgs process_args = *args;   // processes other than the main one print only their own errors
    if (!dist_is_main_process()) process_args.quiet = 1;
    t.args = &process_args;
    // threads = 0: all cores; under mpirun, the cores this process may use,
    // shared with the other processes on its machine (dist_default_threads; 0 alone).
    int threads = threads_set(opt->threads > 0 ? opt->threads : dist_default_threads());
    const char *warning = dist_binding_warning(threads);
    if (warning && dist_is_main_process()) fprintf(stderr, "%s\n", warning);
    // Errors one process sees (a missing file on its machine, a run directory
    // in use) are agreed before the next collective call: every process stops.
    int rc = dist_agree(check_outputs(&t));
    if (rc == TRAIN_OK) rc = dist_agree(setup_model_and_data(&t, args->debug_state == NULL));
    if (rc == TRAIN_OK) rc = dist_agree(read_init_weights(&t));
    if (rc == TRAIN_OK) share_init_weights(&t);
    if (rc == TRAIN_OK && args->debug_state) rc = run_debug_state(&t);
    else if (rc == TRAIN_OK) {
        rc = dist_agree(setup_run_dir(&t));
        if (rc == TRAIN_OK) share_run_state(&t);
        if (rc == TRAIN_OK && t.state.step >= opt->steps) {
            if (dist_is_main_process())
                fprintf(stderr, "%s: the run is finished (step %d of %d); nothing to do and no file changed "
                        "(--steps=N with N > %d trains it on to step N)\n", opt->out_dir, t.state.step, opt->steps,
                        t.state.step);
        } else if (rc == TRAIN_OK) {
            install_signal_handlers();
            rc = train_loop(&t);
        }
    }
    trainer_free(&t);
    return rc;
}
