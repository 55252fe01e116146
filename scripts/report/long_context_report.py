#!/usr/bin/python3
"""The long-context study's report (scripts/run/long_context.sh writes its inputs).

    scripts/report/long_context_report.py OUT_DIR T FINETUNE_STEPS FINETUNE_MULT

Reads OUT_DIR/results.csv (variant, finetuned, seed, mult, seq_len, loss) and
OUT_DIR/positions.csv (variant, position, loss), writes OUT_DIR/report.md,
loss_vs_length.png (mean over seeds against the evaluation length, one line
per variant, dashed after the fine-tune) and loss_vs_position.png (the loss at
each position of a window of the longest length, mean over the validation
split's windows and over 64 positions, seed 1).
"""
import csv
import math
import os
import statistics
import sys

from stats import mean_sd, fmt_mean_sd
from style import SCHEME_COLOURS, ROPE_SCALING_COLOURS

ORDER = ["rope", "rope-linear", "rope-ntk", "rope-yarn", "rope-yarn_paper", "rope-dynamic", "alibi", "t5", "sinusoidal",
         "none", "learned"]
COLOURS = {**SCHEME_COLOURS, **ROPE_SCALING_COLOURS}


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
        return
    if len(sys.argv) != 5:
        sys.exit("usage: long_context_report.py OUT_DIR T FINETUNE_STEPS FINETUNE_MULT")
    out, T, ft_steps, ft_mult = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    table = {}
    with open(os.path.join(out, "results.csv")) as f:
        for r in csv.DictReader(f):
            key = (r["variant"], int(r["finetuned"]), int(r["mult"]))
            table.setdefault(key, []).append(float(r["loss"]) if r["loss"] not in ("", "nan") else math.nan)
    mults = sorted({k[2] for k in table})
    variants = [v for v in ORDER if any(k[0] == v for k in table)]
    wall = {}
    path = os.path.join(out, "wall_time.txt")
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                for part in line.split():
                    if "=" in part:
                        k, v = part.split("=", 1)
                        wall[k] = v
    seeds = max(len(v) for v in table.values())
    lines = ["# Longer than trained\n",
             f"Each final model of the comparison (trained at T = {T}) scored on the same validation tokens "
             f"(every whole window of {max(mults) * T} tokens of the split) with windows of "
             f"{', '.join(str(m * T) for m in mults)} tokens; mean ± sd over {seeds} seed(s). "
             "rope-linear (position interpolation), rope-ntk (NTK-aware base), rope-yarn (YaRN as Hugging Face "
             "and llama.cpp compute it) and rope-yarn_paper (YaRN's ramp as the paper states it) rescale the "
             "trained rope model's angles by factor = length / T, without training; rope-dynamic (Hugging Face's "
             "dynamic NTK, factor 2) grows its base with the length. `learned` has no position beyond T.\n",
             "![loss against evaluation length](loss_vs_length.png)\n",
             "| variant | " + " | ".join(f"{m}T = {m * T}" for m in mults) + " |",
             "|---|" + "---|" * len(mults)]
    for v in variants:
        cells = [fmt_mean_sd(table.get((v, 0, m), [])) for m in mults]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    tuned = [m for m in mults if m >= ft_mult]
    if any(k[1] == 1 for k in table):
        lines += [f"\n## After a short fine-tune at {ft_mult}T\n",
                  f"Each rope variant fine-tuned from each seed's final weights for {ft_steps} steps at "
                  f"{ft_mult}T = {ft_mult * T} tokens (the same tokens per step as the original run, lr / 10), "
                  f"with its scaling at factor {ft_mult} (dynamic: 2); then scored as above (factor = length / T). "
                  + (f"The {len([k for k in table if k[1] == 1 and k[2] == ft_mult]) * seeds} fine-tunes took "
                     f"{int(wall['finetune_s']) / 60:.1f} min in all." if "finetune_s" in wall else "") + "\n",
                  "| variant | " + " | ".join(f"{m}T untuned" + f" | {m}T tuned" for m in tuned) + " |",
                  "|---|" + "---|---|" * len(tuned)]
        for v in variants:
            if not any(k[0] == v and k[1] == 1 for k in table):
                continue
            cells = [fmt_mean_sd(table.get((v, ft, m), [])) for m in tuned for ft in (0, 1)]
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
    lines += ["\n## Where each scheme breaks\n",
              f"Loss at each position of a window of {max(mults) * T} tokens (seed 1, untuned; mean over every "
              "such window of the validation split, then over 64 positions): a scheme that extrapolates keeps "
              "the loss flat past T.\n",
              "![loss against position](loss_vs_position.png)\n"]
    if "wall_s" in wall:
        lines.append(f"The study took {int(wall['wall_s']) / 60:.1f} min (`scripts/run/long_context.sh`).\n")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for v in variants:
        for ft, style in ((0, "-o"), (1, "--s")):
            xs = [m * T for m in mults if (v, ft, m) in table]
            ys = [mean_sd(table[(v, ft, m)])[0] for m in mults if (v, ft, m) in table]
            if xs:
                ax.plot(xs, ys, style, color=COLOURS.get(v), label=v + (f" (tuned at {ft_mult}T)" if ft else ""),
                        markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title(f"trained at T = {T}: loss against evaluation length")
    finite = [mean_sd(x)[0] for x in table.values() if not math.isnan(mean_sd(x)[0])]
    ax.set_ylim(min(finite) - 0.05, min(max(finite), statistics.median(finite) + 1.5) + 0.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss_vs_length.png"), dpi=110)
    plt.close(fig)

    pos = {}
    with open(os.path.join(out, "positions.csv")) as f:
        for r in csv.DictReader(f):
            pos.setdefault(r["variant"], []).append((int(r["position"]), float(r["loss"])))
    fig, ax = plt.subplots(figsize=(8, 5))
    for v in [v for v in ORDER if v in pos]:
        rows = sorted(pos[v])
        xs, ys = [], []
        for i in range(0, len(rows), 64):
            chunk = rows[i:i + 64]
            xs.append(statistics.mean(p for p, _ in chunk))
            ys.append(statistics.mean(l for _, l in chunk))
        ax.plot(xs, ys, color=COLOURS.get(v), label=v)
    ax.axvline(T, color="black", linestyle=":", linewidth=1)
    ax.set_xlabel("position in the window")
    ax.set_ylabel("loss (nats/token), mean over 64 positions")
    ax.set_title(f"windows of {max(mults) * T} tokens (trained at T = {T}, dotted)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss_vs_position.png"), dpi=110)
    plt.close(fig)
    print(f"long_context_report.py: wrote {os.path.join(out, 'report.md')} and 2 plots")


if __name__ == "__main__":
    main()
