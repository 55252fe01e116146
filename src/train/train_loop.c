// train_loop.c: the training loop. Per step, grad_accum forward/backward
// passes, global-norm clipping, AdamW at the scheduled learning rate, a log
// row, validation and checkpoints on schedule; a signal stops it at the end
// of a step, with a checkpoint. Also --debug-state's one pass. Under mpirun,
// N processes train one model data-parallel: the dist_* calls (dist.h) say
// where they meet (sums across processes, agreement on errors and on
// stopping, the main process that owns the files); alone each is what one
// process does.
#include "train/train_loop.h"

#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/blas_cpu.h"
#include "common/clock.h"
#include "common/fs.h"
#include "format/weights_file.h"
#include "train/dist.h"
#include "train/fault_inject.h"
#include "train/schedule.h"
#include "train/train_status.h"

static volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) { stop_signal = sig; }

// SIGINT/SIGTERM only set a flag; the loop saves at the end of the step.
// SA_RESETHAND: a second Ctrl-C kills at once (the checkpoint files are
// written atomically, so that is safe too).
void install_signal_handlers(void) {
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

// --debug-state: one forward and backward on the first training batch (grad_accum 1).
// N processes: each runs its B of the first N*B windows with loss scale 1/N;
// the gradients and losses are summed and the inputs gathered, so the main
// process writes the file one process with batch N*B would write (up to the
// order of float sums).
int run_debug_state(Trainer *t) {
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
        if (debug_state_save(t->args->debug_state, t->model, inputs, targets, dist_size() * B, T, loss,
                             t->precision == GPT_BF16 ? "bf16" : "fp32", options_matmul_name(t->matmul),
                             t->attention == GPT_ATTENTION_FUSED, t->args->overwrite ? ATOMIC_REPLACE : ATOMIC_NEW,
                             err, sizeof err) != 0) {
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

int train_loop(Trainer *t) {
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
