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
against seed s of learned: the runs are paired by seed). Its 95% interval is
the t interval of the mean of the per-seed K (stats.one_sample), given only
where every seed's K is bracketed: a censored K is a bound, not a value.

K against the budget: per seed s, the least-squares slope b_s of ln K_s(N) on
ln N over the budgets where every seed's K is bracketed, then the mean of the
b_s with its t interval over the seeds. One slope per seed, because a seed's
runs at different budgets share its batches and are not independent of each
other, while the seeds are. The same again without the largest budget shows
how much of the trend rests on it.

Against size (the gap, and log10 K, against log10 of the non-embedding
parameters): each width's lr is chosen on seed 1 alone and serves every seed
at that width, so the seeds at a width share that choice and its error; the
width is the unit, and each trend is fitted on the widths' values, with t on
(widths - 2) degrees of freedom (stats.slope). The fits on the per-seed
points are shown beside them: they count the seeds at a width as
independent, so their intervals are narrower than the data support. A
width where a scheme's best lr is the smallest or largest of several tried
(its best may lie beyond) is named, and the trends are given without it too.
"""
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stats  # noqa: E402

RUN = re.compile(r"^(?P<scheme>[a-z0-9]+)(?:-w(?P<w>\d+))?-lr(?P<lr>[0-9.e-]+)-steps(?P<steps>\d+)-s(?P<seed>\d+)$")


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


def k_per_seed(ref, learned, n, seeds):
    """ref: {seed: loss} at budget n; learned: {budget: {seed: loss}}. K from the
    means over the given seeds ref has, K per seed, and the t interval of the
    mean per-seed K ('t': stats.one_sample), None where a seed's K is censored."""
    seeds = [s for s in seeds if s in ref]
    if not seeds:
        return None
    y = sum(ref[s] for s in seeds) / len(seeds)
    k = multiplier(mean_curve(learned, seeds), y, n)
    per_seed = {s: multiplier(mean_curve(learned, [s]), ref[s], n) for s in seeds}
    bracketed = all(v is not None and v[0] == "=" for v in per_seed.values())
    t = stats.one_sample([v[1] for v in per_seed.values()]) if bracketed else None
    return {"k": k, "seeds": seeds, "per_seed": per_seed, "t": t}


def fmt_interval_k(r):
    """'1.42x [1.20, 1.64]': the mean per-seed K and its 95% t interval; why not, where there is none."""
    if r is None:
        return "n/a"
    if r["t"] is None:
        return "n/a (censored in " + ", ".join(f"s{s}" for s, v in sorted(r["per_seed"].items())
                                               if v is None or v[0] != "=") + ")"
    t = r["t"]
    return f"{t['mean']:.2f}x [{t['lo95']:.2f}, {t['hi95']:.2f}]" if t["n"] >= 2 else f"{t['mean']:.2f}x"


def fmt_per_seed(r):
    return ", ".join(f"s{k}: {fmt_k(v)}" for k, v in sorted(r["per_seed"].items()))


def k_slope(ks):
    """ks: {budget: k_per_seed result}. Per seed, the least-squares slope of ln K on ln N
    over the budgets where every seed's K is bracketed; their mean and t interval over
    the seeds (stats.one_sample). None for fewer than 2 such budgets."""
    budgets = sorted(n for n, r in ks.items() if r["t"] is not None)
    if len(budgets) < 2:
        return None
    seeds = sorted(set.intersection(*(set(ks[n]["per_seed"]) for n in budgets)))
    per = {s: stats.slope([math.log(n) for n in budgets],
                          [math.log(ks[n]["per_seed"][s][1]) for n in budgets])["slope"] for s in seeds}
    return {"budgets": budgets, "seeds": seeds, "per_seed": per, "t": stats.one_sample(list(per.values()))}


def train_tokens(args):
    for a in args:
        if a.startswith("--train-tokens="):
            return int(a.split("=", 1)[1])
    # the GCIDE studies' training split, where their data record puts it (configs/data/)
    path = "data/gcide-byte-classes/train.bin"
    try:
        with open("configs/data/gcide-byte-classes.txt") as f:
            path = next(l.split("=", 1)[1].strip() for l in f if l.startswith("train ="))
    except (OSError, StopIteration):
        pass
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


def seed_list(seeds):
    """'1-3' or '1, 3': the seeds, named, for a table cell."""
    return stats.fmt_seeds(seeds).split(" ", 1)[1]


def seeds_label(cells):
    """cells: {seed: value} dicts. 'seeds 1-3' where every cell has the same seeds, else each set once."""
    sets = []
    for c in cells:
        if sorted(c) not in sets:
            sets.append(sorted(c))
    return " / ".join(stats.fmt_seeds(x) for x in sets)


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
        t = [stats.one_sample(list(v.values())) for _, v in pts]
        c = style.colour(s, schemes)
        ax.plot(ns, [r["mean"] for r in t], "o-", color=c, label=f"{s} ({seeds_label(v for _, v in pts)})")
        ax.fill_between(ns, [r["lo95"] for r in t], [r["hi95"] for r in t], color=c, alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("training budget (steps of 8 x 128 tokens, each run its own schedule)")
    ax.set_ylabel("final validation loss (whole split)")
    ax.set_title("final loss against budget (line: seed mean; band: its 95% t interval)")
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
    lines = ["# Budget sweep: final loss against training budget, and the multiplier K(N)", "",
             "Each run trains with its own whole schedule (warmup and cosine over its budget, "
             "scripts/run/sweep.sh), on GCIDE; the loss is ./eval's on the whole validation split "
             f"({main[0]['eval_tokens'] if main else '?'} tokens), every run with reproducible = 1.", ""]
    lines += ["Losses: mean ± sd over the seeds named; differences: paired by seed, mean [95% interval, paired t].", "",
              "| budget (steps) | tokens | epochs | seeds | " + " | ".join(f"{s} (lr {lrs[s]:g})" for s in schemes) +
              " | rope - learned [95%] | alibi - learned [95%] | rope - alibi [95%] |",
              "|---" * (4 + len(schemes) + 3) + "|"]
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
        named = " / ".join(f"{s}: {seed_list(table[s][n])}" for s in schemes if n in table[s])
        if len({tuple(sorted(table[s][n])) for s in schemes if n in table[s]}) == 1:   # the same seeds in every cell
            named = seed_list(next(table[s][n] for s in schemes if n in table[s]))
        lines.append(f"| {n} | {tokens:,} | {ep} | {named} | " + " | ".join(cells) + " | " + " | ".join(diffs) + " |")
        summary["budgets"][n] = {s: table[s].get(n) for s in schemes}
    lines += ["", "## The multiplier K(N)", "",
              "K(N): the budget learned needs, on its own whole schedule, to reach the final loss a scheme "
              "reaches at budget N, over N (read from learned's loss-against-budget curve, interpolated in "
              "log budget; the method is in scripts/report/sweep_report.py). K from the seed means: from both "
              "schemes' mean losses; per seed: seed s of the scheme against seed s of learned; 95% interval: "
              "t over the per-seed K (their mean and its interval).", "",
              "| N (steps) | scheme | seeds | K from the seed means | per-seed K: mean [95% t interval] | per seed |",
              "|---|---|---|---|---|---|"]
    summary["K"], summary["K_slope"] = {}, {}
    ks = {}   # scheme -> budget -> k_per_seed result
    if "learned" in table:
        for s in [x for x in schemes if x != "learned"]:
            for n in sorted(table[s]):
                r = k_per_seed(table[s][n], table["learned"], n, seeds)
                if r is None:
                    continue
                ks.setdefault(s, {})[n] = r
                lines.append(f"| {n} | {s} | {seed_list(r['seeds'])} | {fmt_k(r['k'])} | "
                             f"{fmt_interval_k(r)} | {fmt_per_seed(r)} |")
                t = r["t"] or {}
                summary["K"].setdefault(s, {})[n] = {"k": r["k"], "seeds": r["seeds"], "per_seed": r["per_seed"],
                                                     **{x: t.get(x) for x in ("n", "mean", "lo95", "hi95")}}
    slope_rows = []
    for s, by_n in ks.items():
        whole = k_slope(by_n)
        if whole is None:
            continue
        fits = [("all", whole)]
        if len(whole["budgets"]) >= 3:   # the same without the largest budget: how much rests on it
            fits.append(("without the largest", k_slope({n: by_n[n] for n in whole["budgets"][:-1]})))
        for label, f in fits:
            t = f["t"]
            v = stats.sign_verdict(t["lo95"], t["hi95"], "positive: K rises with the budget",
                                   "negative: K falls with the budget")
            span = f"{f['budgets'][0]:,}-{f['budgets'][-1]:,}" + ("" if label == "all" else
                                                                  f" (without {whole['budgets'][-1]:,})")
            slope_rows.append(f"| {s} | {span} | {seed_list(f['seeds'])} | "
                              f"{stats.fmt_interval(t, '+.3f')} | "
                              + ", ".join(f"s{x}: {b:+.3f}" for x, b in sorted(f["per_seed"].items())) + f" | {v} |")
            summary["K_slope"].setdefault(s, {})[label] = {"budgets": f["budgets"], "seeds": f["seeds"],
                                                           "per_seed": f["per_seed"], "verdict": v,
                                                           **{x: t[x] for x in ("n", "mean", "lo95", "hi95")}}
    if slope_rows:
        lines += ["", "## K against the budget", "",
                  "Per seed, the least-squares slope of ln K on ln N over the budgets where every seed's K is "
                  "bracketed (K ~ N^slope); the mean of the seeds' slopes [95% interval, t over the seeds]. A seed's "
                  "runs at different budgets share its batches; the seeds are independent of each other, so the "
                  "interval is taken over them. Without the largest budget: how much of the trend rests on it.", "",
                  "| scheme | budgets (steps) | seeds | slope of ln K on ln N [95%] | per seed | verdict |",
                  "|---|---|---|---|---|---|"] + slope_rows
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


def plot_size(out, rows, gap_fit, k_fit):
    """rows: size_report's rows. The gap (nats) and K against non-embedding
    parameters on log axes with their 95% intervals, the trends fitted on the
    widths' values (stats.slope results), the literature's point."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ps = [r["params"] for r in rows]
    g = [r["gap"] for r in rows]
    glo = [x["mean"] - x["lo95"] if not math.isnan(x["lo95"]) else 0 for x in g]
    ghi = [x["hi95"] - x["mean"] if not math.isnan(x["hi95"]) else 0 for x in g]
    ax1.errorbar(ps, [x["mean"] for x in g], yerr=[glo, ghi], fmt="o", color="tab:red", capsize=3,
                 label="this sweep (95% interval, paired t)")
    lit_p = literature_params()
    xs = [min(ps), lit_p]
    if gap_fit:
        a, b = gap_fit["intercept"], gap_fit["slope"]
        ax1.plot(xs, [a + b * math.log10(x) for x in xs], "--", color="tab:red", alpha=0.6,
                 label="least-squares trend, extended" + (" (slope undetermined)" if gap_fit["lo95"] <= 0 <=
                                                          gap_fit["hi95"] else ""))
    ax1.plot([lit_p], [LITERATURE["rope"] - LITERATURE["learned"]], "s", color="black",
             label="literature (other data and tokens; not fitted)")
    ax1.axhline(0, color="gray", lw=0.8)
    ax1.set_xscale("log")
    ax1.set_xlabel("non-embedding parameters")
    ax1.set_ylabel("rope - learned, final loss (nats)")
    ax1.set_title("the gap against model size")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=7)
    kp = [r for r in rows if r["K"]["k"] and r["K"]["k"][0] == "="]
    if kp:
        kv = [r["K"]["k"][1] for r in kp]
        t = [r["K"]["t"] if r["K"]["t"] and r["K"]["t"]["n"] >= 2 else None for r in kp]
        klo = [max(0.0, k - x["lo95"]) if x else 0 for k, x in zip(kv, t)]
        khi = [max(0.0, x["hi95"] - k) if x else 0 for k, x in zip(kv, t)]
        ax2.errorbar([r["params"] for r in kp], kv, yerr=[klo, khi], fmt="o", color="tab:red", capsize=3,
                     label="K at 600 steps (95% t interval over the per-seed K, " +
                           seeds_label(r["K"]["per_seed"] for r in kp) + ")")
        if k_fit:
            a, b = k_fit["intercept"], k_fit["slope"]
            ends = [min(ps), max(ps)]
            ax2.plot(ends, [10 ** (a + b * math.log10(x)) for x in ends], "--",
                     color="tab:red", alpha=0.6, label="least-squares trend (log K; undetermined)"
                     if k_fit["lo95"] <= 0 <= k_fit["hi95"] else "least-squares trend (log K)")
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
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "gap_vs_params.png"), dpi=120)
    plt.close(fig)


def size_trends(rows):
    """The gap and log10 K against log10 of the non-embedding parameters
    (stats.slope): on each width's value (the unit: a width's seeds share its
    lr choice) and on the per-seed points; over every width and, where some
    width's lr is at the edge of its lrs tried and 3 or more widths remain,
    without those. {quantity: {subset: {"widths", "means", "per seed"}}}."""
    subsets = {"all": rows}
    rest = [r for r in rows if not r["edge"]]
    if len(rest) < len(rows) and len(rest) >= 3:
        subsets["without edge"] = rest
    out = {"gap": {}, "log10 K": {}}
    for name, sub in subsets.items():
        x = {r["w"]: math.log10(r["params"]) for r in sub}
        gap_seed = [(x[r["w"]], d) for r in sub for d in r["gap_seeds"].values()]
        out["gap"][name] = {"widths": [r["w"] for r in sub],
                            "means": stats.slope(list(x.values()), [r["gap"]["mean"] for r in sub]),
                            "per seed": stats.slope(*zip(*gap_seed))}
        kw = [r for r in sub if r["K"]["k"] and r["K"]["k"][0] == "="]
        k_seed = [(x[r["w"]], math.log10(v[1])) for r in kw for v in r["K"]["per_seed"].values() if v and v[0] == "="]
        if len(kw) >= 2:
            out["log10 K"][name] = {"widths": [r["w"] for r in kw],
                                    "means": stats.slope([x[r["w"]] for r in kw],
                                                         [math.log10(r["K"]["k"][1]) for r in kw]),
                                    "per seed": stats.slope(*zip(*k_seed))}
    return out


def size_report(out, args):
    runs = load(out)
    widths = sorted({r["w"] for r in runs})
    steps = 600
    rows = []   # per width: its lrs, the gap (paired), K (k_per_seed), K with all of rope's seeds
    for w in widths:
        best, tried = {}, {}
        for s in ("rope", "learned"):
            grid = {r["lr"]: r["loss"] for r in by(runs, w=w, scheme=s, steps=steps, seed=1)}
            if grid:
                best[s], tried[s] = min(grid, key=grid.get), sorted(grid)
        if len(best) < 2:
            continue
        loss = {s: {r["seed"]: r["loss"] for r in by(runs, w=w, scheme=s, steps=steps, lr=best[s])} for s in best}
        gap_seeds = {sd: loss["rope"][sd] - loss["learned"][sd] for sd in sorted(loss["rope"]) if sd in loss["learned"]}
        learned_curve = {}
        for r in by(runs, w=w, scheme="learned", lr=best["learned"]):
            learned_curve.setdefault(r["steps"], {})[r["seed"]] = r["loss"]
        # K's seeds: those rope has and learned has at every budget (its longer runs have fewer)
        kseeds = sorted(set(loss["rope"]).intersection(*(set(v) for v in learned_curve.values())))
        kr = k_per_seed(loss["rope"], learned_curve, steps, kseeds) or {"k": None, "seeds": [], "per_seed": {},
                                                                        "t": None}
        rope_all = sum(loss["rope"].values()) / len(loss["rope"])
        rows.append({"w": w, "params": non_embedding_params(w), "best": best, "tried": tried,
                     "edge": [s for s in best if len(tried[s]) > 1 and best[s] in (tried[s][0], tried[s][-1])],
                     "loss": loss, "gap": stats.paired(loss["rope"], loss["learned"]), "gap_seeds": gap_seeds,
                     "K": kr, "K_rope_all": multiplier(mean_curve(learned_curve, kseeds), rope_all, steps)
                     if kseeds else None, "rope_seeds": sorted(loss["rope"])})
    tokens = steps * 8 * 128
    lines = ["# Size sweep: rope against learned across model sizes", "",
             f"Widths W with W/32 layers and heads (head_dim 32), {steps} steps of 8 x 128 tokens on GCIDE at every "
             "size, each scheme at its best lr of a short check (seed 1); loss: ./eval on the whole validation "
             f"split; learned also at longer budgets for K. Losses: mean ± sd over the seeds named; rope - learned: "
             "paired by seed, mean [95% interval, paired t]; K from the seed means over the seeds learned has at "
             "every budget, and its 95% interval, t over the per-seed K; the last column puts rope's mean over all "
             "its seeds against learned's curve instead.", "",
             "| width | layers | non-embedding params | seeds | rope: lr, loss | learned: lr, loss | "
             "rope - learned [95%] | K from the seed means | per-seed K: mean [95% t interval] | per seed | "
             "K, rope over all its seeds |", "|---" * 11 + "|"]
    summary = {"widths": {}, "cpu_hours": cpu_hours(runs), "runs": len(runs)}
    for r in rows:
        w, kr = r["w"], r["K"]
        seeds = f"{steps} steps: {seed_list(r['gap_seeds'])}; K: {seed_list(kr['seeds'])}" if kr["seeds"] else \
            f"{steps} steps: {seed_list(r['gap_seeds'])}"
        lines.append(f"| {w} | {w // 32} | {r['params']:,} | {seeds} | {r['best']['rope']:g}, "
                     f"{stats.fmt_mean_sd(list(r['loss']['rope'].values()))} | {r['best']['learned']:g}, "
                     f"{stats.fmt_mean_sd(list(r['loss']['learned'].values()))} | {stats.fmt_interval(r['gap'])} | "
                     f"{fmt_k(kr['k'])} ({seed_list(kr['seeds']) if kr['seeds'] else '-'}) | {fmt_interval_k(kr)} | "
                     f"{fmt_per_seed(kr) or '-'} | {fmt_k(r['K_rope_all'])} ({seed_list(r['rope_seeds'])}) |")
        t = kr["t"] or {}
        summary["widths"][w] = {"params": r["params"], "best_lr": r["best"], "lrs_tried": r["tried"],
                                "lr_at_edge": r["edge"], "gap": r["gap"], "gap_seeds": r["gap_seeds"],
                                "K": kr["k"], "K_seeds": kr["seeds"], "K_per_seed": kr["per_seed"],
                                "K_t": {x: t.get(x) for x in ("n", "mean", "lo95", "hi95")},
                                "K_rope_all_seeds": r["K_rope_all"], "tokens_per_param": tokens / r["params"]}
    lit_p, lit_gap = literature_params(), LITERATURE["rope"] - LITERATURE["learned"]
    lines.append(f"| (literature) | {LITERATURE['layers']} | {lit_p:,} | 1 run | {LITERATURE['rope']} | "
                 f"{LITERATURE['learned']} | {lit_gap:+.4f} | n/a | n/a | n/a | n/a |")
    lines += ["", f"The last row is not this sweep's: {LITERATURE['label']} (docs/REFERENCES.md), with "
              "other data, tokenizer, schedule and about 50,000 times the tokens; it is placed beside the "
              "trend, never fitted."]
    for r in rows:
        for s in r["edge"]:
            lines += ["", f"Width {r['w']}: {s}'s best lr, {r['best'][s]:g}, is the "
                      f"{'largest' if r['best'][s] == r['tried'][s][-1] else 'smallest'} of the lrs tried "
                      f"({', '.join(f'{x:g}' for x in r['tried'][s])}): a better one may lie beyond it."]
    trends = size_trends(rows)
    gap_fit = k_fit = None
    if trends["gap"]:
        names = {"gap": "the gap, nats per decade of parameters", "log10 K": "K's exponent (K ~ params^b)"}
        lines += ["", "## Trends against size", "",
                  "Least squares against log10 of the non-embedding parameters, slope [95% interval, t on points - 2 "
                  "degrees of freedom]. The verdict is read on the widths' values: each width's lr was chosen on seed 1 "
                  "and serves all its seeds, so the seeds at a width share that choice, and the per-seed rows, which "
                  "count them as independent, are narrower than the data support.", "",
                  "| trend | widths | fitted on | points | slope [95%] | verdict |", "|---|---|---|---|---|---|"]
        for q in ("gap", "log10 K"):
            for sub, f in trends[q].items():
                ws = f"{f['widths'][0]}-{f['widths'][-1]}" + ("" if sub == "all" else " (without " + ", ".join(
                    str(r["w"]) for r in rows if r["edge"]) + ": lr at the edge)")
                m, ps = f["means"], f["per seed"]
                v = stats.sign_verdict(m["lo95"], m["hi95"], "slope > 0", "slope < 0")
                lines.append(f"| {names[q]} | {ws} | each width's value | {m['n']} | "
                             f"{stats.fmt_interval(m, '+.3f', 'slope')} | {v} |")
                lines.append(f"| {names[q]} | {ws} | the per-seed values | {ps['n']} | "
                             f"{stats.fmt_interval(ps, '+.3f', 'slope')} | - |")
                m["verdict"] = v
        summary["trends"] = trends
        gap_fit = trends["gap"]["all"]["means"]
        k_fit = trends["log10 K"].get("all", {}).get("means")
        a, b = gap_fit["intercept"], gap_fit["slope"]
        lines += ["", f"Over all widths: the gap against size is {gap_fit['verdict']}"
                  + (f"; K against size is {k_fit['verdict']}" if k_fit else "") + ". "
                  f"Every width trains the same {steps} steps ({tokens:,} tokens), so tokens per non-embedding parameter "
                  f"fall from {tokens / rows[0]['params']:.2g} at width {rows[0]['w']} to {tokens / rows[-1]['params']:.2g} "
                  f"at width {rows[-1]['w']}: a trend here is one in size and tokens per parameter together.",
                  "", f"The gap's least-squares line over all widths, extended to the literature's {lit_p / 1e6:.0f}M, "
                  f"would give {a + b * math.log10(lit_p):+.3f}, against the {lit_gap:+.3f} measured there; with a slope "
                  f"of {stats.fmt_interval(gap_fit, '+.3f', 'slope')} per decade the extension says little."]
        summary["gap_slope_per_decade"] = b
        summary["gap_at_literature_size"] = a + b * math.log10(lit_p)
        if k_fit:
            summary["k_exponent"] = k_fit["slope"]
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
