// test_compare_studies.c: the studies built on the comparison, end to end on
// a corpus the test writes: the fair sinusoidal baseline learns (at least as
// fast as `none`, the scheme without positions), and a quick version of the
// long-context study (scripts/run/long_context.sh) writes every row. No winner is
// asserted among the real schemes. Run from the repository root.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_study.h"

static char dir[128];

// Lines of a small grammar (learnable in a few dozen steps), tokenised with 300 tokens.
static int setup(void **state) {
    return make_quick_study(dir, sizeof dir, "studies", 900);
}

static int teardown(void **state) {
    return getenv("KEEP") ? 0 : run_shell("rm -rf %s", dir) == 0 ? 0 : -1;
}

// The validation loss of the last row of RUN/log.csv.
static double final_val(const char *run) {
    char path[512], line[512], last[512] = "";
    snprintf(path, sizeof path, "%s/log.csv", run);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) snprintf(last, sizeof last, "%s", line);
    fclose(f);
    const char *c = strchr(strchr(last, ',') + 1, ',') + 1;
    return atof(c);
}

// Mean and sample standard deviation of the final validation loss of
// configs/tiny.ini's 60 steps for seeds 1..3 with the given flags.
static void tiny_runs(const char *name, const char *flags, double *mean, double *sd) {
    double x[3];
    for (int seed = 1; seed <= 3; seed++) {
        char run[256];
        snprintf(run, sizeof run, "%s/tiny-%s-s%d", dir, name, seed);
        assert_int_equal(run_shell("./train configs/tiny.ini --quiet --threads=1 %s --seed=%d "
                            "--tokenizer=%s/data/tokenizer.bin --train_file=%s/data/train.bin "
                            "--val_file=%s/data/val.bin --out_dir=%s", flags, seed, dir, dir, dir, run), 0);
        x[seed - 1] = final_val(run);
    }
    *mean = (x[0] + x[1] + x[2]) / 3;
    double ss = 0;
    for (int i = 0; i < 3; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(ss / 2);
}

// The fair sinusoidal baseline learns like `none` (the causal mask alone):
// over 3 seeds of configs/tiny.ini its final validation loss is not higher
// than none's by more than twice the larger seed standard deviation (a gap
// the seeds cannot explain). The unscaled table (sinusoidal_scale = 1), for
// contrast, must fail that same test: it swamps the token embedding and
// stalls. Measured on this corpus (6 seeds): fair sinusoidal 0.62, none
// 0.56, unscaled 2.83 — the fair table is a little behind none here, which
// is why the test asks for "not slower beyond the seed spread", not for a winner.
static void test_fair_sinusoidal_learns_like_none(void **state) {
    double fair, fair_sd, none, none_sd, unscaled, unscaled_sd;
    tiny_runs("sinusoidal", "--pos=sinusoidal", &fair, &fair_sd);
    tiny_runs("none", "--pos=none", &none, &none_sd);
    tiny_runs("unscaled", "--pos=sinusoidal --sinusoidal_scale=1", &unscaled, &unscaled_sd);
    double spread = 2 * fmax(fair_sd, none_sd);
    printf("  tiny, 3 seeds: sinusoidal %.4f ± %.4f, none %.4f ± %.4f, unscaled %.4f ± %.4f; bound none + %.4f\n",
           fair, fair_sd, none, none_sd, unscaled, unscaled_sd, spread);
    assert_true(fair <= none + spread);
    assert_true(unscaled > none + 2 * fmax(unscaled_sd, none_sd));
}

// Counts the lines of path that start with prefix.
static int count_lines(const char *path, const char *prefix) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strncmp(line, prefix, strlen(prefix)) == 0;
    fclose(f);
    return n;
}

// A comparison of every scheme the study reads (1 seed), then the study with
// --quick (lengths T, 2T, 4T; 4 fine-tune steps at 4T): every row is there.
static void test_long_context_quick_study(void **state) {
    assert_int_equal(run_shell("bash scripts/run/compare.sh --config %s/quick.ini --out %s/cmp --seeds 1 "
                        "--variants \"rope learned sinusoidal t5 alibi none\" > %s/cmp.log 2>&1 "
                        "|| { cat %s/cmp.log; exit 1; }", dir, dir, dir, dir), 0);
    assert_int_equal(run_shell("bash scripts/run/long_context.sh --compare %s/cmp --out %s/lc --quick > %s/lc.log 2>&1 "
                        "|| { cat %s/lc.log; exit 1; }", dir, dir, dir, dir), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/lc/results.csv", dir);
    // untuned: 6 rope variants and 4 other schemes at 3 lengths, learned at T only
    const char *at_all[] = {"rope,0,", "rope-linear,0,", "rope-ntk,0,", "rope-yarn,0,", "rope-yarn_paper,0,",
                            "rope-dynamic,0,", "alibi,0,", "t5,0,", "sinusoidal,0,", "none,0,"};
    for (int i = 0; i < 10; i++) assert_int_equal(count_lines(path, at_all[i]), 3);
    assert_int_equal(count_lines(path, "learned,0,"), 1);
    // tuned at 4T: each rope variant at 4T (the only length >= 4T here)
    const char *tuned[] = {"rope,1,", "rope-linear,1,", "rope-ntk,1,", "rope-yarn,1,", "rope-yarn_paper,1,",
                           "rope-dynamic,1,"};
    for (int i = 0; i < 6; i++) assert_int_equal(count_lines(path, tuned[i]), 1);
    assert_int_equal(count_lines(path, "variant,"), 1);
    // every loss is a number: no empty field at the end of a row
    assert_int_equal(count_lines(path, ""), 1 + 10 * 3 + 1 + 6);
    assert_int_equal(run_shell("awk -F, 'NR > 1 && !($6 > 0) { bad = 1 } END { exit bad }' %s", path), 0);
    snprintf(path, sizeof path, "%s/lc/positions.csv", dir);
    assert_int_equal(count_lines(path, "rope-yarn,"), 64);   // one row per position of a 4T = 64 window
    assert_int_equal(count_lines(path, "none,"), 64);
    snprintf(path, sizeof path, "%s/lc/report.md", dir);
    const char *rows[] = {"| rope |", "| rope-linear |", "| rope-ntk |", "| rope-yarn |", "| rope-yarn_paper |",
                          "| rope-dynamic |", "| alibi |", "| t5 |", "| sinusoidal |", "| none |", "| learned |"};
    for (int i = 0; i < 11; i++) assert_true(count_lines(path, rows[i]) >= 1);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/lc/%s", dir, i ? "loss_vs_position.png" : "loss_vs_length.png");
        assert_int_equal(access(path, R_OK), 0);
    }
}

// ./train --init-from: a differing architecture key is refused naming it
// (exit 2), a file bad in itself with exit 1, learned's block_size cannot change, a bad file leaves an old run
// untouched even with --overwrite, and the weights really are the file's
// (a debug state from them holds them).
static void test_init_from(void **state) {
    char cmd[1024], base[256], args[700];
    snprintf(base, sizeof base, "%s/cmp/rope-s1/model.safetensors", dir);
    if (access(base, R_OK) != 0) {   // the quick study's comparison is not there when run alone
        assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=rope --out_dir=%s/cmp/rope-s1", dir, dir), 0);
    }
    snprintf(args, sizeof args, "%s/quick.ini --quiet --steps=4 --init-from=%s", dir, base);
    snprintf(cmd, sizeof cmd, "./train %s --pos=rope --n_layer=2 --out_dir=%s/if1 2>&1 | grep -q "
             "'n_layer is 1 in the file but 2 in this run'", args, dir);
    assert_int_equal(run_shell("%s", cmd), 0);
    assert_int_equal(run_shell("./train %s --pos=rope --n_layer=2 --out_dir=%s/if1 2>/dev/null", args, dir), 2);
    assert_int_equal(run_shell("./train %s --pos=t5 --out_dir=%s/if2 2>&1 | grep -q 'pos is rope in the file but t5'",
                        args, dir), 0);
    // a longer context with a scaling is what --init-from is for
    assert_int_equal(run_shell("./train %s --pos=rope --block_size=64 --rope_scaling=yarn --rope_scaling_factor=4 "
                        "--rope_original_length=16 --out_dir=%s/if3", args, dir), 0);
    assert_int_equal(run_shell("grep -qx 'rope_original_length = 16' %s/if3/config.ini", dir), 0);
    // without rope_original_length, the source's trained length (its block_size, 16), not the new 64
    assert_int_equal(run_shell("./train %s --pos=rope --block_size=64 --rope_scaling=yarn --rope_scaling_factor=4 "
                        "--out_dir=%s/if6", args, dir), 0);
    assert_int_equal(run_shell("grep -qx 'rope_original_length = 16' %s/if6/config.ini", dir), 0);
    // and a source that has one passes it on: if6 (block 64, L 16) to 128 keeps 16
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --steps=2 --pos=rope --block_size=128 --rope_scaling=yarn "
                        "--rope_scaling_factor=8 --init-from=%s/if6/model.safetensors --out_dir=%s/if7", dir, dir, dir), 0);
    assert_int_equal(run_shell("grep -qx 'rope_original_length = 16' %s/if7/config.ini", dir), 0);
    // a rope scaling for a scheme without rope: ./train and ./eval refuse it alike (exit 2, one line)
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=alibi --rope_scaling=yarn --steps=2 --out_dir=%s/al "
                        "2>&1 | grep -qx -- '--rope_scaling: rope_scaling=yarn applies to pos=rope only, not pos=alibi'",
                        dir, dir), 0);
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=alibi --rope_scaling=yarn --out_dir=%s/al 2>/dev/null",
                        dir, dir), 2);
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=alibi --steps=2 --out_dir=%s/al", dir, dir), 0);
    assert_int_equal(run_shell("./eval --weights %s/al/model.safetensors --data %s/data/val.bin --rope_scaling=yarn 2>&1 | "
                        "grep -q 'rope_scaling=yarn applies to pos=rope only, not pos=alibi'", dir, dir), 0);
    assert_int_equal(run_shell("./eval --weights %s/al/model.safetensors --data %s/data/val.bin --rope_scaling_factor=2 "
                        "2>/dev/null", dir, dir), 2);
    // learned: wpe has block_size rows
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=learned --steps=2 --out_dir=%s/lrn", dir, dir), 0);
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=learned --block_size=32 --steps=2 --out_dir=%s/if4 "
                        "--init-from=%s/lrn/model.safetensors 2>&1 | grep -q 'one learned row per position'",
                        dir, dir, dir), 0);
    // a file that is bad in itself (a NaN in wte): exit 1, as ./eval gives for it
    assert_int_equal(run_shell("/usr/bin/python3 -c \"import json, struct; b = bytearray(open('%s', 'rb').read()); "
                        "n = struct.unpack('<Q', b[:8])[0]; o = json.loads(b[8:8 + n])['wte']['data_offsets'][0]; "
                        "b[8 + n + o:12 + n + o] = struct.pack('<f', float('nan')); open('%s/nan.safetensors', 'wb').write(b)\"",
                        base, dir), 0);
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=rope --steps=2 --init-from=%s/nan.safetensors "
                        "--out_dir=%s/if5 2>/dev/null", dir, dir, dir), 1);
    assert_int_equal(run_shell("./eval --weights %s/nan.safetensors --data %s/data/val.bin 2>/dev/null", dir, dir), 1);
    // --overwrite with a bad file: the old run's checkpoint stays
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=rope --steps=4 --out_dir=%s/old", dir, dir), 0);
    assert_int_equal(run_shell("./train %s/quick.ini --quiet --pos=rope --overwrite --init-from=%s/nope.safetensors "
                        "--out_dir=%s/old 2>/dev/null", dir, dir, dir), 1);
    assert_int_equal(run_shell("test -f %s/old/checkpoint.safetensors", dir), 0);
    // the debug state of a run started from the file holds the file's weights
    assert_int_equal(run_shell("./train %s --pos=rope --debug-state %s/ifds.safetensors", args, dir), 0);
    assert_int_equal(run_shell("/usr/bin/python3 -c \"import sys; sys.path.insert(0, 'scripts/torch'); import torch_model as tm; "
                        "a, _ = tm.load_safetensors('%s'); b, _ = tm.load_safetensors('%s/ifds.safetensors'); "
                        "sys.exit(0 if all(bool((a[n] == b[n]).all()) for n in a) else 1)\"", base, dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_sinusoidal_learns_like_none),
        cmocka_unit_test(test_long_context_quick_study),
        cmocka_unit_test(test_init_from),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
