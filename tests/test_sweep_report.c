// test_sweep_report.c: the sweeps' reports (scripts/report/sweep_report.py) on
// runs the test writes, whose losses are chosen so that the multiplier K(N),
// its interval and its trends are known in closed form. Each is recomputed
// here from its definition, in C, independently of the script; the t
// quantiles too, from the closed forms of Student's t at 1, 2 and 4 degrees
// of freedom (t975), not from scipy.
//
// The budget sweep. Learned's final loss L(n) at budgets 300, 600, 1,200,
// 2,400 is 5.0, 4.6, 4.2, 3.8 plus a seed offset (s - 2) 0.01: 0.4 lower per
// doubling. Rope at budget index j (0 for 300) ends at R_j + (s - 2) 0.01 +
// c_s + d_s j, with R = 4.7, 4.3, 4.0, 3.6, so learned is g_j - c_s - d_s j
// above it, g = 0.3, 0.3, 0.2 at 300-1,200. Learned reaches that loss
// e = (g_j - c_s - d_s j) / 0.4 doublings past n_j (between n_j and 2 n_j,
// as 0 <= e <= 1 for every seed here), so K_s(n_j) = 2^e exactly; rope at
// 2,400 ends below learned's loss at every budget run (3.8 at 2,400, the
// largest), so K is censored there, "> 2400 / 2400". The c_s and d_s differ
// by seed, so the per-seed K spread and the 95% interval (t over the
// per-seed K) is neither a point nor their range; each seed's slope of ln K
// on ln N over 300-1,200 is (slope of g_j over j - d_s) / 0.4, and their t
// interval is over the seeds.
//
// Also: each scheme's line is the lr it has the most runs at, and a run at
// another lr (learned at 8e-3, one seed) is an lr check, not part of the line.
//
// The size sweep. At widths 64, 96, 128 and 256 (W/32 layers; P
// non-embedding parameters, recomputed here from the block's shapes) rope -
// learned at 600 steps is gap(P) - v_W, gap(P) + v_W and gap(P) in seeds 1,
// 2 and 3, gap(P) = -0.1 - 0.05 (log10 P - 5); learned's loss falls 0.4 per
// doubling of its budget (4.6, 4.2, 3.8 at 600, 1,200 and 2,400, seeds 1-2).
// The means over seeds 1-3 and over seeds 1-2 both give gap(P), so the gap's
// trend is -0.05 per decade, K from the seed means 2^(-gap / 0.4), log10 K's
// slope in log10 P 0.125 log10 2 with no residual on the widths' values,
// while the per-seed K, 2^((-gap +- v_W) / 0.4), scatter about that line.
// Width 64 has a rope run at lr 2e-3 too, worse than 4e-3: its best lr is
// the largest tried, so the trends are also given without width 64.
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

// The budget sweep's seeds: rope's departures c_s and d_s from learned (see the top).
static const double budget_c[3] = {-0.04, 0.0, 0.02}, budget_d[3] = {-0.02, 0.0, 0.01};
static const double budget_g[3] = {0.3, 0.3, 0.2};   // learned - rope at 300, 600, 1,200 before c_s, d_s

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/ropelab_sweep_%d/runs/compare-budget", (int)getpid());
    if (run_shell("rm -rf %s && mkdir -p %s", dir, dir)) return -1;
    const int budgets[4] = {300, 600, 1200, 2400};
    const double learned[4] = {5.0, 4.6, 4.2, 3.8}, rope[4] = {4.7, 4.3, 4.0, 3.6};
    char name[128];
    for (int j = 0; j < 4; j++)
        for (int s = 1; s <= 3; s++) {
            double offset = (s - 2) * 0.01;
            snprintf(name, sizeof name, "learned-lr0.004-steps%d-s%d", budgets[j], s);
            if (write_run(name, learned[j] + offset)) return -1;
            snprintf(name, sizeof name, "rope-lr0.004-steps%d-s%d", budgets[j], s);
            if (write_run(name, rope[j] + offset + budget_c[s - 1] + budget_d[s - 1] * j)) return -1;
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

// |got - want| <= tol in double precision, and a NaN fails (summary_value's NaN
// for a key the summary lacks; cmocka's assert_float_equal compares floats
// and passes a NaN).
#define assert_near(got, want, tol) assert_near_at((got), (want), (tol), __FILE__, __LINE__)
static void assert_near_at(double got, double want, double tol, const char *file, int line) {
    if (!(fabs(got - want) <= tol)) {
        fprintf(stderr, "%s:%d: %.9g != %.9g (tolerance %.3g)\n", file, line, got, want, tol);
        _fail(file, line);   // cmocka's fail() at the caller's line; it does not return
    }
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

// t(0.975, df) in closed form, where Student's t has one: df 1, the Cauchy
// quantile tan(pi (p - 1/2)); df 2, F(t) = 1/2 + t / (2 sqrt(2 + t^2)) solved
// for t: (2p - 1) / sqrt(2 p (1 - p)); df 4, with a = 4 p (1 - p), 2 sqrt(q - 1)
// where q = cos(acos(sqrt(a)) / 3) / sqrt(a) (Shaw 2006, the cubic of F).
static double t975(int df) {
    const double p = 0.975, a = 4 * p * (1 - p);
    switch (df) {
    case 1: return tan(M_PI * (p - 0.5));
    case 2: return (2 * p - 1) / sqrt(2 * p * (1 - p));
    case 4: return 2 * sqrt(cos(acos(sqrt(a)) / 3) / sqrt(a) - 1);
    default: fail_msg("t975: no closed form for %d degrees of freedom", df); return NAN;
    }
}

// The mean of x[0..n-1] and its 95% t interval: mean -+ t975(n - 1) sd / sqrt(n).
static void t_interval(const double *x, int n, double *mean, double *lo, double *hi) {
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++) m += x[i] / n;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    double h = t975(n - 1) * sqrt(ss / (n - 1)) / sqrt(n);
    *mean = m, *lo = m - h, *hi = m + h;
}

// The least-squares slope of y on x and its 95% interval: b -+ t975(n - 2) se,
// se^2 = (sum of squared residuals) / (n - 2) / Sxx.
static void slope_interval(const double *x, const double *y, int n, double *b, double *lo, double *hi) {
    double mx = 0, my = 0, sxx = 0, sxy = 0, rss = 0;
    for (int i = 0; i < n; i++) mx += x[i] / n, my += y[i] / n;
    for (int i = 0; i < n; i++) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    *b = sxy / sxx;
    *lo = *hi = NAN;   // two points leave no degree of freedom for the residuals
    if (n < 3) return;
    for (int i = 0; i < n; i++) rss += pow(y[i] - my - *b * (x[i] - mx), 2);
    double h = t975(n - 2) * sqrt(rss / (n - 2) / sxx);
    *lo = *b - h, *hi = *b + h;
}

// How far the script's interval may lie from the exact one when each value
// it rests on is off by at most eps: the mean moves by eps; the sd,
// |x - mean x| / sqrt(n - 1), by at most |error| / sqrt(n - 1) <= sqrt(n / (n - 1))
// eps, so the half-width t975(n - 1) sd / sqrt(n) by t975(n - 1) eps / sqrt(n - 1),
// and each end by eps (1 + t975(n - 1) / sqrt(n - 1)).
static double t_interval_tol(int n, double eps) { return eps * (1 + t975(n - 1) / sqrt(n - 1)); }

// Likewise for a least-squares slope over x[0..n-1]: b = sum (x - mean x) y / Sxx
// moves by at most eps sum |x - mean x| / Sxx (slope_move); the residuals by at
// most sqrt(n) eps in norm (I - H projects), so se by sqrt(n) eps / sqrt((n - 2)
// Sxx), and each end of b's interval by b's move plus t975(n - 2) times se's (slope_tol).
static double slope_move(const double *x, int n, double eps) {
    double mx = 0, sxx = 0, sab = 0;
    for (int i = 0; i < n; i++) mx += x[i] / n;
    for (int i = 0; i < n; i++) sxx += (x[i] - mx) * (x[i] - mx), sab += fabs(x[i] - mx);
    return eps * sab / sxx;
}

static double slope_tol(const double *x, int n, double eps) {
    double mx = 0, sxx = 0;
    for (int i = 0; i < n; i++) mx += x[i] / n;
    for (int i = 0; i < n; i++) sxx += (x[i] - mx) * (x[i] - mx);
    return slope_move(x, n, eps) + t975(n - 2) * sqrt(n) * eps / sqrt((n - 2) * sxx);
}

// The script reads losses written to 6 decimals, each off by at most 5e-7. K = 2^e with
// e = (l0 - y) / (l0 - l1), l0 - l1 = 0.4 and 0 <= e <= 1: e moves by at most
// (|dl0| + |dy|) / 0.4 + e (|dl0| + |dl1|) / 0.4 <= 4 x 5e-7 / 0.4 = 5e-6, so ln K by 5e-6 ln 2
// (the same for the seed means, whose errors are means of such errors).
static const double LN_K_ERR = 5e-6 * M_LN2;

static void test_multiplier_known_in_closed_form(void **state) {
    if (run_shell("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null")) { fprintf(stderr, "no matplotlib: skipped\n"); skip(); }
    assert_int_equal(run_shell("/usr/bin/python3 scripts/report/sweep_report.py budget %s --train-tokens=1000000 >/dev/null",
                        dir), 0);
    const char *budgets[3] = {"300", "600", "1200"};
    double e[3][3], cbar = 0, dbar = 0;   // e[seed][budget]: log2 of the per-seed K
    for (int s = 0; s < 3; s++) cbar += budget_c[s] / 3, dbar += budget_d[s] / 3;
    char expr[256];
    for (int j = 0; j < 3; j++) {
        // K from the seed means: learned's mean curve against rope's mean, 2^((g - c - d j) / 0.4) in the means
        double k = pow(2.0, (budget_g[j] - cbar - dbar * j) / 0.4), ks[3], m, lo, hi;
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"k\"][1]", budgets[j]);
        assert_near(summary_value(expr), k, LN_K_ERR * k);
        for (int s = 0; s < 3; s++) {
            e[s][j] = (budget_g[j] - budget_c[s] - budget_d[s] * j) / 0.4;
            ks[s] = pow(2.0, e[s][j]);
            snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"per_seed\"][\"%d\"][1]", budgets[j], s + 1);
            assert_near(summary_value(expr), ks[s], LN_K_ERR * ks[s]);
        }
        // The 95% interval: t over the three per-seed K (K <= 2 here, so each is off by at most 2 LN_K_ERR)
        t_interval(ks, 3, &m, &lo, &hi);
        const double tol = t_interval_tol(3, 2 * LN_K_ERR);
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"mean\"]", budgets[j]);
        assert_near(summary_value(expr), m, tol);
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"lo95\"]", budgets[j]);
        assert_near(summary_value(expr), lo, tol);
        snprintf(expr, sizeof expr, "d[\"K\"][\"rope\"][\"%s\"][\"hi95\"]", budgets[j]);
        assert_near(summary_value(expr), hi, tol);
    }
    // K(2400): censored at the largest budget run, > 2400 / 2400, with no interval.
    assert_near(summary_value("d[\"K\"][\"rope\"][\"2400\"][\"k\"][1]"), 1.0, 1e-12);
    assert_near(summary_value("1 if d[\"K\"][\"rope\"][\"2400\"][\"k\"][0] == \">\" else 0"), 1.0, 0.0);
    assert_near(summary_value("1 if d[\"K\"][\"rope\"][\"2400\"][\"lo95\"] is None else 0"), 1.0, 0.0);
    // The slope of ln K on ln N per seed, over the bracketed budgets 300-1,200 and without
    // 1,200; the mean of the seeds' slopes and its t interval over the seeds.
    const char *fits[2] = {"all", "without the largest"};
    for (int f = 0; f < 2; f++) {
        int nb = 3 - f;
        double x[3], slopes[3], m, lo, hi, b, blo, bhi, lnk[3];
        for (int j = 0; j < nb; j++) x[j] = log(300.0) + j * M_LN2;
        for (int s = 0; s < 3; s++) {
            for (int j = 0; j < nb; j++) lnk[j] = e[s][j] * M_LN2;
            slope_interval(x, lnk, nb, &b, &blo, &bhi);   // its own interval unused: the seeds give it
            slopes[s] = b;
            snprintf(expr, sizeof expr, "d[\"K_slope\"][\"rope\"][\"%s\"][\"per_seed\"][\"%d\"]", fits[f], s + 1);
            assert_near(summary_value(expr), b, slope_move(x, nb, LN_K_ERR));
        }
        t_interval(slopes, 3, &m, &lo, &hi);
        const double tol = t_interval_tol(3, slope_move(x, nb, LN_K_ERR));
        snprintf(expr, sizeof expr, "d[\"K_slope\"][\"rope\"][\"%s\"][\"mean\"]", fits[f]);
        assert_near(summary_value(expr), m, tol);
        snprintf(expr, sizeof expr, "d[\"K_slope\"][\"rope\"][\"%s\"][\"lo95\"]", fits[f]);
        assert_near(summary_value(expr), lo, tol);
        snprintf(expr, sizeof expr, "d[\"K_slope\"][\"rope\"][\"%s\"][\"hi95\"]", fits[f]);
        assert_near(summary_value(expr), hi, tol);
    }
    // The lines: learned at 4e-3 (twelve runs), its 8e-3 run an lr check beside the line.
    const char *text = report_text();
    assert_non_null(strstr(text, "learned (lr 0.004)"));
    assert_non_null(strstr(text, "| learned | 300 | 1 | 0.004: 4.9900 | 0.008: 5.1000 | +0.1100 |"));
    // learned's mean at 300 is its line's (5.0), not pulled toward the check's 5.1; every row names its seeds
    assert_non_null(strstr(text, "| 300 | 307,200 | 0.31 | 1-3 |"));
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
    const int widths[4] = {64, 96, 128, 256};
    const double v[4] = {0.02, 0.05, 0.01, 0.03};   // each width's per-seed spread of rope (seeds 1, 2: -v, +v)
    const double u[3] = {-1, 1, 0};                  // seed s's share of it
    char name[128];
    for (int i = 0; i < 4; i++) {
        double gap = size_gap(block_params(widths[i], widths[i] / 32));
        for (int s = 1; s <= 3; s++) {
            double offset = (s - 2) * 0.01;
            snprintf(name, sizeof name, "learned-w%d-lr0.004-steps600-s%d", widths[i], s);
            assert_int_equal(write_run(name, 4.6 + offset), 0);
            snprintf(name, sizeof name, "rope-w%d-lr0.004-steps600-s%d", widths[i], s);
            assert_int_equal(write_run(name, 4.6 + gap + offset + u[s - 1] * v[i]), 0);
        }
        for (int s = 1; s <= 2; s++) {
            double offset = (s - 2) * 0.01;
            snprintf(name, sizeof name, "learned-w%d-lr0.004-steps1200-s%d", widths[i], s);
            assert_int_equal(write_run(name, 4.2 + offset), 0);
            snprintf(name, sizeof name, "learned-w%d-lr0.004-steps2400-s%d", widths[i], s);
            assert_int_equal(write_run(name, 3.8 + offset), 0);
        }
    }
    assert_int_equal(write_run("rope-w64-lr0.002-steps600-s1", 4.9), 0);   // width 64's lr check: 4e-3 at the edge
    assert_int_equal(run_shell("/usr/bin/python3 scripts/report/sweep_report.py size %s >/dev/null", dir), 0);
    double x[4], xs[8], lks[8];   // log10 P: the widths'; log10 P and log10 K: the per-seed points
    for (int i = 0; i < 4; i++) x[i] = log10(block_params(widths[i], widths[i] / 32));
    // Losses are read to 6 decimals: each gap, a seed's or a mean, within 1e-6 (the per-seed
    // points sit at the same log10 P three times, which leaves slope_move as it is).
    assert_near(summary_value("d[\"gap_slope_per_decade\"]"), -0.05, slope_move(x, 4, 1e-6));
    assert_near(summary_value("d[\"trends\"][\"gap\"][\"all\"][\"per seed\"][\"slope\"]"), -0.05,
                slope_move(x, 4, 1e-6));
    char expr[256];
    for (int i = 0; i < 4; i++) {
        double P = block_params(widths[i], widths[i] / 32), k = pow(2.0, -size_gap(P) / 0.4);
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"params\"]", widths[i]);
        assert_near(summary_value(expr), P, 0.5);
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"K\"][1]", widths[i]);
        assert_near(summary_value(expr), k, LN_K_ERR * k);
        // rope's mean over seeds 1-3 against learned's over 1-2: the seed offsets average 0
        // and -0.005, so rope ends 0.005 nearer learned than in K, 2^((-gap - 0.005) / 0.4)
        double k_all = pow(2.0, (-size_gap(P) - 0.005) / 0.4);
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"K_rope_all_seeds\"][1]", widths[i]);
        assert_near(summary_value(expr), k_all, LN_K_ERR * k_all);
        // per seed, 2^((-gap -+ v) / 0.4), and the interval t over the two (1 degree of freedom)
        double ks[2], m, lo, hi;
        for (int s = 0; s < 2; s++) {
            ks[s] = pow(2.0, (-size_gap(P) - u[s] * v[i]) / 0.4);
            xs[2 * i + s] = x[i], lks[2 * i + s] = log10(ks[s]);
            snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"K_per_seed\"][\"%d\"][1]", widths[i], s + 1);
            assert_near(summary_value(expr), ks[s], LN_K_ERR * ks[s]);
        }
        t_interval(ks, 2, &m, &lo, &hi);
        const double tol = t_interval_tol(2, LN_K_ERR * ks[0]);   // ks[0], seed 1's, is the larger
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"K_t\"][\"lo95\"]", widths[i]);
        assert_near(summary_value(expr), lo, tol);
        snprintf(expr, sizeof expr, "d[\"widths\"][\"%d\"][\"K_t\"][\"hi95\"]", widths[i]);
        assert_near(summary_value(expr), hi, tol);
    }
    // K's exponent on the widths' K: 0.125 log10 2 on a line, so its interval closes on it
    // (all four widths: 2 degrees of freedom; without width 64, whose lr is at the edge: 1).
    const double eps = LN_K_ERR / M_LN10;   // log10 K's error
    assert_near(summary_value("d[\"k_exponent\"]"), 0.125 * log10(2.0), slope_move(x, 4, eps));
    assert_near(summary_value("d[\"trends\"][\"log10 K\"][\"all\"][\"means\"][\"lo95\"]"), 0.125 * log10(2.0),
                slope_tol(x, 4, eps));
    assert_near(summary_value("d[\"trends\"][\"log10 K\"][\"without edge\"][\"means\"][\"hi95\"]"),
                0.125 * log10(2.0), slope_tol(x + 1, 3, eps));
    assert_near(summary_value("int(d[\"widths\"][\"64\"][\"lr_at_edge\"] == [\"rope\"])"), 1.0, 0.0);
    assert_near(summary_value("int(d[\"trends\"][\"log10 K\"][\"without edge\"][\"widths\"] == [96, 128, 256])"), 1.0, 0);
    // On the per-seed points of widths 96-256 (6 points, 4 degrees of freedom), the
    // spread -+v about the line gives the interval its width.
    double b, lo, hi;
    slope_interval(xs + 2, lks + 2, 6, &b, &lo, &hi);
    const double tol = slope_tol(xs + 2, 6, eps);
    assert_near(summary_value("d[\"trends\"][\"log10 K\"][\"without edge\"][\"per seed\"][\"slope\"]"), b,
                slope_move(xs + 2, 6, eps));
    assert_near(summary_value("d[\"trends\"][\"log10 K\"][\"without edge\"][\"per seed\"][\"lo95\"]"), lo, tol);
    assert_near(summary_value("d[\"trends\"][\"log10 K\"][\"without edge\"][\"per seed\"][\"hi95\"]"), hi, tol);
    // The literature's point (12 layers of width 768), beside the trend, not in it.
    assert_near(summary_value("d[\"gap_at_literature_size\"]"), size_gap(block_params(768, 12)), 1e-5);
    char path[256];
    snprintf(path, sizeof path, "%s/gap_vs_params.png", dir);
    assert_int_equal(access(path, R_OK), 0);
    const char *text = report_text();
    assert_non_null(strstr(text, "| (literature) | 12 | 85,056,000 | 1 run | 2.759 | 2.809 | -0.0500 |"));
    assert_non_null(strstr(text, "| 600 steps: 1-3; K: 1-2 |"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multiplier_known_in_closed_form),
        cmocka_unit_test(test_size_trend_known_in_closed_form),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
