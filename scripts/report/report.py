#!/usr/bin/python3
"""The comparison reports: one per setup, and a summary across setups.

    scripts/report/report.py COMPARE_DIR variant [variant ...] [--name NAME]
    scripts/report/report.py --lr COMPARE_DIR scheme-lrX [...] [--name NAME]   (the lr study)
    scripts/report/report.py --summary OUT.md COMPARE_DIR [COMPARE_DIR ...]

A variant is a scheme (rope, learned, sinusoidal, t5, alibi, none) or a
scheme with a setting, e.g. sinusoidal-scale1 (scripts/run/compare.sh names the
run directories COMPARE_DIR/<variant>-s<seed>/).

Per setup it reads each run's log.csv and COMPARE_DIR/extrapolation.csv and
writes into COMPARE_DIR:
  val_loss_vs_step.png  validation loss against step: mean over seeds (line)
                        and the min-max band across seeds, one colour per variant
  val_loss_vs_time.png  the same against the run's training seconds
  report.md             final loss (mean ± sd, min..max), the paired difference
                        to learned (and rope against alibi) with its 95%
                        interval and an equivalence test (scripts/report/stats.py),
                        steps to three targets with the speed-up over learned
                        (mean ± sd over seeds), the wall time, length extrapolation
  summary.json          the same numbers, for the summary across setups

Targets: learned's mean validation loss at 1/4 and 1/2 of the run, and its
mean final loss. Steps to a target are read off each run's validation curve
by linear interpolation between evaluations (first crossing). Runs with the
same seed see the same batches from the same initial values in every shared
tensor, so the speed-up is taken per seed, steps(learned, seed) /
steps(variant, seed), then averaged. A learned seed that never reaches its
own mean final loss counts as reaching it at the last step, so that seed's
speed-up is biased low (marked with a dagger); each speed-up is given as the
mean of the per-seed ratios with its 95% interval (t over the seeds).
"""
import csv
import glob
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import mean_sd, fmt_mean_sd, paired, verdict, fmt_interval, one_sample   # noqa: E402
from style import SCHEME_COLOURS, colour   # noqa: E402

REF = "learned"
MARGIN = 0.02   # nats: the equivalence margin of the two one-sided tests


def read_log(path):
    """All rows of a training log, as dicts of floats (NaN for empty fields)."""
    with open(path) as f:
        return [{k: float(v) if v not in ("", None) else math.nan for k, v in r.items()}
                for r in csv.DictReader(f)]


def load_runs(out, variants):
    """variant -> {seed: {"val": rows with a validation loss, "all": every row}}, seeds in order.
    Reads OUT/<variant>-s<seed>/log.csv (a comparison's run directories) or, for a
    committed setup, OUT/logs/<variant>-s<seed>.csv."""
    runs = {}
    committed = os.path.isdir(os.path.join(out, "logs"))
    for v in variants:
        pattern = os.path.join(glob.escape(out), *(["logs"] if committed else []), f"{glob.escape(v)}-s*")
        for d in glob.glob(pattern):
            name = os.path.basename(d)
            if committed:
                if not name.endswith(".csv"):
                    continue
                name = name[:-4]
            rest = name[len(v) + 2:]   # the seed: v-s<digits> exactly (not v-scale1-s1)
            log = d if committed else os.path.join(d, "log.csv")
            if not rest.isdigit() or not os.path.isfile(log):
                continue
            seed = rest
            rows = read_log(log)
            runs.setdefault(v, {})[int(seed)] = {
                "val": [r for r in rows if not math.isnan(r["val_loss"])], "all": rows,
                "whole": read_final_eval(log[:-4] + ".eval.txt" if committed else os.path.join(d, "final_eval.txt"))}
    return {v: dict(sorted(seeds.items())) for v, seeds in runs.items()}


def read_final_eval(path):
    """The loss ./eval printed in a run's final_eval.txt (compare.sh --final-eval: the
    final model on the whole validation split), or NaN if there is none."""
    try:
        with open(path) as f:
            for word in f.read().split():
                if word.startswith("loss="):
                    return float(word[5:])
    except OSError:
        pass
    return math.nan


def finals(seed_runs):
    """{seed: final validation loss} of one variant's runs."""
    return {s: r["val"][-1]["val_loss"] for s, r in seed_runs.items()}


def first_crossing(val_rows, target, key="step"):
    """The step (or, with key="elapsed_s", the run's own training seconds) at which the
    validation curve first reaches <= target, interpolated between evaluations; NaN if never."""
    prev = None
    for r in val_rows:
        if r["val_loss"] <= target:
            if prev is None:
                return r[key]
            s0, l0, s1, l1 = prev[key], prev["val_loss"], r[key], r["val_loss"]
            return s0 + (l0 - target) / (l0 - l1) * (s1 - s0) if l0 != l1 else s1
        prev = r
    return math.nan


def fmt(x, spec=".3f"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def plot(runs, out, xkey, xlabel, fname, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for v, seeds in runs.items():
        rs = list(seeds.values())
        n = min(len(r["val"]) for r in rs)
        xs = [statistics.mean(r["val"][i][xkey] for r in rs) for i in range(n)]
        ys = [[r["val"][i]["val_loss"] for r in rs] for i in range(n)]
        style = "-" if v == v.split("-")[0] else "--"
        line, = ax.plot(xs, [statistics.mean(y) for y in ys], style, color=colour(v, list(runs)),
                        label=f"{v} ({len(rs)} seeds)")
        ax.fill_between(xs, [min(y) for y in ys], [max(y) for y in ys], color=line.get_color(), alpha=0.15)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title(title)
    finals = [r["val"][-1]["val_loss"] for s in runs.values() for r in s.values()]
    early = [r["val"][min(3, len(r["val"]) - 1)]["val_loss"] for s in runs.values() for r in s.values()]
    lo = min(min(row["val_loss"] for row in r["val"]) for s in runs.values() for r in s.values())
    ax.set_ylim(lo - 0.05, min(max(early), statistics.median(finals) + 2.0) + 0.1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, fname), dpi=110)
    plt.close(fig)


def wall_time(out, runs):
    """(wall seconds of the whole comparison if recorded, sum of the runs' training seconds)."""
    total = sum(r["all"][-1]["elapsed_s"] for s in runs.values() for r in s.values())
    wall = math.nan
    path = os.path.join(out, "wall_time.txt")
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                if line.startswith("wall_s="):
                    wall = float(line.split("=", 1)[1])
    return wall, total


def analyse(out, variants, name, ref=REF):
    """The runs of variants and the report's numbers, with ref's losses as the targets."""
    runs = load_runs(out, variants)
    missing = [v for v in variants if v not in runs]
    if missing:
        sys.exit(f"report.py: {out}: no finished runs for {', '.join(missing)}")
    if ref not in runs:
        sys.exit(f"report.py: {out}: the targets are {ref}'s losses: include {ref}")
    steps_total = int(max(r["val"][-1]["step"] for s in runs.values() for r in s.values()))
    final = {v: [r["val"][-1]["val_loss"] for r in s.values()] for v, s in runs.items()}
    targets = []
    for frac in (0.25, 0.5):
        rows = [min(r["val"], key=lambda x: abs(x["step"] - frac * steps_total)) for r in runs[ref].values()]
        targets.append({"label": f"{ref} at step {int(rows[0]['step'])}",
                        "loss": statistics.mean(x["val_loss"] for x in rows), "capped": False})
    targets.append({"label": f"{ref}'s final", "loss": statistics.mean(final[ref]), "capped": True})
    result = {"name": name, "dir": out, "steps": steps_total, "variants": {}, "targets": targets}
    for v, seeds in runs.items():
        entry = {"seeds": sorted(seeds), "final": final[v], "final_by_seed": finals(seeds), "tokens_per_s": statistics.median(
            x["tokens_per_s"] for r in seeds.values() for x in r["all"] if x["tokens_per_s"] > 0), "targets": []}
        for t in targets:
            steps, speedups, seconds, time_speedups, reached = [], [], [], [], 0
            for seed, r in seeds.items():
                s = first_crossing(r["val"], t["loss"])
                sec = first_crossing(r["val"], t["loss"], "elapsed_s")
                reached += not math.isnan(s)
                steps.append(s)
                seconds.append(sec)
                rr = runs[ref].get(seed)
                if rr is not None and not math.isnan(s) and s > 0:
                    s_ref = first_crossing(rr["val"], t["loss"])
                    sec_ref = first_crossing(rr["val"], t["loss"], "elapsed_s")
                    if math.isnan(s_ref) and t["capped"]:
                        # reached no earlier than the end: lower bounds
                        s_ref, sec_ref = rr["val"][-1]["step"], rr["val"][-1]["elapsed_s"]
                    if not math.isnan(s_ref):
                        speedups.append(s_ref / s)
                        time_speedups.append(sec_ref / sec)
            entry["targets"].append({"steps": steps, "reached": reached, "speedups": speedups,
                                     "seconds": seconds, "time_speedups": time_speedups})
        # Paired by seed: this variant's final loss minus ref's.
        entry["vs_ref"] = paired(finals(seeds), finals(runs[ref]))
        whole = {sd: r["whole"] for sd, r in seeds.items() if not math.isnan(r["whole"])}
        if whole and len(whole) == len(seeds):   # the final model on the whole validation split
            entry["whole"] = list(whole.values())
            entry["whole_vs_ref"] = paired(whole, {sd: r["whole"] for sd, r in runs[ref].items()})
        result["variants"][v] = entry
    by_scheme = {}
    for v in runs:
        by_scheme.setdefault(v.split("-")[0], []).append(v)
    if len(by_scheme.get("rope", [])) == 1 and len(by_scheme.get("alibi", [])) == 1:
        result["rope-vs-alibi"] = paired(finals(runs[by_scheme["rope"][0]]), finals(runs[by_scheme["alibi"][0]]))
    result["ref"] = ref
    result["wall_s"], result["run_s"] = wall_time(out, runs)
    result["step_costs"] = read_step_costs(out)
    return runs, result


def read_step_costs(out):
    """{variant: ms per step} from OUT/step_costs.csv (scripts/run/step_costs.sh), or None."""
    path = os.path.join(out, "step_costs.csv")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return {r["variant"]: float(r["ms_per_step"]) for r in csv.DictReader(f)}


def step_cost(costs, variant):
    """A variant's ms per step: its own row, else its scheme's (SCHEME-lrX, -scaleS:
    the lr and the scale change no work in a step, so the step costs the scheme's)."""
    return costs.get(variant, costs.get(variant.split("-")[0], math.nan))


def extrapolation_rows(out, variants):
    path = os.path.join(out, "extrapolation.csv")
    if not os.path.isfile(path):
        return None, []
    table = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            table.setdefault((r["pos"], int(r["seq_len"])), []).append(float(r["loss"]))
    lens = sorted({k[1] for k in table})
    return table, lens


WHOLE_NOTE = ("every window of the split, where the training log's validation loss is its first eval_batches x "
              "batch_size windows")


def final_loss_lines(runs, res):
    """The final-loss table: each variant against the reference, paired by seed."""
    ref = res["ref"]
    lines = ["## Final validation loss\n",
             f"Paired by seed: d = this variant's final loss minus {ref}'s for the same seed (same batches, same "
             f"initial values), mean and 95% interval (paired t over the seeds); lower: seeds where this variant "
             f"ends below {ref}; verdict: lower or higher where the interval excludes 0, 'equivalent' only where a "
             f"two one-sided test at ±{MARGIN} nats says so (90% interval inside the margin), else undecided "
             "(scripts/report/stats.py). tokens/s: one-thread runs sharing the machine with other work; not a speed "
             "comparison (`make bench` is).\n",
             f"| variant | final val loss (mean ± sd) | min..max | d vs {ref} [95% interval] | lower | verdict | tokens/s (median) |",
             "|---|---|---|---|---|---|---|"]
    for v in runs:
        e = res["variants"][v]
        m, sd = mean_sd(e["final"])
        pr = e["vs_ref"]
        lines.append(f"| {v} | {m:.4f} ± {sd:.4f} | {min(e['final']):.4f}..{max(e['final']):.4f} | "
                     f"{'-' if v == ref else fmt_interval(pr)} | {'-' if v == ref else str(pr['wins']) + '/' + str(pr['n'])} | "
                     f"{'-' if v == ref else verdict(pr, MARGIN, v, ref)} | {fmt(e['tokens_per_s'], '.0f')} |")
    whole = [v for v in runs if "whole" in res["variants"][v]]
    if whole and len(whole) == len(runs):
        lines += [f"\nThe same final models on the whole validation split (./eval --reproducible, "
                  f"{WHOLE_NOTE}):\n", f"| variant | final loss, whole split (mean ± sd) | d vs {ref} [95% interval] | "
                  "lower | verdict |", "|---|---|---|---|---|"]
        for v in runs:
            e = res["variants"][v]
            m, sd = mean_sd(e["whole"])
            pr = e["whole_vs_ref"]
            lines.append(f"| {v} | {m:.4f} ± {sd:.4f} | {'-' if v == ref else fmt_interval(pr)} | "
                         f"{'-' if v == ref else str(pr['wins']) + '/' + str(pr['n'])} | "
                         f"{'-' if v == ref else verdict(pr, MARGIN, v, ref)} |")
    if "rope-vs-alibi" in res:
        pr = res["rope-vs-alibi"]
        lines.append(f"\nrope against alibi, paired: d = rope - alibi = {fmt_interval(pr)} nats "
                     f"(rope lower in {pr['wins']} of {pr['n']} seeds): {verdict(pr, MARGIN, 'rope', 'alibi')}.")
    return lines


def steps_lines(runs, res):
    """Steps to the reference's losses at 1/4 and 1/2 of the run and its final loss, with per-seed speed-ups."""
    ref, steps = res["ref"], res["steps"]
    lines = ["\n## Steps to reach a target validation loss\n",
              "Steps read off each seed's curve (interpolated between evaluations), mean ± sd over seeds; "
              f"speed-up = steps({ref}) / steps(variant) for the same seed, the mean of the seeds' ratios with its 95% "
              f"interval (t over the seeds); *not reached*: no seed "
              f"reached it within {steps} steps; (k/n): the mean is over the k seeds that did; †: some {ref} "
              "seeds never reached their own mean final loss and count as the last step, which biases their "
              "ratios low."
              + (" time: the speed-up in training time, the step speed-up times the two variants' ratio of "
                 "step costs measured side by side on a quiet machine (step_costs.csv beside this report, "
                 "from scripts/run/step_costs.sh)." if res.get("step_costs") else "") + "\n",
              "| variant | " + " | ".join(f"{t['label']} ({t['loss']:.4f})" for t in res["targets"]) + " |",
              "|---|" + "---|" * len(res["targets"])]
    for v in runs:
        cells = []
        for t, et in zip(res["targets"], res["variants"][v]["targets"]):
            n = len(et["steps"])
            if et["reached"] == 0:
                cells.append("not reached")
                continue
            m, sd = mean_sd(et["steps"])
            su = one_sample(et["speedups"])
            # In time: the step speed-up times the ratio of the two schemes' step
            # costs, measured side by side (step_costs.csv), not the runs' own
            # speeds, which depend on what shared the machine with each run.
            costs = res.get("step_costs") or {}
            cost = step_cost(costs, ref) / step_cost(costs, v) if costs else math.nan
            note = "" if et["reached"] == n else f" ({et['reached']}/{n})"
            capped = "†" if t["capped"] and any(math.isnan(s) for s in res["variants"][ref]["targets"][2]["steps"]) else ""
            cells.append(f"{m:.0f} ± {sd:.0f}{note}, {fmt_speedup(su)}{capped}"
                         + (f"; time {fmt_speedup(su, cost)}{capped}" if costs else ""))
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return lines


def fmt_speedup(r, factor=1.0):
    """'1.42x [1.25, 1.59]': a mean ratio and its 95% interval (one_sample), times factor."""
    if math.isnan(r["lo95"]):
        return f"{fmt(r['mean'] * factor, '.2f')}x"
    return f"{r['mean'] * factor:.2f}x [{r['lo95'] * factor:.2f}, {r['hi95'] * factor:.2f}]"


def write_report(out, variants, name):
    runs, res = analyse(out, variants, name)
    plot(runs, out, "step", "step", "val_loss_vs_step.png", f"{name}: validation loss (mean, band = min..max over seeds)")
    plot(runs, out, "elapsed_s", "training seconds", "val_loss_vs_time.png",
         f"{name}: validation loss against training time")
    schemes_only = {v: s for v, s in runs.items() if v in SCHEME_COLOURS}
    if len(schemes_only) < len(runs):   # ablations make the scale coarse: the schemes alone too
        plot(schemes_only, out, "step", "step", "val_loss_vs_step_schemes.png",
             f"{name}: the schemes only (mean, band = min..max over seeds)")
    steps, seeds = res["steps"], sorted({s for v in res["variants"].values() for s in v["seeds"]})
    wall = res["wall_s"]
    lines = [f"# Positional schemes compared: {name}\n",
             f"Config: `config.ini` (beside this report: the config every run used; each variant adds its "
             f"--pos and settings); {steps} steps; seeds {', '.join(map(str, seeds))}. "
             f"Time: {fmt(res['run_s'] / 3600, '.2f')} h of training summed over the runs"
             + (f", {fmt(wall / 3600, '.2f')} h wall clock (two one-thread runs side by side)." if not math.isnan(wall) else ".")
             + "\n",
             "![validation loss against step](val_loss_vs_step.png)\n",
             *(["![the schemes alone](val_loss_vs_step_schemes.png)\n"] if len(runs) > len([v for v in runs if v in SCHEME_COLOURS]) else []),
             "![validation loss against time](val_loss_vs_time.png)\n",
             *final_loss_lines(runs, res),
             *steps_lines(runs, res)]
    table, lens = extrapolation_rows(out, variants)
    if table:
        lines += ["\n## Length extrapolation\n",
                  f"Validation loss of each final model at sequence lengths {', '.join(map(str, lens))} "
                  f"(trained at {lens[0]}); the same tokens are scored at every length. "
                  "`learned` has no position embeddings beyond its training length.\n",
                  "| variant | " + " | ".join(f"T={n}" for n in lens) + " |",
                  "|---|" + "---|" * len(lens)]
        for v in runs:
            cells = [fmt_mean_sd(table.get((v, n), [])) for n in lens]
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(res, f, indent=1, default=lambda x: None)
    print(f"report.py: wrote {os.path.join(out, 'report.md')}, summary.json and 2 plots")


def split_lr(variant):
    """'rope-lr0.004' -> ('rope', 0.004); a variant without -lr -> (variant, None)."""
    if "-lr" not in variant:
        return variant, None
    base, lr = variant.rsplit("-lr", 1)
    return base, float(lr)


def write_lr_report(out, variants, name):
    """The learning-rate study: final loss against lr per scheme, each scheme's best lr
    (lowest mean final loss over seeds), and the comparison at each scheme's own best lr."""
    runs = load_runs(out, variants)
    grid = {}   # scheme -> {lr: {seed: final}}
    for v, seeds in runs.items():
        scheme, lr = split_lr(v)
        grid.setdefault(scheme, {})[lr] = finals(seeds)
    if REF not in grid:
        sys.exit(f"report.py: {out}: no finished {REF} runs")
    best = {sc: min(g, key=lambda lr: mean_sd(list(g[lr].values()))[0]) for sc, g in grid.items()}
    lrs = sorted({lr for g in grid.values() for lr in g})

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for sc, g in grid.items():
        xs = sorted(g)
        ms = [mean_sd(list(g[x].values()))[0] for x in xs]
        lo = [m - min(g[x].values()) for m, x in zip(ms, xs)]
        hi = [max(g[x].values()) - m for m, x in zip(ms, xs)]
        ax.errorbar(xs, ms, yerr=[lo, hi], marker="o", capsize=3, color=SCHEME_COLOURS.get(sc), label=sc)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("peak learning rate (min_lr = lr/10)")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title(f"{name}: final loss against lr (mean, bars = min..max over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "final_loss_vs_lr.png"), dpi=110)
    plt.close(fig)

    lines = [f"# Learning-rate study: {name}\n",
             "Each scheme at every peak learning rate of the grid (min_lr = lr/10, as in the config; "
             "everything else as in config.ini beside this report), the same seeds at every lr. Final validation loss, mean ± sd "
             "(k seeds); **bold**: the scheme's best lr (lowest mean); *edge*: the best lr is at the end of the "
             "grid, so a better one may lie beyond it.\n",
             "![final loss against lr](final_loss_vs_lr.png)\n",
             "| scheme | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " | best lr |",
             "|---|" + "---|" * (len(lrs) + 1)]
    for sc, g in grid.items():
        cells = []
        for lr in lrs:
            if lr not in g:
                cells.append("-")
                continue
            m, sd = mean_sd(list(g[lr].values()))
            c = f"{m:.4f} ± {sd:.4f} ({len(g[lr])})"
            cells.append(f"**{c}**" if lr == best[sc] else c)
        edge = " (edge)" if best[sc] in (min(g), max(g)) else ""
        lines.append(f"| {sc} | " + " | ".join(cells) + f" | {best[sc]:g}{edge} |")
    # Each scheme at its best lr against learned at its best lr, paired by seed.
    at_best = [f"{sc}-lr{lr_text(out, sc, best[sc], variants)}" for sc in grid]
    ref = f"{REF}-lr{lr_text(out, REF, best[REF], variants)}"
    bruns, res = analyse(out, at_best, name, ref)
    lines += ["\n## Each scheme at its own best learning rate\n",
              f"The targets are {ref}'s losses; the pairs are by seed as in the setup's report.\n",
              *final_loss_lines(bruns, res), *steps_lines(bruns, res)]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    res["best_lr"] = best
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(res, f, indent=1, default=lambda x: None)
    print(f"report.py: wrote {os.path.join(out, 'report.md')}, summary.json and final_loss_vs_lr.png")


def lr_text(out, scheme, lr, variants):
    """The lr as it is written in the variant's name (0.0005, not 5e-04)."""
    for v in variants:
        sc, x = split_lr(v)
        if sc == scheme and x == lr:
            return v.rsplit("-lr", 1)[1]
    sys.exit(f"report.py: {out}: no variant {scheme} at lr {lr:g}")



def write_summary(path, dirs):
    """One table across setups: who reaches each target first, by how much, and whether
    rope's lead over the runner-up exceeds the seed spread."""
    lines = ["# Summary across setups\n",
             "For each setup and target: steps (mean over seeds; (k/n): over the k of n seeds that reached it, "
             "'not reached': none did) of every scheme, the scheme that gets there first (among those every "
             "seed of which reached it), rope's speed-up over learned (mean ± sd of the per-seed ratios), and "
             "rope's margin over the next scheme. Final loss: rope's paired difference to learned and to the "
             "best other scheme, mean [95% interval] over the seeds (scripts/report/stats.py).\n"]
    results = []
    for d in dirs:
        with open(os.path.join(d, "summary.json")) as f:
            results.append(json.load(f))
    columns = []   # every scheme of any setup, in order of first appearance ("-" where a setup lacks it)
    for res in results:
        columns += [v for v in res["variants"] if "-" not in v and v not in columns]
    lines += ["| setup | target | " + " | ".join(columns) + " | first | rope vs learned | rope vs next |",
              "|---|---|" + "---|" * len(columns) + "---|---|---|"]
    for res in results:
        schemes = [v for v in res["variants"] if "-" not in v]
        for i, t in enumerate(res["targets"]):
            means, partial = {}, {}
            for v in schemes:
                st = [x for x in res["variants"][v]["targets"][i]["steps"] if x is not None and not math.isnan(x)]
                n = len(res["variants"][v]["seeds"])
                means[v] = statistics.mean(st) if st else math.nan
                partial[v] = "" if len(st) == n else f" ({len(st)}/{n})"
            # "first": among the schemes every seed of which reached the target
            reached = {v: m for v, m in means.items() if not math.isnan(m) and not partial[v]}
            first = min(reached, key=reached.get) if reached else "none"
            su = [x for x in res["variants"].get("rope", {}).get("targets", [{}] * 3)[i].get("speedups", [])]
            others = [m for v, m in reached.items() if v != "rope"]
            margin = min(others) / reached["rope"] if "rope" in reached and others else math.nan
            cells = ["-" if v not in means else fmt(means[v], ".0f") + partial[v] if not math.isnan(means[v])
                     else "not reached" for v in columns]
            su_m, su_sd = mean_sd(su)
            lines.append(f"| {res['name']} | {t['label']} ({t['loss']:.3f}) | " + " | ".join(cells) +
                         f" | {first} | {fmt(su_m, '.2f')}x ± {fmt(su_sd, '.2f')} | {fmt(margin, '.2f')}x |")
    lines += ["\n| setup | seeds | rope final loss | learned | best other (scheme) | rope - learned [95%] | "
              "rope - best other [95%] | time |", "|---|---|---|---|---|---|---|---|"]
    for res in results:
        fin = {v: mean_sd(e["final"]) for v, e in res["variants"].items() if "-" not in v}
        if "rope" not in fin:
            continue
        by_seed = {v: {int(k): x for k, x in e["final_by_seed"].items()} for v, e in res["variants"].items()}
        best = min((v for v in fin if v not in ("rope",)), key=lambda v: fin[v][0])
        vs_ref = paired(by_seed["rope"], by_seed[REF])
        vs_best = paired(by_seed["rope"], by_seed[best])
        wall = res.get("wall_s")
        time = f"{res['run_s'] / 3600:.1f} h of runs" + (f", {wall / 3600:.1f} h wall" if wall else "")
        lines.append(f"| {res['name']} | {vs_ref['n']} | {fin['rope'][0]:.4f} | {fin[REF][0]:.4f} | "
                     f"{fin[best][0]:.4f} ({best}) | {fmt_interval(vs_ref)} | {fmt_interval(vs_best)} | {time} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"report.py: wrote {path}")


def main():
    args = sys.argv[1:]
    if args in (["-h"], ["--help"]):
        print(__doc__)
        return
    if len(args) >= 3 and args[0] == "--summary":
        write_summary(args[1], args[2:])
        return
    lr_study = "--lr" in args
    if lr_study:
        args.remove("--lr")
    name = None
    if "--name" in args:
        i = args.index("--name")
        name = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit("usage: report.py [--lr] COMPARE_DIR variant [variant ...] [--name NAME]\n"
                 "       report.py --summary OUT.md COMPARE_DIR [COMPARE_DIR ...]")
    (write_lr_report if lr_study else write_report)(args[0], args[1:], name or os.path.basename(os.path.normpath(args[0])))


if __name__ == "__main__":
    main()
