// trainer.c: the training run. Setup (tokenizer -> vocab_size, the model's
// rules, data loaders, then the model; the run directory, locked, new or
// resumed), then the loop (train_loop.c). Under mpirun, N processes train
// one model data-parallel: the dist_* calls (dist.h) say where they meet
// (the main process reads and writes the files and shares what it read;
// agreement on errors); alone each is what one process does.
#include "train/trainer.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/blas_cpu.h"
#include "common/cli.h"
#include "common/fs.h"
#include "common/threads.h"
#include "data/bpe.h"
#include "format/weights_file.h"
#include "train/dist.h"
#include "train/fault_inject.h"
#include "train/footprint.h"
#include "train/matmul_auto.h"
#include "train/run_dir.h"
#include "train/train_loop.h"

// A setup step that failed: its one-line message on stderr, and the exit
// status to return.
static int fail(const char *err, int status) {
    fprintf(stderr, "%s\n", err);
    return status;
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
// absent: then only the hash is checked. matmul = auto's recorded choice, if
// any, goes into t->matmul_auto. Returns an exit status.
static int check_run_record(Trainer *t, const char *ckpt) {
    const TrainOptions *opt = t->opt;
    char err[ERR_MAX];
    static RunRecord saved;   // 8 KB
    TrainState probe = {.config_hash = options_model_hash(opt), .world_size = dist_size()};
    if (checkpoint_check(ckpt, &probe, err, sizeof err) != 0 || checkpoint_read_record(ckpt, &saved, err, sizeof err))
        return fail(err, TRAIN_EIO);
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
    snprintf(t->matmul_auto, sizeof t->matmul_auto, "%s", probe.matmul_auto);
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
        options_check_batch(opt, &cfg, err, sizeof err) != 0)
        return fail(err, TRAIN_ECONFIG);
    // The model records its tokenizer, the one the token files were made with
    // where they say so (./prepare's do; llm.c's and older ones do not).
    cfg.tokenizer_checksum = tokenizer_checksum;
    if (loader_open(&t->train, opt->train_file, B, T, opt->seed, t->vocab_size, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    t->train_open = 1;
    if (tokens_check_tokenizer(&t->train.file, tokenizer_checksum, opt->tokenizer, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    loader_set_shard(&t->train, dist_size(), dist_rank());   // this process's B of every N*B windows
    if (need_val) {
        if (loader_open(&t->val, opt->val_file, B, T, opt->seed, t->vocab_size, err, sizeof err) != 0)
            return fail(err, TRAIN_EIO);
        t->val_open = 1;
        if (tokens_check_tokenizer(&t->val.file, tokenizer_checksum, opt->tokenizer, err, sizeof err) != 0)
            return fail(err, TRAIN_EIO);
        t->val_losses = malloc((size_t)opt->eval_batches * sizeof *t->val_losses);
        if (!t->val_losses) {
            fprintf(stderr, "out of memory for %d validation losses\n", opt->eval_batches);
            return TRAIN_EIO;
        }
    }
    // The run's record: its keys and the checksums of its data (run_dir.h).
    if (dist_is_main_process()) {
        if (run_dir_data_record(opt->tokenizer, opt->train_file, opt->val_file, &t->data, err, sizeof err) != 0)
            return fail(err, TRAIN_EIO);
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
    const char *choice;
    if (options_matmul(opt, &t->matmul, &t->precision, &t->attention, &choice, err, sizeof err) != 0)
        return fail(err, TRAIN_ECONFIG);
    snprintf(t->matmul_choice, sizeof t->matmul_choice, "%s", choice);
    // matmul = auto in fp32 chooses once for the run's life: a resume takes
    // its checkpoint's record (one without it, the rule above, recorded from
    // now on); a new run measures (choose_matmul_auto, after this setup),
    // but for --debug-state's one pass and where oneDNN fp32 cannot run.
    if (matmul_auto_chooses(opt->matmul, opt->precision, opt->reproducible)) {
        if (resuming && t->matmul_auto[0]) {
            t->matmul = strcmp(t->matmul_auto, "onednn") == 0 ? GPT_MATMUL_ONEDNN : GPT_MATMUL_OPENBLAS;
            snprintf(t->matmul_choice, sizeof t->matmul_choice,
                     "matmul = auto: %s fp32 (the run's choice, recorded in its checkpoint)", t->matmul_auto);
        } else {
            t->matmul_trial = !resuming && !t->args->debug_state && matmul_auto_can_measure();
        }
        if (!t->matmul_trial) snprintf(t->matmul_auto, sizeof t->matmul_auto, "%s", options_matmul_name(t->matmul));
    }
    // The checkpoint (--resume) and --init-from's weights are read tensor by
    // tensor into buffers already counted (weights_file.h): nothing more.
    Footprint need;
    GPTWorkload work = {.matmul = t->matmul, .precision = t->precision, .attention = t->attention, .B = B,
                        .T = T, .n_threads = omp_get_max_threads(), .logits_rows = opt->logits_rows};
    if ((t->matmul_trial ? footprint_train_auto(&need, &cfg, &work, err, sizeof err)
                         : footprint_train(&need, &cfg, &work, need_val, err, sizeof err)) != 0 ||
        footprint_check(&need, dist_processes_on_this_machine(), err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    if (opt->reproducible && blas_reproducible_check(err, sizeof err) != 0)
        return fail(err, TRAIN_ECONFIG);
    if (gpt_create(&t->model, &cfg, opt->seed, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    // The engine before the activations, which are laid out for it (bf16 keeps fewer).
    if (gpt_set_matmul(t->model, t->matmul, t->precision, t->attention, err, sizeof err) != 0)
        return fail(err, TRAIN_ECONFIG);   // e.g. bf16 on a CPU without bf16 dot products
    gpt_set_logits_rows(t->model, opt->logits_rows);
    if (gpt_alloc_activations(t->model, B, T, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    return TRAIN_OK;
}

// matmul = auto in fp32, measured (matmul_auto.h), before anything of the
// run is written. The main process alone knows whether the run resumes (then
// its record or the rule: no trial), so its plan is every process's. Every
// process runs the trial, at once, as they will train; the main process's
// times decide, shared, so that all run one engine. An exit status.
static int choose_matmul_auto(Trainer *t) {
    char err[ERR_MAX];
    int plan[2] = {t->matmul_trial, (int)t->matmul};
    dist_bcast(plan, sizeof plan);
    t->matmul_trial = plan[0];
    if (!t->matmul_trial) {
        if ((GPTMatmul)plan[1] == t->matmul) return TRAIN_OK;
        t->matmul = (GPTMatmul)plan[1];   // a process other than the main one, which planned a trial
        return gpt_set_matmul(t->model, t->matmul, t->precision, t->attention, err, sizeof err) == 0
                   ? TRAIN_OK
                   : fail(err, TRAIN_EIO);
    }
    double ms[2];
    int rc = matmul_auto_time(t->model, t->attention, t->opt->batch_size, t->opt->model.block_size, ms, err,
                              sizeof err);
    int hooked = rc == 0 ? fault_auto_ms(ms, dist_size() > 1 && dist_is_last_process()) : 0;   // test build only
    if (hooked < 0) {
        snprintf(err, sizeof err, "ROPELAB_TEST_AUTO_MS: not openblas=MS,onednn=MS");
        rc = -1;
    }
    if (rc != 0) fprintf(stderr, "matmul = auto: %s\n", err);
    if (dist_agree(rc != 0 ? TRAIN_EIO : TRAIN_OK) != TRAIN_OK) return TRAIN_EIO;
    dist_bcast(ms, sizeof ms);
    dist_bcast(&hooked, sizeof hooked);
    t->matmul = matmul_auto_pick(ms, hooked, t->matmul_choice, sizeof t->matmul_choice);
    snprintf(t->matmul_auto, sizeof t->matmul_auto, "%s", options_matmul_name(t->matmul));
    if (gpt_set_matmul(t->model, t->matmul, t->precision, t->attention, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    return TRAIN_OK;
}

// --init-from FILE (or a Hugging Face directory): the trained weights replace the seed's (the model keys
// must be FILE's but for the length keys), read by the main process and
// given to every process (share_init_weights); AdamW starts from zero. Before
// anything is written: a bad FILE leaves the run directory as it was. Returns
// an exit status on the main process, 0 elsewhere.
static int read_init_weights(Trainer *t) {
    if (!t->args->init_from || !dist_is_main_process()) return TRAIN_OK;
    char err[1024];
    // A valid file of another model is a configuration error (exit 2); a file
    // that is bad in itself (unreadable, metadata missing or invalid, a tensor
    // missing, of the wrong shape, not finite) is 1, as for ./eval, ./sample and
    // ./export. FILE may be a Hugging Face model directory (weights_file.h).
    int rc = gpt_read_params_at(t->model, t->args->init_from, 1, err, sizeof err);
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
    GPTConfig src;
    if (dist_is_main_process() && gpt_config_at(args->init_from, &src, err, sizeof err) == 0 && src.pos == POS_ROPE)
        length = src.rope_original_length > 0 ? src.rope_original_length : src.block_size;
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
        return fail(err, TRAIN_ECONFIG);
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
        return fail(err, TRAIN_EIO);
    }
    snprintf(t->path_ckpt, sizeof t->path_ckpt, "%s/checkpoint.safetensors", opt->out_dir);
    snprintf(t->path_model, sizeof t->path_model, "%s/model.safetensors", opt->out_dir);
    snprintf(t->path_log, sizeof t->path_log, "%s/log.csv", opt->out_dir);
    snprintf(t->path_config, sizeof t->path_config, "%s/config.ini", opt->out_dir);
    if (make_dirs(opt->out_dir, err, sizeof err) != 0 || run_dir_check_files(opt->out_dir, err, sizeof err) != 0 ||
        run_dir_lock(opt->out_dir, &t->lock_fd, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
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
    if (adamw_init(&t->adamw, &acfg, gpt_num_params(t->model), err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
    t->state.config_hash = options_model_hash(opt);
    t->state.world_size = dist_size();   // checkpoint_load refuses a checkpoint of another number of processes
    if (resume) {
        if (checkpoint_load(t->path_ckpt, t->model, &t->adamw, &t->state, err, sizeof err) != 0)
            return fail(err, TRAIN_EIO);
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
    if (t->matmul_auto[0])   // else a resume keeps the record it loaded
        snprintf(t->state.matmul_auto, sizeof t->state.matmul_auto, "%s", t->matmul_auto);
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
        runlog_open(&t->log, t->path_log, resume ? t->state.step : -1, err, sizeof err) != 0)
        return fail(err, TRAIN_EIO);
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
    if (rc == TRAIN_OK) rc = dist_agree(choose_matmul_auto(&t));
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

