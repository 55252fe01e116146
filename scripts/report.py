#!/usr/bin/python3
"""Writes the comparison report: report.md and two PNG plots.

    scripts/report.py COMPARE_DIR scheme [scheme ...]

Reads COMPARE_DIR/<pos>-s<seed>/log.csv (the training logs) and
COMPARE_DIR/extrapolation.csv, and writes into COMPARE_DIR:
  val_loss_vs_step.png  validation loss against step: mean over seeds (line)
                        and the min-max band across seeds, one colour per scheme
  val_loss_vs_time.png  the same against wall-clock seconds
  report.md             the tables: final loss, steps to target, speed-up
                        relative to learned, tokens/s, length extrapolation

Steps to reach a target loss are read off each run's validation curve by
linear interpolation between evaluations (first crossing), then averaged
over seeds. The speed-up of a scheme is steps(learned) / steps(scheme).
"""
import csv
import glob
import math
import os
import statistics
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"rope": "tab:red", "learned": "tab:blue", "sinusoidal": "tab:green",
           "t5": "tab:purple", "alibi": "tab:orange", "none": "tab:gray"}


def read_log(path):
    """Rows of a training log that carry a validation loss, as floats."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get("val_loss") not in (None, "", "nan"):
                rows.append({k: float(v) if v not in ("", None) else math.nan for k, v in r.items()})
    return rows


def load_runs(out, schemes):
    runs = {}
    for pos in schemes:
        for d in sorted(glob.glob(os.path.join(out, f"{pos}-s*"))):
            log = os.path.join(d, "log.csv")
            if os.path.isfile(log):
                runs.setdefault(pos, []).append({"seed": int(d.rsplit("-s", 1)[1]),
                                                 "val": read_log(log),
                                                 "all": read_all(log)})
    return runs


def read_all(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def first_crossing(val_rows, target):
    """Step at which the validation curve first reaches <= target (interpolated)."""
    prev = None
    for r in val_rows:
        if r["val_loss"] <= target:
            if prev is None:
                return r["step"]
            s0, l0, s1, l1 = prev["step"], prev["val_loss"], r["step"], r["val_loss"]
            return s0 + (l0 - target) / (l0 - l1) * (s1 - s0) if l0 != l1 else s1
        prev = r
    return math.nan


def mean_std(xs):
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return math.nan, math.nan
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def tokens_per_s(run):
    vals = [float(r["tokens_per_s"]) for r in run["all"] if r.get("tokens_per_s") not in (None, "", "nan")]
    vals = [v for v in vals if v > 0]
    return statistics.median(vals) if vals else math.nan


def plot(runs, out, xkey, xlabel, fname):
    fig, ax = plt.subplots(figsize=(8, 5))
    for pos, rs in runs.items():
        n = min(len(r["val"]) for r in rs)
        xs = [statistics.mean(r["val"][i][xkey] for r in rs) for i in range(n)]
        ys = [[r["val"][i]["val_loss"] for r in rs] for i in range(n)]
        ax.plot(xs, [statistics.mean(y) for y in ys], color=COLOURS.get(pos), label=f"{pos} ({len(rs)} seeds)")
        ax.fill_between(xs, [min(y) for y in ys], [max(y) for y in ys], color=COLOURS.get(pos), alpha=0.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title("validation loss: mean over seeds, band = min..max")
    lo = min(min(row["val_loss"] for row in r["val"]) for rs in runs.values() for r in rs)
    first = [rs[0]["val"][min(1, len(rs[0]["val"]) - 1)]["val_loss"] for rs in runs.values()]
    ax.set_ylim(lo - 0.05, max(first) + 0.1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, fname), dpi=110)
    plt.close(fig)


def fmt(x, spec=".3f"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: report.py COMPARE_DIR scheme [scheme ...]")
    out, schemes = sys.argv[1], sys.argv[2:]
    runs = load_runs(out, schemes)
    missing = [p for p in schemes if p not in runs]
    if missing:
        sys.exit(f"report.py: {out}: no finished runs for {', '.join(missing)}")
    plot(runs, out, "step", "step", "val_loss_vs_step.png")
    plot(runs, out, "elapsed_s", "wall-clock seconds", "val_loss_vs_time.png")

    final = {p: mean_std([r["val"][-1]["val_loss"] for r in rs]) for p, rs in runs.items()}
    steps_total = int(max(r["val"][-1]["step"] for rs in runs.values() for r in rs))
    ref = "learned" if "learned" in runs else schemes[0]
    # Targets: the reference's final loss, and its mean loss at 1/4 and 1/2 of training.
    targets = []
    for frac in (0.25, 0.5):
        rows = [min(r["val"], key=lambda v: abs(v["step"] - frac * steps_total)) for r in runs[ref]]
        targets.append((f"{ref} at step {int(rows[0]['step'])}", statistics.mean(v["val_loss"] for v in rows)))
    targets.append(("final " + ref, final[ref][0]))

    lines = [f"# Positional schemes compared\n",
             f"Config: `{os.path.join(out, 'config.ini')}`; {steps_total} steps; seeds: "
             f"{', '.join(str(r['seed']) for r in runs[schemes[0]])}.\n",
             "![validation loss against step](val_loss_vs_step.png)\n",
             "![validation loss against time](val_loss_vs_time.png)\n",
             "## Final validation loss and speed\n",
             "| scheme | final val loss (mean ± sd) | min..max over seeds | tokens/s (median) |",
             "|---|---|---|---|"]
    for p, rs in runs.items():
        vals = [r["val"][-1]["val_loss"] for r in rs]
        tps = statistics.mean(tokens_per_s(r) for r in rs)
        lines.append(f"| {p} | {fmt(final[p][0], '.4f')} ± {fmt(final[p][1], '.4f')} | "
                     f"{min(vals):.4f}..{max(vals):.4f} | {fmt(tps, '.0f')} |")

    lines += ["\n## Steps to reach a target validation loss\n",
              f"Steps read off each seed's curve (interpolated between evaluations), mean ± sd over seeds; "
              f"speed-up = steps({ref}) / steps(scheme); *not reached*: no seed reached it within {steps_total} steps; (k/n seeds): the mean is over the k seeds that did.\n",
              "| scheme | " + " | ".join(f"{name} ({t:.4f}): steps, speed-up" for name, t in targets) + " |",
              "|---|" + "---|" * len(targets)]
    for p, rs in runs.items():
        cells = []
        for _, t in targets:
            m, sd = mean_std([first_crossing(r["val"], t) for r in rs])
            mref, _ = mean_std([first_crossing(r["val"], t) for r in runs[ref]])
            reached = sum(not math.isnan(first_crossing(r["val"], t)) for r in rs)
            note = "" if reached == len(rs) else f" ({reached}/{len(rs)} seeds)"
            if reached == 0:
                cells.append("not reached")
            else:
                speedup = mref / m if m > 0 and not math.isnan(mref) else math.nan
                cells.append(f"{m:.0f} ± {sd:.0f}{note}, {fmt(speedup, '.2f')}x")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")

    extrap_path = os.path.join(out, "extrapolation.csv")
    if os.path.isfile(extrap_path):
        table = {}
        with open(extrap_path) as f:
            for r in csv.DictReader(f):
                table.setdefault((r["pos"], int(r["seq_len"])), []).append(float(r["loss"]))
        lens = sorted({k[1] for k in table})
        lines += ["\n## Length extrapolation\n",
                  f"Validation loss of each final model at sequence lengths {', '.join(map(str, lens))} "
                  f"(trained at {lens[0]}); the same tokens are scored at every length. "
                  "`learned` has no position embeddings beyond its training length.\n",
                  "| scheme | " + " | ".join(f"T={n}" for n in lens) + " |",
                  "|---|" + "---|" * len(lens)]
        for p in runs:
            cells = []
            for n in lens:
                m, sd = mean_std(table.get((p, n), [math.nan]))
                cells.append("n/a" if math.isnan(m) else f"{m:.4f} ± {sd:.4f}")
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"report.py: wrote {os.path.join(out, 'report.md')} and 2 plots")


if __name__ == "__main__":
    main()
