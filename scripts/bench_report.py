#!/usr/bin/python3
"""bench_report.py: the tables and verdicts of a `make bench` run, read from
the results file scripts/bench.sh wrote.

    scripts/bench_report.py RESULTS_FILE

bench.sh only measures; this script only reports, so it can be run again on
an old results file, and the report can change without measuring again.
Standard library only.

The results file
----------------
One record a line: a kind, then `key=value` fields, split as a shell splits
a command line (a value holding spaces is double-quoted). Blank lines and
lines starting with `#` are ignored; so are unknown kinds and unknown keys,
so a program may print more fields without breaking this script. A record is
mostly a program's own machine-readable line, with a few keys bench.sh
appends (a key given twice: the last one counts).

    bench date=... threads=2 steps=8 warmup=2 rounds=3 scheme_steps=32 configs="S M"
          schemes="rope learned sinusoidal t5" torch=1        the run's settings
    machine cores=2 cpu="..." load="..."
    coretype source=environment value=X                 OPENBLAS_CORETYPE was set: kept
    coretype source=override detected=Prescott value=Haswell
                                                        OpenBLAS misdetected the CPU: overridden
    coretype source=openblas detected=X                 unset: OpenBLAS's own choice
    blas side=ropelab|torch core=X config="..." ...     the OpenBLAS core each side really uses
    sgemm n=1024 threads=2 gflops=G when=before         build/bench_model --peak, + when=
    sgemm_peak gflops=G when=before|after               (the peak of PEAKS["sgemm"])
    ropelab config=S pos=rope ... round=1               build/bench_model, one run, + round=
    torch pos=rope L=.. ... config=S round=1            scripts/torch_baseline.py, + config= round=
    scheme_compare config=S pos=... ...                 build/bench_model --compare-schemes
    scheme_kernels config=S pos=... ...
    rope_micro dir=forward ... / rope_micro max_abs_diff=...   build/bench_model --rope-micro

Adding a setup (e.g. ropelab on oneDNN fp32 or bf16, or over MPI): let its
program print its training line as a `ropelab` record with a field that tells
it apart (say engine=onednn dtype=bf16, or ranks=4), and its peak as a record
of a kind of its own (say `onednn_peak dtype=bf16 gflops=...`); bench.sh
appends both to the file; here, add one Peak to PEAKS and one Setup to SETUPS.
A record belongs to the setup whose `where` fields it matches most
specifically, so the plain OpenBLAS setup (no `where`) keeps only the
records no other setup claims. Every setup gets its rows in the main table
(a `setup` column appears once there is more than one), its MFU against its
own peak, its speed-up against PyTorch, and the row targets.
"""

import math
import shlex
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Peak:
    """A measured peak (GFLOP/s) some setups' MFU is relative to."""
    label: str            # as printed: "sgemm peak"
    detail: str           # how it is measured, printed once
    kind: str             # record kind holding gflops=, with when=before|after
    where: dict = field(default_factory=dict)   # fields such a record must have


@dataclass(frozen=True)
class Setup:
    """One way of training the model whose rows the main table shows."""
    name: str             # row label in the `setup` column
    kind: str             # record kind of its training measurements
    peak: str             # key of PEAKS
    where: dict = field(default_factory=dict)   # fields its records have


PEAKS = {
    "sgemm": Peak("sgemm peak", "best of square 1024/1536/2048", "sgemm_peak"),
}

SETUPS = [
    Setup("OpenBLAS fp32", "ropelab", "sgemm"),
]

BASELINE_KIND = "torch"     # scripts/torch_baseline.py: the speed-up's denominator

# Targets. Each verdict judges the value as printed, so verdict and text agree.
SPEEDUP_TARGET = 2.5        # x PyTorch's tokens/s, every config and scheme
MFU_TARGET = (("M",), 0.55)  # of the setup's peak, on these configs
RSS_TARGET = 1.3            # peak RSS / the program's accounting
SCHEME_TARGETS = {"rope": 3.0, "t5": 5.0}   # % of a step added to learned's (kernel by kernel)


# ----------------------------------------------------------------------------
# Reading


def read_records(path):
    """[(kind, {key: value text})] in file order. Raises ValueError("path:line: problem")."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                words = shlex.split(line)
            except ValueError as e:
                raise ValueError(f"{path}:{number}: {e}") from None
            fields = {}
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if sep:
                    fields[key] = value
            records.append((words[0], fields))
    return records


def num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def matches(rec, where):
    return all(rec.get(k) == v for k, v in where.items())


def setup_of(rec_kind, rec):
    """The setup a training record belongs to: the most specific match, or None."""
    found = [s for s in SETUPS if s.kind == rec_kind and matches(rec, s.where)]
    return max(found, key=lambda s: len(s.where)) if found else None


class Results:
    def __init__(self, records):
        self.records = records
        self.first = {}
        for kind, rec in records:
            self.first.setdefault(kind, rec)
        bench = self.first.get("bench", {})
        self.configs = bench.get("configs", "").split() or self._order("config")
        self.schemes = bench.get("schemes", "").split() or self._order("pos")
        # best run (by tokens/s) of each setup and of the baseline, per (config, pos)
        self.best = {}
        for kind, rec in records:
            if kind == BASELINE_KIND:
                who = BASELINE_KIND
            else:
                setup = setup_of(kind, rec)
                if setup is None:
                    continue
                who = setup.name
            key = (who, rec.get("config"), rec.get("pos"))
            if key not in self.best or num(rec.get("tokens_per_s")) > num(self.best[key].get("tokens_per_s")):
                self.best[key] = rec
        self.setups = [s for s in SETUPS if any(k[0] == s.name for k in self.best)]

    def _order(self, key):
        seen = []
        for kind, rec in self.records:
            if kind in ("ropelab", BASELINE_KIND) and rec.get(key) and rec[key] not in seen:
                seen.append(rec[key])
        return seen

    def all(self, kind, **where):
        return [rec for k, rec in self.records if k == kind and matches(rec, where)]

    def peak(self, name):
        """(reference, before, after) of PEAKS[name]: the reference is the larger
        measurement in GFLOP/s (the VM's speed drifts; a low peak would flatter
        the MFU), before and after the texts as measured (None if absent)."""
        p = PEAKS[name]
        recs = [r for r in self.all(p.kind) if matches(r, p.where)]
        before = [r.get("gflops") for r in recs if r.get("when", "before") == "before"]
        after = [r.get("gflops") for r in recs if r.get("when") == "after"]
        vals = [num(v) for v in before + after if not math.isnan(num(v))]
        return (max(vals) if vals else math.nan, before[0] if before else None, after[0] if after else None)


# ----------------------------------------------------------------------------
# Printing


def fmt(x, spec):
    return "n/a" if x is None or math.isnan(x) else format(x, spec)


def verdict(value, limit, direction):
    ok = value >= limit if direction == "min" else value <= limit
    return "met" if ok else "MISSED"


def header(res, out):
    bench, machine = res.first.get("bench", {}), res.first.get("machine", {})
    threads = bench.get("threads", "?")
    out(f"# ropelab training benchmark ({bench.get('date', '?')})")
    out(f"machine: {machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, load {machine.get('load', '?')}")
    out(f"threads: {threads}; {bench.get('steps', '?')} timed steps after {bench.get('warmup', '?')} warm-up "
        f"steps, medians; best of {bench.get('rounds', '?')} alternating runs per side")
    core = res.first.get("coretype")
    if core:
        source = core.get("source")
        if source == "environment":
            out(f"OPENBLAS_CORETYPE={core.get('value', '')} (set before bench.sh ran) for both ropelab and PyTorch")
        elif source == "override":
            out(f"OpenBLAS detected {core.get('detected', '?')} on a CPU with AVX2+FMA (a misdetection): exported "
                f"OPENBLAS_CORETYPE={core.get('value', '?')} for both ropelab and PyTorch, as ./train does "
                "(src/common/blas_cpu.c)")
        else:
            out(f"OPENBLAS_CORETYPE unset: OpenBLAS's own choice ({core.get('detected', '?')}) "
                "for both ropelab and PyTorch")
    for side in res.all("blas"):
        if side.get("side") == "ropelab":
            out(f"ropelab: openblas core={side.get('core', '?')} config={side.get('config', '?')} "
                f"threads={side.get('threads', '?')}")
        elif side.get("side") == "torch":
            out(f"torch {side.get('version', '?')}: openblas core={side.get('core', '?')} "
                f"({side.get('libs') or 'no OpenBLAS loaded'}), threads={side.get('threads', '?')}")
    if bench.get("torch") == "0":
        out("torch: not installed (or NO_TORCH set): ropelab only "
            "(bash scripts/install_deps.sh installs python3-torch)")
    for rec in res.all("sgemm", when="before"):
        out(f"sgemm n={rec.get('n')} threads={rec.get('threads')} gflops={rec.get('gflops')}")
    for name, p in PEAKS.items():
        ref, before, after = res.peak(name)
        if before is not None:
            out(f"{p.label} ({p.detail}, {threads} threads): {before} GFLOP/s")
        if after is not None:
            out(f"{p.label} measured again after the runs: {after} GFLOP/s; reference peak {ref:g} GFLOP/s")


def main_table(res, out):
    """The speed table and the row targets; returns nothing."""
    if not res.setups:
        return
    many = len(res.setups) > 1
    peaks = {s.name: res.peak(s.peak)[0] for s in res.setups}
    out("")
    out("| config | pos | " + ("setup | " if many else "") + "ropelab tokens/s | fwd ms | bwd ms | opt ms | "
        "ms/step | GFLOP/s | MFU | peak RSS MiB | accounted MiB (state + activations) | RSS / accounted | "
        "PyTorch tokens/s | speed-up |")
    out("|---|---|" + ("---|" if many else "") + "---|" * 12)
    rows, warnings = [], []   # rows: (cfg, pos, setup, rec, speed-up text or None, mfu)
    for cfg in res.configs:
        for pos in res.schemes:
            base = res.best.get((BASELINE_KIND, cfg, pos))
            for s in res.setups:
                rec = res.best.get((s.name, cfg, pos))
                if rec is None:
                    continue
                g, peak = num(rec.get("gflops")), peaks[s.name]
                mfu = float(f"{g / peak:.3f}") if peak > 0 else math.nan
                tok = num(rec.get("tokens_per_s"))
                if base is not None:
                    ttok = num(base.get("tokens_per_s"))
                    speedup = f"{tok / ttok:.2f}"
                    tcol = f"{ttok:.0f} | {speedup}x"
                    diff = [k for k in ("L", "C", "H", "V", "B", "T") if rec.get(k) != base.get(k)]
                    if diff:
                        warnings.append(f"WARNING: {cfg} {pos}: PyTorch's model differs in "
                                        + ", ".join(f"{k} ({base.get(k)} vs {rec.get(k)})" for k in diff)
                                        + ": the speed-up compares different work")
                else:
                    speedup, tcol = None, "- | -"
                rows.append((cfg, pos, s, rec, speedup, mfu))
                out(f"| {cfg} | {pos} | " + (f"{s.name} | " if many else "")
                    + f"{tok:.0f} | {rec.get('fwd_ms')} | {rec.get('bwd_ms')} | {rec.get('opt_ms')} | "
                    f"{rec.get('ms_per_step')} | {rec.get('gflops')} | {fmt(100 * mfu, '.0f')}% | "
                    f"{rec.get('rss_mb')} | {num(rec.get('state_mb')):.1f} + {num(rec.get('act_mb')):.1f} | "
                    f"{rec.get('rss_ratio')} | {tcol} |")
    for w in warnings:
        out(w)
    out("")
    sizes = []
    for cfg in res.configs:
        rec = next((r for (who, c, _), r in res.best.items() if who != BASELINE_KIND and c == cfg), None)
        if rec:
            sizes.append(f"{cfg}: " + " ".join(f"{k}={rec.get(k)}" for k in ("L", "C", "H", "T", "B", "V")))
    peak_text = ", ".join(dict.fromkeys(f"{PEAKS[s.peak].label} {fmt(peaks[s.name], 'g')} GFLOP/s"
                                        for s in res.setups))
    out("; ".join(sizes) + f". threads={res.first.get('bench', {}).get('threads', '?')}, {peak_text}.")
    out("Model FLOPs per step = 3 x forward; forward = 2*B*T*(12*L*C^2 + V*C) (matmuls) "
        "+ 2*B*L*C*T*(T+1) (causal q.k and p.v).")
    out("State = params, grads, AdamW m and v (4 x 4 bytes per parameter); activations = gpt_activation_bytes().")
    out("")
    out("Targets (this run):")
    mfu_configs, mfu_limit = MFU_TARGET
    for cfg, pos, s, rec, speedup, mfu in rows:
        who = f"{cfg} {pos}" + (f" ({s.name})" if many else "")
        if speedup is not None:
            out(f"  {who}: {speedup}x PyTorch's tokens/s (target >= {SPEEDUP_TARGET:g}x): "
                f"{verdict(float(speedup), SPEEDUP_TARGET, 'min')}")
        if cfg in mfu_configs and not math.isnan(mfu):
            out(f"  {who}: MFU {100 * mfu:.1f}% of the {PEAKS[s.peak].label} "
                f"(target >= {100 * mfu_limit:g}%): {verdict(mfu, mfu_limit, 'min')}")
        out(f"  {who}: peak RSS {rec.get('rss_ratio')}x the accounting (target <= {RSS_TARGET:g}x): "
            f"{verdict(num(rec.get('rss_ratio')), RSS_TARGET, 'max')}")


def scheme_tables(res, out):
    compare = res.all("scheme_compare")
    if compare:
        steps = res.first.get("bench", {}).get("scheme_steps") or compare[0].get("steps", "?")
        out("")
        out("Scheme overhead: all four schemes built in one process and trained in turn, one step each, in")
        out(f"rotating order, on the same batches, for {steps} rounds. Per scheme: the median of its step time")
        out("divided by learned's in the same round (drift cancels within a round), with the quartiles of that")
        out("ratio, and its fastest step against learned's fastest (the VM's noise only ever adds time):")
        out("")
        configs = [c for c in res.configs if any(r.get("config") == c for r in compare)]
        others = [r.get("pos") for r in compare if r.get("config") == configs[0] and r.get("pos") != "learned"]
        out("| config | learned ms/step (fastest) | "
            + " | ".join(f"{p} vs learned: median [q1, q3]; fastest" if i == 0 else p for i, p in enumerate(others))
            + " |")
        out("|---|---|" + "---|" * len(others))
        for cfg in configs:
            recs = {r.get("pos"): r for r in compare if r.get("config") == cfg}
            learned = recs.get("learned", {})
            fast_learned = num(learned.get("fastest_ms"))
            cells = [f"{learned.get('ms_per_step', 'n/a')} ({learned.get('fastest_ms', 'n/a')})"]
            for p in others:
                r = recs.get(p)
                if r is None:
                    cells.append("n/a")
                    continue
                fpct = 100 * (num(r.get("fastest_ms")) / fast_learned - 1)
                cells.append(f"{r.get('vs_learned_pct')}% [{r.get('q1_pct')}%, {r.get('q3_pct')}%]; "
                             f"{fmt(fpct, '.1f')}%")
            out(f"| {cfg} | " + " | ".join(cells) + " |")
    kernels = res.all("scheme_kernels")
    if not kernels:
        return
    out("")
    out("The same, kernel by kernel: the work each scheme adds to a step (embedding hook, L x q/k rotation,")
    out("bias table and gradient + L x (attention with the bias - without it)), fastest of 30, on each")
    out("model's own buffers, as a share of learned's fastest step above:")
    out("")
    configs = [c for c in res.configs if any(r.get("config") == c for r in kernels)]
    others = [r.get("pos") for r in kernels if r.get("config") == configs[0] and r.get("pos") != "learned"]
    out("| config | learned's fastest step ms | learned ms (share) | "
        + " | ".join(f"{p} ms (vs learned)" if i == 0 else p for i, p in enumerate(others)) + " |")
    out("|---|---|---|" + "---|" * len(others))
    for cfg in configs:
        recs = {r.get("pos"): r for r in kernels if r.get("config") == cfg}
        learned = recs.get("learned", {})
        step, own = learned.get("learned_fastest_step_ms", "n/a"), learned.get("own_ms", "n/a")
        cells = [step, f"{own} ({fmt(100 * num(own) / num(step), '.2f')}%)"]
        for p in others:
            r = recs.get(p)
            if r is None:
                cells.append("n/a")
                continue
            pct = r.get("vs_learned_pct", "n/a")
            cells.append(f"{r.get('own_ms')} ({pct if pct.startswith('-') else '+' + pct}%)")
        out(f"| {cfg} | " + " | ".join(cells) + " |")
    out("")
    out("Scheme targets (the kernel-by-kernel figure; the whole-step figures above are beside it):")
    for cfg in configs:
        for pos, limit in SCHEME_TARGETS.items():
            r = next((r for r in kernels if r.get("config") == cfg and r.get("pos") == pos), None)
            if r is None:
                continue
            pct = r.get("vs_learned_pct")
            out(f"  {cfg} {pos}: adds {pct}% of a step to learned's (target <= {limit:g}%): "
                f"{verdict(num(pct), limit, 'max')}")


def rope_micro(res, out):
    recs = res.all("rope_micro")
    if not recs:
        return
    out("")
    out("RoPE micro-benchmark (q and k of config M; ms, median of 9; speed-up of elementwise over "
        "matrix / matrix-sgemm):")
    out("")
    out("| RoPE pass | head vectors x head_dim | block-diagonal matrix (mat-vec per vector) | "
        "block-diagonal matrix (sgemm per position) | elementwise (cos/sin tables) | elementwise speed-up |")
    out("|---|---|---|---|---|---|")
    for r in recs:
        if r.get("dir"):
            out(f"| {r['dir']} | {r.get('vectors')} x {r.get('head_dim')} | {r.get('matrix_ms')} | "
                f"{r.get('matrix_sgemm_ms')} | {r.get('elementwise_ms')} | "
                f"{r.get('speedup')}x / {r.get('speedup_sgemm')}x |")
    for r in recs:
        if "max_abs_diff" in r:
            out("")
            out(f"RoPE matrix vs elementwise: max |difference| {r['max_abs_diff']}")


def report(records, out=print):
    res = Results(records)
    header(res, out)
    main_table(res, out)
    scheme_tables(res, out)
    rope_micro(res, out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: bench_report.py RESULTS_FILE (written by scripts/bench.sh)", file=sys.stderr)
        return 2
    try:
        records = read_records(argv[0])
    except (OSError, ValueError) as e:
        print(f"bench_report.py: {e}", file=sys.stderr)
        return 2
    report(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
