// test_torch_crosscheck.c: the C program against the independent PyTorch
// reference (scripts/torch/torch_model.py), through the contract's files.
//
// For every scheme (and partial rope, and t5 with few buckets so the
// logarithmic buckets and the cap are reached), `./train --debug-state`
// writes one batch's parameters, loss and every gradient; then
// scripts/torch/check_debug_state.py recomputes loss and gradients in float64 in
// PyTorch and fails on any difference beyond float32 rounding (loss rel 1e-5,
// each gradient 1e-3 of its tensor's largest entry); on every engine:
// OpenBLAS (the default), oneDNN fp32 and bf16, and the reference engine
// (--matmul=reference) for every scheme. It also runs
// tests/torch_check.sh: the reference against a plain-loop NumPy model and the
// checker's own mutation tests. And a trained model.safetensors gives the same
// validation loss in the training log, in ./eval and in PyTorch. Skipped (not failed) where python3-torch is
// missing; .ci/run installs it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_shell.h"

#include "model/gpt.h"
#include "util_engine.h"

static char dir[128];

// 1 if /usr/bin/python3 can import torch, asked once (an import takes seconds).
static int have_torch = -1;

static int setup(void **state) {
    have_torch = system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
    if (!have_torch) return 0;  // tests skip
    snprintf(dir, sizeof dir, "/tmp/ropelab_xcheck_%d", (int)getpid());
    // A small corpus of varied text, tokenised with a 300-token vocabulary.
    if (run_shell("rm -rf %s && mkdir -p %s", dir, dir)) return -1;
    if (run_shell("for i in $(seq 1 60); do echo \"line $i: the quick brown fox $((i*7%%13)) jumps over "
           "the lazy dog $((i%%5)), and the cat sat on the mat $((i*3%%11)).\"; done > %s/corpus.txt%s",
           dir, "")) return -1;
    if (run_shell("./prepare --vocab-size 300 --val-fraction 0.2 --out-dir %s/data %s/corpus.txt >/dev/null 2>&1",
           dir, dir)) return -1;
    return 0;
}

static int teardown(void **state) {
    if (dir[0] && !getenv("KEEP")) run_shell("rm -rf %s", dir);
    return 0;
}

static void skip_without_torch(void) {
    if (!have_torch) {
        fprintf(stderr, "python3-torch is not installed: skipped\n");
        skip();
    }
}

// ./train --debug-state with the given extra flags into DIR/NAME.safetensors.
static void write_state(const char *name, const char *flags) {
    assert_int_equal(run_shell("./train configs/tiny.ini --quiet --threads=1 --tokenizer=%s/data/tokenizer.bin "
                               "--train_file=%s/data/train.bin --val_file=%s/data/val.bin --batch_size=3 "
                               "--block_size=24 --n_layer=2 --d_model=32 --n_head=4 %s --debug-state %s/%s.safetensors",
                               dir, dir, dir, flags, dir, name), 0);
}

// The float64 check of the states NAMES (n of them) in one PyTorch process;
// on a failure, its per-tensor tables are shown.
static void check_states(const char *const *names, int n) {
    char cmd[4096], out[256];
    snprintf(out, sizeof out, "%s/%s.check.txt", dir, names[0]);
    int len = snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/torch/check_debug_state.py");
    for (int i = 0; i < n; i++) len += snprintf(cmd + len, sizeof cmd - len, " %s/%s.safetensors", dir, names[i]);
    snprintf(cmd + len, sizeof cmd - len, " > %s 2>&1", out);
    assert_true((size_t)len < sizeof cmd - 300);
    int rc = system(cmd);
    if (rc != 0) {
        run_shell("cat %s", out);
    }
    assert_int_equal(rc, 0);
}

// One state: its debug state, then the check.
static void check_scheme(const char *name, const char *flags) {
    write_state(name, flags);
    check_states(&name, 1);
}

static void test_rope(void **state)         { skip_without_torch(); check_scheme("rope", "--pos=rope"); }
static void test_rope_partial(void **state) { skip_without_torch(); check_scheme("rope4", "--pos=rope --rope_dims=4 --rope_base=500"); }
static void test_learned(void **state)      { skip_without_torch(); check_scheme("learned", "--pos=learned"); }
static void test_sinusoidal(void **state)   { skip_without_torch(); check_scheme("sinusoidal", "--pos=sinusoidal --sinusoidal_scale=1"); }
static void test_sinusoidal_scaled(void **state) { skip_without_torch(); check_scheme("sinusoidal_s", "--pos=sinusoidal --sinusoidal_scale=0.1767767"); }
// rope beyond the training length: the scaled angle tables (block_size 24; yarn with a
// ramp that is neither 0 nor 1 for the first pairs: L = 8, betas 0.1..4).
static void test_rope_linear(void **state) { skip_without_torch(); check_scheme("rope_lin", "--pos=rope --rope_scaling=linear --rope_scaling_factor=3"); }
static void test_rope_ntk(void **state)    { skip_without_torch(); check_scheme("rope_ntk", "--pos=rope --rope_scaling=ntk --rope_scaling_factor=4"); }
static void test_rope_yarn(void **state)   { skip_without_torch(); check_scheme("rope_yarn", "--pos=rope --rope_scaling=yarn --rope_scaling_factor=4 "
                                             "--rope_original_length=8 --rope_yarn_beta_fast=4 --rope_yarn_beta_slow=0.1"); }
static void test_rope_yarn_paper(void **state) { skip_without_torch(); check_scheme("rope_yarnp", "--pos=rope --rope_scaling=yarn_paper "
                                             "--rope_scaling_factor=4 --rope_original_length=8 --rope_yarn_beta_fast=4 --rope_yarn_beta_slow=0.1"); }
// dynamic NTK: the window (24) is longer than L = 8, so the base grows: (2 * 24 / 8 - 1)^(R/(R-2))
static void test_rope_dynamic(void **state) { skip_without_torch(); check_scheme("rope_dyn", "--pos=rope --rope_scaling=dynamic "
                                             "--rope_scaling_factor=2 --rope_original_length=8"); }
// The fp32 oneDNN backend passes the same float32 check; bf16 products pass
// against a reference that rounds the same product inputs (scripts/torch/check_debug_state.py).
static void test_onednn_fp32(void **state) {
    skip_without_torch();
    static const char *const names[] = {"dnn_rope", "dnn_t5", "dnn_learned"};
    write_state(names[0], "--pos=rope --matmul=onednn");
    write_state(names[1], "--pos=t5 --t5_num_buckets=8 --t5_max_distance=16 --matmul=onednn");
    write_state(names[2], "--pos=learned --matmul=onednn");
    check_states(names, 3);
}
// check_scheme for every scheme on the list (gpt.h), with the engine's flags; t5 with few buckets.
static void check_every_scheme(const char *prefix, const char *engine_flags) {
    char names[POS_COUNT][32];
    const char *list[POS_COUNT];
    for (int k = 0; k < POS_COUNT; k++) {
        char flags[160];
        snprintf(names[k], sizeof names[k], "%s_%s", prefix, pos_kind_name((PosKind)k));
        snprintf(flags, sizeof flags, "--pos=%s %s%s", pos_kind_name((PosKind)k), engine_flags,
                 k == POS_T5 ? " --t5_num_buckets=8 --t5_max_distance=16" : "");
        write_state(names[k], flags);
        list[k] = names[k];
    }
    check_states(list, POS_COUNT);
}
static void test_bf16_every_scheme(void **state) {
    skip_without_torch();
    ue_skip_without_bf16();
    check_every_scheme("bf16", "--precision=bf16");
    // the fused attention's evaluation (tm.Bf16FusedAttention): every scheme in one key block
    // (T = 24), and at T = 150, three blocks of keys, where the online softmax rescales
    check_every_scheme("bf16f", "--precision=bf16 --attention=fused");
    static const char *const long_names[] = {"bf16f_long_t5", "bf16f_long_rope"};
    write_state(long_names[0], "--pos=t5 --t5_num_buckets=8 --t5_max_distance=16 --precision=bf16 --attention=fused "
                               "--block_size=150 --batch_size=2");
    write_state(long_names[1], "--pos=rope --precision=bf16 --attention=fused --block_size=150 --batch_size=2");
    check_states(long_names, 2);
}
// The reference engine (engine_reference.c's plain loops) passes the same check.
static void test_reference_every_scheme(void **state) {
    skip_without_torch();
    check_every_scheme("ref", "--matmul=reference");
}
// The llama block (RMSNorm, SwiGLU, no biases) under every scheme, on the default engine and in bf16.
static void test_llama_every_scheme(void **state) { skip_without_torch(); check_every_scheme("llama", "--block=llama"); }
static void test_llama_bf16(void **state) {
    skip_without_torch();
    ue_skip_without_bf16();
    static const char *const names[] = {"llama_bf16_rope", "llama_bf16_alibi"};
    write_state(names[0], "--block=llama --pos=rope --precision=bf16");
    write_state(names[1], "--block=llama --pos=alibi --precision=bf16");
    check_states(names, 2);
}
static void test_t5(void **state)           { skip_without_torch(); check_scheme("t5", "--pos=t5 --t5_num_buckets=8 --t5_max_distance=16"); }
static void test_alibi(void **state)        { skip_without_torch(); check_scheme("alibi", "--pos=alibi"); }
static void test_alibi_6_heads(void **state){ skip_without_torch(); check_scheme("alibi6", "--pos=alibi --n_head=6 --d_model=36"); }
static void test_none(void **state)         { skip_without_torch(); check_scheme("none", "--pos=none"); }

// Runs cmd and returns the number after "key=" in its output (-1 if absent).
static double number_after(const char *cmd, const char *key) {
    FILE *p = popen(cmd, "r");
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    const char *at = strstr(out, key);
    return at ? atof(at + strlen(key)) : -1.0;
}

// A trained checkpoint gives the same loss three ways: the validation loss
// the training loop logged at its last step, ./eval with the run's batch
// size and eval_batches, and the PyTorch reference loading model.safetensors.
static void test_checkpoint_loss_in_pytorch(void **state) {
    skip_without_torch();
    const char *schemes[] = {"rope", "learned", "t5"};
    for (int i = 0; i < 3; i++) {
        char cmd[2048];
        assert_int_equal(run_shell("./train configs/tiny.ini --quiet --threads=1 --pos=%s --tokenizer=%s/data/tokenizer.bin "
                                   "--train_file=%s/data/train.bin --val_file=%s/data/val.bin --batch_size=4 "
                                   "--block_size=16 --steps=20 --eval_every=10 --eval_batches=2 --out_dir=%s/run_%s",
                                   schemes[i], dir, dir, dir, dir, schemes[i]), 0);
        snprintf(cmd, sizeof cmd, "tail -1 %s/run_%s/log.csv | cut -d, -f3", dir, schemes[i]);
        FILE *p = popen(cmd, "r");
        double logged = -1;
        assert_int_equal(fscanf(p, "%lf", &logged), 1);
        pclose(p);
        snprintf(cmd, sizeof cmd, "./eval --weights %s/run_%s/model.safetensors --data %s/data/val.bin "
                 "--batch-size 4 --batches 2 --threads 1", dir, schemes[i], dir);
        double c_eval = number_after(cmd, " loss=");
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/torch/torch_eval.py --weights %s/run_%s/model.safetensors "
                 "--data %s/data/val.bin --batch-size 4 --batches 2", dir, schemes[i], dir);
        double torch_eval = number_after(cmd, "loss=");
        fprintf(stderr, "%s: logged %.6f, ./eval %.6f, PyTorch %.6f\n", schemes[i], logged, c_eval, torch_eval);
        assert_true(logged > 0.5);
        assert_float_equal(c_eval, logged, 2e-6 * logged);     // both printed with ~6 decimals
        assert_float_equal(torch_eval, c_eval, 1e-5 * c_eval);  // float32 vs float64
    }
}

static void test_reference_self_checks(void **state) {
    skip_without_torch();
    assert_int_equal(system("bash tests/torch_check.sh > /tmp/ropelab_torch_check.log 2>&1 || "
                            "{ cat /tmp/ropelab_torch_check.log; exit 1; }"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope), cmocka_unit_test(test_rope_partial),
        cmocka_unit_test(test_rope_linear), cmocka_unit_test(test_rope_ntk), cmocka_unit_test(test_rope_yarn),
        cmocka_unit_test(test_rope_yarn_paper), cmocka_unit_test(test_rope_dynamic),
        cmocka_unit_test(test_learned), cmocka_unit_test(test_sinusoidal), cmocka_unit_test(test_sinusoidal_scaled),
        cmocka_unit_test(test_t5), cmocka_unit_test(test_alibi),
        cmocka_unit_test(test_alibi_6_heads), cmocka_unit_test(test_none),
        cmocka_unit_test(test_onednn_fp32), cmocka_unit_test(test_bf16_every_scheme),
        cmocka_unit_test(test_reference_every_scheme),
        cmocka_unit_test(test_llama_every_scheme), cmocka_unit_test(test_llama_bf16),
        cmocka_unit_test(test_checkpoint_loss_in_pytorch),
        cmocka_unit_test(test_reference_self_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
