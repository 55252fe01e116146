// trainer.c: the training run. Setup (tokenizer -> vocab_size, model, data
// loaders, run directory or checkpoint), then the loop: per step, grad_accum
// forward/backward passes, global-norm clipping, AdamW at the scheduled
// learning rate, a log row, validation and checkpoints on schedule.
#include "train/trainer.h"

#include "common/threads.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/bpe.h"
#include "data/loader.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
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
    Progress progress;
    TrainState state;
    char path_ckpt[OPT_STR_MAX + 64], path_model[OPT_STR_MAX + 64];
    char path_log[OPT_STR_MAX + 64], path_config[OPT_STR_MAX + 64];
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
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// mkdir -p
static int make_dirs(const char *path, char *err, size_t errlen) {
    char buf[OPT_STR_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "%s: cannot create directory: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

static void trainer_free(Trainer *t) {
    if (t->train_open) loader_close(&t->train);
    if (t->val_open) loader_close(&t->val);
    if (t->model) gpt_free(t->model);
    adamw_free(&t->adamw);
    runlog_close(&t->log);
}

// Everything that does not write: tokenizer, model, loaders. Returns an exit status.
static int setup_model_and_data(Trainer *t, int need_val) {
    const TrainOptions *opt = t->opt;
    char err[1024];
    Tokenizer tok;
    memset(&tok, 0, sizeof tok);
    if (bpe_load(&tok, opt->tokenizer, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        if (!file_exists(opt->tokenizer))
            fprintf(stderr, "(make the default data with: scripts/get_data.sh && "
                    "./prepare --vocab-size 2048 --out-dir data/kjv data/kjv.txt)\n");
        return TRAIN_EIO;
    }
    t->vocab_size = tok.vocab_size;
    bpe_free(&tok);

    GPTConfig cfg;
    if (options_model_config(opt, t->vocab_size, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_ECONFIG;
    }
    if (gpt_create(&t->model, &cfg, opt->seed, err, sizeof err) != 0 ||
        gpt_alloc_activations(t->model, opt->batch_size, opt->model.block_size, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    if (loader_open(&t->train, opt->train_file, opt->batch_size, opt->model.block_size, opt->seed,
                    t->vocab_size, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    t->train_open = 1;
    if (need_val) {
        if (loader_open(&t->val, opt->val_file, opt->batch_size, opt->model.block_size, opt->seed,
                        t->vocab_size, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        t->val_open = 1;
    }
    return TRAIN_OK;
}

// --debug-state: one forward and backward on the first training batch (grad_accum 1).
static int run_debug_state(Trainer *t) {
    const TrainOptions *opt = t->opt;
    char err[1024];
    int B = opt->batch_size, T = opt->model.block_size;
    loader_next_batch(&t->train);
    gpt_zero_grad(t->model);
    float loss = gpt_forward(t->model, t->train.inputs, t->train.targets, B, T);
    gpt_backward(t->model, 1.0f);
    if (debug_state_save(t->args->debug_state, t->model, t->train.inputs, t->train.targets, B, T, loss,
                         err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    if (!t->args->quiet) fprintf(stderr, "debug state written to %s (loss %.6f)\n", t->args->debug_state, loss);
    return TRAIN_OK;
}

// The run directory: new (config.ini, fresh log) or resumed (checkpoint, cut log).
static int setup_run_dir(Trainer *t) {
    const TrainOptions *opt = t->opt;
    char err[1024];
    snprintf(t->path_ckpt, sizeof t->path_ckpt, "%s/checkpoint.safetensors", opt->out_dir);
    snprintf(t->path_model, sizeof t->path_model, "%s/model.safetensors", opt->out_dir);
    snprintf(t->path_log, sizeof t->path_log, "%s/log.csv", opt->out_dir);
    snprintf(t->path_config, sizeof t->path_config, "%s/config.ini", opt->out_dir);
    int resume = t->args->resume_dir != NULL;
    AdamWConfig acfg = {opt->beta1, opt->beta2, opt->eps, opt->weight_decay};
    if (adamw_init(&t->adamw, &acfg, gpt_num_params(t->model)) != 0) {
        fprintf(stderr, "out of memory for the AdamW moments\n");
        return TRAIN_EIO;
    }
    t->state.config_hash = options_model_hash(opt);
    if (resume) {
        if (checkpoint_load(t->path_ckpt, t->model, &t->adamw, &t->state, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        loader_set_rng(&t->train, t->state.data_rng);
    } else {
        if (!t->args->overwrite && (file_exists(t->path_ckpt) || file_exists(t->path_log))) {
            fprintf(stderr, "%s: already holds a run; continue it with --resume %s or start over with --overwrite\n",
                    opt->out_dir, opt->out_dir);
            return TRAIN_ECONFIG;
        }
        if (make_dirs(opt->out_dir, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return TRAIN_EIO;
        }
        remove(t->path_ckpt);   // --overwrite: an old checkpoint must not be resumed by mistake
        t->state.step = 0;
        t->state.elapsed_s = 0;
    }
    // config.ini is (re)written on resume too: [optim]/[run] overrides such as
    // --steps stick for the next resume.
    if (options_write_ini(opt, t->path_config, t->vocab_size, err, sizeof err) != 0 ||
        runlog_open(&t->log, t->path_log, resume ? t->state.step : -1, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return TRAIN_EIO;
    }
    return TRAIN_OK;
}

static float evaluate(Trainer *t) {
    const TrainOptions *opt = t->opt;
    double sum = 0.0;
    for (int k = 0; k < opt->eval_batches; k++) {
        loader_eval_batch(&t->val, (size_t)k);
        sum += gpt_forward(t->model, t->val.inputs, t->val.targets, opt->batch_size, opt->model.block_size);
    }
    return (float)(sum / opt->eval_batches);
}

static int save(Trainer *t) {
    char err[1024];
    t->state.data_rng = loader_get_rng(&t->train);
    if (checkpoint_save(t->path_ckpt, t->model, &t->adamw, &t->state, err, sizeof err) != 0 ||
        gpt_save(t->model, t->path_model, err, sizeof err) != 0) {
        progress_break(&t->progress);
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static int diverged(Trainer *t, int step, const char *what, double value) {
    progress_break(&t->progress);
    fprintf(stderr, "step %d: %s is %g; stopping (the last checkpoint in %s is from before the divergence; "
            "try a lower lr)\n", step, what, value, t->opt->out_dir);
    return TRAIN_EDIVERGED;
}

// Test hook (tests/test_train_run.c): ROPELAB_TEST_SIGINT_AT_STEP=k raises
// SIGINT after step k, exactly as a Ctrl-C during that step would.
static int sigint_hook_step(void) {
    const char *s = getenv("ROPELAB_TEST_SIGINT_AT_STEP");
    return s ? atoi(s) : -1;
}

// Gradients of one step: grad_accum micro-batches, each backward scaled by
// 1/grad_accum so the sum is the gradient of the mean loss. Returns that mean.
static float accumulate_gradients(Trainer *t) {
    const int B = t->opt->batch_size, T = t->opt->model.block_size, accum = t->opt->grad_accum;
    gpt_zero_grad(t->model);
    double loss_sum = 0.0;
    for (int a = 0; a < accum; a++) {
        loader_next_batch(&t->train);
        loss_sum += gpt_forward(t->model, t->train.inputs, t->train.targets, B, T);
        gpt_backward(t->model, 1.0f / accum);
    }
    return (float)(loss_sum / accum);
}

// One optimizer update (0-based index s). Returns 0, or an exit status on divergence.
static int train_step(Trainer *t, int s, float lr, float *loss, double *norm) {
    const ParamEntry *entries;
    int n_entries = gpt_param_entries(t->model, &entries);
    size_t n_params = gpt_num_params(t->model);
    float *grads = gpt_grads(t->model);
    *loss = accumulate_gradients(t);
    *norm = grad_global_norm(grads, n_params);
    if (!isfinite(*loss)) return diverged(t, s + 1, "the training loss", *loss);
    if (!isfinite(*norm)) return diverged(t, s + 1, "the gradient norm", *norm);
    grad_clip(grads, n_params, *norm, t->opt->grad_clip);
    adamw_step(&t->adamw, gpt_params(t->model), grads, entries, n_entries, lr, s + 1);
    return 0;
}

static int train_loop(Trainer *t) {
    const TrainOptions *opt = t->opt;
    LrSchedule sched = {opt->lr, opt->min_lr, opt->warmup_steps, opt->steps};
    const double tokens_per_step = (double)opt->batch_size * opt->model.block_size * opt->grad_accum;
    const int hook_step = sigint_hook_step();
    double t_begin = now_s(), elapsed0 = t->state.elapsed_s;
    int first_step = t->state.step;
    float last_val = NAN;

    progress_init(&t->progress, t->args->quiet, opt->steps);
    if (!t->args->quiet)
        fprintf(stderr, "%s %s: %zu parameters, vocab %d, %.0f tokens per step, %d threads, step %d of %d\n",
                first_step ? "resuming" : "training", opt->out_dir, gpt_num_params(t->model), t->vocab_size,
                tokens_per_step, omp_get_max_threads(), first_step, opt->steps);
    if (first_step == 0) {                   // row 0: the initial weights
        last_val = evaluate(t);
        if (!isfinite(last_val)) return diverged(t, 0, "the validation loss", last_val);
        runlog_row(&t->log, 0, NAN, last_val, NAN, NAN, NAN, elapsed0 + now_s() - t_begin);
        progress_update(&t->progress, 0, NAN, last_val, 1, 0, NAN);
    }
    while (t->state.step < opt->steps) {
        int s = t->state.step;               // 0-based index of this update
        float lr = lr_at_step(&sched, s), loss;
        double norm, t0 = now_s();
        int rc = train_step(t, s, lr, &loss, &norm);
        if (rc) return rc;
        t->state.step = ++s;                 // from here on, s counts updates done
        double tok_s = tokens_per_step / (now_s() - t0);

        int evaluated = s == opt->steps || (opt->eval_every > 0 && s % opt->eval_every == 0);
        float val = evaluated ? evaluate(t) : NAN;
        if (evaluated && !isfinite(val)) return diverged(t, s, "the validation loss", val);
        if (evaluated) last_val = val;
        double now = now_s();
        t->state.elapsed_s = elapsed0 + now - t_begin;
        runlog_row(&t->log, s, loss, val, lr, (float)norm, tok_s, t->state.elapsed_s);
        double eta = (now - t_begin) / (s - first_step) * (opt->steps - s);
        progress_update(&t->progress, s, loss, last_val, evaluated, tok_s, eta);

        if (s == hook_step) raise(SIGINT);
        int stopping = stop_signal != 0;
        if (s == opt->steps || (opt->save_every > 0 && s % opt->save_every == 0) || stopping)
            if (save(t) != 0) return TRAIN_EIO;
        if (stopping) {
            progress_break(&t->progress);
            fprintf(stderr, "stopped by %s after step %d; checkpoint saved; continue with ./train --resume %s\n",
                    stop_signal == SIGINT ? "SIGINT" : "SIGTERM", s, opt->out_dir);
            return 128 + stop_signal;
        }
    }
    progress_break(&t->progress);
    if (!t->args->quiet)
        fprintf(stderr, "done: step %d, val loss %.4f, %.1f s; weights in %s\n", t->state.step, last_val,
                t->state.elapsed_s, t->path_model);
    return TRAIN_OK;
}

int train_run(const TrainOptions *opt, const TrainArgs *args) {
    Trainer t;
    memset(&t, 0, sizeof t);
    t.opt = opt;
    t.args = args;
    threads_set(opt->threads);
    int rc = setup_model_and_data(&t, args->debug_state == NULL);
    if (rc == TRAIN_OK && args->debug_state) rc = run_debug_state(&t);
    else if (rc == TRAIN_OK) {
        rc = setup_run_dir(&t);
        if (rc == TRAIN_OK && t.state.step >= opt->steps) {
            if (!args->quiet) fprintf(stderr, "%s: already at step %d of %d; nothing to do\n",
                                      opt->out_dir, t.state.step, opt->steps);
        } else if (rc == TRAIN_OK) {
            install_signal_handlers();
            rc = train_loop(&t);
        }
    }
    trainer_free(&t);
    return rc;
}
