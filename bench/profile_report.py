#!/usr/bin/env python3
"""profile_report.py: a perf profile of one bench_model run, grouped by kernel.

Reads `perf script -F ip,sym,dso` text on stdin (or from the file named): one
sample a line, "ADDRESS SYMBOL (DSO)", SYMBOL "[unknown]" where perf has none
(oneDNN's generated code: DSO "[JIT] tid N" or "/tmp/perf-PID.map"). Prints one Markdown row per
group with its share of all samples; counting the samples, not perf
report's rounded percentages, keeps the thousands of JIT addresses that
perf report would each show as 0.00%. bench/profile.sh runs perf and
then this.

The groups are the kernels a training step is made of; a symbol matches the
first group whose pattern it contains (OpenMP outlines a parallel loop of f
as f._omp_fn.N, so the pattern is the C function's name).
"""
import re
import sys

# (group, dsos or None, symbol substrings or None): first match wins.
GROUPS = [
    ("matrix products (oneDNN's generated kernels `[JIT]`, libdnnl, OpenBLAS)",
     ("[JIT]", "/tmp/perf-", "libdnnl", "libopenblas"), None),
    ("rounding activations to bf16 (`to_bf16`)", None, ("to_bf16", "bf16_round")),
    ("attention's softmax and its gradient (`attention_block_probs`, `_dscores`)", None,
     ("attention_block_probs", "attention_block_dscores")),
    ("attention's own loops around its products", None, ("attention",)),
    ("GELU forward + backward", None, ("gelu_",)),
    ("cross-entropy forward + backward", None, ("crossentropy_",)),
    ("positional scheme (`rope_apply`, bias tables, embeddings)", None,
     ("rope_", "pos_", "bias_table", "encoder_")),
    ("bias gradients (`bias_grad`; in bf16 with the rounding of the output gradient)", None, ("bias_grad",)),
    ("LayerNorm, residual adds", None, ("layernorm_", "residual_")),
    ("AdamW, gradient norm", None, ("adamw", "grad_global_norm", "grad_")),
    ("model set-up (parameter init, `cos`/`sin` tables)", None, ("params_init", "__cos", "__sin")),
    ("libgomp (threads waiting at the end of a region)", ("libgomp",), None),
    ("kernel, libc, libm (page faults, memset, maths calls)", ("[kernel", "libc", "libm"), None),
]
OTHER = "other ropelab code"

LINE = re.compile(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def group_of(dso, sym):
    for name, dsos, syms in GROUPS:
        if dsos and any(d in dso for d in dsos):
            return name
        if syms and any(s in sym for s in syms):
            return name
    return OTHER


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    counts = {}
    total = 0
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        g = group_of(m.group(2), m.group(1))
        counts[g] = counts.get(g, 0) + 1
        total += 1
    if total == 0:
        sys.exit("profile_report.py: no samples in the perf script output")
    print(f"| kernel group | share of {total} samples |")
    print("|---|---|")
    for name in [g[0] for g in GROUPS] + [OTHER]:
        if name in counts:
            print(f"| {name} | {100.0 * counts[name] / total:.1f}% |")


if __name__ == "__main__":
    main()
