"""The frontier study's report (scripts/run/sweep.sh frontier; issue 48): per
scheme the best loss L*(C), the best size N*(C) and tokens D*(C) at each
compute budget, K*(C), the gap at the frontier and the exponent of N*(C).

    frontier_report.py OUT [--scale S] [--train-tokens N] [--draws B]

Reads each finished run's RUN/final_eval.txt (./eval on the whole validation
split) and RUN/log.csv; the budgets, lrs and FLOP count are the plan's
(scripts/run/frontier_plan.py; --scale S is its FRONTIER_SCALE). Writes
OUT/report.md, OUT/summary.json and OUT/frontier.png.

The fit. For one scheme at one budget C, the runs' final losses y at sizes N
(non-embedding parameters) and seeds s:

    y = δ_s + c1 x + c2 x² + e,   x = ln N - x̄ (x̄: the mean over the sizes),  e ~ N(0, σ_e²)

δ_s is the seed's level: a seed fixes the data order at every size, and a
seed whose batches suit the validation split lowers every size alike (in the
size sweep seed 2 is below seed 1 at all four widths at 1,200 and 2,400
steps). With a level of its own per seed, the curve's shape, hence N*, comes
from differences between sizes within a seed. Then

    N* = exp(x̄ - c1 / (2 c2))             (a minimum only if c2 > 0)
    L* = mean_s δ_s - c1² / (4 c2)          (the mean seed's frontier loss)
    D* = C / (6 (N + V w + n_layer T w))    at the (real) width w of N*: the tokens

only where the vertex lies among the sizes run (ln N between the smallest
and the largest): elsewhere the parabola is extrapolated and the budget's
minimum is not bracketed (the study adds a size there, frontier_plan.py);
such a budget gets no N*, L* or D*, and takes no part in K*, the gap or the
exponent.

σ_e² is pooled over all fits (ν_e = Σ (runs - parameters)). The seeds are a
sample of data orders: δ_s = μ + u_s with u_s ~ N(0, σ_u²), and L* is to hold
for μ, so its uncertainty includes σ_u² / k (k seeds in the fit). σ_u² by the
method of moments, pooled over the fits with 2 or more seeds:

    E Σ_s (δ̂_s - mean δ̂)² = (k - 1) σ_u² + σ_e² tr(M V_δ)

(V_δ: the δ block of (X'X)^-1; M = I - 11'/k), ν_u = Σ (k - 1).

The intervals: DRAWS draws from the fits' sampling distribution,

    σ_e*² = σ̂_e² ν_e / χ²(ν_e),  σ_u*² = σ̂_u² ν_u / χ²(ν_u)   (one pair per draw)
    θ* = θ̂ + σ_e* R z  (R R' = (X'X)^-1, z standard normal),  ū* ~ N(0, σ_u*² / k)   (per fit)

and every statistic recomputed from each draw; the 95% interval is the 2.5%
and 97.5% points. A statistic linear in θ alone (the difference of two
sizes' losses within a fit), or in ū alone, gets exactly the t interval this
way (a normal over a scaled χ²; with both, the sum of two such); the vertex,
L*, K* and the exponents are not linear, and the draws carry that: a
curvature c2* near 0 puts a vertex far out, a long tail, as in Fieller's
interval. Why not per-seed fits with a t over seeds: seeds
1-2 run every size and seed 3 only the best, so a per-seed parabola has 1
degree of freedom between seeds (t = 12.7) and leaves seed 3 out; a bootstrap
over 2 seeds per point halves the variance it resamples. The fits are drawn
independently: K* and the gap are not credited with any pairing of rope's and
learned's seeds (conservative where the two share the seed's level).

K*(C): learned's frontier is its L* at each of its budgets; the compute at
which it reaches rope's L*(C) is read between the two budgets that bracket
it, linearly in ln C (sweep_report.budget_needed, the budget sweep's rule);
K* = that compute / C. Past learned's largest budget K* is censored (> its
ratio). The gap at the frontier: L*_rope(C) - L*_learned(C). The exponent:
least squares of ln N* on ln C over a scheme's budgets; also for the
compute-weighted size N_c = N + V w + n_layer T w, for which C = 6 N_c D
holds exactly, so D* grows as C^(1 - a_c).
"""
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run"))  # frontier_plan
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frontier_plan as plan  # noqa: E402
import sweep_report  # noqa: E402

RUN = re.compile(r"^(?P<scheme>[a-z]+)-w(?P<w>\d+)-lr(?P<lr>[0-9.]+)-steps(?P<steps>\d+)-s(?P<seed>\d+)$")
DRAWS = 20000
# The literature's exponent of the compute-optimal size (docs/REFERENCES.md, "Compute-optimal
# scaling"): Hoffmann et al. 2022, N_opt ~ C^a with a = 0.50, 0.49, 0.46 (their three
# approaches; N counts every parameter, C = 6 N D); Kaplan et al. 2020, 0.73 (non-embedding N).
LITERATURE_A = {"Hoffmann et al. 2022 (all parameters)": 0.50, "Kaplan et al. 2020 (non-embedding)": 0.73}


def load(out):
    """Finished runs of the plan: dicts scheme, w, lr, steps, seed, loss, cpu_s, and
    k (the budget) with check = the lr's factor against the rule (1 on the frontier)."""
    runs, stray = [], 0
    for name in sorted(os.listdir(out)):
        m = RUN.match(name)
        d = os.path.join(out, name)
        if not m or not os.path.exists(os.path.join(d, "done")):
            continue
        fin = sweep_report.read_final(d)
        if fin is None:
            continue
        sc, w, n, x = m["scheme"], int(m["w"]), int(m["steps"]), float(m["lr"])
        ks = [k for k in range(plan.n_budgets()) if sc in plan.schemes_at(k) and plan.steps(w, k) == n]
        if not ks or sc not in plan.SCHEMES:
            stray += 1
            continue
        runs.append({"scheme": sc, "w": w, "lr": x, "steps": n, "seed": int(m["seed"]), "loss": fin[0],
                     "k": ks[0], "factor": x / plan.lr(sc, w),
                     "cpu_s": sweep_report.train_seconds(d) + fin[2]})
    return runs, stray


def frontier_runs(runs):
    return [r for r in runs if abs(r["factor"] - 1) < 1e-9]


class Fit:
    """One scheme at one budget: y = δ_s + c1 x + c2 x² by least squares."""

    def __init__(self, scheme, k, rows):
        self.scheme, self.k, self.rows = scheme, k, rows
        self.C = plan.budget(k)
        self.widths = sorted({r["w"] for r in rows})
        self.seeds = sorted({r["seed"] for r in rows})
        lnN = {w: math.log(plan.non_embedding(w)) for w in self.widths}
        self.xbar = sum(lnN.values()) / len(lnN)
        ks = len(self.seeds)
        self.p = ks + 2
        X = np.zeros((len(rows), self.p))
        for i, r in enumerate(rows):
            x = lnN[r["w"]] - self.xbar
            X[i, self.seeds.index(r["seed"])] = 1
            X[i, ks], X[i, ks + 1] = x, x * x
        y = np.array([r["loss"] for r in rows])
        self.n = len(rows)
        self.ok = len(self.widths) >= 3 and self.n > self.p
        if not self.ok:
            return
        self.XtXi = np.linalg.inv(X.T @ X)
        self.theta = self.XtXi @ X.T @ y
        self.rss = float(np.sum((y - X @ self.theta) ** 2))
        self.dof = self.n - self.p
        self.R = np.linalg.cholesky(self.XtXi)
        M = np.eye(ks) - 1.0 / ks
        self.q = float(self.theta[:ks] @ M @ self.theta[:ks])          # Σ (δ̂_s - mean)²
        self.tr = float(np.trace(M @ self.XtXi[:ks, :ks]))
        self.xlo = min(lnN.values()) - self.xbar
        self.xhi = max(lnN.values()) - self.xbar

    def stats(self, theta, ubar):
        """(ln N*, L*) for parameter rows theta (B x p) and seed-mean shifts ubar (B): NaN where the
        curve has no minimum among the sizes run (c2 <= 0, or the vertex beyond an end)."""
        ks = len(self.seeds)
        c1, c2 = theta[:, ks], theta[:, ks + 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            xv = np.where(c2 > 0, -c1 / (2 * c2), np.nan)
            xv = np.where((xv >= self.xlo) & (xv <= self.xhi), xv, np.nan)
        L = theta[:, :ks].mean(axis=1) + ubar + c1 * xv + c2 * xv * xv
        return xv + self.xbar, L


def fit_all(runs):
    fr = frontier_runs(runs)
    fits = {}
    for k in range(plan.n_budgets()):
        for sc in plan.schemes_at(k):
            rows = [r for r in fr if r["scheme"] == sc and r["k"] == k]
            if rows:
                fits[(sc, k)] = Fit(sc, k, rows)
    return fits


def pooled(fits):
    ok = [f for f in fits.values() if f.ok]
    nu_e = sum(f.dof for f in ok)
    s2e = sum(f.rss for f in ok) / nu_e if nu_e else 0.0
    multi = [f for f in ok if len(f.seeds) >= 2]
    nu_u = sum(len(f.seeds) - 1 for f in multi)
    s2u = max(0.0, (sum(f.q for f in multi) - s2e * sum(f.tr for f in multi)) / nu_u) if nu_u else 0.0
    return s2e, nu_e, s2u, nu_u


def quantiles(a):
    """The 2.5% and 97.5% points of the draws a (order statistics, outward), and the share of
    NaN draws (a draw without a minimum: its vertex could lie off either end, so a NaN counts
    as -inf for the lower point and +inf for the upper: more than 2.5% of them leaves that
    end unknown, NaN). Infinite draws (censored) stay infinite."""
    a = np.asarray(a, float)
    n = len(a)
    v = np.sort(a[~np.isnan(a)])
    nan = n - len(v)
    lo_i, hi_i = int(math.floor(0.025 * (n - 1))), int(math.ceil(0.975 * (n - 1)))
    lo = v[lo_i - nan] if lo_i >= nan else math.nan
    hi = v[hi_i] if hi_i < len(v) else math.nan
    return float(lo), float(hi), nan / n


def k_star(learned_curve, y, C):
    """K* = the compute learned's frontier needs to reach y, over C: ('=', K), ('>', bound),
    ('<', bound), or None."""
    curve = [(c, l) for c, l in learned_curve if not math.isnan(l)]
    if len(curve) < 2 or math.isnan(y):
        return None
    r = sweep_report.budget_needed(curve, y)
    return (r[0], r[1] / C)


def slope(xs, ys):
    xs, ys = np.asarray(xs), np.asarray(ys)
    xm = xs.mean(axis=-1, keepdims=True)
    return ((xs - xm) * (ys - ys.mean(axis=-1, keepdims=True))).sum(axis=-1) / ((xs - xm) ** 2).sum(axis=-1)


def analyse(runs, draws=DRAWS, seed=1):
    fits = fit_all(runs)
    s2e, nu_e, s2u, nu_u = pooled(fits)
    rng = np.random.default_rng(seed)
    se = math.sqrt(s2e) * np.sqrt(nu_e / rng.chisquare(nu_e, draws)) if nu_e else np.zeros(draws)
    su = math.sqrt(s2u) * np.sqrt(nu_u / rng.chisquare(nu_u, draws)) if nu_u else np.zeros(draws)
    res = {"sigma_e": math.sqrt(s2e), "nu_e": nu_e, "sigma_u": math.sqrt(s2u), "nu_u": nu_u, "fits": {}}
    point, drawn = {}, {}
    for key, f in sorted(fits.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if not f.ok:
            continue
        lnN0, L0 = f.stats(f.theta[None, :], np.zeros(1))
        z = rng.standard_normal((draws, f.p))
        theta = f.theta[None, :] + se[:, None] * (z @ f.R.T)
        ubar = su / math.sqrt(len(f.seeds)) * rng.standard_normal(draws)
        lnN, L = f.stats(theta, ubar)
        point[key] = (float(lnN0[0]), float(L0[0]))
        drawn[key] = (lnN, L)
    for key, (lnN0, L0) in point.items():
        f = fits[key]
        lnN, L = drawn[key]
        n_star = math.exp(lnN0)
        w_star = plan.width_of(n_star)
        fpt = plan.flops_per_token(w_star)
        nlo, nhi, nshare = quantiles(np.exp(lnN))
        llo, lhi, _ = quantiles(L)
        res["fits"][f"{key[0]}:{key[1]}"] = {
            "scheme": key[0], "k": key[1], "C": f.C, "widths": f.widths, "seeds": f.seeds,
            "seeds_by_width": {w: sorted(r["seed"] for r in f.rows if r["w"] == w) for w in f.widths},
            "runs": f.n, "dof": f.dof, "theta": f.theta.tolist(), "xbar": f.xbar,
            "N": n_star, "N_lo": nlo, "N_hi": nhi, "no_minimum_share": nshare,
            "bracketed": not math.isnan(lnN0),
            "width": w_star, "L": L0, "L_lo": llo, "L_hi": lhi,
            # D* falls as N* grows (C fixed): its interval is N*'s, mapped
            "D": f.C / fpt, "D_lo": f.C / plan.flops_per_token(plan.width_of(nhi)),
            "D_hi": f.C / plan.flops_per_token(plan.width_of(nlo)), "Nc": fpt / 6}
    # learned's frontier and K*
    lk = sorted(k for (sc, k) in point if sc == "learned" and not math.isnan(point[(sc, k)][0]))
    learned_point = [(plan.budget(k), point[("learned", k)][1]) for k in lk]
    res["K"], res["gap"], res["exponent"] = {}, {}, {}
    for (sc, k), (lnN0, L0) in sorted(point.items()):
        if sc != "rope":
            continue
        C = plan.budget(k)
        kp = k_star(learned_point, L0, C)
        if kp is None:
            continue
        Lr = drawn[("rope", k)][1]
        Ll = np.stack([drawn[("learned", j)][1] for j in lk], axis=1)
        Cs = [plan.budget(j) for j in lk]
        kd = np.empty(draws)
        cens = 0
        for b in range(draws):
            # a draw in which any of these fits has no minimum among its sizes: K* unknown
            r = None if np.isnan(Ll[b]).any() else k_star(list(zip(Cs, Ll[b])), Lr[b], C)
            if r is None:
                kd[b] = math.nan
            elif r[0] == ">":
                kd[b], cens = math.inf, cens + 1
            elif r[0] == "<":
                kd[b], cens = 0.0, cens + 1
            else:
                kd[b] = r[1]
        lo, hi, nan = quantiles(kd)
        res["K"][k] = {"C": C, "k": kp, "lo95": lo, "hi95": hi, "censored_share": cens / draws, "nan_share": nan}
        if ("learned", k) in point and not math.isnan(point[("learned", k)][1]):
            g = Lr - drawn[("learned", k)][1]
            glo, ghi, _ = quantiles(g)
            res["gap"][k] = {"C": C, "gap": L0 - point[("learned", k)][1], "lo95": glo, "hi95": ghi}
    for sc in plan.SCHEMES:
        ks = sorted(k for (s, k) in point if s == sc and not math.isnan(point[(s, k)][0]))   # the bracketed
        if len(ks) < 2:
            continue
        lnC = np.log([plan.budget(k) for k in ks])
        lnN0 = np.array([point[(sc, k)][0] for k in ks])
        lnNd = np.stack([drawn[(sc, k)][0] for k in ks], axis=1)
        a = float(slope(lnC, lnN0))
        ad = slope(np.broadcast_to(lnC, lnNd.shape), lnNd)
        lnNc0 = np.log([res["fits"][f"{sc}:{k}"]["Nc"] for k in ks])
        ac = float(slope(lnC, lnNc0))
        acd = slope(np.broadcast_to(lnC, lnNd.shape), np.log(plan.flops_per_token(plan.width_of(np.exp(lnNd))) / 6))
        lo, hi, nan = quantiles(ad)
        clo, chi, _ = quantiles(acd)
        res["exponent"][sc] = {"budgets": ks, "a_N": a, "lo95": lo, "hi95": hi, "nan_share": nan,
                               "a_Nc": ac, "a_Nc_lo95": clo, "a_Nc_hi95": chi,
                               "a_D": 1 - ac, "a_D_lo95": 1 - chi, "a_D_hi95": 1 - clo}
    return fits, res


# ---- the report


def fmt_k(k):
    return sweep_report.fmt_k(k)


def iv(lo, hi, spec):
    f = lambda v: "?" if v != v else ("∞" if v == math.inf else format(v, spec))  # noqa: E731
    return f"[{f(lo)}, {f(hi)}]"


def seeds_text(seeds_by_width):
    """'w32 s1-2, w64 s1-3, ...'"""
    def span(ss):
        return f"s{ss[0]}-{ss[-1]}" if ss == list(range(ss[0], ss[-1] + 1)) and len(ss) > 1 else \
            "s" + ",".join(map(str, ss))
    return ", ".join(f"w{w} {span(ss)}" for w, ss in seeds_by_width.items())


def plot(out, runs, fits, res):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import style
    fr = frontier_runs(runs)
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 5))
    colours = {sc: style.colour(sc, list(plan.SCHEMES)) for sc in plan.SCHEMES}
    # 1: loss against compute: each run's validation curve, its final loss, each scheme's frontier
    for r in fr:
        d = os.path.join(out, f"{r['scheme']}-w{r['w']}-lr{r['lr']:g}-steps{r['steps']}-s{r['seed']}", "log.csv")
        try:
            rows = [l.split(",") for l in open(d).read().split("\n")[1:] if l]
        except OSError:
            continue
        fpt = plan.TOKENS_PER_STEP * plan.flops_per_token(r["w"])
        pts = [(int(x[0]) * fpt, float(x[2])) for x in rows if len(x) > 2 and x[2] and int(x[0]) > 0]
        if pts:
            ax1.plot(*zip(*pts), color=colours[r["scheme"]], alpha=0.12, lw=0.7)
        ax1.plot([plan.budget(r["k"])], [r["loss"]], ".", color=colours[r["scheme"]], alpha=0.5)
    for sc in plan.SCHEMES:
        fs = sorted((v for v in res["fits"].values() if v["scheme"] == sc), key=lambda v: v["C"])
        fs = [v for v in fs if v["L"] == v["L"]]
        if fs:
            ax1.errorbar([v["C"] for v in fs], [v["L"] for v in fs],
                         yerr=[[v["L"] - v["L_lo"] if v["L_lo"] == v["L_lo"] else 0 for v in fs],
                               [v["L_hi"] - v["L"] if v["L_hi"] == v["L_hi"] else 0 for v in fs]],
                         fmt="o-", color=colours[sc], lw=2, capsize=3, label=f"{sc}: L*(C), 95% interval")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("training compute C (FLOPs)")
    ax1.set_ylabel("validation loss")
    ax1.set_title("loss against compute (curves: each run; line: L*(C))", fontsize=10)
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)
    # 2: each budget's losses over size with the fitted parabola and its vertex
    for (sc, k), f in sorted(fits.items()):
        if not f.ok:
            continue
        c = colours[sc]
        ls = "-" if sc == "rope" else "--"
        ks = len(f.seeds)
        xs = np.linspace(f.xlo, f.xhi, 60)
        ax2.plot(np.exp(xs + f.xbar), f.theta[:ks].mean() + f.theta[ks] * xs + f.theta[ks + 1] * xs * xs,
                 ls, color=c, alpha=0.4 + 0.6 * k / max(1, plan.n_budgets() - 1))
        ax2.plot([plan.non_embedding(r["w"]) for r in f.rows], [r["loss"] for r in f.rows], "o" if sc == "rope" else "s",
                 color=c, ms=3, alpha=0.6)
        v = res["fits"].get(f"{sc}:{k}")
        if v and v["N"] == v["N"]:
            ax2.plot([v["N"]], [v["L"]], "*", color=c, ms=10)
            ax2.annotate(f"{v['C']:.2g}", (v["N"], v["L"]), fontsize=7, xytext=(3, -9), textcoords="offset points")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("non-embedding parameters N")
    ax2.set_ylabel("final validation loss")
    ax2.set_title("each budget over size (rope solid, learned dashed; *: minimum)", fontsize=10)
    ax2.grid(True, which="both", alpha=0.3)
    # 3: N*(C) with its fitted power and the literature's C^0.5 through rope's first point
    for sc in plan.SCHEMES:
        fs = sorted((v for v in res["fits"].values() if v["scheme"] == sc and v["N"] == v["N"]), key=lambda v: v["C"])
        if not fs:
            continue
        ax3.errorbar([v["C"] for v in fs], [v["N"] for v in fs],
                     yerr=[[v["N"] - v["N_lo"] if v["N_lo"] == v["N_lo"] else 0 for v in fs],
                           [v["N_hi"] - v["N"] if v["N_hi"] == v["N_hi"] else 0 for v in fs]],
                     fmt="o", color=colours[sc], capsize=3, label=sc)
        e = res["exponent"].get(sc)
        if e:
            cs = np.array([fs[0]["C"], fs[-1]["C"]])
            ax3.plot(cs, fs[0]["N"] * (cs / cs[0]) ** e["a_N"], "-", color=colours[sc], alpha=0.6,
                     label=f"{sc}: N* ~ C^{e['a_N']:.2f}")
            if sc == "rope":
                ax3.plot(cs, fs[0]["N"] * (cs / cs[0]) ** 0.5, ":", color="gray", label="C^0.5 (Hoffmann et al.)")
    ax3.set_xscale("log")
    ax3.set_yscale("log")
    ax3.set_xlabel("training compute C (FLOPs)")
    ax3.set_ylabel("N* (non-embedding parameters)")
    ax3.set_title("the compute-optimal size N*(C)", fontsize=10)
    ax3.grid(True, which="both", alpha=0.3)
    ax3.legend(fontsize=8)
    plain = matplotlib.ticker.FormatStrFormatter("%.1f")   # 4.0, not 4 x 10^0
    for ax in (ax1, ax2):
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "frontier.png"), dpi=110)
    plt.close(fig)


def report(out, args):
    draws = int(args[args.index("--draws") + 1]) if "--draws" in args else DRAWS
    runs, stray = load(out)
    tt = sweep_report.train_tokens([a for a in args if a.startswith("--train-tokens=")])
    fits, res = analyse(runs, draws)
    fr = frontier_runs(runs)
    L = ["# The compute-optimal frontier: rope against learned", "",
         f"Budgets C_k = {plan.BASE_FLOPS:.3g} x {plan.RATIO_TEXT}^k FLOPs" +
         (f" / {plan.scale():g} (FRONTIER_SCALE: a smoke run, not a result)" if plan.scale() != 1 else "") +
         f"; FLOPs = 6 (N + {plan.VOCAB} W + (W/32) {plan.CONTEXT} W) per token (non-embedding parameters, "
         "the tied output head, attention's scores and sums; scripts/run/frontier_plan.py), "
         f"{plan.TOKENS_PER_STEP} tokens a step. Widths W with W/32 layers and heads of 32 dims; "
         "each size at its rule's lr; the loss is ./eval's on the whole validation split, every run "
         "with reproducible = 1, on GCIDE" + (f" ({tt:,} training tokens)." if tt else "."), ""]
    # every run of the frontier
    L += ["## The runs", "", "| budget | FLOPs | scheme | width | N | steps | epochs | lr | loss per seed | mean |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for r in fr:
        groups.setdefault((r["k"], r["scheme"], r["w"]), []).append(r)
    for (k, sc, w), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], plan.SCHEMES.index(kv[0][1]), kv[0][2])):
        rs = sorted(rs, key=lambda r: r["seed"])
        n = rs[0]["steps"]
        ep = f"{n * plan.TOKENS_PER_STEP / tt:.2f}" if tt else "?"
        L.append(f"| {k} | {plan.budget(k):.3g} | {sc} | {w} | {plan.non_embedding(w):,.0f} | {n:,} | {ep} | "
                 f"{rs[0]['lr']:g} | " + ", ".join(f"s{r['seed']} {r['loss']:.4f}" for r in rs) +
                 f" | {sum(r['loss'] for r in rs) / len(rs):.4f} |")
    L += ["", "## The frontier: L*(C), N*(C), D*(C)", "",
          "Per scheme and budget, a parabola in ln N with a level per seed, fitted to every run "
          f"(method: scripts/report/frontier_report.py). Residual sd σ_e = {res['sigma_e']:.4f} "
          f"({res['nu_e']} degrees of freedom, pooled); seed-level sd σ_u = {res['sigma_u']:.4f} "
          f"({res['nu_u']} dof). 95% intervals from {draws:,} draws of the fits' sampling distribution.", "",
          "| budget | FLOPs | scheme | seeds (per width) | N* [95%] | width of N* | D* tokens [95%] | D*/N* | "
          "epochs at D* | L* [95%] |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, v in sorted(res["fits"].items(), key=lambda kv: (kv[1]["k"], plan.SCHEMES.index(kv[1]["scheme"]))):
        if not v["bracketed"]:
            L.append(f"| {v['k']} | {v['C']:.3g} | {v['scheme']} | {seeds_text(v['seeds_by_width'])} | "
                     "not bracketed: the fitted curve has no minimum among the sizes run | - | - | - | - | - |")
            continue
        flag = ""
        if v["no_minimum_share"] > 0.025:
            flag = f" ({100 * v['no_minimum_share']:.0f}% of draws without a minimum among the sizes)"
        ep = f"{v['D'] / tt:.2f}" if tt else "?"
        L.append(f"| {v['k']} | {v['C']:.3g} | {v['scheme']} | {seeds_text(v['seeds_by_width'])} | "
                 f"{v['N']:,.0f} {iv(v['N_lo'], v['N_hi'], ',.0f')}{flag} | {v['width']:.0f} | "
                 f"{v['D']:,.0f} {iv(v['D_lo'], v['D_hi'], ',.0f')} | {v['D'] / v['N']:.1f} | {ep} | "
                 f"{v['L']:.4f} {iv(v['L_lo'], v['L_hi'], '.4f')} |")
    L += ["", "## K*(C): the compute learned needs on its own frontier to reach rope's L*(C)", "",
          "Learned's frontier (its L* at each of its budgets) read linearly in ln C between the two "
          "budgets that bracket rope's L*(C); K* = that compute / C. Seeds: each L* is of its fit's "
          "seeds (the table above).", "",
          "| budget | FLOPs | rope L* | learned's budgets | K* | 95% interval |", "|---|---|---|---|---|---|"]
    lk = sorted(v["k"] for v in res["fits"].values() if v["scheme"] == "learned")
    for k, v in sorted(res["K"].items()):
        note = f" ({100 * v['censored_share']:.0f}% of draws censored)" if v["censored_share"] > 0 else ""
        L.append(f"| {k} | {v['C']:.3g} | {res['fits'][f'rope:{k}']['L']:.4f} | "
                 f"{', '.join(f'{plan.budget(j):.3g}' for j in lk)} | {fmt_k(v['k'])} | "
                 f"{iv(v['lo95'], v['hi95'], '.2f')}{note} |")
    L += ["", "## The gap at the frontier", "",
          "| budget | FLOPs | L*_rope - L*_learned [95%] | seeds |", "|---|---|---|---|"]
    for k, v in sorted(res["gap"].items()):
        L.append(f"| {k} | {v['C']:.3g} | {v['gap']:+.4f} {iv(v['lo95'], v['hi95'], '+.4f')} | rope "
                 f"{seeds_text(res['fits'][f'rope:{k}']['seeds_by_width'])}; learned "
                 f"{seeds_text(res['fits'][f'learned:{k}']['seeds_by_width'])} |")
    L += ["", "## How N* grows with compute", "",
          "Least squares of ln N* on ln C over a scheme's budgets; N_c = N + V W + n_layer T W is the size "
          "compute sees (C = 6 N_c D exactly, so D* ~ C^(1 - a_c)). The literature: N_opt ~ C^0.50 "
          "(Hoffmann et al. 2022, every parameter counted, their approaches give 0.46-0.50), C^0.73 "
          "(Kaplan et al. 2020, non-embedding).", "",
          "| scheme | budgets | a (N*, non-embedding) [95%] | a_c (N_c*) [95%] | D*: 1 - a_c [95%] |",
          "|---|---|---|---|---|"]
    for sc, e in res["exponent"].items():
        L.append(f"| {sc} | {', '.join(map(str, e['budgets']))} | {e['a_N']:.2f} {iv(e['lo95'], e['hi95'], '.2f')} | "
                 f"{e['a_Nc']:.2f} {iv(e['a_Nc_lo95'], e['a_Nc_hi95'], '.2f')} | "
                 f"{e['a_D']:.2f} {iv(e['a_D_lo95'], e['a_D_hi95'], '.2f')} |")
    checks = plan.lr_check_table(out)
    if checks:
        L += ["", "## The lr checks", "",
              f"The rule's lr against half and twice it at the smallest and the largest width, seeds 1-{plan.SEEDS}.",
              "", "| budget | width | scheme | lr: loss per seed | verdict |", "|---|---|---|---|---|"]
        for k, w, sc, losses, verdict, _ in checks:
            cells = "; ".join(f"{plan.lr(sc, w) * f:g}: " + ", ".join(f"s{i + 1} {x:.4f}" for i, x in enumerate(vs))
                              for f, vs in sorted(losses.items()))
            L.append(f"| {k} | {w} | {sc} | {cells} | {verdict} |")
    cpu = sum(r["cpu_s"] for r in runs) / 3600
    L += ["", f"Compute: {len(runs)} runs, {cpu:.1f} CPU-hours by the logs (training on one thread each, "
          "plus the final evaluations)" + (f"; {stray} run directories not of this plan left out" if stray else "") +
          ".", ""]
    if fits:
        plot(out, runs, fits, res)
        L += ["![the frontier](frontier.png)", ""]
    res.update(runs=len(runs), cpu_hours=cpu, scale=plan.scale(), draws=draws)
    open(os.path.join(out, "report.md"), "w").write("\n".join(L))
    json.dump(res, open(os.path.join(out, "summary.json"), "w"), indent=1, default=str)
    print("\n".join(L))


def main():
    a = sys.argv[1:]
    if not a or a[0].startswith("-"):
        print(__doc__.split("\n\n")[1])
        sys.exit(2)
    if "--scale" in a:
        os.environ["FRONTIER_SCALE"] = a[a.index("--scale") + 1]
    report(a[0], a[1:])


if __name__ == "__main__":
    main()
