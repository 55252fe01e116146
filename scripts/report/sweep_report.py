"""The report of a sweep (scripts/run/sweep.sh): the budget sweep's final loss
against training budget and the compute multiplier K(N), or the size sweep's
gap and K against model size.

    sweep_report.py budget runs/compare-budget [--train-tokens N]
    sweep_report.py size runs/compare-size [--train-tokens N]

Reads each finished run's RUN/final_eval.txt (./eval on the whole validation
split, written by compare.sh --final-eval) and RUN/log.csv; writes
DIR/report.md, DIR/summary.json and the plots.

The multiplier. Learned's final loss at budgets n_1 < n_2 < ... (each with its
own whole schedule) is a curve L(n); read in log budget, linearly between the
budgets that bracket a loss y:

    n(y) = exp( log n_i + (log n_{i+1} - log n_i) (L_i - y) / (L_i - L_{i+1}) )

for the first i with L_i >= y >= L_{i+1}. K(N) = n(L_rope(N)) / N: how many
times rope's budget learned needs to reach the loss rope reaches at budget N.
Where rope's loss lies below learned's at every budget run, K is censored:
K > n_max / N. Where it lies above learned's loss at the smallest budget, K <
n_1 / N.

K is computed from the seed means of both curves, and per seed (seed s of rope
against seed s of learned: the runs are paired by seed). Its 95% interval is a
paired bootstrap over seeds: seeds drawn with replacement (the same draw for
both schemes), K recomputed from the means of the drawn seeds, 10,000 draws,
the 2.5% and 97.5% points. With 3 seeds there are only 10 distinct draws, so
the interval is coarse: it is close to the range of K over seed subsets.
"""
import json
import math
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402

RUN = re.compile(r"^(?P<scheme>[a-z0-9]+)(?:-w(?P<w>\d+))?-lr(?P<lr>[0-9.e-]+)-steps(?P<steps>\d+)-s(?P<seed>\d+)$")
BOOTSTRAP_DRAWS = 10000


def read_final(d):
    """(loss, tokens, eval seconds) of RUN/final_eval.txt, or None."""
    try:
        text = open(os.path.join(d, "final_eval.txt")).read()
    except OSError:
        return None
    m = re.search(r" tokens=(\d+) loss=([0-9.]+)", text)
    if not m:
        return None
    e = re.search(r"^eval_s=(\d+)", text, re.M)
    return float(m.group(2)), int(m.group(1)), int(e.group(1)) if e else 0


def train_seconds(d):
    """The run's elapsed_s at its last logged step (one thread), or 0."""
    try:
        rows = open(os.path.join(d, "log.csv")).read().split("\n")
    except OSError:
        return 0.0
    head = rows[0].split(",")
    last = [r for r in rows[1:] if r]
    if "elapsed_s" not in head or not last:
        return 0.0
    return float(last[-1].split(",")[head.index("elapsed_s")])


def load(out):
    """Finished runs: list of dicts scheme, w, lr, steps, seed, loss, tokens, cpu_s."""
    runs = []
    for name in sorted(os.listdir(out)):
        m = RUN.match(name)
        d = os.path.join(out, name)
        if not m or not os.path.exists(os.path.join(d, "done")):
            continue
        fin = read_final(d)
        if fin is None:
            continue
        runs.append({"scheme": m["scheme"], "w": int(m["w"]) if m["w"] else 128, "lr": float(m["lr"]),
                     "steps": int(m["steps"]), "seed": int(m["seed"]), "loss": fin[0], "eval_tokens": fin[1],
                     "cpu_s": train_seconds(d) + fin[2]})
    return runs


def budget_needed(curve, y):
    """curve: [(n, loss)] by increasing n. The budget at which the curve reaches y,
    interpolated in log n; ('>', n_max) or ('<', n_min) where it does not bracket y."""
    if not curve:
        return None
    if y >= curve[0][1]:
        return ("<", curve[0][0]) if y > curve[0][1] else ("=", curve[0][0])
    for (n0, l0), (n1, l1) in zip(curve, curve[1:]):
        if l0 >= y >= l1 and l0 > l1:
            f = (l0 - y) / (l0 - l1)
            return ("=", math.exp(math.log(n0) + f * (math.log(n1) - math.log(n0))))
    return (">", curve[-1][0])


def multiplier(curve, y, n):
    """K = budget_needed / n as (relation, value): '=', '>' (censored) or '<'."""
    r = budget_needed(curve, y)
    return None if r is None else (r[0], r[1] / n)


def fmt_k(k):
    if k is None:
        return "n/a"
    return f"{k[1]:.2f}x" if k[0] == "=" else f"{k[0]} {k[1]:.2f}x"


def mean_curve(losses, seeds):
    """losses: {n: {seed: loss}}. [(n, mean over the given seeds)] for the budgets that have all of them."""
    out = []
    for n in sorted(losses):
        vals = [losses[n][s] for s in seeds if s in losses[n]]
        if len(vals) == len(seeds):
            out.append((n, sum(vals) / len(vals)))
    return out


def k_with_interval(ref, learned, n, seeds):
    """ref: {seed: loss} at budget n; learned: {budget: {seed: loss}}. K from the seed
    means, per seed, and its paired bootstrap interval over seeds."""
    seeds = [s for s in seeds if s in ref]
    if not seeds:
        return None
    y = sum(ref[s] for s in seeds) / len(seeds)
    k = multiplier(mean_curve(learned, seeds), y, n)
    per_seed = {s: multiplier(mean_curve(learned, [s]), ref[s], n) for s in seeds}
    rng = random.Random(1)
    draws = []
    for _ in range(BOOTSTRAP_DRAWS):
        pick = [rng.choice(seeds) for _ in seeds]
        kd = multiplier(mean_curve(learned, pick), sum(ref[s] for s in pick) / len(pick), n)
        if kd is not None:
            draws.append(kd)
    lo = hi = None
    if draws:
        vals = sorted(d[1] for d in draws)
        lo, hi = vals[int(0.025 * (len(vals) - 1))], vals[int(0.975 * (len(vals) - 1))]
        censored = sum(d[0] == ">" for d in draws) / len(draws)
    else:
        censored = 0.0
    return {"k": k, "per_seed": per_seed, "lo95": lo, "hi95": hi, "share_censored": censored}


def fmt_interval_k(r):
    if r is None or r["lo95"] is None:
        return "n/a"
    s = f"[{r['lo95']:.2f}, {r['hi95']:.2f}]"
    if r["share_censored"] > 0:
        s += f" ({100 * r['share_censored']:.0f}% of draws censored: their bound counted)"
    return s


def train_tokens(args):
    for a in args:
        if a.startswith("--train-tokens="):
            return int(a.split("=", 1)[1])
    path = "data/gcide/train.bin"
    try:
        with open(path, "rb") as f:
            header = f.read(12)
        return int.from_bytes(header[8:12], "little")
    except OSError:
        return None


def by(runs, **kw):
    return [r for r in runs if all(r[k] == v for k, v in kw.items())]


def cpu_hours(runs):
    return sum(r["cpu_s"] for r in runs) / 3600


def plot_budget(out, table, schemes):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import style
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in schemes:
        pts = sorted(table[s].items())
        ns = [n for n, _ in pts]
        means = [stats.mean_sd(list(v.values()))[0] for _, v in pts]
        lo = [min(v.values()) for _, v in pts]
        hi = [max(v.values()) for _, v in pts]
        c = style.colour(s, schemes)
        ax.plot(ns, means, "o-", color=c, label=s)
        ax.fill_between(ns, lo, hi, color=c, alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("training budget (steps of 8 x 128 tokens, each run its own schedule)")
    ax.set_ylabel("final validation loss (whole split)")
    ax.set_title("final loss against budget (line: seed mean; band: min-max over seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "final_loss_vs_budget.png"), dpi=120)
    plt.close(fig)


def sweep_lrs(runs):
    """Each scheme's lr line: the lr it has the most runs at (sweep.sh runs every budget and
    seed at it; the lr checks are single runs or a few budgets). Ties: the lower lr."""
    count = {}
    for r in runs:
        count.setdefault(r["scheme"], {}).setdefault(r["lr"], 0)
        count[r["scheme"]][r["lr"]] += 1
    return {s: min(c, key=lambda lr: (-c[lr], lr)) for s, c in count.items()}


def budget_report(out, args):
    runs = load(out)
    tt = train_tokens(args)
    lrs = sweep_lrs(runs)
    main = [r for r in runs if r["lr"] == lrs[r["scheme"]]]
    schemes = [s for s in ("rope", "alibi", "learned") if by(main, scheme=s)]
    table = {s: {} for s in schemes}   # scheme -> budget -> seed -> loss
    for r in main:
        table[r["scheme"]].setdefault(r["steps"], {})[r["seed"]] = r["loss"]
    seeds = sorted({r["seed"] for r in main})
    lines = [f"# Budget sweep: final loss against training budget, and the multiplier K(N)", "",
             "Each run trains with its own whole schedule (warmup and cosine over its budget, "
             "scripts/run/sweep.sh), on GCIDE; the loss is ./eval's on the whole validation split "
             f"({main[0]['eval_tokens'] if main else '?'} tokens), every run with reproducible = 1.", ""]
    lines += ["| budget (steps) | tokens | epochs | " + " | ".join(f"{s} (lr {lrs[s]:g})" for s in schemes) +
              " | rope - learned [95%] | alibi - learned [95%] | rope - alibi [95%] |",
              "|---" * (3 + len(schemes) + 3) + "|"]
    budgets = sorted({n for s in schemes for n in table[s]})
    summary = {"budgets": {}, "cpu_hours": cpu_hours(runs), "runs": len(runs)}
    for n in budgets:
        tokens = n * 8 * 128
        ep = f"{tokens / tt:.2f}" if tt else "?"
        cells = [stats.fmt_mean_sd(list(table[s].get(n, {}).values())) if n in table[s] else "-" for s in schemes]
        diffs = []   # the paired differences; rope - alibi with the verdict (lower, equivalent or undecided)
        for s, b in (("rope", "learned"), ("alibi", "learned"), ("rope", "alibi")):
            if n in table.get(s, {}) and n in table.get(b, {}):
                p = stats.paired(table[s][n], table[b][n])
                diffs.append(stats.fmt_interval(p) + (f", {stats.verdict(p, 0.02, s, b)}" if b == "alibi" else ""))
            else:
                diffs.append("-")
        lines.append(f"| {n} | {tokens:,} | {ep} | " + " | ".join(cells) + " | " + " | ".join(diffs) + " |")
        summary["budgets"][n] = {s: table[s].get(n) for s in schemes}
    lines += ["", "## The multiplier K(N)", "",
              "K(N): the budget learned needs, on its own whole schedule, to reach the final loss a scheme "
              "reaches at budget N, over N (read from learned's loss-against-budget curve, interpolated in "
              "log budget; the method is in scripts/report/sweep_report.py). 95% interval: paired bootstrap "
              "over seeds.", "",
              "| N (steps) | scheme | K from the seed means | 95% interval | per seed |", "|---|---|---|---|---|"]
    summary["K"] = {}
    if "learned" in table:
        for s in [x for x in schemes if x != "learned"]:
            for n in sorted(table[s]):
                r = k_with_interval(table[s][n], table["learned"], n, seeds)
                if r is None:
                    continue
                per = ", ".join(f"s{k}: {fmt_k(v)}" for k, v in sorted(r["per_seed"].items()))
                lines.append(f"| {n} | {s} | {fmt_k(r['k'])} | {fmt_interval_k(r)} | {per} |")
                summary["K"].setdefault(s, {})[n] = {"k": r["k"], "lo95": r["lo95"], "hi95": r["hi95"],
                                                     "per_seed": r["per_seed"]}
    # The lr checks: every run at another lr than its scheme's line, against the line's run
    # of the same budget and seed (a negative difference: the other lr did better)
    checks = sorted((r for r in runs if r not in main), key=lambda r: (r["scheme"], r["steps"], r["lr"], r["seed"]))
    if checks:
        lines += ["", "## Has the best lr moved? (the lr checks)", "",
                  "| scheme | budget | seed | the sweep's lr: loss | other lr: loss | difference |",
                  "|---|---|---|---|---|---|"]
        for r in checks:
            base = table.get(r["scheme"], {}).get(r["steps"], {}).get(r["seed"])
            lines.append(f"| {r['scheme']} | {r['steps']} | {r['seed']} | {lrs[r['scheme']]:g}: "
                         f"{base:.4f} | {r['lr']:g}: {r['loss']:.4f} | {r['loss'] - base:+.4f} |"
                         if base is not None else
                         f"| {r['scheme']} | {r['steps']} | {r['seed']} | - | {r['lr']:g}: {r['loss']:.4f} | - |")
    lines += ["", f"Compute: {len(runs)} runs, {cpu_hours(runs):.1f} CPU-hours (training on one thread each, "
              "plus the final evaluations).", ""]
    if budgets:
        plot_budget(out, table, schemes)
        lines += ["![final loss against budget](final_loss_vs_budget.png)", ""]
    open(os.path.join(out, "report.md"), "w").write("\n".join(lines))
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1, default=str)
    print("\n".join(lines))


def block_params(w, L):
    """The gpt2 block's parameters per model without wte/wpe: L layers of
    c_attn (3C^2 + 3C), c_proj (C^2 + C), c_fc (4C^2 + 4C), mlp_proj (4C^2 + C)
    and two LayerNorms (4C), plus the final LayerNorm (2C); C = w."""
    return L * (12 * w * w + 13 * w) + 2 * w


def non_embedding_params(w):
    """The sweep's models: width w with w/32 layers."""
    return block_params(w, w // 32)


# The literature's point (docs/REFERENCES.md: EleutherAI's rotary post, GPT-NeoX, 125M parameters
# with GPT-3 Small's shape, 12 layers of width 768, on OpenWebText2 after 55k steps, about 30B
# tokens, one run each): final losses learned 2.809, rotary 2.759. Its non-embedding parameters
# are block_params at width 768 with 12 layers (about 85M). Placed
# beside the sweep, never fitted: other data, tokenizer, tokens and schedule.
LITERATURE = {"label": "EleutherAI blog: 125M, OpenWebText2, 55k steps (~30B tokens), 1 run",
              "layers": 12, "width": 768, "learned": 2.809, "rope": 2.759}


def literature_params():
    return block_params(LITERATURE["width"], LITERATURE["layers"])


def fit_line(xs, ys):
    """Least squares y = a + b x: (a, b)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def plot_size(out, rows, gap_fit, k_fit):
    """rows: [(params, gap result, K result or None)]. The gap (nats) and K against
    non-embedding parameters on log axes, the fitted trends, the literature's point."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ps = [r[0] for r in rows]
    g = [r[1]["mean"] for r in rows]
    glo = [r[1]["mean"] - r[1]["lo95"] if not math.isnan(r[1]["lo95"]) else 0 for r in rows]
    ghi = [r[1]["hi95"] - r[1]["mean"] if not math.isnan(r[1]["hi95"]) else 0 for r in rows]
    ax1.errorbar(ps, g, yerr=[glo, ghi], fmt="o", color="tab:red", capsize=3, label="this sweep (95% interval)")
    lit_p = literature_params()
    xs = [min(ps), lit_p]
    if gap_fit:
        a, b = gap_fit
        ax1.plot(xs, [a + b * math.log10(x) for x in xs], "--", color="tab:red", alpha=0.6,
                 label="least-squares trend, extended to the literature's size")
    ax1.plot([lit_p], [LITERATURE["rope"] - LITERATURE["learned"]], "s", color="black",
             label="literature (other data and tokens; not fitted)")
    ax1.axhline(0, color="gray", lw=0.8)
    ax1.set_xscale("log")
    ax1.set_xlabel("non-embedding parameters")
    ax1.set_ylabel("rope - learned, final loss (nats)")
    ax1.set_title("the gap against model size")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)
    kp = [(r[0], r[2]) for r in rows if r[2] and r[2]["k"] and r[2]["k"][0] == "="]
    if kp:
        kv = [k["k"][1] for _, k in kp]
        klo = [k["k"][1] - k["lo95"] if k["lo95"] is not None else 0 for _, k in kp]
        khi = [k["hi95"] - k["k"][1] if k["hi95"] is not None else 0 for _, k in kp]
        ax2.errorbar([p for p, _ in kp], kv, yerr=[klo, khi], fmt="o", color="tab:red", capsize=3,
                     label="K at 600 steps (95% interval)")
        if k_fit:
            a, b = k_fit
            ends = [min(ps), max(ps)]
            ax2.plot(ends, [10 ** (a + b * math.log10(x)) for x in ends], "--",
                     color="tab:red", alpha=0.6, label="least-squares trend (log K)")
    ax2.axhline(1, color="gray", lw=0.8)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    plain = matplotlib.ticker.FormatStrFormatter("%.2fx")   # 1.40x, not 1.4 x 10^0
    ax2.yaxis.set_major_formatter(plain)
    ax2.yaxis.set_minor_formatter(plain)
    ax2.set_xlabel("non-embedding parameters")
    ax2.set_ylabel("K: learned's budget to match rope at 600 steps, / 600")
    ax2.set_title("the multiplier against model size")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gap_vs_params.png"), dpi=120)
    plt.close(fig)


def size_report(out, args):
    runs = load(out)
    widths = sorted({r["w"] for r in runs})
    lines = ["# Size sweep: rope against learned across model sizes", "",
             "Widths W with W/32 layers and heads (head_dim 32), 600 steps of 8 x 128 tokens on GCIDE at every "
             "size, each scheme at its best lr of a short check (seed 1); loss: ./eval on the whole validation "
             "split; learned also at 1,200 and 2,400 steps (seeds 1-2) for K.", "",
             "| width | layers | non-embedding params | rope: lr, loss | learned: lr, loss | rope - learned [95%] | "
             "K (seeds 1-2) | 95% interval |", "|---|---|---|---|---|---|---|---|"]
    summary = {"widths": {}, "cpu_hours": cpu_hours(runs), "runs": len(runs)}
    rows = []   # (params, the gap's paired result, K with its interval) per size
    for w in widths:
        best = {}
        for s in ("rope", "learned"):
            grid = {}
            for r in by(runs, w=w, scheme=s, steps=600, seed=1):
                grid[r["lr"]] = r["loss"]
            if grid:
                best[s] = min(grid, key=grid.get)
        if len(best) < 2:
            continue
        loss = {s: {r["seed"]: r["loss"] for r in by(runs, w=w, scheme=s, steps=600, lr=best[s])} for s in best}
        p = stats.paired(loss["rope"], loss["learned"])
        learned_curve = {}
        for r in by(runs, w=w, scheme="learned", lr=best["learned"]):
            learned_curve.setdefault(r["steps"], {})[r["seed"]] = r["loss"]
        kr = k_with_interval(loss["rope"], learned_curve, 600, [1, 2])
        lines.append(f"| {w} | {w // 32} | {non_embedding_params(w):,} | {best['rope']:g}, "
                     f"{stats.fmt_mean_sd(list(loss['rope'].values()))} | {best['learned']:g}, "
                     f"{stats.fmt_mean_sd(list(loss['learned'].values()))} | "
                     f"{stats.fmt_interval(p)} | {fmt_k(kr['k']) if kr else 'n/a'} | {fmt_interval_k(kr)} |")
        summary["widths"][w] = {"params": non_embedding_params(w), "best_lr": best, "gap": p,
                                "K": kr["k"] if kr else None}
        rows.append((non_embedding_params(w), p, kr))
    lit_p, lit_gap = literature_params(), LITERATURE["rope"] - LITERATURE["learned"]
    lines.append(f"| (literature) | {LITERATURE['layers']} | {lit_p:,} | {LITERATURE['rope']} | "
                 f"{LITERATURE['learned']} | {lit_gap:+.4f} (1 run) | n/a | n/a |")
    lines += ["", f"The last row is not this sweep's: {LITERATURE['label']} (docs/REFERENCES.md), with "
              "other data, tokenizer, schedule and about 50,000 times the tokens; it is placed beside the "
              "trend, never fitted."]
    gap_fit = k_fit = None
    if len(rows) >= 2:
        gap_fit = fit_line([math.log10(r[0]) for r in rows], [r[1]["mean"] for r in rows])
        a, b = gap_fit
        lines += ["", f"Trend of the gap: {b:+.4f} nats per decade of non-embedding parameters (least squares "
                  f"over {len(rows)} sizes); extended to the literature's {lit_p / 1e6:.0f}M it would be "
                  f"{a + b * math.log10(lit_p):+.3f}, against the {lit_gap:+.3f} measured there."]
        summary["gap_slope_per_decade"] = b
        summary["gap_at_literature_size"] = a + b * math.log10(lit_p)
        kpts = [(r[0], r[2]["k"][1]) for r in rows if r[2] and r[2]["k"] and r[2]["k"][0] == "="]
        if len(kpts) >= 2:
            k_fit = fit_line([math.log10(x) for x, _ in kpts], [math.log10(k) for _, k in kpts])
            lines += [f"Trend of K: K ~ params^{k_fit[1]:+.3f} (least squares of log K over {len(kpts)} sizes "
                      "whose K is bracketed)."]
            summary["k_exponent"] = k_fit[1]
    lines += ["", f"Compute: {len(runs)} runs, {cpu_hours(runs):.1f} CPU-hours.", ""]
    if rows:
        plot_size(out, rows, gap_fit, k_fit)
        lines += ["![the gap and K against model size](gap_vs_params.png)", ""]
    open(os.path.join(out, "report.md"), "w").write("\n".join(lines))
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1, default=str)
    print("\n".join(lines))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("budget", "size"):
        print(__doc__)
        sys.exit(2)
    (budget_report if sys.argv[1] == "budget" else size_report)(sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
