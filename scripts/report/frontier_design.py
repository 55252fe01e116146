"""The numbers behind the frontier study's design (docs/results/frontier/design.md),
from the committed budget and size sweeps alone: where each budget's loss
minimum should lie, so that the plan's sizes (scripts/run/frontier_plan.py)
bracket it.

    frontier_design.py

Reads docs/results/budget/logs and docs/results/size/logs (./eval's loss on
the whole validation split of each run), each scheme at the lr its sweep ran
as its line (budget: 4e-3 at width 128; size: each width's best lr), and
prints, by the plan's FLOP count:

1. every measured point as (width, steps, FLOPs, loss, seed mean of 1-2);
2. iso-FLOP comparisons where two widths were both measured around one
   compute (interpolated in ln C between a width's budgets, never beyond);
3. the additive surface L = E + A N^-a + B D^-b fitted by least squares to
   every run (seed 3 of rope width 64, which spiked, left out), for E fixed
   at 0, 1, 2 and 2.5 (with E free the fit runs to E -> -inf: over 0.3-9.6M
   tokens the loss is straight in ln D, so E is not determined), and each
   plan budget's best width under each; and the same with N counting the
   head (N + V W);
4. per width, a quadratic in ln D through learned's measured budgets (widths
   64 and 96 bend, their slope per doubling rising by 0.07 and 0.05 a doubling; 128 and 192 do
   not), extended to each plan budget: a second, cruder guess.
"""
import math
import os
import re
import sys

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run"))  # frontier_plan
import frontier_plan as plan  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results")
NAME = re.compile(r"^(rope|learned)(?:-w(\d+))?-lr([0-9.]+)-steps(\d+)-s(\d+)\.eval\.txt$")
# The lr each sweep ran its line at (docs/results/size/report.md; the budget sweep's 4e-3).
LINE_LR = {"rope": {64: 0.016, 96: 0.008, 128: 0.004, 192: 0.002}, "learned": {64: 0.008, 96: 0.004, 128: 0.004,
                                                                                 192: 0.002}}


def load():
    runs = {}
    for study in ("budget", "size"):
        d = os.path.join(ROOT, study, "logs")
        for f in os.listdir(d):
            m = NAME.match(f)
            if not m:
                continue
            sc, w, lr, st, sd = m[1], int(m[2] or 128), float(m[3]), int(m[4]), int(m[5])
            if LINE_LR[sc].get(w) != lr:
                continue
            loss = float(re.search(r" loss=([0-9.]+)", open(os.path.join(d, f)).read()).group(1))
            runs[(sc, w, st, sd)] = loss   # the size sweep's width-128 runs are the budget sweep's
    return runs


def flops(w, st):
    return st * plan.TOKENS_PER_STEP * plan.flops_per_token(w)


def main():
    runs = load()
    widths = list(plan.LADDER[:8])
    budgets = [plan.budget(k) for k in range(plan.n_budgets())]
    print("1. measured (seed mean of seeds 1-2; FLOPs by the plan's count)")
    curves = {}
    for (sc, w, st, sd), loss in sorted(runs.items()):
        if sd in (1, 2):
            curves.setdefault(sc, {}).setdefault(w, {}).setdefault(st, []).append(loss)
    for sc in plan.SCHEMES:
        for w in sorted(curves[sc]):
            pts = sorted(curves[sc][w].items())
            print(f"  {sc} w{w}: " + ", ".join(f"{st} steps {flops(w, st):.3g} {np.mean(v):.3f}" for st, v in pts))
    print("\n2. iso-FLOP (interpolated in ln C within a width's measured budgets)")
    for sc in plan.SCHEMES:
        for C in (2e12, 4e12, 8e12, 1.6e13, 3.2e13):
            row = []
            for w in sorted(curves[sc]):
                pts = sorted((flops(w, st), np.mean(v)) for st, v in curves[sc][w].items())
                lc = np.log([p[0] for p in pts])
                if len(pts) > 1 and lc[0] <= math.log(C) <= lc[-1]:
                    row.append(f"w{w} {np.interp(math.log(C), lc, [p[1] for p in pts]):.3f}")
            if len(row) > 1:
                print(f"  {sc} at {C:.2g}: " + ", ".join(row))
    print("\n3. L = E + A (N/1e6)^-a + B (D/1e6)^-b, each plan budget's best width (losses at the widths around it)")
    for sc in plan.SCHEMES:
        pts = [(w, st, l) for (s, w, st, sd), l in runs.items() if s == sc and not (sc == "rope" and w == 64 and sd == 3)]
        w = np.array([p[0] for p in pts])
        D = np.array([p[1] for p in pts], float) * plan.TOKENS_PER_STEP
        y = np.array([p[2] for p in pts])
        for label, size in (("N", plan.non_embedding), ("N + V W", lambda x: plan.non_embedding(x) + plan.VOCAB * x)):
            N = np.array([size(x) for x in w], float)
            for E in (0.0, 1.0, 2.0, 2.5):
                def resid(th):
                    return E + np.exp(th[0]) * (N / 1e6) ** -th[1] + np.exp(th[2]) * (D / 1e6) ** -th[3] - y
                fit = min((least_squares(resid, [a0, 0.3, b0, 0.3], bounds=([-10, 0.01, -10, 0.01], [10, 3, 10, 3]))
                           for a0 in (-2, 0, 1) for b0 in (0, 1, 2)), key=lambda r: r.cost)
                th = fit.x

                def model(x, C):
                    return E + math.exp(th[0]) * (size(x) / 1e6) ** -th[1] + \
                        math.exp(th[2]) * (C / plan.flops_per_token(x) / 1e6) ** -th[3]
                best = []
                for C in budgets:
                    ls = [model(x, C) for x in widths]
                    i = int(np.argmin(ls))
                    best.append(f"{C:.3g}: w{widths[i]} (" + " ".join(f"{x}:{ls[j]:.2f}" for j, x in
                                                                      enumerate(widths) if abs(j - i) <= 1) + ")")
                print(f"  {sc}, {label}, E={E:g}: A={math.exp(th[0]):.3f} a={th[1]:.2f} B={math.exp(th[2]):.2f} "
                      f"b={th[3]:.2f}, rms {math.sqrt(2 * fit.cost / len(y)):.3f} nats over {len(y)} runs\n     " +
                      "; ".join(best))
    print("\n4. learned, per width: a quadratic in ln D through its measured budgets, extended")
    quad = {}
    for w, pts in sorted(curves["learned"].items()):
        st = sorted(pts)
        if len(st) >= 3:
            quad[w] = np.polyfit(np.log(st), [np.mean(pts[s]) for s in st], 2)
            print(f"  w{w}: second difference {2 * quad[w][0] * math.log(2) ** 2:+.3f} nats per doubling, "
                  f"measured to {max(st)} steps")
    for C in budgets:
        ls = {w: float(np.polyval(q, math.log(C / (plan.TOKENS_PER_STEP * plan.flops_per_token(w)))))
              for w, q in quad.items()}
        print(f"  {C:.3g}: " + ", ".join(f"w{w} {ls[w]:.2f} ({C / (plan.TOKENS_PER_STEP * plan.flops_per_token(w)):,.0f} "
                                         f"steps)" for w in sorted(ls)))


if __name__ == "__main__":
    main()
