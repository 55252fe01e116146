#!/usr/bin/python3
"""bench_report.py: the tables and verdicts of a `make bench` run, read from
the results file bench/bench.sh wrote.

    bench/bench_report.py RESULTS_FILE

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
          schemes="rope learned sinusoidal t5" torch=1
          engines="openblas-fp32 onednn-fp32 onednn-bf16" torch_modes="fp32 bf16"
          scheme_engines="openblas-fp32 onednn-bf16"          the run's settings
    machine cores=2 cpu="..." vendor=.. family=.. model=.. isa="avx2 fma ..." load="..." mem_total_mb=..
            mem_available_mb=..                         (vendor, family, model, isa: later runs)
    bench_config config=L L=12 C=768 H=12 T=1024 B=4 V=4096 params=.. flops_per_step=..
          formula_state_mb=.. formula_act_mb=.. formula_mb=..
                                                        build/bench_model --list-configs: a config's
                                                        sizes, parameters (rope), model FLOPs per
                                                        step and memory by docs/MODEL.md's formula
    coretype source=environment value=X                 OPENBLAS_CORETYPE was set: kept
    coretype source=override detected=Prescott value=Haswell
                                                        OpenBLAS misdetected the CPU: overridden
    coretype source=openblas detected=X                 unset: OpenBLAS's own choice
    blas side=ropelab|torch core=X config="..." ...     the OpenBLAS core each side really uses
    matmul_engine engine=onednn precision=bf16 describe="..."   an engine's own description
    auto config=M precision=fp32 engine=onednn choice="matmul = auto: onednn fp32 (measured ...)"
                                                        what the default ./train (matmul = auto) runs
                                                        here in fp32 for a config: build/bench_model
                                                        --auto's "# auto fp32 = ..." line, the trainer's
                                                        trial (the #37 targets; older files: no config=,
                                                        options_engine's rule)
    engine_unavailable engine=onednn precision=bf16 reason="..."   left out (e.g. no native bf16)
    sgemm n=1024 threads=2 gflops=G when=before         build/bench_model --peak, + when=
    sgemm_peak gflops=G when=before|after               (the peak of PEAKS["sgemm"])
    linear engine=onednn precision=bf16 n=2048 c=1024 oc=4096 threads=2 gflops=G when=before
    linear_peak engine=onednn precision=bf16 n=2048 gflops=G when=before|after
                                                        --peak --matmul M --precision P: the
                                                        engine's forward at N=2048, C, OC in
                                                        1024..4096, and its best (PEAKS)
    ropelab config=S pos=rope engine=onednn precision=bf16 ... matmul_mb=.. engine_share=..
            engine_gflops=.. linear_ms=.. linear_gflops=.. attention_ms=.. attention_gflops=.. round=1
                                                        build/bench_model, one run, + round=;
                                                        engine_*, linear_*, attention_*: the
                                                        time inside the engine's calls
    torch pos=rope L=.. ... autocast=off|bf16 ... rss_mb=.. config=S round=1
                                                        scripts/torch/torch_baseline.py, + config= round=
    scheme_compare config=S pos=... engine=... precision=... ...   build/bench_model --compare-schemes
    scheme_kernels config=S pos=... engine=... precision=... ...
    rope_micro dir=forward ... / rope_micro max_abs_diff=...   build/bench_model --rope-micro
    attention config=M variant=bf16-onednn fwd_bwd_ms=.. ...   build/bench_attention (variants
                                                        fp32-openblas[-fused], fp32-onednn[-fused],
                                                        bf16-onednn)
    memory config=M engine=openblas precision=fp32 attention=blocked B=8 T=256 threads=2 state_mb=..
           act_mb=.. engine_mb=.. total_mb=.. token_b=.. token_state_b=.. token_act_b=.. token_engine_b=..
           token_layers_b=.. token_logits_b=.. token_other_b=.. today_mb=.. longest_t_today=.. today_x=..
           limit_today=.. budget_gib=16 longest_t_budget=.. budget_x=.. limit_budget=..
           recompute_token_b=.. recompute_t_today=.. recompute_t_budget=..
                                                        build/bench_memory: the accounting's memory
                                                        at T, per token of context, and the longest T
                                                        (its docstring has each field)
    memory_fused config=M engine=openblas precision=fp32 ... ratio_today=.. ratio_budget=..
                                                        the longest T fused over blocked

Records written before a field existed lack it: a ropelab or scheme record
without engine= is OpenBLAS fp32, a torch record without autocast= is fp32;
without bench_config records (or rss_mb= in torch records) the scaling table
(or PyTorch's memory) is left out; without engine_share= a run has no row in
the table of where a step goes.

Setups, baselines, peaks
------------------------
A setup (SETUPS) is one way ropelab trains the model: its records are the
`ropelab` (and scheme_*) records whose fields match its `where`, its MFU is
against its own peak (PEAKS, the larger of the measurements before and after
the runs), and its speed-up is against the PyTorch side of the same
precision (BASELINES: fp32 setups against plain PyTorch, bf16 against
PyTorch under autocast bf16). A record belongs to the setup (or baseline)
whose `where` fields it matches most specifically, so the plain OpenBLAS
setup and plain PyTorch (no `where`) keep only the records no other one
claims. Adding a setup (say ropelab over MPI): let its program print its
training line as a `ropelab` record with a field that tells it apart (say
ranks=4) and its peak as a record of its own kind; bench.sh appends both to
the file; here, add one Peak to PEAKS and one Setup to SETUPS, and its
targets to RATIO_TARGETS if any.

Issue #37's targets (T37_*, rows "#37: ..." of the targets table) come from
the same records: the auto record's engine against the fastest fp32 setup on
M; oneDNN bf16's MFU on M (judged only with native bf16); each setup's
attention_gflops over its own peak on M and L; config M's longest T in
today's memory (memory records); every setup against its PyTorch side. A row
the run cannot judge says why; a missed target says what bounds it.
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
class Baseline:
    """A PyTorch side the setups are compared with."""
    name: str             # as printed: "PyTorch fp32"
    kind: str             # record kind of its training measurements
    where: dict = field(default_factory=dict)   # fields its records have


@dataclass(frozen=True)
class Setup:
    """One way of training the model whose rows the main table shows."""
    name: str             # row label in the `setup` column
    kind: str             # record kind of its training measurements
    peak: str             # key of PEAKS
    where: dict = field(default_factory=dict)   # fields its records have
    baseline: str = "fp32"                      # key of BASELINES: the PyTorch side of the same precision
    speedup_target: float = 2.5                 # x that side's tokens/s, every config and scheme


LINEAR_SHAPES = "N = 2048 rows, C -> OC: 1024 -> 1024, 1024 -> 4096, 4096 -> 1024, 2048 -> 2048; best median of 5"

PEAKS = {
    "sgemm": Peak("sgemm peak", "OpenBLAS cblas_sgemm, best of square 1024/1536/2048", "sgemm_peak"),
    "onednn_fp32": Peak("oneDNN fp32 peak", "the engine's forward product out = inp W^T + b (linear_forward), "
                        + LINEAR_SHAPES, "linear_peak", {"engine": "onednn", "precision": "fp32"}),
    "onednn_bf16": Peak("oneDNN bf16 peak", "the engine's forward product, bf16 rounding of the input "
                        "included, from packed bf16 weight copies, " + LINEAR_SHAPES,
                        "linear_peak", {"engine": "onednn", "precision": "bf16"}),
    # not a reference: OpenBLAS at the oneDNN shapes, so the engines compare shape for shape
    "openblas_linear": Peak("OpenBLAS forward at the oneDNN shapes", "for comparison only, not a reference",
                            "linear_peak", {"engine": "openblas"}),
}

BASELINES = {
    "fp32": Baseline("PyTorch fp32", "torch"),
    "bf16": Baseline("PyTorch autocast bf16", "torch", {"autocast": "bf16"}),
}

SETUPS = [
    Setup("OpenBLAS fp32", "ropelab", "sgemm"),
    Setup("oneDNN fp32", "ropelab", "onednn_fp32", {"engine": "onednn", "precision": "fp32"}),
    Setup("oneDNN bf16", "ropelab", "onednn_bf16", {"engine": "onednn", "precision": "bf16"},
          baseline="bf16", speedup_target=2.0),
]

# Targets. Each verdict judges the value as printed, so verdict and text agree.
# A setup's tokens/s over another's, same run, same (config, pos): (setup, over, {config: at least})
RATIO_TARGETS = [
    ("oneDNN fp32", "OpenBLAS fp32", {"M": 1.6}),
    ("oneDNN bf16", "OpenBLAS fp32", {"S": 1.8, "M": 2.5}),
]
# MFU: a setup's GFLOP/s over its own peak, per config: {setup: {config: at least}}
MFU_TARGETS = {"OpenBLAS fp32": {"M": 0.80}, "oneDNN fp32": {"M": 0.55}, "oneDNN bf16": {"M": 0.75, "S": 0.65}}
RSS_TARGET = 1.3            # peak RSS / the program's accounting
SCHEME_TARGETS = {"rope": 3.0, "t5": 5.0}   # % of a step added to learned's (kernel by kernel), every setup
# Issue #37's targets (rows labelled "#37: ..."; targets_37): the default ./train (matmul = auto) against
# the fastest fp32 engine on M; oneDNN bf16's MFU on M where the CPU has native bf16; attention's GFLOP/s
# over its setup's own peak on M and L; config M's longest context in today's memory; every setup
# against its PyTorch side.
T37_AUTO = 0.95          # auto's engine's tokens/s over the fastest fp32 engine's, on M, every scheme
T37_BF16_MFU = 0.70      # oneDNN bf16 on M, on a CPU with native bf16 (avx512_bf16 or amx_bf16)
T37_ATTENTION = 0.50     # attention_gflops / the setup's own peak, on M and L, every setup and scheme
T37_CONTEXT = 4.0        # config M: the best setup's longest T in today's memory / the config's T
T37_TORCH = 1.0          # every setup's tokens/s over its PyTorch side's, every config and scheme


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


def most_specific(candidates, rec):
    """The candidate (with .where) rec matches most specifically, or None."""
    found = [c for c in candidates if matches(rec, c.where)]
    return max(found, key=lambda c: len(c.where)) if found else None


def setup_of(rec_kind, rec):
    """The setup a training record belongs to (rec_kind None: any kind, for the
    scheme records, which carry the same engine fields), or None."""
    return most_specific([s for s in SETUPS if rec_kind is None or s.kind == rec_kind], rec)


def baseline_of(rec_kind, rec):
    return most_specific([b for b in BASELINES.values() if b.kind == rec_kind], rec)


class Results:
    def __init__(self, records):
        self.records = records
        self.first = {}
        for kind, rec in records:
            self.first.setdefault(kind, rec)
        bench = self.first.get("bench", {})
        self.configs = bench.get("configs", "").split() or self._order("config")
        self.schemes = bench.get("schemes", "").split() or self._order("pos")
        # best run (by tokens/s) of each setup and of each baseline, per (config, pos)
        self.best = {}
        for kind, rec in records:
            who = setup_of(kind, rec) or baseline_of(kind, rec)
            if who is None:
                continue
            key = (who.name, rec.get("config"), rec.get("pos"))
            if key not in self.best or num(rec.get("tokens_per_s")) > num(self.best[key].get("tokens_per_s")):
                self.best[key] = rec
        self.setups = [s for s in SETUPS if any(k[0] == s.name for k in self.best)]
        self.baselines = [b for b in BASELINES.values() if any(k[0] == b.name for k in self.best)]

    def _order(self, key):
        seen = []
        kinds = {s.kind for s in SETUPS} | {b.kind for b in BASELINES.values()}
        for kind, rec in self.records:
            if kind in kinds and rec.get(key) and rec[key] not in seen:
                seen.append(rec[key])
        return seen

    def all(self, kind, **where):
        return [rec for k, rec in self.records if k == kind and matches(rec, where)]

    def peak(self, name):
        """(reference, before, after) of PEAKS[name]: the reference is the larger
        measurement in GFLOP/s (the machine's speed drifts; a low peak would flatter
        the MFU), before and after the texts as measured (None if absent)."""
        p = PEAKS[name]
        recs = [r for r in self.all(p.kind) if matches(r, p.where)]
        before = [r.get("gflops") for r in recs if r.get("when", "before") == "before"]
        after = [r.get("gflops") for r in recs if r.get("when") == "after"]
        vals = [num(v) for v in before + after if not math.isnan(num(v))]
        return (max(vals) if vals else math.nan, before[0] if before else None, after[0] if after else None)

    def tokens(self, who, cfg, pos):
        rec = self.best.get((who, cfg, pos))
        return num(rec.get("tokens_per_s")) if rec else math.nan


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
    cpu = machine.get("cpu", "?")
    if machine.get("family"):
        cpu += f" ({machine.get('vendor', '?')} family {machine['family']} model {machine.get('model', '?')}"
        cpu += f"; {machine['isa']})" if machine.get("isa") else ")"
    out(f"machine: {machine.get('cores', '?')} cores, {cpu}, load {machine.get('load', '?')}"
        + (f", memory {machine['mem_total_mb']} MiB ({machine.get('mem_available_mb', '?')} available at the start)"
           if machine.get("mem_total_mb") else ""))
    out(f"threads: {threads}; {bench.get('steps', '?')} timed steps after {bench.get('warmup', '?')} warm-up "
        f"steps, medians; best of {bench.get('rounds', '?')} alternating runs per setup")
    if bench.get("engines"):
        modes = bench.get("torch_modes") or "none"
        dropped = res.first.get("torch_mode_dropped")
        if dropped:   # bench.sh ran without it: say so instead of listing it
            modes = " ".join(m for m in modes.split() if m != dropped.get("mode")) or "none"
        out(f"ropelab engines: {bench['engines']}; PyTorch modes: {modes}"
            + (" (bf16 = torch.autocast('cpu', dtype=torch.bfloat16) around forward and loss)"
               if "bf16" in modes.split() else "")
            + (f"; PyTorch {dropped.get('mode')} not run: {dropped.get('reason')}" if dropped else ""))
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
    for eng in res.all("matmul_engine"):
        out(f"ropelab engine {eng.get('engine', '?')} {eng.get('precision', '?')}: {eng.get('describe', '?')}")
    for auto in res.all("auto"):
        out(f"./train's default (matmul = auto) on this machine, fp32"
            f"{', config ' + auto['config'] if 'config' in auto else ''}: {auto.get('engine', '?')} "
            f"({auto.get('choice', '?')})")
    for eng in res.all("engine_unavailable"):
        out(f"ropelab engine {eng.get('engine', '?')} {eng.get('precision', '?')}: NOT AVAILABLE on this machine "
            f"({eng.get('reason', '?')}): no rows, no targets")
    if bench.get("torch") == "0":
        out("torch: not installed (or NO_TORCH set): ropelab only "
            "(bash scripts/run/install_deps.sh installs python3-torch)")
    for rec in res.all("sgemm", when="before"):
        out(f"sgemm n={rec.get('n')} threads={rec.get('threads')} gflops={rec.get('gflops')}")
    linear_table(res, out)
    for name, p in PEAKS.items():
        ref, before, after = res.peak(name)
        if before is not None:
            out(f"{p.label} ({p.detail}; {threads} threads): {before} GFLOP/s")
        if after is not None:
            out(f"{p.label} measured again after the runs: {after} GFLOP/s; reference peak {ref:g} GFLOP/s")


def linear_table(res, out):
    """The engines' forward products at the peak shapes (measured before the runs), side by side."""
    recs = [r for r in res.all("linear") if r.get("when", "before") == "before"]
    if not recs:
        return
    engines = list(dict.fromkeys(f"{r.get('engine')} {r.get('precision')}" for r in recs))
    shapes = list(dict.fromkeys((r.get("c"), r.get("oc")) for r in recs))
    out("")
    out(f"Forward product out = inp W^T + b of each matmul engine, N = {recs[0].get('n')} rows, GFLOP/s "
        "(median of 5; the best shape is the engine's peak):")
    out("")
    out("| C -> OC | " + " | ".join(engines) + " |")
    out("|---|" + "---|" * len(engines))
    for c, oc in shapes:
        cells = []
        for e in engines:
            r = next((r for r in recs if f"{r.get('engine')} {r.get('precision')}" == e
                      and (r.get("c"), r.get("oc")) == (c, oc)), None)
            cells.append(r.get("gflops") if r else "n/a")
        out(f"| {c} -> {oc} | " + " | ".join(cells) + " |")
    out("")


def accounted(rec):
    """'state + activations (+ matmul)' MiB text and its sum."""
    parts = [num(rec.get("state_mb")), num(rec.get("act_mb"))]
    if "matmul_mb" in rec:
        parts.append(num(rec.get("matmul_mb")))
    return " + ".join(f"{x:.1f}" for x in parts), sum(parts)


def main_table(res, out):
    """The speed table; returns its rows [(cfg, pos, setup, rec, speed-up text or None, mfu)]."""
    if not res.setups:
        return []
    many = len(res.setups) > 1 or res.setups[0] is not SETUPS[0]   # a `setup` column
    many_base = len({s.baseline for s in res.setups}) > 1   # a "PyTorch side" column
    ref = SETUPS[0] if SETUPS[0] in res.setups else None   # "vs OpenBLAS fp32" column
    peaks = {s.name: res.peak(s.peak)[0] for s in res.setups}
    out("")
    out("| config | pos | " + ("setup | " if many else "") + "ropelab tokens/s | fwd ms | bwd ms | opt ms | "
        "ms/step | GFLOP/s | MFU | peak RSS MiB | accounted MiB (state + activations + matmul engine) | "
        "RSS / accounted | " + ("PyTorch side | " if many_base else "") + "PyTorch tokens/s | speed-up |"
        + (f" vs {ref.name} |" if many and ref else ""))
    out("|---|---|" + ("---|" if many else "") + "---|" * 12 + ("---|" if many_base else "")
        + ("---|" if many and ref else ""))
    rows, warnings = [], []
    for cfg in res.configs:
        for pos in res.schemes:
            for s in res.setups:
                rec = res.best.get((s.name, cfg, pos))
                if rec is None:
                    continue
                bname = BASELINES[s.baseline].name
                base = res.best.get((bname, cfg, pos))
                g, peak = num(rec.get("gflops")), peaks[s.name]
                mfu = float(f"{g / peak:.3f}") if peak > 0 else math.nan
                tok = num(rec.get("tokens_per_s"))
                if base is not None:
                    ttok = num(base.get("tokens_per_s"))
                    speedup = f"{tok / ttok:.2f}"
                    tcol = f"{ttok:.0f} | {speedup}x"
                    diff = [k for k in ("L", "C", "H", "V", "B", "T") if rec.get(k) != base.get(k)]
                    if diff:
                        warnings.append(f"WARNING: {cfg} {pos}: {bname}'s model differs in "
                                        + ", ".join(f"{k} ({base.get(k)} vs {rec.get(k)})" for k in diff)
                                        + ": the speed-up compares different work")
                else:
                    speedup, tcol = None, "- | -"
                vs_ref = ""
                if many and ref:
                    r = tok / res.tokens(ref.name, cfg, pos)
                    vs_ref = f" {fmt(r, '.2f')}x |" if s is not ref else " - |"
                acc_text, acc_sum = accounted(rec)
                rows.append((cfg, pos, s, rec, speedup, mfu))
                out(f"| {cfg} | {pos} | " + (f"{s.name} | " if many else "")
                    + f"{tok:.0f} | {rec.get('fwd_ms')} | {rec.get('bwd_ms')} | {rec.get('opt_ms')} | "
                    f"{rec.get('ms_per_step')} | {rec.get('gflops')} | {fmt(100 * mfu, '.0f')}% | "
                    f"{rec.get('rss_mb')} | {acc_text} | {rec.get('rss_ratio')} | "
                    + (f"{bname} | " if many_base else "") + f"{tcol} |" + vs_ref)
    for w in warnings:
        out(w)
    out("")
    sizes = []
    for cfg in res.configs:
        rec = next((r for (who, c, _), r in res.best.items() if c == cfg
                    and who in {s.name for s in res.setups}), None)
        if rec:
            sizes.append(f"{cfg}: " + " ".join(f"{k}={rec.get(k)}" for k in ("L", "C", "H", "T", "B", "V")))
    peak_text = ", ".join(dict.fromkeys(f"{PEAKS[s.peak].label} {fmt(peaks[s.name], 'g')} GFLOP/s"
                                        for s in res.setups))
    out("; ".join(sizes) + f". threads={res.first.get('bench', {}).get('threads', '?')}; each setup's MFU "
        f"against its own peak: {peak_text}.")
    if many_base:
        out("Speed-up: each setup against the PyTorch side of its precision (fp32 setups against PyTorch fp32, "
            "bf16 against PyTorch under autocast bf16).")
    out("Model FLOPs per step = 3 x forward; forward = 2*B*T*(12*L*C^2 + V*C) (matmuls) "
        "+ 2*B*L*C*T*(T+1) (causal q.k and p.v); the same count for every precision.")
    out("Accounted = state (params, grads, AdamW m and v: 4 x 4 bytes per parameter) + activations "
        "(gpt_memory's activations) + the matmul engine's own memory (Engine.bytes: weight copies "
        "and scratch).")
    return rows


def memory_table(res, out):
    """Each setup's memory per config: the run with the largest peak RSS among its best runs."""
    if not res.setups:
        return
    out("")
    out("Memory per setup (of its best runs, the one with the largest peak RSS):")
    out("")
    out("| config | setup | pos | peak RSS MiB | state MiB | activations MiB | matmul engine MiB "
        "(weight copies + scratch) | RSS / accounted | PyTorch side | its peak RSS MiB (same pos) |")
    out("|---|---|---|---|---|---|---|---|---|---|")
    for cfg in res.configs:
        for s in res.setups:
            recs = [res.best[(s.name, cfg, pos)] for pos in res.schemes if (s.name, cfg, pos) in res.best]
            if not recs:
                continue
            rec = max(recs, key=lambda r: num(r.get("rss_mb")))
            bname = BASELINES[s.baseline].name
            base = res.best.get((bname, cfg, rec.get("pos")))
            out(f"| {cfg} | {s.name} | {rec.get('pos')} | {rec.get('rss_mb')} | {rec.get('state_mb')} | "
                f"{rec.get('act_mb')} | {rec.get('matmul_mb', 'n/a')} | {rec.get('rss_ratio')} | "
                f"{bname if base else '-'} | {base.get('rss_mb', 'n/a') if base else '-'} |")


def scaling_table(res, out):
    """One row per config: its size by the formulas (bench_config records: model
    FLOPs per step, state + activation bytes by docs/MODEL.md) beside each
    setup's and PyTorch side's measured ms/step and peak RSS (best run, rope if
    measured, else the first scheme), with each value's ratio to the first
    config's, so the growth of cost with size reads down a column."""
    sizes = {rec.get("config"): rec for rec in res.all("bench_config")}
    configs = [c for c in res.configs if c in sizes]
    if not configs:
        return
    pos = "rope" if "rope" in res.schemes else (res.schemes[0] if res.schemes else None)
    sides = [s.name for s in res.setups] + [b.name for b in res.baselines]
    first = sizes[configs[0]]

    def rel(value, base):
        r = value / base if base and not math.isnan(base) else math.nan
        return "" if math.isnan(r) else f" (x{r:.3g})"

    def ms_of(side, cfg):
        rec = res.best.get((side, cfg, pos))
        return num(rec.get("ms_per_step")) if rec else math.nan

    # the bf16 engine keeps the linear layers' inputs itself, so the model holds them for one layer
    # (records from before that change have no bf16 formula: every side is set against fp32's)
    bf16_layout = any("formula_bf16_mb" in sizes[c] for c in configs)
    bf16_sides = {s.name for s in res.setups if s.where.get("precision") == "bf16"} if bf16_layout else set()

    def formula_mb(side, z):
        return num(z.get("formula_bf16_mb" if side in bf16_sides else "formula_mb"))

    out("")
    out(f"Scaling with size ({pos}; formula = docs/MODEL.md's: state = 16 bytes per parameter (parameters, "
        "gradients, AdamW m and v), activations = B*T*(C + L*(16C + 4 + H) + C + 4 + V + 10C + H) floats "
        + ("(bf16: L*(9C + 4 + H) + 7C in place of L*(16C + 4 + H), the four linear inputs held for one "
           "layer, since its engine keeps them in bf16; the bf16 total in brackets) " if bf16_layout else "")
        + "+ 2 B*T ints; model FLOPs as for the MFU; per setup and PyTorch side, of its best run: ms/step, "
        f"then peak RSS MiB and its ratio to the formula's total; (xN) = N times config {configs[0]}'s value):")
    out("")
    out("| config | L, C, H, T, B, V | parameters | model GFLOP/step | formula MiB (state + activations) | "
        + " | ".join(f"{n}: ms/step; peak RSS MiB (/ formula)" for n in sides) + " |")
    out("|---|---|---|---|---|" + "---|" * len(sides))
    for cfg in configs:
        z = sizes[cfg]
        gf, f_mb = num(z.get("flops_per_step")) / 1e9, num(z.get("formula_mb"))
        cells = [cfg, ", ".join(str(z.get(k)) for k in ("L", "C", "H", "T", "B", "V")),
                 f"{num(z.get('params')) / 1e6:.2f} M",
                 f"{fmt(gf, '.1f')}" + rel(gf, num(first.get("flops_per_step")) / 1e9),
                 f"{z.get('formula_state_mb')} + {z.get('formula_act_mb')} = {z.get('formula_mb')}"
                 + rel(f_mb, num(first.get("formula_mb")))
                 + (f" (bf16: {z.get('formula_bf16_mb')})" if bf16_layout else "")]
        for side in sides:
            ms, rec = ms_of(side, cfg), res.best.get((side, cfg, pos))
            rss, side_mb = (num(rec.get("rss_mb")) if rec else math.nan), formula_mb(side, z)
            cells.append("-" if rec is None else
                         ("-" if math.isnan(ms) else f"{ms:g}" + rel(ms, ms_of(side, configs[0])))
                         + "; " + ("n/a" if math.isnan(rss) else f"{rss:g} ({rss / side_mb:.2f})"))
        out("| " + " | ".join(cells) + " |")
    out("")
    out("Read down a column: where ms/step grows like the model GFLOP/step, the GFLOP/s (and MFU) stay the "
        "same; RSS / formula above 1 is the matmul engine's own buffers (bf16 weight copies, scratch), "
        "the libraries' and, for PyTorch, what it stores beyond ropelab's accounting (e.g. each layer's "
        "(B, H, T, T) attention probabilities).")


def split_table(res, out):
    """Where each best run's step goes: inside the engine (the linear layers' and the head's
    products with the engine's rounding and bias gradients; attention, softmax included) and
    outside it (the model's own fp32 work and AdamW), with the engine's own rates against the
    setup's peak. The last column is the MFU the step would have if everything outside the
    engine took no time: what bounds the MFU targets when the model's own work is not the cause."""
    recs = [(cfg, pos, s, res.best.get((s.name, cfg, pos))) for cfg in res.configs for pos in res.schemes
            for s in res.setups]
    recs = [r for r in recs if r[3] is not None and "engine_share" in r[3]]
    if not recs:
        return
    out("")
    out("Where a step goes (bench_model's TimedEngine: wall time inside the engine's calls):")
    out("")
    out("| config | pos | setup | ms/step | in the engine | linear + head: ms, GFLOP/s (% of peak) | "
        "attention: ms, GFLOP/s (% of peak) | outside the engine, ms | MFU were the outside free |")
    out("|---|---|---|---|---|---|---|---|---|")
    for cfg, pos, s, rec in recs:
        peak = res.peak(s.peak)[0]
        step = num(rec.get("ms_per_step"))

        def rate(key):
            g = num(rec.get(key))
            return f"{fmt(g, '.0f')} ({fmt(100 * g / peak, '.0f')}%)" if peak > 0 else fmt(g, ".0f")
        share = num(rec.get("engine_share"))
        out(f"| {cfg} | {pos} | {s.name} | {rec.get('ms_per_step')} | {fmt(100 * share, '.0f')}% | "
            f"{rec.get('linear_ms')}, {rate('linear_gflops')} | {rec.get('attention_ms')}, "
            f"{rate('attention_gflops')} | {fmt(step * (1 - share), '.1f')} | "
            f"{fmt(100 * num(rec.get('engine_gflops')) / peak, '.0f') if peak > 0 else '-'}% |")


def torch_table(res, out):
    """PyTorch's own rows: each mode's best run per (config, pos)."""
    if not res.baselines:
        return
    out("")
    out("PyTorch (scripts/torch/torch_baseline.py, best run of each mode):")
    out("")
    out("| config | pos | PyTorch side | tokens/s | fwd ms | bwd ms | opt ms | ms/step | peak RSS MiB |")
    out("|---|---|---|---|---|---|---|---|---|")
    for cfg in res.configs:
        for pos in res.schemes:
            for b in res.baselines:
                rec = res.best.get((b.name, cfg, pos))
                if rec:
                    out(f"| {cfg} | {pos} | {b.name} | {num(rec.get('tokens_per_s')):.0f} | {rec.get('fwd_ms')} | "
                        f"{rec.get('bwd_ms')} | {rec.get('opt_ms')} | {rec.get('ms_per_step')} | "
                        f"{rec.get('rss_mb', 'n/a')} |")


def targets(res, rows, out):
    """One row per target: the measured values (range over its rows) and the verdict;
    then every row of every target."""
    checks = []   # (target text, config, pos, measured text, verdict)
    for s in res.setups:
        bname = BASELINES[s.baseline].name
        for cfg, pos, rs, rec, speedup, mfu in rows:
            if rs is s and speedup is not None:
                checks.append((f"{s.name} >= {s.speedup_target:g}x {bname}'s tokens/s, every config and scheme",
                               cfg, pos, f"{speedup}x", verdict(float(speedup), s.speedup_target, "min")))
    for name, over, limits in RATIO_TARGETS:
        if not any(s.name == name for s in res.setups) or not any(s.name == over for s in res.setups):
            continue
        for cfg, limit in limits.items():
            for pos in res.schemes:
                r = res.tokens(name, cfg, pos) / res.tokens(over, cfg, pos)
                if not math.isnan(r):
                    checks.append((f"{name} >= {limit:g}x {over}'s tokens/s on {cfg}", cfg, pos, f"{r:.2f}x",
                                   verdict(float(f"{r:.2f}"), limit, "min")))
    for s in res.setups:
        for cfg, limit in MFU_TARGETS.get(s.name, {}).items():
            for c, pos, rs, rec, speedup, mfu in rows:
                if rs is s and c == cfg and not math.isnan(mfu):
                    checks.append((f"{s.name}: MFU >= {100 * limit:g}% of the {PEAKS[s.peak].label} on {cfg}",
                                   cfg, pos, f"{100 * mfu:.1f}%", verdict(mfu, limit, "min")))
    for s in res.setups:
        for cfg, pos, rs, rec, speedup, mfu in rows:
            if rs is s:
                checks.append((f"{s.name}: peak RSS <= {RSS_TARGET:g}x the accounting", cfg, pos,
                               f"{rec.get('rss_ratio')}x", verdict(num(rec.get("rss_ratio")), RSS_TARGET, "max")))
    kernels = res.all("scheme_kernels")
    for s in SETUPS:
        for pos, limit in SCHEME_TARGETS.items():
            for cfg in res.configs:
                r = next((r for r in kernels if setup_of(None, r) is s and r.get("config") == cfg
                          and r.get("pos") == pos), None)
                if r is not None:
                    pct = r.get("vs_learned_pct")
                    checks.append((f"{pos} adds <= {limit:g}% of a step to learned's ({s.name}, kernel by kernel)",
                                   cfg, pos, f"{pct}%", verdict(num(pct), limit, "max")))
    checks = [c + ("",) for c in checks] + targets_37(res, rows)
    if not checks:
        return
    out("")
    out("Targets (this run; a target is met when every one of its rows is; a row the run cannot judge says "
        "why and counts neither way; a missed #37 target says what bounds it, from its lowest row):")
    out("")
    out("| target | rows | measured | verdict |")
    out("|---|---|---|---|")
    for target in dict.fromkeys(c[0] for c in checks):
        mine = [c for c in checks if c[0] == target]
        judged = [c for c in mine if c[4] in ("met", "MISSED")]
        shown = [c for c in (judged or mine) if not math.isnan(num(c[3].rstrip("x%")))]
        by_value = sorted(shown, key=lambda c: num(c[3].rstrip("x%")))
        lo, hi = (by_value[0][3], by_value[-1][3]) if by_value else ("-", "-")   # as printed in the rows
        measured = lo if lo == hi else f"{lo} to {hi}"
        missed = [c for c in by_value if c[4] == "MISSED"]
        cfgs = ", ".join(dict.fromkeys(c[1] for c in mine if c[1] != "-")) or "-"
        others = "; ".join(dict.fromkeys(c[4] for c in mine if c not in judged))
        if not judged:
            text = others
        else:
            text = "met" if not missed else f"MISSED ({len(missed)} of {len(judged)})"
            if missed and missed[0][5]:
                text += f": {missed[0][5]}"
            if others:
                text += f"; other rows {others}"
        out(f"| {target} | {len(mine)} ({cfgs}) | {measured} | {text} |")
    out("")
    out("Every row:")
    out("")
    out("| target | config | pos | measured | verdict |")
    out("|---|---|---|---|---|")
    for c in checks:
        out("| " + " | ".join(c[:4]) + " | " + c[4] + (f": {c[5]}" if c[4] == "MISSED" and c[5] else "") + " |")


def targets_37(res, rows):
    """Issue #37's targets, one check per row: (target, config, pos, measured, verdict, bound).
    verdict: met, MISSED, or why the run cannot judge the row ("not run here: ...");
    bound: for a missed row, what bounds it, where the run shows it."""
    checks = []
    setups = {s.name: s for s in res.setups}
    unavailable = {(r.get("engine"), r.get("precision")): r.get("reason", "?") for r in res.all("engine_unavailable")}

    def not_run(cfg):
        return f"not run: config {cfg} not in this run's CONFIGS"

    # T1: the default ./train against the fastest fp32 engine, on M, every scheme
    auto = next(iter(res.all("auto", config="M")), None) or res.first.get("auto")
    engine = auto.get("engine") if auto else None
    auto_setup = most_specific([s for s in SETUPS if s.kind == "ropelab" and s.where.get("precision", "fp32") == "fp32"],
                               {"engine": engine, "precision": "fp32"}) if engine in ENGINE_NAMES else None
    label = (f"#37: the default ./train (matmul = auto: {auto_setup.name if auto_setup else engine or '?'} here) "
             f">= {100 * T37_AUTO:g}% of the fastest fp32 engine's tokens/s on M, every scheme")
    fp32 = [s for s in res.setups if s.kind == "ropelab" and s.where.get("precision", "fp32") == "fp32"]
    if auto is None:
        checks.append((label, "M", "-", "-", "not judged: no auto record (results from before bench_model "
                       "printed '# auto fp32')", ""))
    elif auto_setup is None:
        checks.append((label, "M", "-", "-", f"not judged: auto's engine '{engine}' is no setup of this report", ""))
    elif "M" not in res.configs:
        checks.append((label, "M", "-", "-", not_run("M"), ""))
    else:
        for pos in res.schemes:
            toks = {s.name: res.tokens(s.name, "M", pos) for s in fp32}
            toks = {n: t for n, t in toks.items() if not math.isnan(t)}
            if auto_setup.name not in toks or len(toks) < 2:
                checks.append((label, "M", pos, "-", "not judged: needs auto's engine and the other fp32 engine "
                               "measured (ENGINES)", ""))
                continue
            fastest = max(toks, key=toks.get)
            r = float(f"{100 * toks[auto_setup.name] / toks[fastest]:.1f}")
            bound = (f"auto picks {auto_setup.name} ({auto.get('choice', '?')}), {fastest} is "
                     f"{toks[fastest] / toks[auto_setup.name]:.2f}x faster here: auto's trial "
                     "(src/train/matmul_auto.c)")
            checks.append((label, "M", pos, f"{r:.1f}%", verdict(r, 100 * T37_AUTO, "min"), bound))

    # T2: oneDNN bf16's MFU on M, on a CPU with native bf16
    name = "oneDNN bf16"
    label = (f"#37: {name}: MFU >= {100 * T37_BF16_MFU:g}% of the {PEAKS['onednn_bf16'].label} on M "
             "(a CPU with native bf16)")
    isa = res.first.get("machine", {}).get("isa")
    describe = next((r.get("describe", "") for r in res.all("matmul_engine", engine="onednn", precision="bf16")), "")
    native = "emulated" not in describe and (isa is None or any(f in isa.split() for f in ("avx512_bf16", "amx_bf16")))
    mine = [(pos, rec, mfu) for cfg, pos, s, rec, speedup, mfu in rows if s.name == name and cfg == "M"]
    if ("onednn", "bf16") in unavailable:
        checks.append((label, "M", "-", "-", "not run here: no native bf16 on this CPU (oneDNN bf16 unavailable; "
                       "the header says why)", ""))
    elif not mine:
        checks.append((label, "M", "-", "-", not_run("M") if "M" not in res.configs
                       else "not run: onednn-bf16 not in this run's ENGINES", ""))
    else:
        peak = res.peak(setups[name].peak)[0]
        for pos, rec, mfu in mine:
            share, eg = num(rec.get("engine_share")), num(rec.get("engine_gflops"))
            bound = ("" if math.isnan(share) else
                     f"outside the engine (the model's fp32 work) {100 * (1 - share):.0f}% of the step; the engine's "
                     f"calls at {fmt(100 * eg / peak, '.0f')}% of its peak")
            checks.append((label, "M", pos, f"{100 * mfu:.1f}%",
                           verdict(mfu, T37_BF16_MFU, "min") if native
                           else "not judged: no native bf16 here (oneDNN emulates it)", bound))

    # T3: attention's GFLOP/s over its setup's own peak, on M and L
    label = f"#37: attention >= {100 * T37_ATTENTION:g}% of the setup's own peak on M and L, every setup and scheme"
    for cfg in ("M", "L"):
        mine = [(pos, s, rec) for c, pos, s, rec, speedup, mfu in rows if c == cfg]
        if cfg not in res.configs:
            checks.append((label, cfg, "-", "-", not_run(cfg), ""))
        for pos, s, rec in mine:
            g, peak = num(rec.get("attention_gflops")), res.peak(s.peak)[0]
            if math.isnan(g) or not peak > 0:
                checks.append((label, cfg, f"{pos}, {s.name}", "-", "not judged: no attention_gflops or no peak", ""))
                continue
            r = float(f"{100 * g / peak:.1f}")
            flags = "" if s.where.get("engine") is None else \
                f" --matmul {s.where['engine']} --precision {s.where.get('precision', 'fp32')}"
            bound = (f"attention {g:.0f} GFLOP/s, {rec.get('attention_ms')} of {rec.get('ms_per_step')} ms/step; "
                     f"where its time goes: bash bench/profile.sh --config {cfg}{flags}")
            checks.append((label, cfg, f"{pos}, {s.name}", f"{r:.1f}%", verdict(r, 100 * T37_ATTENTION, "min"), bound))

    # T4: config M's longest context in today's memory, the best setup's
    # (the accounting covers every setup; the best is among those this CPU runs)
    mem = [r for r in res.all("memory", config="M") if num(r.get("T")) > 0
           and (r.get("engine"), r.get("precision")) not in unavailable]
    label = f"#37: config M (B 8): the best setup's longest T in today's memory >= {T37_CONTEXT:g}x T"
    if not mem:
        checks.append((label, "M", "-", "-", "not run: M not in this run's MEMORY_CONFIGS", ""))
    else:
        best = max(mem, key=lambda r: num(r.get("longest_t_today")))
        x = num(best.get("longest_t_today")) / num(best.get("T"))
        tot = num(best.get("token_b"))

        def share(key):
            return f"{fmt(100 * num(best.get(key)) / tot, '.0f')}%"
        limit = best.get("limit_today", "budget")
        bound = (f"{ENGINE_NAMES.get(best.get('engine'), best.get('engine'))} {best.get('precision')} "
                 f"{best.get('attention')} reaches T {best.get('longest_t_today')} (B {best.get('B')}); "
                 + (f"the model refuses more: {limit}; " if limit != "budget" else "")
                 + f"per token of context {fmt(tot / 1024, '.1f')} KiB: layers' saved tensors "
                 f"{share('token_layers_b')}, logits {share('token_logits_b')}, other activations "
                 f"{share('token_other_b')}, engine {share('token_engine_b')}")
        x = float(f"{x:.2f}")
        checks.append((label, "M", best.get("pos", "-"), f"{x:.2f}x", verdict(x, T37_CONTEXT, "min"), bound))

    # T5: every setup ahead of its PyTorch side, every config and scheme
    label = f"#37: every setup >= {T37_TORCH:g}x its PyTorch side's tokens/s (same precision), every config and scheme"
    for s in res.setups:
        bname = BASELINES[s.baseline].name
        mine = [(cfg, pos, rec, speedup) for cfg, pos, rs, rec, speedup, mfu in rows if rs is s]
        if not any(speedup is not None for *_, speedup in mine):
            checks.append((label, "-", s.name, "-", f"not judged: no PyTorch rows ({bname}"
                           + (": NO_TORCH set or torch not installed)" if not res.baselines else ")"), ""))
            continue
        for cfg, pos, rec, speedup in mine:
            if speedup is None:
                continue
            base = res.best.get((bname, cfg, pos))
            share = num(rec.get("engine_share"))
            bound = (f"{bname} {num(base.get('tokens_per_s')):.0f} vs {num(rec.get('tokens_per_s')):.0f} tokens/s"
                     + ("" if math.isnan(share) else
                        f"; ropelab's step {100 * (1 - share):.0f}% outside the engine"))
            checks.append((label, cfg, f"{pos}, {s.name}", f"{speedup}x", verdict(float(speedup), T37_TORCH, "min"),
                           bound))
    return checks


def scheme_setups(res, recs):
    """[(setup, its records)] for the setups the scheme records belong to, in SETUPS order."""
    return [(s, [r for r in recs if setup_of(None, r) is s]) for s in SETUPS
            if any(setup_of(None, r) is s for r in recs)]


def scheme_tables(res, out):
    compare = res.all("scheme_compare")
    if compare:
        groups = scheme_setups(res, compare)
        many = len(groups) > 1 or groups[0][0] is not SETUPS[0]   # a `setup` column
        steps = res.first.get("bench", {}).get("scheme_steps") or compare[0].get("steps", "?")
        out("")
        out("Scheme overhead: all four schemes built in one process and trained in turn, one step each, in")
        out(f"rotating order, on the same batches, for {steps} rounds. Per scheme: the median of its step time")
        out("divided by learned's in the same round (drift cancels within a round), with the quartiles of that")
        out("ratio, and its fastest step against learned's fastest (noise only ever adds time)"
            + (", on each setup's matmul engine:" if many else ":"))
        out("")
        configs = [c for c in res.configs if any(r.get("config") == c for r in compare)]
        others = [r.get("pos") for r in groups[0][1] if r.get("config") == configs[0] and r.get("pos") != "learned"]
        out("| config | " + ("setup | " if many else "") + "learned ms/step (fastest) | "
            + " | ".join(f"{p} vs learned: median [q1, q3]; fastest" if i == 0 else p for i, p in enumerate(others))
            + " |")
        out("|---|" + ("---|" if many else "") + "---|" + "---|" * len(others))
        for cfg in configs:
            for s, srecs in groups:
                recs = {r.get("pos"): r for r in srecs if r.get("config") == cfg}
                if not recs:
                    continue
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
                out(f"| {cfg} | " + (f"{s.name} | " if many else "") + " | ".join(cells) + " |")
    kernels = res.all("scheme_kernels")
    if not kernels:
        return
    groups = scheme_setups(res, kernels)
    many = len(groups) > 1 or groups[0][0] is not SETUPS[0]
    out("")
    out("The same, kernel by kernel: the work each scheme adds to a step (embedding hook, L x q/k rotation,")
    out("bias table and gradient + L x (attention with the bias - without it)), fastest of 30, on each")
    out("model's own buffers, as a share of learned's fastest step above"
        + (" (these kernels are fp32 on every engine;\nwhat changes with the engine is the step they are a share of):"
           if many else ":"))
    out("")
    configs = [c for c in res.configs if any(r.get("config") == c for r in kernels)]
    others = [r.get("pos") for r in groups[0][1] if r.get("config") == configs[0] and r.get("pos") != "learned"]
    out("| config | " + ("setup | " if many else "") + "learned's fastest step ms | learned ms (share) | "
        + " | ".join(f"{p} ms (vs learned)" if i == 0 else p for i, p in enumerate(others)) + " |")
    out("|---|" + ("---|" if many else "") + "---|---|" + "---|" * len(others))
    for cfg in configs:
        for s, srecs in groups:
            recs = {r.get("pos"): r for r in srecs if r.get("config") == cfg}
            if not recs:
                continue
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
            out(f"| {cfg} | " + (f"{s.name} | " if many else "") + " | ".join(cells) + " |")


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


def attention_table(res, out):
    recs = [r for r in res.all("attention") if r.get("variant")]
    if not recs:
        return
    out("")
    out("Attention alone (build/bench_attention: one forward + backward of one layer, no bias; ms, "
        "median of alternating rounds; speed-up = median over rounds of OpenBLAS's time / the variant's):")
    out("")
    out("| config | products on | fwd + bwd ms | fwd ms | bwd ms | GFLOP/s | speed-up | max rel. difference |")
    out("|---|---|---|---|---|---|---|---|")
    for r in recs:
        out(f"| {r.get('config')} | {r.get('variant')} | {r.get('fwd_bwd_ms')} | {r.get('fwd_ms')} | "
            f"{r.get('bwd_ms')} | {r.get('gflops')} | {r.get('speedup_vs_fp32_openblas')}x | {r.get('max_rel_diff')} |")


ENGINE_NAMES = {"openblas": "OpenBLAS", "onednn": "oneDNN"}


def memory_tables(res, out):
    """build/bench_memory's records: the memory at each config's T, the longest T that fits, and
    what one more token of context costs, part by part (all from the program's accounting)."""
    recs = res.all("memory")
    if not recs:
        return

    def setup(r):
        return f"{ENGINE_NAMES.get(r.get('engine'), r.get('engine'))} {r.get('precision')} {r.get('attention', '')}"

    def longest(r, which):
        limit = r.get(f"limit_{which}", "budget")
        return (f"{r.get(f'longest_t_{which}')} ({r.get(f'{which}_x')}x)"
                + ("" if limit == "budget" else f" [model limit: {limit}]"))
    gib = recs[0].get("budget_gib", "?")
    out("")
    out(f"Memory and the longest context (build/bench_memory: footprint_train, the accounting ./train checks; "
        f"engine scratch at threads={recs[0].get('threads', '?')}; nothing trained). Today's memory: what the same "
        "engine and precision with the blocked attention need at the config's T:")
    out("")
    out("| config | setup | B, T | at T, MiB: state + activations + engine = total | KiB per token of context | "
        f"longest T in today's memory (x T) | longest T in {gib} GiB (x T) | "
        f"recomputation estimate: longest T today's, {gib} GiB |")
    out("|---|---|---|---|---|---|---|---|")
    for r in recs:
        out(f"| {r.get('config')} | {setup(r)} | {r.get('B')}, {r.get('T')} | {r.get('state_mb')} + {r.get('act_mb')} + "
            f"{r.get('engine_mb')} = {r.get('total_mb')} | {fmt(num(r.get('token_b')) / 1024, '.1f')} | "
            f"{longest(r, 'today')} | {longest(r, 'budget')} | {r.get('recompute_t_today')}, "
            f"{r.get('recompute_t_budget')} |")
    for r in res.all("memory_fused"):
        out(f"Fused over blocked, {r.get('config')} {ENGINE_NAMES.get(r.get('engine'), r.get('engine'))} "
            f"{r.get('precision')}: longest T {r.get('longest_t_fused_today')} / {r.get('longest_t_blocked_today')} "
            f"= {fmt(num(r.get('ratio_today')), '.2f')}x in today's memory, {r.get('longest_t_fused_budget')} / "
            f"{r.get('longest_t_blocked_budget')} = {fmt(num(r.get('ratio_budget')), '.2f')}x in "
            f"{r.get('budget_gib')} GiB.")
    out("")
    out("What one more token of context costs (at the config's B; bytes, and share): the layers' saved "
        "tensors, the logits (B, T, V), the other activations (embedding output, ln_f, cross-entropy, the "
        "backward's one-layer scratch), the engine's buffers (attention scratch; bf16: kept rounded inputs), "
        "the state (the scheme's tables):")
    out("")
    out("| config | setup | bytes | layers | logits | other activations | engine | state |")
    out("|---|---|---|---|---|---|---|---|")
    for r in recs:
        tot = num(r.get("token_b"))

        def part(key):
            v = num(r.get(key))
            return f"{v:.0f} ({fmt(100 * v / tot, '.1f')}%)"
        out(f"| {r.get('config')} | {setup(r)} | {r.get('token_b')} | {part('token_layers_b')} | "
            f"{part('token_logits_b')} | {part('token_other_b')} | {part('token_engine_b')} | "
            f"{part('token_state_b')} |")
    out("")
    out("Recomputation estimate (not the program's): each layer keeps only its input, one (B, T, C) fp32 tensor, "
        "and one layer's saved tensors are live at a time; the longest T extrapolated linearly from the "
        "footprint at T.")


def report(records, out=print):
    res = Results(records)
    header(res, out)
    rows = main_table(res, out)
    memory_table(res, out)
    split_table(res, out)
    torch_table(res, out)
    scaling_table(res, out)
    scheme_tables(res, out)
    rope_micro(res, out)
    attention_table(res, out)
    memory_tables(res, out)
    targets(res, rows, out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: bench_report.py RESULTS_FILE (written by bench/bench.sh)", file=sys.stderr)
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
