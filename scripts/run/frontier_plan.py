#!/usr/bin/env python3
"""The frontier study's plan (issue 48, `make compare SETUP=frontier`): its
compute budgets, the model sizes at each, each size's lr, the seeds and the
FLOP count that turns a budget into steps, in one place. scripts/run/sweep.sh
trains what `next` prints; scripts/report/frontier_report.py reads the same
budgets, lrs and FLOP count from here.

    frontier_plan.py plan [--step-costs FILE]  the planned runs: steps, tokens, epochs, FLOPs
                                              and, from measured step costs, CPU-hours
    frontier_plan.py next OUT                 the next batch to train, "SEEDS VARIANT ..." (its
                                              label on stderr); nothing once the study is whole
    frontier_plan.py name SCHEME WIDTH BUDGET [LR_FACTOR]   one run's variant name
    frontier_plan.py lr-fit                   the lr rule's first fit, on the size sweep's logs
    frontier_plan.py lr-fit OUT               the rule fitted on OUT's lr checks (every lr run at
                                              the check points, seeds 1-2)

FRONTIER_SCALE=S divides every budget by S (the smoke run of the pipeline;
a run at budget k is never shorter than 12 + k steps, so that its schedule's
twelfths exist and no two budgets share a run; at S = 1 no run is that short).

Compute. A run's FLOPs are C = 6 (N + V d + n_layer T d) D, with D = steps x
8 x 128 training tokens, width d, vocabulary V = 2048, context T = 128:
  - N, the non-embedding parameters (sweep_report.block_params): every
    weight of the blocks is one multiply-add per token forward and two
    backward, 6 FLOPs per token in all (Kaplan et al. 2020, table 1);
  - V d, the output head: the token embedding, tied, is used again as the
    head's matrix, so its product costs what V d parameters cost; the
    embedding lookups and the learned position table cost none;
  - n_layer T d, attention's scores and weighted sum: under the causal mask
    a token attends to T/2 positions on average, each a d-long product in
    QK^T and in AV: 2 n_layer T d forward (Kaplan's 2 n_layer n_ctx d_attn),
    3x that with the backward.
Layer norms, softmax, GELU and the optimiser are left out (O(d) per token or
O(N) per step). The head is kept in because here it is not small: at width 64
it is 131k "parameters" of compute against N = 100k. The count tracks the
measured cost: one thread in reproducible mode trains at about the same
FLOP rate at every width from 64 to 256, 70-78 GFLOP/s by this count
(docs/results/frontier/design.md); without the head, width 64 would look
twice as cheap per FLOP as width 256.

Sizes: width W with W/32 layers and W/32 heads of 32 dims (compare.sh's -wW),
W a multiple of 32 from 32 (one layer) to 320. The sizes at each budget are
placed around the loss minimum the committed budget and size sweeps predict
(docs/results/frontier/design.md, scripts/report/frontier_design.py); where a
scheme's lowest loss (mean of seeds 1-2) falls on the smallest or largest
size run at a budget, the next width beyond is added for both schemes, until
the minimum lies inside or the width ladder ends.

lr: each scheme's lr at the study's smallest and largest width (the check
points: each at the first budget that has it) is the best of a factor-2
grid there, mean of seeds 1-2, not at the grid's edge (`lr-fit OUT` reads
the grids; LR_ENDS holds the two lrs); between and beyond, lr is a power of
width through them, rounded to two significant digits. (The first rule, one
power of width fitted on the size sweep's 600-step grids, `lr-fit`, put
both schemes' lrs 4x too high at width 32 and learned's 2x too high at
192.) Before the budgets the rule is checked at both ends against half and
twice its lr, seeds 1-2, so the chosen lr is the middle of the grid
checked. If, for either scheme at either end, one neighbour is lower than
the rule's lr in both seeds, `next` stops the study (exit 3) with the
table. FRONTIER_LR_GATE=warn goes on regardless (the default in a smoke
run, whose tiny budgets favour large lrs).

Seeds: 1-2 at every point; seed 3 at each scheme's best size of each budget
(the lowest mean of seeds 1-2, after any sizes were added).

Learned also trains at one budget above the largest (the ladder's next), at
its best size of the largest budget and the next two widths, with the same
edge rule: K*, the compute learned needs on its own frontier to reach rope's
best loss, is then bracketed at every budget if K* < 2.83.
"""
import math
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "report"))  # sweep_report, stats
import sweep_report  # noqa: E402

SCHEMES = ("rope", "learned")
VOCAB, CONTEXT, BATCH = 2048, 128, 8
TOKENS_PER_STEP = BATCH * CONTEXT

# The budgets: C_k = BASE_FLOPS (2 sqrt 2)^k. k = 0, 1, 2 for both schemes (8x
# from first to last), k = 3 for learned only.
BASE_FLOPS = 8e12
BUDGET_RATIO = 2 ** 1.5
RATIO_TEXT = "2√2"
BUDGETS = 3                      # rope's and learned's budgets
LEARNED_EXTRA = 1                # learned's budgets beyond them
INITIAL_SIZES = ((32, 64, 96, 128), (32, 64, 96, 128), (64, 96, 128, 160, 192))
LADDER = tuple(range(32, 321, 32))
LEARNED_EXTRA_SIZES = 3          # learned's best width at the largest budget and the next two

# The lr rule: each scheme's lr at the smallest and the largest check width,
# the best of a factor-2 grid there on seeds 1-2 (`lr-fit OUT`), and a power of
# width between them.
LR_ENDS = {"rope": (0.004, 0.003), "learned": (0.0035, 0.0013)}
LR_CHECK_FACTORS = (0.5, 2.0)

SEEDS = 2                        # at every point
OPTIMUM_SEEDS = 3                # at each scheme's best size of each budget
MIN_STEPS = 12

# An eval batch (./eval, 8 windows of 128) against a training step of the same width,
# measured on one thread (ratio 0.32-0.42 at widths 64-256); each run evaluates 8
# batches at step 0 and at each twelfth, then the whole validation split (551 batches).
EVAL_BATCH_SHARE = 0.4
EVAL_BATCHES_PER_RUN = 8 * 13 + 551


def scale():
    s = float(os.environ.get("FRONTIER_SCALE", "1") or 1)
    if not s >= 1:
        sys.exit(f"frontier_plan: FRONTIER_SCALE={s:g}: must be 1 or more")
    return s


def layers(w):
    return w / 32


def non_embedding(w):
    """N at width w (a real w gives the family's continuous extension, w/32 layers)."""
    return sweep_report.block_params(w, layers(w))


def flops_per_token(w):
    """6 (N + V w + n_layer T w): the study's FLOP count per training token."""
    return 6 * (non_embedding(w) + VOCAB * w + layers(w) * CONTEXT * w)


def width_of(n):
    """The (real) width whose non-embedding count is n, by bisection (N(w) increases); n may be
    a float or a numpy array (NaN gives NaN)."""
    lo, hi = 0 * n + 1.0, 0 * n + 4096.0
    for _ in range(64):
        mid = (lo + hi) / 2
        below = (non_embedding(mid) < n) * 1.0
        lo, hi = lo + (mid - lo) * below, mid + (hi - mid) * below
    return (lo + hi) / 2 + 0 * n


def budget(k, s=None):
    return BASE_FLOPS * BUDGET_RATIO ** k / (scale() if s is None else s)


def schemes_at(k):
    return SCHEMES if k < BUDGETS else ("learned",)


def n_budgets():
    return BUDGETS + LEARNED_EXTRA


def steps(w, k, s=None):
    return max(MIN_STEPS + k, round(budget(k, s) / (TOKENS_PER_STEP * flops_per_token(w))))


def lr(scheme, w):
    """lr_small (w / W_small)^b with b = ln(lr_large / lr_small) / ln(W_large / W_small): the
    ends' lrs exactly, a straight line in log lr against log width between them (and beyond)."""
    (_, w0), (_, w1) = check_points()
    x0, x1 = LR_ENDS[scheme]
    return float(f"{x0 * (w / w0) ** (math.log(x1 / x0) / math.log(w1 / w0)):.2g}")


def variant(scheme, w, k, factor=1.0, s=None):
    x = lr(scheme, w) * factor
    name = f"{scheme}-w{w}-lr{x:g}-steps{steps(w, k, s)}"
    assert "e" not in f"{x:g}", name   # compare.sh splits a variant at '-'
    return name


def check_points():
    """(budget, width) of the lr checks: the smallest and the largest initial width,
    each at the first budget that has it."""
    smallest = min(min(sz) for sz in INITIAL_SIZES)
    largest = max(max(sz) for sz in INITIAL_SIZES)
    first = lambda w: next(k for k, sz in enumerate(INITIAL_SIZES) if w in sz)  # noqa: E731
    return [(first(smallest), smallest), (first(largest), largest)]


# ---- what a study directory holds


def final_loss(out, name, seed):
    """The whole validation split's loss of a finished run (compare.sh --final-eval), or None."""
    d = os.path.join(out, f"{name}-s{seed}")
    if not os.path.exists(os.path.join(d, "done")):
        return None
    r = sweep_report.read_final(d)
    return r[0] if r else None


def mean_loss(out, name, seeds):
    vals = [final_loss(out, name, s) for s in seeds]
    return None if any(v is None for v in vals) else sum(vals) / len(vals)


class Pending(Exception):
    """A batch of runs the next decision needs: (seeds, variants, label)."""


def best_width(out, scheme, k, sizes):
    """The size with the lowest mean loss over seeds 1..SEEDS (ties: the smaller)."""
    means = {w: mean_loss(out, variant(scheme, w, k), range(1, SEEDS + 1)) for w in sizes}
    return min(sizes, key=lambda w: (means[w], w))


def need(out, seeds, variants, label):
    if any(final_loss(out, v, s) is None for v in variants for s in range(1, seeds + 1)):
        raise Pending(seeds, variants, label)


def lr_check_table(out):
    """[(k, w, scheme, {factor: [loss per seed]}, verdict)] for the finished lr checks."""
    rows = []
    for k, w in check_points():
        for sc in SCHEMES:
            losses = {f: [final_loss(out, variant(sc, w, k, f), s) for s in range(1, SEEDS + 1)]
                      for f in (1.0,) + LR_CHECK_FACTORS}
            if any(v is None for vs in losses.values() for v in vs):
                continue
            beaten = [f for f in LR_CHECK_FACTORS if all(a < b for a, b in zip(losses[f], losses[1.0]))]
            verdict = ("the rule's lr is off: " + ", ".join(f"{f:g}x its lr lower in seeds 1-{SEEDS}" for f in beaten)
                       if beaten else "the rule's lr holds (no neighbour lower in every seed)")
            rows.append((k, w, sc, losses, verdict, bool(beaten)))
    return rows


def sizes_at(out, k):
    """The sizes budget k trains (after the edge rule), as decided from the runs in OUT;
    raises Pending while a decision waits for runs."""
    if k < BUDGETS:
        sizes = list(INITIAL_SIZES[k])
    else:
        prev = sizes_at(out, BUDGETS - 1)
        w0 = best_width(out, "learned", BUDGETS - 1, prev)
        i = LADDER.index(w0)
        sizes = list(LADDER[i:i + LEARNED_EXTRA_SIZES])
    while True:
        need(out, SEEDS, [variant(sc, w, k) for sc in schemes_at(k) for w in sizes],
             f"budget {k} ({budget(k):.3g} FLOPs): widths {' '.join(map(str, sizes))}, "
             f"{'/'.join(schemes_at(k))}, seeds 1-{SEEDS}")
        add = set()
        for sc in schemes_at(k):
            b = best_width(out, sc, k, sizes)
            i = LADDER.index(b)
            if b == min(sizes) and i > 0:
                add.add(LADDER[i - 1])
            if b == max(sizes) and i + 1 < len(LADDER):
                add.add(LADDER[i + 1])
        if not add:
            return sorted(sizes)
        sizes = sorted(set(sizes) | add)


def batches(out):
    """Walks the study in its order and raises Pending at the first batch not finished:
    the lr checks, then each budget (sizes, added sizes, seed 3 at the optimum)."""
    for k, w in check_points():
        need(out, SEEDS, [variant(sc, w, k, f) for sc in SCHEMES for f in (1.0,) + LR_CHECK_FACTORS],
             f"lr check at width {w}, budget {k} ({budget(k):.3g} FLOPs): the rule's lr, half and twice it")
    failed = [r for r in lr_check_table(out) if r[5]]
    if failed:
        if os.environ.get("FRONTIER_LR_GATE", "stop" if scale() == 1 else "warn") == "warn":
            print("frontier_plan: the lr rule is off at " + ", ".join(f"width {w} ({sc})" for _, w, sc, *_ in failed) +
                  "; going on (FRONTIER_LR_GATE=warn)", file=sys.stderr)
        else:
            text = "\n".join(f"  width {w}, {sc}: " + ", ".join(
                f"lr {lr(sc, w) * f:g}: " + " ".join(f"{v:.4f}" for v in vs) for f, vs in losses.items()) + f" -> {v}"
                for k, w, sc, losses, v, _ in failed)
            print(f"frontier_plan: the lr checks (seeds 1-{SEEDS}):\n{text}\nfrontier_plan: the study stops here: "
                  "set the rule's ends again (LR_ENDS, from `lr-fit OUT`), or go on regardless with "
                  "FRONTIER_LR_GATE=warn", file=sys.stderr)
            sys.exit(3)
    for k in range(n_budgets()):
        sizes = sizes_at(out, k)
        best = [variant(sc, best_width(out, sc, k, sizes), k) for sc in schemes_at(k)]
        need(out, OPTIMUM_SEEDS, best, f"budget {k}: seed {OPTIMUM_SEEDS} at each scheme's best size")


def next_batch(out):
    try:
        batches(out)
    except Pending as p:
        seeds, variants, label = p.args
        print(f"[frontier] {label}", file=sys.stderr)
        print(seeds, " ".join(variants))


# ---- the printed plan and its cost


def read_step_costs(path):
    """{variant: ms per step} from step_costs.sh's CSV."""
    costs = {}
    for line in open(path).read().split("\n")[1:]:
        if line:
            v, ms, _ = line.split(",")
            costs[v] = float(ms)
    return costs


def run_cost_s(scheme, w, n_steps, costs):
    ms = costs.get(f"{scheme}-w{w}")
    if ms is None:
        return None
    return ms / 1e3 * (n_steps + EVAL_BATCH_SHARE * EVAL_BATCHES_PER_RUN)


def print_plan(args):
    costs = read_step_costs(args[args.index("--step-costs") + 1]) if "--step-costs" in args else {}
    assume = int(args[args.index("--assume-learned-best") + 1]) if "--assume-learned-best" in args else 128
    train = sweep_report.train_tokens([])
    print(f"FLOPs per run: 6 (N + {VOCAB} W + (W/32) {CONTEXT} W) x steps x {TOKENS_PER_STEP}; "
          f"budgets C_k = {BASE_FLOPS:.3g} x {RATIO_TEXT}^k / {scale():g}")
    print(f"| budget | FLOPs | width | N (non-emb.) | steps | tokens | epochs | rope lr | learned lr | runs | CPU-h |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    total_runs, total_h, total_flops = 0, 0.0, 0.0

    def row(k, w, runs_by_scheme, note=""):
        nonlocal total_runs, total_h, total_flops
        n = steps(w, k)
        h = 0.0
        for sc, r in runs_by_scheme.items():
            c = run_cost_s(sc, w, n, costs)
            h = h + r * c / 3600 if (c is not None and h is not None) else None
        runs = sum(runs_by_scheme.values())
        total_runs += runs
        total_flops += runs * n * TOKENS_PER_STEP * flops_per_token(w)
        total_h = total_h + h if (h is not None and total_h is not None) else None
        lrs = [f"{lr(sc, w):g}" if sc in runs_by_scheme else "-" for sc in SCHEMES]
        ep = f"{n * TOKENS_PER_STEP / train:.2f}" if train else "?"
        print(f"| {k}{note} | {budget(k):.3g} | {w} | {non_embedding(w):,.0f} | {n:,} | {n * TOKENS_PER_STEP:,} | {ep} | "
              f"{lrs[0]} | {lrs[1]} | {runs} | {'?' if h is None else f'{h:.2f}'} |")

    for k, w in check_points():
        row(k, w, {sc: SEEDS * len(LR_CHECK_FACTORS) for sc in SCHEMES}, " (lr checks: x0.5, x2)")
    for k in range(BUDGETS):
        for w in INITIAL_SIZES[k]:
            row(k, w, {sc: SEEDS for sc in SCHEMES})
    i = LADDER.index(assume)
    extra = LADDER[i:i + LEARNED_EXTRA_SIZES]
    for w in extra:
        row(BUDGETS, w, {"learned": SEEDS}, f" (learned; if its best at {BUDGETS - 1} is {assume})")
    for k in range(n_budgets()):
        # seed 3 at the optimum: costed at the middle initial size
        sz = INITIAL_SIZES[k] if k < BUDGETS else extra
        row(k, sz[len(sz) // 2], {sc: 1 for sc in schemes_at(k)}, f" (seed {OPTIMUM_SEEDS} at the optimum, ~)")
    print(f"\nTotal: {total_runs} runs, {total_flops:.3g} FLOPs" +
          (f", {total_h:.1f} CPU-hours (training at the measured step costs, one run per core, plus "
           f"{EVAL_BATCHES_PER_RUN} eval batches a run at {EVAL_BATCH_SHARE:g} of a step)" if total_h else "") +
          "; sizes added by the edge rule come on top (per added width at budget k: 2 schemes x 2 seeds).")


# ---- the lr rule's fit


def fit_lr_rule(grid):
    """grid: {(scheme, width): {lr: loss}}. Per (scheme, width) the vertex of the parabola in
    ln lr through the grid's best lr and its two neighbours (none where the best is the grid's
    end); then least squares of ln lr* = a_scheme + b ln(W / 128), one b for both schemes."""
    import numpy as np
    from scipy.stats import t
    pts = []
    for (sc, w), g in sorted(grid.items()):
        lrs = sorted(g)
        i = lrs.index(min(g, key=g.get))
        text = f"{sc} width {w}: " + ", ".join(f"{x:g}: {g[x]:.4f}" for x in lrs)
        if 0 < i < len(lrs) - 1:
            c = np.polyfit(np.log(lrs[i - 1:i + 2]), [g[x] for x in lrs[i - 1:i + 2]], 2)
            v = math.exp(-c[1] / (2 * c[0]))
            pts.append((sc, w, v))
            print(f"{text}; vertex {v:.5f}")
        else:
            print(f"{text}; best at the grid's end ({lrs[i]:g}): no vertex, left out")
    X = np.array([[sc == "rope", sc == "learned", math.log(w / 128)] for sc, w, _ in pts], float)
    y = np.array([math.log(v) for _, _, v in pts])
    th, res, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - 3
    interval = ""
    if dof > 0:
        s2 = float(res[0]) / dof
        h = t.ppf(0.975, dof) * math.sqrt(s2 * np.linalg.inv(X.T @ X)[2, 2])
        interval = f" [{th[2] - h:.3f}, {th[2] + h:.3f}] (95%, t over {dof} dof); residual sd {math.sqrt(s2):.3f} in ln lr"
    print(f"ln lr* = a_scheme + b ln(W/128): b = {th[2]:.3f}{interval}; lr at 128: rope {math.exp(th[0]):.5f}, "
          f"learned {math.exp(th[1]):.5f}")
    print(f"The plan's rule: LR_ENDS = {LR_ENDS} (the lr at widths "
          f"{' and '.join(str(w) for _, w in check_points())})")
    for w in LADDER:
        print(f"  width {w}: " + ", ".join(f"{sc} {lr(sc, w):g}" for sc in SCHEMES))


def lr_fit():
    """The rule's first fit: the size sweep's seed-1 grids at 600 steps."""
    logs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results", "size", "logs")
    pat = re.compile(r"^(rope|learned)-w(\d+)-lr([0-9.]+)-steps600-s1\.eval\.txt$")
    grid = {}
    for f in sorted(os.listdir(logs)):
        m = pat.match(f)
        if m:
            loss = float(re.search(r" loss=([0-9.]+)", open(os.path.join(logs, f)).read()).group(1))
            grid.setdefault((m[1], int(m[2])), {})[float(m[3])] = loss
    fit_lr_rule(grid)


def lr_fit_checks(out):
    """The rule's ends from the study's own lr checks: at each check point, every lr run at
    its width and steps, the mean final loss of seeds 1..SEEDS where all have finished; the
    best lr is an end of LR_ENDS if it is not the grid's smallest or largest (else the grid
    is to be extended on that side). Also each grid's parabola vertex in ln lr, for the record."""
    import numpy as np
    ends = {}
    print(f"lr checks in {out}, mean final loss of seeds 1-{SEEDS}:")
    for i, (k, w) in enumerate(check_points()):
        for sc in SCHEMES:
            pat = re.compile(rf"^{sc}-w{w}-lr([0-9.]+)-steps{steps(w, k)}-s1$")
            g = {}
            for d in sorted(os.listdir(out)):
                m = pat.match(d)
                loss = mean_loss(out, d[:-3], range(1, SEEDS + 1)) if m else None
                if loss is not None:
                    g[float(m[1])] = loss
            if not g:
                print(f"  {sc} width {w}: no lr finished on seeds 1-{SEEDS}")
                continue
            lrs = sorted(g)
            j = lrs.index(min(g, key=g.get))
            text = f"  {sc} width {w}, budget {k}: " + ", ".join(f"{x:g}: {g[x]:.4f}" for x in lrs)
            if 0 < j < len(lrs) - 1:
                c = np.polyfit(np.log(lrs[j - 1:j + 2]), [g[x] for x in lrs[j - 1:j + 2]], 2)
                print(f"{text}; best {lrs[j]:g}, vertex {math.exp(-c[1] / (2 * c[0])):.5f}")
                ends.setdefault(sc, [None, None])[i] = lrs[j]
            else:
                side = "smaller" if j == 0 else "larger"
                print(f"{text}; best at the grid's end ({lrs[j]:g}): run a {side} lr")
    whole = {sc: tuple(e) for sc, e in ends.items() if None not in e}
    print(f"LR_ENDS from these: {whole if len(whole) == len(SCHEMES) else 'not yet (a grid unfinished or not bracketed)'}")
    print(f"LR_ENDS in the plan: {LR_ENDS}")


def main():
    a = sys.argv[1:]
    if a[:1] == ["plan"]:
        print_plan(a)
    elif a[:1] == ["next"] and len(a) == 2:
        next_batch(a[1])
    elif a[:1] == ["name"] and len(a) in (4, 5):
        print(variant(a[1], int(a[2]), int(a[3]), float(a[4]) if len(a) == 5 else 1.0))
    elif a[:1] == ["lr-fit"] and len(a) == 1:
        lr_fit()
    elif a[:1] == ["lr-fit"] and len(a) == 2:
        lr_fit_checks(a[1])
    else:
        print(__doc__.split("\n\n")[1])
        sys.exit(2)


if __name__ == "__main__":
    main()
