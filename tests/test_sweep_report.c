// test_sweep_report.c: the budget sweep's report (scripts/report/sweep_report.py)
// on runs the test writes, whose losses are chosen so that the multiplier K(N)
// is known in closed form. K is recomputed here from its definition, in C,
// independently of the script:
//
//   learned's final loss L(n) at budgets 300, 600, 1200: 5.0, 4.6, 4.2 (mean
//   over 3 seeds; each seed offset by (s - 2) * 0.01, rope's likewise, so every
//   seed and every bootstrap draw gives the same K);
//   rope at 300 ends at 4.7: learned reaches 4.7 between 300 and 600, at
//   n = exp(log 300 + (log 600 - log 300) (5.0 - 4.7) / (5.0 - 4.6)) = 300 2^0.75,
//   so K(300) = 2^0.75; rope at 600 ends at 4.3: K(600) = 2^0.75 as well;
//   rope at 1200 ends at 4.0, below learned's loss at every budget run: K is
//   censored, "> 1200 / 1200".
//
// Also: each scheme's line is the lr it has the most runs at, and a run at
// another lr (learned at 8e-3, one seed) is an lr check, not part of the line.
//
// The size sweep's report likewise: at widths 64, 128 and 256 (W/32 layers;
// P non-embedding parameters, recomputed here from the block's shapes) rope
// ends gap(P) = -0.1 - 0.05 (log10 P - 5) below learned at 600 steps, and
// learned's loss falls 0.4 per doubling of its budget (4.6, 4.2, 3.8 at 600,
// 1,200, 2,400), so the trend of the gap is -0.05 per decade, K = 2^(-gap /
// 0.4), and log10 K's slope in log10 P is 0.125 log10 2.
// Run from the repository root.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util_shell.h"

static char dir[128];

// A finished sweep run: RUN/done, RUN/log.csv (its last row's elapsed_s) and
// RUN/final_eval.txt in ./eval's form, with the given whole-split loss.
static int write_run(const char *name, double loss) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (run_shell("mkdir -p %s && touch %s/done", path, path)) return -1;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s/log.csv", dir, name);
    if (!(f = fopen(path, "w"))) return -1;
    fprintf(f, "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,elapsed_s\n0,7,7,0,1,1000,0\n10,%f,%f,0,1,1000,36\n",
            loss, loss);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s/final_eval.txt", dir, name);
    if (!(f = fopen(path, "w"))) return -1;
    fprintf(f, "eval: weights=%s/model.safetensors data=val.bin pos=x seq_len=128 windows=10 tokens=1280 "
               "loss=%.6f ppl=1\neval_s=0\n", name, loss);
    fclose(f);
    return 0;
}

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/ropelab_sweep_%d/runs/compare-budget", (int)getpid());
    if (run_shell("rm -rf %s && mkdir -p %s", dir, dir)) return -1;
    const int budgets[3] = {300, 600, 1200};
    const double learned[3] = {5.0, 4.6, 4.2}, rope[3] = {4.7, 4.3, 4.0};
    char name[128];
    for (int i = 0; i < 3; i++)
        for (int s = 1; s <= 3; s++) {
            double offset = (s - 2) * 0.01;
            snprintf(name, sizeof name, "learned-lr0.004-steps%d-s%d", budgets[i], s);
            if (write_run(name, learned[i] + offset)) return -1;
            snprintf(name, sizeof name, "rope-lr0.004-steps%d-s%d", budgets[i], s);
            if (write_run(name, rope[i] + offset)) return -1;
        }
    return write_run("learned-lr0.008-steps300-s1", 5.1);
}

static int teardown(void **state) {
    run_shell("rm -rf /tmp/ropelab_sweep_%d", (int)getpid());
    return 0;
}

// One value of the report's summary.json, by a Python expression on d, as a double.
static double summary_value(const char *expr) {
    char out[256];
    snprintf(out, sizeof out, "%s/value.txt", dir);
    if (run_shell("/usr/bin/python3 -c 'import json; d = json.load(open(\"%s/summary.json\")); print(%s)' > %s", dir, expr,
           out))
        return NAN;
    FILE *f = fopen(out, "r");
    double v = NAN;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = NAN;
        fclose(f);
    }
    return v;
}

// DIR/report.md, whole.
static const char *report_text(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/report.md", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return text;
}

static void test_multiplier_known_in_closed_form(void **state) {
    if (run_shell("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null")) { fprintf(stderr, "no matplotlib: skipped\n"); skip(); }
    assert_int_equal(run_shell("/usr/bin/python3 scripts/report/sweep_report.py budget %s --train-tokens=1000000 >/dev/null",
                        dir), 0);
    // K(300) and K(600): 2^0.75 from the seed means, per seed, and at both ends of the
    // bootstrap interval. The script reads losses printed to 6 decimals: a loss error of
    // 5e-7 moves log n by at most 5e-7 / 0.4 log 2, so K by a relative 1e-6.
    const double k = pow(2.0, 0.75), tol = 1e-5 * k;
    const char *budgets[2] = {"300", "600"};
    char expr[256];
    for (int i = 0; i < 2; i++) {
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"k\"][1]", budgets[i]);
        assert_float_equal(summary_value(expr), k, tol);
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"lo95\"]", budgets[i]);
        assert_float_equal(summary_value(expr), k, tol);
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"hi95\"]", budgets[i]);
        assert_float_equal(summary_value(expr), k, tol);
        for (int s = 1; s <= 3; s++) {
            snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"per_seed\"][\"%d\"][1]", budgets[i], s);
            assert_float_equal(summary_value(expr), k, tol);
        }
    }
    // K(1200): censored at the largest budget run, > 1200 / 1200.
    assert_float_equal(summary_value("d[\"K\"][\"rope\"][\"1200\"][\"k\"][1]"), 1.0, 1e-12);
    assert_float_equal(summary_value("1 if d[\"K\"][\"rope\"][\"1200\"][\"k\"][0] == \">\" else 0"), 1.0, 0.0);
    // The lines: learned at 4e-3 (nine runs), its 8e-3 run an lr check beside the line.
    const char *text = report_text();
    assert_non_null(strstr(text, "learned (lr 0.004)"));
    assert_non_null(strstr(text, "| learned | 300 | 1 | 0.004: 4.9900 | 0.008: 5.1000 | +0.1100 |"));
    // learned's mean at 300 is its line's (5.0), not pulled toward the check's 5.1
    assert_non_null(strstr(text, "| 300 | 307,200 |"));
    assert_non_null(strstr(text, "5.0000 ± 0.0100"));
}

// The gpt2 block's non-embedding parameters at width w with L layers: per layer c_attn
// (3w x w + 3w), attention's c_proj (w x w + w), c_fc (4w x w + 4w), the MLP's c_proj
// (w x 4w + w) and two LayerNorms (4w); then ln_f (2w).
static double block_params(int w, int L) {
    double W = w;
    return L * (3 * W * W + 3 * W + W * W + W + 4 * W * W + 4 * W + 4 * W * W + W + 4 * W) + 2 * W;
}

static double size_gap(double params) { return -0.1 - 0.05 * (log10(params) - 5); }

static void test_size_trend_known_in_closed_form(void **state) {
    if (run_shell("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null")) { fprintf(stderr, "no matplotlib: skipped\n"); skip(); }
    snprintf(dir, sizeof dir, "/tmp/ropelab_sweep_%d/runs/compare-size", (int)getpid());
    assert_int_equal(run_shell("rm -rf %s && mkdir -p %s", dir, dir), 0);
    const int widths[3] = {64, 128, 256};
    char name[128];
    for (int i = 0; i < 3; i++) {
        double gap = size_gap(block_params(widths[i], widths[i] / 32));
        for (int s = 1; s <= 3; s++) {
            double offset = (s - 2) * 0.01;
            snprintf(name, sizeof name, "learned-w%d-lr0.004-steps600-s%d", widths[i], s);
            assert_int_equal(write_run(name, 4.6 + offset), 0);
            snprintf(name, sizeof name, "rope-w%d-lr0.004-steps600-s%d", widths[i], s);
            assert_int_equal(write_run(name, 4.6 + gap + offset), 0);
        }
        for (int s = 1; s <= 2; s++) {
            double offset = (s - 2) * 0.01;
            snprintf(name, sizeof name, "learned-w%d-lr0.004-steps1200-s%d", widths[i], s);
            assert_int_equal(write_run(name, 4.2 + offset), 0);
            snprintf(name, sizeof name, "learned-w%d-lr0.004-steps2400-s%d", widths[i], s);
            assert_int_equal(write_run(name, 3.8 + offset), 0);
        }
    }
    assert_int_equal(run_shell("/usr/bin/python3 scripts/report/sweep_report.py size %s >/dev/null", dir), 0);
    // Losses are read to 6 decimals: each gap within 1e-6, so the slope over log10 P
    // (a span of 1.6 decades here) within about 2e-6.
    assert_float_equal(summary_value("d[\"gap_slope_per_decade\"]"), -0.05, 1e-5);
    char expr[256];
    for (int i = 0; i < 3; i++) {
        double P = block_params(widths[i], widths[i] / 32), k = pow(2.0, -size_gap(P) / 0.4);
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"params\"]", widths[i]);
        assert_float_equal(summary_value(expr), P, 0.5);
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"K\"][1]", widths[i]);
        assert_float_equal(summary_value(expr), k, 1e-5 * k);
    }
    assert_float_equal(summary_value("d[\"k_exponent\"]"), 0.125 * log10(2.0), 1e-5);
    // The literature's point (12 layers of width 768), beside the trend, not in it.
    assert_float_equal(summary_value("d[\"gap_at_literature_size\"]"), size_gap(block_params(768, 12)), 1e-5);
    char path[256];
    snprintf(path, sizeof path, "%s/gap_vs_params.png", dir);
    assert_int_equal(access(path, R_OK), 0);
    assert_non_null(strstr(report_text(), "| (literature) | 12 | 85,056,000 | 2.759 | 2.809 | -0.0500 (1 run) |"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multiplier_known_in_closed_form),
        cmocka_unit_test(test_size_trend_known_in_closed_form),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
