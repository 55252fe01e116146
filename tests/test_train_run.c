// test_train_run.c: ./train end to end on a small structured corpus that the
// test writes and tokenises with ./prepare: every positional scheme learns,
// an interrupted and resumed run logs exactly the losses of a straight run,
// a crash in the middle of a save leaves the previous checkpoint usable,
// --debug-state holds true gradients, the start line and machine.txt say
// what matmul = auto chose, its measured choice is the run's for its life
// (the named engine's run bit for bit, resumed too), and a diverging run stops with a message naming
// the step. Run from the repository root with ./train, its
// test build (TRAIN_WITH_FAULTS, for the interruption and the crash) and
// ./prepare built.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/rng.h"
#include "model/gpt.h"
#include "util_gradcheck.h"
#include "format/safetensors.h"
#include "format/weights_file.h"
#include "train/options.h"
#include "util_run.h"

// Tiny models gain nothing from threads, and 2 OpenMP threads on a 2-core
// machine that is busy with other work can be many times slower: runs use one
// thread, except the exact-resume tests, which use two so that the
// determinism of the parallel loops is checked too.

static int setup(void **state) {
    return make_data_dir("train");
}

// val_loss of a log row (third field), NAN if empty.
static double row_val(const char *row) {
    const char *c = strchr(strchr(row, ',') + 1, ',') + 1;
    return *c == ',' ? NAN : atof(c);
}

static long long checkpoint_step(const char *path) {
    StFile *f;
    char err[512];
    if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    const char *s = st_meta(f, "step");
    assert_non_null(s);
    long long step = atoll(s);
    st_close(f);
    return step;
}

static void test_every_scheme_learns(void **state) {
    // every scheme of the list (pos.h) on both blocks: a new scheme is covered by adding it there
    static char rows[200][160];
    static const char *const blocks[] = {"gpt2", "llama"};
    for (int kb = 0; kb < 2 * POS_COUNT; kb++) {
        const char *scheme = pos_kind_name((PosKind)(kb % POS_COUNT)), *block = blocks[kb / POS_COUNT];
        char run_dir[512], path[600], err[512];
        snprintf(run_dir, sizeof run_dir, "%s/learn-%s-%s", dir, scheme, block);
        int rc = run("./train configs/tiny.ini %s --threads=1 --pos=%s --block=%s --out_dir=%s --quiet", data_args,
                     scheme, block, run_dir);
        if (rc != 0) fail_msg("%s %s: exit %d: %s", scheme, block, rc, out);
        int n = read_log(run_dir, rows, 200);
        assert_int_equal(n, 61);                        // row 0 + 60 steps of configs/tiny.ini
        double first = row_val(rows[0]), last = row_val(rows[n - 1]);
        printf("  %-10s %-5s val loss %.3f -> %.3f\n", scheme, block, first, last);
        if (!(last <= 0.7 * first))
            fail_msg("%s %s: val loss %.4f -> %.4f, not below 70%%", scheme, block, first, last);
        // the weights file is the contract file; the checkpoint is one too, with extras
        GPT *m;
        snprintf(path, sizeof path, "%s/model.safetensors", run_dir);
        if (gpt_load(&m, path, 0, err, sizeof err) != 0) fail_msg("%s", err);
        assert_string_equal(pos_kind_name(gpt_config(m)->pos), scheme);
        assert_int_equal(gpt_config(m)->block, kb / POS_COUNT == 0 ? BLOCK_GPT2 : BLOCK_LLAMA);
        assert_int_equal(gpt_config(m)->vocab_size, 320);
        // llama has no biases: none in the file
        assert_true((gpt_find_param(m, "h.0.mlp.c_fc.bias") != NULL) == (kb < POS_COUNT));
        gpt_free(m);
        StFile *f;
        if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
        assert_string_equal(st_meta(f, "block"), block);   // the metadata names the block
        st_close(f);
        snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
        assert_int_equal(gpt_load(&m, path, 0, err, sizeof err), -1);
        if (gpt_load(&m, path, 1, err, sizeof err) != 0) fail_msg("%s", err);
        gpt_free(m);
        assert_int_equal(checkpoint_step(path), 60);
    }
    // A second run into the same directory is refused (exit 2) unless --overwrite.
    assert_int_equal(run("./train configs/tiny.ini %s --out_dir=%s/learn-rope-gpt2 --quiet", data_args, dir), 2);
    assert_non_null(strstr(out, "already holds a run"));
    // A missing data file is an I/O error (exit 1) naming the file.
    assert_int_equal(run("./train configs/tiny.ini --tokenizer=%s/nope.bin --out_dir=%s/x --quiet", dir, dir), 1);
    assert_non_null(strstr(out, "nope.bin"));
}

// The reference: 40 straight steps with t5 (shared bias table, so its
// gradient accumulation is covered too), evaluations every 10 steps.
#define RUN_ARGS "configs/tiny.ini %s --threads=2 --pos=t5 --steps=40 --eval_every=10 --save_every=10"

static int straight_rows(char rows[][160]) {
    static int done = 0;
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/straight", dir);
    if (!done) {
        if (run("./train " RUN_ARGS " --out_dir=%s --quiet", pinned_args, run_dir) != 0) fail_msg("%s", out);
        done = 1;
    }
    return read_log(run_dir, rows, 100);
}

static void test_interrupt_and_resume_is_exact(void **state) {
    static char ref[100][160], got[100][160];
    int n_ref = straight_rows(ref);
    assert_int_equal(n_ref, 41);
    char run_dir[512];
    snprintf(run_dir, sizeof run_dir, "%s/interrupted", dir);
    // SIGINT during step 15 (not an evaluation or save step): saved at the end of the step.
    int rc = run("ROPELAB_TEST_SIGINT_AT_STEP=15 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s", pinned_args, run_dir);
    assert_int_equal(rc, 130);
    assert_non_null(strstr(out, "stopped by SIGINT after step 15"));
    assert_non_null(strstr(out, "step 10/40"));           // not a terminal: a plain line per evaluation
    char path[600];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    assert_int_equal(checkpoint_step(path), 15);
    assert_int_equal(read_log(run_dir, got, 100), 16);
    rc = run("./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    assert_same_rows(ref, n_ref, got, read_log(run_dir, got, 100));
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/straight/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/model.safetensors", run_dir);
    assert_true(files_equal(a, b));                       // bit-identical final weights
    // Resuming a finished run does nothing; --steps may be raised to continue it.
    assert_int_equal(run("./train --resume %s --quiet", run_dir), 0);
    assert_int_equal(read_log(run_dir, got, 100), 41);
    assert_int_equal(run("./train --resume %s --d_model=64", run_dir), 2);
    assert_non_null(strstr(out, "--d_model: cannot be changed on --resume"));
}

// block=llama through every program: an interrupted and resumed run logs the
// straight run's rows and ends with the same weights; ./eval and ./sample
// (KV cache) read its model; --init-from starts a llama run from it and
// refuses a gpt2 run, naming the key.
static void test_llama_resume_eval_sample_init_from(void **state) {
    static char ref[100][160], got[100][160];
    char straight[512], stopped[512], a[600], b[600];
    snprintf(straight, sizeof straight, "%s/llama-straight", dir);
    snprintf(stopped, sizeof stopped, "%s/llama-stopped", dir);
#define LLAMA_ARGS "configs/tiny.ini %s --threads=1 --block=llama --pos=rope --steps=30 --save_every=10"
    if (run("./train " LLAMA_ARGS " --out_dir=%s --quiet", pinned_args, straight) != 0) fail_msg("%s", out);
    int n_ref = read_log(straight, ref, 100);
    assert_int_equal(n_ref, 31);
    assert_int_equal(run("ROPELAB_TEST_SIGINT_AT_STEP=12 " TRAIN_WITH_FAULTS " " LLAMA_ARGS " --out_dir=%s --quiet",
                         pinned_args, stopped), 130);
    if (run("./train --resume %s --quiet", stopped) != 0) fail_msg("resume: %s", out);
    assert_same_rows(ref, n_ref, got, read_log(stopped, got, 100));
    snprintf(a, sizeof a, "%s/model.safetensors", straight);
    snprintf(b, sizeof b, "%s/model.safetensors", stopped);
    assert_true(files_equal(a, b));
    // ./eval: the model's loss on the validation file, finite and below the untrained one
    assert_int_equal(run("./eval --weights %s --data %s/data/val.bin --threads 1", a, dir), 0);
    const char *loss = strstr(out, "loss=");
    assert_non_null(loss);
    double l = atof(loss + 5);
    printf("  llama: ./eval loss %.4f (log: %.4f at step 0)\n", l, row_val(ref[0]));
    assert_true(isfinite(l) && l < 0.5 * row_val(ref[0]));
    // ./sample: decodes with the KV cache
    assert_int_equal(run("./sample --weights %s --tokenizer %s/data/tokenizer.bin --tokens 20 --seed 3 --threads 1",
                         a, dir), 0);
    assert_true(strlen(out) > 0);
    // --init-from: a llama run starts from it; a gpt2 run is another model
    assert_int_equal(run("./train " LLAMA_ARGS " --steps=5 --init-from=%s --out_dir=%s/llama-init --quiet",
                         pinned_args, a, dir), 0);
    assert_int_equal(run("./train configs/tiny.ini %s --threads=1 --pos=rope --steps=5 --init-from=%s "
                         "--out_dir=%s/gpt2-init --quiet", data_args, a, dir), 2);
    assert_non_null(strstr(out, "block"));
#undef LLAMA_ARGS
}

static void test_crash_in_save_keeps_previous_checkpoint(void **state) {
    static char ref[100][160], got[100][160];
    int n_ref = straight_rows(ref);
    char run_dir[512], path[600], tmp[640], err[512];
    snprintf(run_dir, sizeof run_dir, "%s/crashed", dir);
    int rc = run("ROPELAB_TEST_CRASH_IN_SAVE=20 " TRAIN_WITH_FAULTS " " RUN_ARGS " --out_dir=%s --quiet",
                 pinned_args, run_dir);
    assert_int_equal(rc, 1);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.crash0", path);  // a temporary's name (PATH.tmp.XXXXXX)
    assert_int_equal(access(tmp, F_OK), 0);               // the half-written file is there ...
    StFile *f;
    assert_int_equal(st_open(&f, tmp, err, sizeof err), -1);   // ... and is not a valid file
    assert_int_equal(checkpoint_step(path), 10);          // the previous checkpoint is intact
    assert_int_equal(read_log(run_dir, got, 100), 21);    // rows up to the crash
    rc = run("./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume: exit %d: %s", rc, out);
    assert_same_rows(ref, n_ref, got, read_log(run_dir, got, 100));
    assert_int_equal(access(tmp, F_OK), -1);              // the resumed run removed it
}

// kill -9 at arbitrary moments of a run that saves every step. The engine is
// named (no matmul = auto trial) and the first kill's clock starts when the
// run directory has its config.ini, so that a slow start (a sanitizer build,
// a busy machine) cannot put every kill before the run exists.
static void test_kill9_during_saves(void **state) {
    static char rows[400][160];
    char run_dir[512], path[600], config[600], cmd[2048];
    snprintf(run_dir, sizeof run_dir, "%s/killed", dir);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    snprintf(config, sizeof config, "%s/config.ini", run_dir);
    const int delays_ms[] = {700, 300, 450};
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "exec ./train %s --resume %s --quiet >/dev/null 2>&1", "", run_dir);
        if (k == 0)
            snprintf(cmd, sizeof cmd, "exec ./train configs/tiny.ini %s --threads=1 --steps=300 --save_every=1 --eval_every=50 "
                     "--out_dir=%s --quiet >/dev/null 2>&1", pinned_args, run_dir);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        for (int waited_ms = 0; k == 0 && access(config, F_OK) != 0 && waited_ms < 120000; waited_ms += 10)
            usleep(10 * 1000);
        usleep(delays_ms[k] * 1000);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        if (access(path, F_OK) == 0) {
            long long step = checkpoint_step(path);       // whole and readable wherever the kill landed
            printf("  kill %d after %d ms: checkpoint at step %lld\n", k, delays_ms[k], step);
        }
    }
    int rc = run("./train --resume %s --quiet", run_dir);
    if (rc != 0) fail_msg("resume after kill -9: exit %d: %s", rc, out);
    int n = read_log(run_dir, rows, 400);
    assert_int_equal(n, 301);                             // every step exactly once
    for (int i = 0; i < n; i++) assert_int_equal(atoi(rows[i]), i);
    assert_int_equal(checkpoint_step(path), 300);
}

static void test_debug_state(void **state) {
    char path[600], err[512];
    snprintf(path, sizeof path, "%s/debug.safetensors", dir);
    int rc = run("./train configs/tiny.ini %s --pos=learned --threads=1 --debug-state %s --quiet", data_args, path);
    if (rc != 0) fail_msg("exit %d: %s", rc, out);
    StFile *f;
    if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    GPT *m;
    if (gpt_load(&m, path, 1, err, sizeof err) != 0) fail_msg("%s", err);
    const GPTConfig *cfg = gpt_config(m);
    assert_int_equal(cfg->pos, POS_LEARNED);
    assert_string_equal(st_meta(f, "pos"), "learned");
    assert_string_equal(st_meta(f, "vocab_size"), "320");
    const ParamEntry *e;
    int n = gpt_param_entries(m, &e);
    assert_int_equal(st_num_tensors(f), 2 * n + 3);
    for (int i = 0; i < n; i++) {
        char gname[96];
        snprintf(gname, sizeof gname, "grad.%s", e[i].name);
        const StTensor *p = st_find(f, e[i].name), *g = st_find(f, gname);
        if (!p || !g) fail_msg("missing %s or %s", e[i].name, gname);
        assert_int_equal(g->dtype, ST_F32);
        assert_int_equal(g->ndim, e[i].ndim);
        for (int d = 0; d < e[i].ndim; d++) assert_int_equal(g->shape[d], e[i].shape[d]);
    }
    const StTensor *in = st_find(f, "inputs"), *tg = st_find(f, "targets"), *loss = st_find(f, "loss");
    assert_non_null(in); assert_non_null(tg); assert_non_null(loss);
    assert_int_equal(in->dtype, ST_I32);
    assert_int_equal(tg->dtype, ST_I32);
    assert_int_equal(loss->dtype, ST_F32);
    assert_int_equal(in->ndim, 2);
    assert_int_equal(in->shape[0], 8);                   // batch_size of tiny.ini
    assert_int_equal(in->shape[1], 32);                  // block_size of tiny.ini
    assert_int_equal(tg->shape[0], 8);
    assert_int_equal(tg->shape[1], 32);
    assert_int_equal(loss->ndim, 1);
    assert_int_equal(loss->shape[0], 1);
    const int *inputs = in->data, *targets = tg->data;
    for (int b = 0; b < 8; b++)                          // targets are the inputs shifted by one
        for (int t = 0; t + 1 < 32; t++) assert_int_equal(targets[b * 32 + t], inputs[b * 32 + t + 1]);
    float L = *(const float *)loss->data;
    assert_true(fabsf(L - logf(320.0f)) < 0.5f);          // near ln V at initialisation

    // The file's loss and gradients are the real ones: recompute the loss from
    // the stored parameters, on the engine the file names (matmul = auto's
    // choice), and check a few gradients by central differences.
    GPTMatmul matmul;
    GPTPrecision precision;
    assert_int_equal(options_engine(st_meta(f, "matmul"), st_meta(f, "precision"), 0, &matmul, &precision, NULL, err,
                                    sizeof err), 0);
    assert_int_equal(gpt_set_matmul(m, matmul, precision, GPT_ATTENTION_BLOCKED, err, sizeof err), 0);
    assert_int_equal(gpt_alloc_activations(m, 8, 32, err, sizeof err), 0);
    assert_float_equal(gc_forward(m, inputs, targets, 8, 32), L, 1e-5);
    float *params = gpt_params(m);
    const char *checks[] = {"ln_f.bias", "wpe", "h.1.mlp.c_fc.weight", "wte"};
    for (int c = 0; c < 4; c++) {
        char gname[96];
        snprintf(gname, sizeof gname, "grad.%s", checks[c]);
        const StTensor *g = st_find(f, gname);
        const float *grad = g->data;
        size_t numel = g->nbytes / 4, best = 0;
        for (size_t i = 0; i < numel; i++) if (fabsf(grad[i]) > fabsf(grad[best])) best = i;
        size_t off = 0;
        for (int i = 0; i < n; i++) if (strcmp(e[i].name, checks[c]) == 0) off = e[i].offset;
        float *p = &params[off + best], saved = *p, h = 1e-2f;
        *p = saved + h;
        double lp = gc_forward(m, inputs, targets, 8, 32);
        *p = saved - h;
        double lm = gc_forward(m, inputs, targets, 8, 32);
        *p = saved;
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - grad[best]) > 0.05 * fabs(grad[best]) + 1e-4)
            fail_msg("%s[%zu]: file grad %g, finite difference %g", checks[c], best, grad[best], fd);
    }
    gpt_free(m);
    st_close(f);
}

// The start line and machine.txt say what matmul = auto chose and why. The
// trial's times come from the test build's hook (ROPELAB_TEST_AUTO_MS,
// src/train/fault_inject.h), read only after a trial ran, so each choice is
// made on any machine. Where there is one candidate (bf16, the reproducible
// mode, a named engine) or one pass (--debug-state) nothing is measured: the
// hook then holds a value a trial would fail on, and the run must not fail.
// The reproducible mode takes OpenBLAS in ./train and in ./eval, never
// refusing auto.
#define FASTER_ONEDNN "ROPELAB_TEST_AUTO_MS=openblas=2,onednn=1"
#define FASTER_OPENBLAS "ROPELAB_TEST_AUTO_MS=openblas=1,onednn=2"
#define UNREAD "ROPELAB_TEST_AUTO_MS=never-read"
static int have_bf16(void) {
    GPTEngine *e;
    char err[256];
    if (gpt_engine_make(GPT_MATMUL_ONEDNN, GPT_BF16, GPT_ATTENTION_BLOCKED, &e, err, sizeof err) != 0) return 0;
    gpt_engine_free(e);
    return 1;
}

static void test_matmul_auto_recorded(void **state) {
    static const struct {
        const char *env, *flags, *engine, *choice;
    } cases[] = {
        {FASTER_ONEDNN, "", "onednn fp32 (",
         "matmul = auto: onednn fp32 (measured per forward+backward: onednn 1.00 ms, openblas 2.00 ms, as the test "
         "hook says)"},
        {FASTER_OPENBLAS, "", "openblas fp32 (",
         "matmul = auto: openblas fp32 (measured per forward+backward: openblas 1.00 ms, onednn 2.00 ms, as the test "
         "hook says)"},
        {UNREAD, "--reproducible=1", "openblas fp32 (", "matmul = auto: openblas fp32 (reproducible)"},
        {UNREAD, "--matmul=openblas", "openblas fp32 (", "matmul = openblas"},
        {UNREAD, "--matmul=onednn", "onednn fp32 (", "matmul = onednn"},
        {UNREAD, "--precision=bf16", "onednn bf16 (", "matmul = auto: onednn bf16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char run_dir[512], want[256];
        if (strstr(cases[i].flags, "bf16") && !have_bf16()) {
            printf("  no bf16 products on this CPU: the bf16 case is not run\n");
            continue;
        }
        snprintf(run_dir, sizeof run_dir, "%s/auto-%zu", dir, i);
        if (run("{ %s " TRAIN_WITH_FAULTS " configs/tiny.ini %s --threads=1 --steps=1 --eval_every=0 %s "
                "--out_dir=%s && cat %s/machine.txt; }", cases[i].env, data_args, cases[i].flags, run_dir, run_dir) != 0)
            fail_msg("%s %s: %s", cases[i].env, cases[i].flags, out);
        snprintf(want, sizeof want, "; %s", cases[i].engine);
        if (!strstr(out, want)) fail_msg("%s %s: no '%s' in the start line: %s", cases[i].env, cases[i].flags, want, out);
        snprintf(want, sizeof want, "; %s", cases[i].choice);
        if (!strstr(out, want)) fail_msg("%s %s: no '%s' in the start line: %s", cases[i].env, cases[i].flags, want, out);
        snprintf(want, sizeof want, "\nengine = %s", cases[i].engine);
        if (!strstr(out, want)) fail_msg("%s %s: no '%s' in machine.txt: %s", cases[i].env, cases[i].flags, want, out);
        snprintf(want, sizeof want, "\n%s\n", cases[i].choice);
        if (!strstr(out, want)) fail_msg("%s %s: no '%s' in machine.txt: %s", cases[i].env, cases[i].flags, want, out);
    }
    assert_int_equal(run("./eval --weights %s/auto-2/model.safetensors --data "
                         "%s/data/val.bin --batches 1 --threads 1 --reproducible", dir, dir), 0);
    // --debug-state's one pass: the rule (options_engine), no trial.
    char path[600], err[512];
    snprintf(path, sizeof path, "%s/auto-debug.safetensors", dir);
    if (run(UNREAD " " TRAIN_WITH_FAULTS " configs/tiny.ini %s --threads=1 --debug-state %s --quiet", data_args, path))
        fail_msg("--debug-state: %s", out);
    GPTMatmul rule;
    GPTPrecision fp32;
    assert_int_equal(options_engine("auto", "fp32", 0, &rule, &fp32, NULL, err, sizeof err), 0);
    StFile *f;
    if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    assert_string_equal(st_meta(f, "matmul"), options_matmul_name(rule));
    st_close(f);
}

// A checkpoint's record of matmul = auto's choice ("" when it has none).
static const char *checkpoint_matmul_auto(const char *run_dir, char *buf, size_t n) {
    char path[600], err[512];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    StFile *f;
    if (st_open(&f, path, err, sizeof err) != 0) fail_msg("%s", err);
    const char *v = st_meta(f, "matmul_auto");
    snprintf(buf, n, "%s", v ? v : "");
    st_close(f);
    return buf;
}

// matmul = auto's choice is the run's for its life. For each engine made the
// faster by the hook: the auto run is, bit for bit (log and weights), the run
// with that engine named; so is a run interrupted at step 10 and resumed with
// the hook's times flipped, which measures nothing and keeps the recorded
// choice. Where the two engines' runs differ these equalities name the
// engine; where they do not (OpenBLAS's AVX-512 kernels and oneDNN's can sum
// the tiny model's products alike, bit for bit) the checkpoint's record and
// the start line still do, and the test says which held. A checkpoint without the record (a run on a named engine, as
// before the record existed) resumed as auto takes the rule, the ISA question
// answered by ROPELAB_TEST_AUTO_ISA, and records it: the next resume keeps it
// whatever the rule would say then.
#define AUTO_ARGS "configs/tiny.ini %s --threads=2 --steps=20 --eval_every=10 --save_every=10"
static void test_matmul_auto_is_the_runs_for_life(void **state) {
    static char ref[40][160], got[40][160];
    static const struct {
        const char *engine, *faster, *flipped;
    } cases[] = {{"onednn", FASTER_ONEDNN, FASTER_OPENBLAS}, {"openblas", FASTER_OPENBLAS, FASTER_ONEDNN}};
    char named[2][600], buf[32];
    for (int i = 0; i < 2; i++) {
        char d[512], a[600], b[600];
        snprintf(d, sizeof d, "%s/life-named-%s", dir, cases[i].engine);
        snprintf(named[i], sizeof named[i], "%s/model.safetensors", d);
        if (run("./train " AUTO_ARGS " --matmul=%s --out_dir=%s --quiet", data_args, cases[i].engine, d) != 0)
            fail_msg("--matmul=%s: %s", cases[i].engine, out);
        int n_ref = read_log(d, ref, 40);
        assert_int_equal(n_ref, 21);
        // measured: the faster engine's run, bit for bit
        snprintf(d, sizeof d, "%s/life-auto-%s", dir, cases[i].engine);
        if (run("%s " TRAIN_WITH_FAULTS " " AUTO_ARGS " --out_dir=%s --quiet", cases[i].faster, data_args, d) != 0)
            fail_msg("auto (%s faster): %s", cases[i].engine, out);
        assert_same_rows(ref, n_ref, got, read_log(d, got, 40));
        snprintf(a, sizeof a, "%s/model.safetensors", d);
        if (!files_equal(named[i], a)) fail_msg("auto choosing %s: not the weights of --matmul=%s", cases[i].engine,
                                                cases[i].engine);
        assert_string_equal(checkpoint_matmul_auto(d, buf, sizeof buf), cases[i].engine);
        // interrupted, resumed with the times flipped: still the first choice, nothing measured
        snprintf(d, sizeof d, "%s/life-resumed-%s", dir, cases[i].engine);
        assert_int_equal(run("ROPELAB_TEST_SIGINT_AT_STEP=10 %s " TRAIN_WITH_FAULTS " " AUTO_ARGS " --out_dir=%s --quiet",
                             cases[i].faster, data_args, d), 130);
        if (run("%s " TRAIN_WITH_FAULTS " --resume %s", cases[i].flipped, d) != 0) fail_msg("resume: %s", out);
        snprintf(b, sizeof b, "; matmul = auto: %s fp32 (the run's choice, recorded in its checkpoint)\n",
                 cases[i].engine);
        if (!strstr(out, b)) fail_msg("resume: no '%s' in: %s", b, out);
        assert_null(strstr(out, "measured"));
        assert_same_rows(ref, n_ref, got, read_log(d, got, 40));
        snprintf(a, sizeof a, "%s/model.safetensors", d);
        if (!files_equal(named[i], a)) fail_msg("resumed auto run of %s: not the weights of --matmul=%s",
                                                cases[i].engine, cases[i].engine);
    }
    if (files_equal(named[0], named[1]))
        print_message("  the two engines train the tiny model to the same bits here: the choice is told by the "
                      "checkpoint's record and the start line alone\n");
    // No record: the rule, then recorded.
    static const struct {
        const char *isa, *engine, *why;
    } rule[] = {{"avx512", "onednn", "AVX-512"}, {"avx2", "openblas", "no AVX-512"}};
    for (int i = 0; i < 2; i++) {
        char d[512], want[256];
        snprintf(d, sizeof d, "%s/life-rule-%s", dir, rule[i].isa);
        if (run("./train " AUTO_ARGS " --steps=10 --matmul=openblas --out_dir=%s --quiet", data_args, d) != 0)
            fail_msg("%s", out);
        assert_string_equal(checkpoint_matmul_auto(d, buf, sizeof buf), "");
        if (run("ROPELAB_TEST_AUTO_ISA=%s " UNREAD " " TRAIN_WITH_FAULTS " --resume %s --matmul=auto --steps=15", rule[i].isa,
                d) != 0)
            fail_msg("resume as auto: %s", out);
        snprintf(want, sizeof want, "; matmul = auto: %s fp32 (%s, as the test hook says)\n", rule[i].engine,
                 rule[i].why);
        if (!strstr(out, want)) fail_msg("no '%s' in: %s", want, out);
        assert_string_equal(checkpoint_matmul_auto(d, buf, sizeof buf), rule[i].engine);
        if (run("ROPELAB_TEST_AUTO_ISA=%s " UNREAD " " TRAIN_WITH_FAULTS " --resume %s --steps=20", rule[1 - i].isa, d) != 0)
            fail_msg("second resume: %s", out);
        snprintf(want, sizeof want, "; matmul = auto: %s fp32 (the run's choice, recorded in its checkpoint)\n",
                 rule[i].engine);
        if (!strstr(out, want)) fail_msg("no '%s' in: %s", want, out);
    }
}
#undef AUTO_ARGS

static void test_divergence_stops(void **state) {
    char run_dir[512], path[600];
    snprintf(run_dir, sizeof run_dir, "%s/nan", dir);
    int rc = run("./train configs/tiny.ini %s --threads=1 --lr=1e30 --min_lr=0 --save_every=1 --out_dir=%s --quiet",
                 data_args, run_dir);
    assert_int_equal(rc, 3);
    int step = -1;
    const char *s = strstr(out, "step ");
    assert_non_null(s);
    assert_int_equal(sscanf(s, "step %d:", &step), 1);
    assert_true(strstr(out, "nan") || strstr(out, "inf"));
    printf("  diverged: %s", out);
    assert_true(step >= 1);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    if (step > 1) assert_int_equal(checkpoint_step(path), step - 1);   // the last good one stays
    if (step > 1) assert_non_null(strstr(out, "the last checkpoint in"));
    // No save before the divergence: the message names no checkpoint.
    snprintf(run_dir, sizeof run_dir, "%s/nan-unsaved", dir);
    rc = run("./train configs/tiny.ini %s --threads=1 --lr=1e30 --min_lr=0 --save_every=1000 --out_dir=%s --quiet",
             data_args, run_dir);
    assert_int_equal(rc, 3);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    assert_int_equal(access(path, F_OK), -1);
    if (strstr(out, "checkpoint in") || !strstr(out, "no checkpoint was saved"))
        fail_msg("divergence before any save: %s", out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_scheme_learns),
        cmocka_unit_test(test_interrupt_and_resume_is_exact),
        cmocka_unit_test(test_llama_resume_eval_sample_init_from),
        cmocka_unit_test(test_crash_in_save_keeps_previous_checkpoint),
        cmocka_unit_test(test_kill9_during_saves),
        cmocka_unit_test(test_debug_state),
        cmocka_unit_test(test_matmul_auto_recorded),
        cmocka_unit_test(test_matmul_auto_is_the_runs_for_life),
        cmocka_unit_test(test_divergence_stops),
    };
    return cmocka_run_group_tests(tests, setup, remove_data_dir);
}
