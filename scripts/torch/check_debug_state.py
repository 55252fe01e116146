#!/usr/bin/python3
"""check_debug_state.py: recomputes a debug state of `./train --debug-state FILE`
in float64 PyTorch and compares loss and gradients with the file.

    scripts/torch/check_debug_state.py FILE        check FILE; exit 0 ok, 1 mismatch, 2 bad file
    scripts/torch/check_debug_state.py --self-test write debug states with PyTorch in
                                             float32 (and with deliberately wrong
                                             models), check that the right ones pass
                                             and the wrong ones fail

The debug state (docs/FORMAT.md, "The debug state") is a safetensors file with
every parameter under its contract name, `inputs` and `targets` (I32 [B,T]),
`loss` (F32 [1]) and `grad.NAME` for every parameter, plus the model metadata.
"""

import argparse
import io
import math
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402

# Tolerances. The file was computed in float32 (unit roundoff u = 6e-8) and
# the reference is float64 from the same float32 weights, so the only honest
# difference is float32 rounding. A gradient entry is a sum of up to B*T*4C
# products (weight gradients sum over the batch); with random-order rounding
# its error is about sqrt(K) u |terms| ~ 1e-5 of the tensor's scale at most
# for our sizes; the self-test measures ~1e-6 for PyTorch float32. 1e-3 leaves
# two orders of margin for a different summation order (blocked BLAS, OpenMP
# reductions) and still flags any real bug, which moves a gradient by O(1)
# of its scale (wrong index, sign, missing term, wrong rope pairing ...).
# The loss is one number: a mean of B*T terms of size ~log V; float32 gives
# ~1e-7 relative (pairwise or double accumulation), naive float accumulation
# of a few thousand terms ~1e-6; 1e-5 is tight enough to catch e.g. exact
# GELU in place of the tanh approximation.
LOSS_REL_TOL = 1e-5
GRAD_REL_TOL = 1e-3
# bf16 products (a debug state with metadata precision = bf16): the reference
# rounds the same product inputs to bf16 (tm.Bf16Linear for the linear layers
# and the head, tm.Bf16Attention for attention's), so what remains is
# float32 against float64 plus rounding flips: the C program's fp32 inputs
# differ from the reference's by ~1e-6 relative, and an input that falls that
# close to a bf16 rounding midpoint rounds the other way: one bf16 ulp, 2^-7
# of that input, which moves its product term by up to 2^-7 of the term and
# spreads through the layers above (measured: hundreds of entries at 1e-4,
# the worst near 1e-3). A gradient entry may therefore differ by one ulp of
# the tensor's largest entry: 2^-7. The loss is a mean over B*T positions in
# which the flips average out: the float32 tolerance holds (measured 1e-8).
# The rounding itself (to nearest even, in which products) is checked
# product by product in tests/test_model_linear.c.
GRAD_REL_TOL_BF16 = 2.0 ** -7
# c_attn gradients are also checked per q / k / v block, each relative to
# its own max |g| but at least PART_FLOOR x the whole tensor's (the k bias
# gradient is exactly zero in exact arithmetic unless pos=rope: softmax is
# invariant to a constant added to every score of a row).
PART_FLOOR = 1e-2


class BadFile(Exception):
    """A debug-state file that cannot be checked (message: "path: problem")."""


def read_debug_state(path):
    """-> cfg, params (name -> float64), inputs, targets (long), loss (float), grads (name -> float64)."""
    try:
        tensors, meta = tm.load_safetensors(path)
    except tm.SafetensorsError as e:
        raise BadFile(str(e)) from None
    try:
        cfg = tm.GPTConfig.from_metadata(meta)
    except ValueError as e:
        raise BadFile(f"{path}: {e}") from None
    shapes = {n: tuple(p.shape) for n, p in tm.GPT(cfg).named_parameters()}

    def get(name, dtype, shape=None):
        if name not in tensors:
            raise BadFile(f"{path}: tensor '{name}' missing")
        t = tensors[name]
        if t.dtype != dtype:
            raise BadFile(f"{path}: tensor '{name}' has dtype {tm.st_dtype_name(t.dtype) or t.dtype}, "
                          f"expected {tm.st_dtype_name(dtype)}")
        if shape is not None and tuple(t.shape) != shape:
            raise BadFile(f"{path}: tensor '{name}' has shape {list(t.shape)}, expected {list(shape)}")
        return t

    params = {n: get(n, torch.float32, s).double() for n, s in shapes.items()}
    grads = {n: get("grad." + n, torch.float32, s).double() for n, s in shapes.items()}
    inputs = get("inputs", torch.int32)
    if inputs.dim() != 2 or inputs.shape[0] < 1 or inputs.shape[1] < 1:
        raise BadFile(f"{path}: tensor 'inputs' has shape {list(inputs.shape)}, expected [B, T]")
    targets = get("targets", torch.int32, tuple(inputs.shape))
    loss = get("loss", torch.float32, (1,))
    for name, t in (("inputs", inputs), ("targets", targets)):
        if t.min() < 0 or t.max() >= cfg.vocab_size:
            raise BadFile(f"{path}: '{name}' holds tokens outside 0..{cfg.vocab_size - 1}")
    if cfg.pos == "learned" and inputs.shape[1] > cfg.block_size:
        raise BadFile(f"{path}: T ({inputs.shape[1]}) exceeds block_size ({cfg.block_size})")
    known = set(shapes) | {"grad." + n for n in shapes} | {"inputs", "targets", "loss"}
    extra = sorted(set(tensors) - known)
    if extra:
        raise BadFile(f"{path}: unexpected tensor '{extra[0]}' for pos={cfg.pos}")
    precision = meta.get("precision", "fp32")   # files written before the key: fp32
    if precision not in ("fp32", "bf16"):
        raise BadFile(f"{path}: metadata precision '{precision}' is not fp32 or bf16")
    attention = meta.get("attention", "blocked")   # written only for the fused attention
    if attention not in ("blocked", "fused"):
        raise BadFile(f"{path}: metadata attention '{attention}' is not blocked or fused")
    return cfg, params, inputs.long(), targets.long(), float(loss[0]), grads, precision == "bf16", attention == "fused"


def reference(cfg, params, inputs, targets, bf16=False, fused=False):
    """float64 loss and gradients of the contract model at the given weights;
    with bf16, every product's inputs rounded to bf16 as the C program's
    precision=bf16 rounds them (tm.Bf16Linear), the sums still float64; with
    fused too, attention as the fused attention evaluates it (tm.Bf16FusedAttention).
    (In fp32 the two attentions differ only in float rounding.)"""
    model = tm.GPT(cfg).double().set_bf16_products(bf16, fused)
    model.load_state_dict(params, strict=True)
    _, loss = model(inputs, targets)
    loss.backward()
    return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def parts(name, ref, got):
    """(label, ref, got, scale): the whole tensor, plus q/k/v blocks of c_attn."""
    whole = ref.abs().max().item()
    yield name, ref, got, whole
    if name.endswith("attn.c_attn.weight") or name.endswith("attn.c_attn.bias"):
        C = ref.shape[0] // 3
        for i, label in enumerate("qkv"):
            r, g = ref[i * C:(i + 1) * C], got[i * C:(i + 1) * C]
            yield f"{name}[{label}]", r, g, max(r.abs().max().item(), PART_FLOOR * whole)


def check_file(path, loss_tol=LOSS_REL_TOL, grad_tol=None, out=sys.stdout):
    """Checks one file; returns (exit code, worst loss rel error, worst grad rel error).
    grad_tol None: GRAD_REL_TOL, or GRAD_REL_TOL_BF16 for a bf16 debug state."""
    try:
        cfg, params, inputs, targets, loss, grads, bf16, fused = read_debug_state(path)
    except BadFile as e:
        print(e, file=sys.stderr)
        return 2, math.nan, math.nan
    if grad_tol is None:
        grad_tol = GRAD_REL_TOL_BF16 if bf16 else GRAD_REL_TOL
    B, T = inputs.shape
    print(f"{path}: pos={cfg.pos} L={cfg.n_layer} H={cfg.n_head} C={cfg.d_model} "
          f"V={cfg.vocab_size} block_size={cfg.block_size} B={B} T={T}{' bf16 products' if bf16 else ''}{', fused attention' if fused else ''}", file=out)
    if T > 1 and not torch.equal(inputs[:, 1:], targets[:, :-1]):
        print("note: targets[:, t] != inputs[:, t+1] somewhere (not a contract error)", file=out)
    ref_loss, ref_grads = reference(cfg, params, inputs, targets, bf16, fused)
    ok = True
    loss_rel = abs(loss - ref_loss) / abs(ref_loss)
    flag = "ok" if loss_rel <= loss_tol else "FAIL"
    ok &= flag == "ok"
    print(f"loss: file {loss:.9g} reference {ref_loss:.9g} rel err {loss_rel:.2e} "
          f"(tol {loss_tol:.0e}) {flag}", file=out)
    print(f"{'tensor':<34} {'max|g|':>10} {'max abs err':>12} {'rel err':>9}", file=out)
    worst = 0.0
    for name in params:
        for label, r, g, scale in parts(name, ref_grads[name], grads[name]):
            err = (r - g).abs().max().item()
            rel = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
            good = rel <= grad_tol            # False for NaN
            ok &= good
            worst = max(worst, rel) if not math.isnan(rel) else math.inf
            print(f"{label:<34} {scale:10.3e} {err:12.3e} {rel:9.2e}{'' if good else '  FAIL'}",
                  file=out)
    print(f"{'OK' if ok else 'MISMATCH'}: loss rel err {loss_rel:.2e} (tol {loss_tol:.0e}), "
          f"worst grad rel err {worst:.2e} (tol {grad_tol:.0e})", file=out)
    return (0 if ok else 1), loss_rel, worst


# ----------------------------------------------------------------------------
# Self-test: debug states written by PyTorch in float32, right and wrong


def randomise(model, seed):
    """Weights large enough that positions matter (O(1) attention scores)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if name.endswith(("ln_1.weight", "ln_2.weight")) or name == "ln_f.weight":
                val = 1.0 + 0.2 * r
            elif name.endswith(".bias"):
                val = 0.1 * r
            elif name in ("wte", "wpe", "rel_bias"):
                val = r
            else:                                     # linear weight [out, in]
                val = r / math.sqrt(p.shape[1])
            p.copy_(val)


def write_debug_state(path, cfg, B, T, seed, mutate=None):
    """Writes a float32 debug state. mutate(model) may return (model_for_grads,
    fix_grads): the loss and gradients are then those of a deliberately wrong
    model, while the parameters written are the right ones."""
    torch.manual_seed(seed)
    model = tm.GPT(cfg)
    randomise(model, seed)
    tokens = torch.randint(0, cfg.vocab_size, (B, T + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    run, fix = model, None
    if mutate is not None:
        run, fix = mutate(model) or (model, None)
    _, loss = run(inputs, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in run.named_parameters()}
    if fix is not None:
        grads = fix(grads)
    out = dict(params)
    out.update({"inputs": inputs.int(), "targets": targets.int(), "loss": loss.detach().reshape(1)})
    out.update({"grad." + n: g for n, g in grads.items()})
    tm.save_safetensors(path, out, cfg.to_metadata())


@contextmanager
def patched(name, fn):
    old = getattr(tm, name)
    setattr(tm, name, fn)
    try:
        yield
    finally:
        setattr(tm, name, old)


def rope_rotate_half(u, cos, sin):
    """GPT-NeoX layout (pairs i, i + R/2): the layout the contract rules out."""
    R = 2 * cos.shape[1]
    x0, x1 = u[..., :R // 2], u[..., R // 2:R]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos, u[..., R:]), dim=-1)


def rope_theta_from_d(T, R, rope_base, *scaling, D=8):
    """theta_i = base^(-2i/D) with D the head width (8 in the self-test), not R."""
    theta = rope_base ** (-2.0 * torch.arange(R // 2, dtype=torch.float64) / D)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    return torch.cos(angle), torch.sin(angle)


_sinusoidal_table = tm.sinusoidal_table


def sinusoidal_swapped(T, C, scale=1.0):
    pe = _sinusoidal_table(T, C, scale)
    return torch.stack((pe[:, 1::2], pe[:, 0::2]), dim=-1).reshape(T, C)


_rope_cos_sin = tm.rope_cos_sin


def rope_yarn_no_temperature(T, R, base, scaling="none", factor=1.0, *rest):
    cos, sin = _rope_cos_sin(T, R, base, scaling, factor, *rest)
    t = 0.1 * math.log(factor) + 1.0 if scaling == "yarn" and factor > 1 else 1.0
    return cos / t, sin / t


def rope_yarn_paper_ramp(T, R, base, scaling="none", factor=1.0, *rest):
    return _rope_cos_sin(T, R, base, "yarn_paper" if scaling == "yarn" else scaling, factor, *rest)


def rope_dynamic_unscaled(T, R, base, scaling="none", factor=1.0, *rest):
    return _rope_cos_sin(T, R, base, "none" if scaling == "dynamic" else scaling, factor, *rest)


def rope_ntk_as_linear(T, R, base, scaling="none", factor=1.0, *rest):
    return _rope_cos_sin(T, R, base, "linear" if scaling == "ntk" else scaling, factor, *rest)


def sinusoidal_unscaled(T, C, scale=1.0):
    return _sinusoidal_table(T, C)


def t5_bucket_round(n, nb, md):
    e = nb // 2
    return n if n < e else min(nb - 1, e + round(math.log(n / e) / math.log(md / e) * (nb - e)))


def alibi_naive(H):
    return [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)]


def mutant_wpe_shift(model):
    """Position t reads wpe[t+1]: the gradient lands one row off."""
    with torch.no_grad():
        model.wpe.copy_(torch.roll(model.wpe, -1, dims=0))
    return model, lambda g: {**g, "wpe": torch.roll(g["wpe"], 1, dims=0)}


def mutant_t5_bias_before_scale(model):
    """s = (q.k + bias)/sqrt(D): same as scaling rel_bias by 1/sqrt(D)."""
    k = 1.0 / math.sqrt(model.cfg.head_dim)
    with torch.no_grad():
        model.rel_bias.mul_(k)
    return model, lambda g: {**g, "rel_bias": g["rel_bias"] * k}


def mutant_gelu_erf(model):
    for block in model.h:
        block.mlp.gelu = nn.GELU()
    return model, None


def self_test(tmpdir):
    base = dict(n_layer=2, n_head=4, d_model=32, vocab_size=40, block_size=16)
    B, T = 2, 12
    cases = [  # (label, config overrides, T)
        ("rope", dict(pos="rope"), T),
        ("rope-partial", dict(pos="rope", rope_dims=4, rope_base=500.0), T),
        ("learned", dict(pos="learned"), T),
        ("sinusoidal", dict(pos="sinusoidal"), T),
        ("t5", dict(pos="t5", t5_num_buckets=8, t5_max_distance=20, block_size=32), 24),
        ("alibi", dict(pos="alibi"), T),
        ("alibi-H6", dict(pos="alibi", n_head=6, d_model=48), T),
        ("none", dict(pos="none"), T),
        ("sinusoidal-scaled", dict(pos="sinusoidal", sinusoidal_scale=0.25), T),
        ("rope-yarn", dict(pos="rope", rope_scaling="yarn", rope_scaling_factor=4.0, rope_original_length=8,
                           rope_yarn_beta_fast=4.0, rope_yarn_beta_slow=0.1), T),
        ("rope-ntk", dict(pos="rope", rope_scaling="ntk", rope_scaling_factor=4.0), T),
        ("rope-dynamic", dict(pos="rope", rope_scaling="dynamic", rope_scaling_factor=2.0, rope_original_length=8), T),
    ]
    mutants = [  # (case label, description, context manager or None, mutate fn or None)
        ("rope", "rotate-half pairing (GPT-NeoX)", lambda: patched("apply_rope", rope_rotate_half), None),
        ("rope-partial", "theta from D instead of rope_dims", lambda: patched("rope_cos_sin", rope_theta_from_d), None),
        ("learned", "wpe read one row off", None, mutant_wpe_shift),
        ("sinusoidal", "sin and cos swapped", lambda: patched("sinusoidal_table", sinusoidal_swapped), None),
        ("sinusoidal-scaled", "sinusoidal_scale ignored", lambda: patched("sinusoidal_table", sinusoidal_unscaled), None),
        ("rope-yarn", "yarn without its attention temperature", lambda: patched("rope_cos_sin", rope_yarn_no_temperature), None),
        ("rope-yarn", "yarn's ramp in turns (yarn_paper)", lambda: patched("rope_cos_sin", rope_yarn_paper_ramp), None),
        ("rope-ntk", "ntk as linear interpolation", lambda: patched("rope_cos_sin", rope_ntk_as_linear), None),
        ("rope-dynamic", "dynamic's base not grown beyond L", lambda: patched("rope_cos_sin", rope_dynamic_unscaled), None),
        ("t5", "round instead of floor in bucket", lambda: patched("t5_bucket", t5_bucket_round), None),
        ("t5", "bias added before 1/sqrt(D)", None, mutant_t5_bias_before_scale),
        ("alibi-H6", "power-of-two slope formula for H=6", lambda: patched("alibi_slopes", alibi_naive), None),
        ("none", "exact (erf) GELU", None, mutant_gelu_erf),
    ]
    failures = 0
    sink = open(os.devnull, "w")
    cfgs = {}
    for i, (label, over, t) in enumerate(cases):
        cfg = tm.GPTConfig(**{**base, **over}).validate()
        cfgs[label] = (cfg, t, 100 + i)
        path = os.path.join(tmpdir, f"{label}.safetensors")
        write_debug_state(path, cfg, B, t, seed=100 + i)
        code, lrel, grel = check_file(path, out=sink)
        good = code == 0
        failures += not good
        print(f"self-test {label:<13} float32 vs float64: {'pass' if good else 'FAIL'} "
              f"(loss rel {lrel:.1e}, worst grad rel {grel:.1e})")
        if label == "rope":   # a corrupted gradient and a corrupted loss must fail
            tensors, meta = tm.load_safetensors(path)
            bad = dict(tensors)
            g = bad["grad.h.1.mlp.c_fc.weight"].clone()
            g[3, 5] += 1e-2 * g.abs().max()
            bad["grad.h.1.mlp.c_fc.weight"] = g
            p2 = os.path.join(tmpdir, "bad_grad.safetensors")
            tm.save_safetensors(p2, bad, meta)
            bad = dict(tensors)
            bad["loss"] = tensors["loss"] * (1 + 1e-4)
            p3 = os.path.join(tmpdir, "bad_loss.safetensors")
            tm.save_safetensors(p3, bad, meta)
            for what, p in (("one gradient entry +1% of max", p2), ("loss x (1+1e-4)", p3)):
                code, _, _ = check_file(p, out=sink)
                failures += code != 1
                print(f"self-test corrupted: {what:<38} {'detected' if code == 1 else 'MISSED'}")
    for label, desc, ctx, mutate in mutants:
        cfg, t, seed = cfgs[label]
        path = os.path.join(tmpdir, "mutant.safetensors")
        if ctx is not None:
            with ctx():
                write_debug_state(path, cfg, B, t, seed)
        else:
            write_debug_state(path, cfg, B, t, seed, mutate)
        code, lrel, grel = check_file(path, out=sink)
        failures += code != 1
        print(f"self-test mutant {label:<13} {desc:<36} {'detected' if code == 1 else 'MISSED'} "
              f"(loss rel {lrel:.1e}, worst grad rel {grel:.1e})")
    failures += bad_file_tests(tmpdir, cfgs["rope"])
    print(f"self-test: {'all passed' if failures == 0 else f'{failures} FAILED'}")
    return 0 if failures == 0 else 1


def bad_file_tests(tmpdir, rope_case):
    """Bad files must give exit 2 and one line naming the file."""
    cfg, t, seed = rope_case
    good = os.path.join(tmpdir, "good.safetensors")
    write_debug_state(good, cfg, 2, t, seed)
    tensors, meta = tm.load_safetensors(good)
    blob = open(good, "rb").read()
    cases = []

    def add(label, writer):
        p = os.path.join(tmpdir, f"bad_{len(cases)}.safetensors")
        writer(p)
        cases.append((label, p))
    add("truncated file", lambda p: open(p, "wb").write(blob[:-4]))
    add("not safetensors", lambda p: open(p, "wb").write(b"hello world, not a tensor file"))
    add("missing gradient", lambda p: tm.save_safetensors(
        p, {k: v for k, v in tensors.items() if k != "grad.ln_f.bias"}, meta))
    add("wrong gradient shape", lambda p: tm.save_safetensors(
        p, {**tensors, "grad.ln_f.bias": tensors["grad.ln_f.bias"][:-1]}, meta))
    add("missing metadata key", lambda p: tm.save_safetensors(
        p, tensors, {k: v for k, v in meta.items() if k != "n_head"}))
    add("token out of range", lambda p: tm.save_safetensors(
        p, {**tensors, "targets": tensors["targets"] * 0 + cfg.vocab_size}, meta))
    add("wpe present for rope", lambda p: tm.save_safetensors(
        p, {**tensors, "wpe": torch.zeros(cfg.block_size, cfg.d_model)}, meta))
    add("F64 loss", lambda p: tm.save_safetensors(p, {**tensors, "loss": tensors["loss"].double()}, meta))
    add("missing file", lambda p: None)
    failures = 0
    for i, (label, p) in enumerate(cases):
        if i < 2:   # the command line itself, twice (a python start-up each)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), p],
                               capture_output=True, text=True)
            code, msg = r.returncode, r.stderr.strip()
        else:
            err = io.StringIO()
            old, sys.stderr = sys.stderr, err
            try:
                code, _, _ = check_file(p, out=open(os.devnull, "w"))
            finally:
                sys.stderr = old
            msg = err.getvalue().strip()
        good = code == 2 and msg.count("\n") == 0 and msg.startswith(p)
        failures += not good
        print(f"self-test bad file: {label:<24} {'exit 2' if good else 'WRONG'}: {msg}")
    return failures


def main():
    ap = argparse.ArgumentParser(description="Check a ropelab debug state against PyTorch (float64).")
    ap.add_argument("files", nargs="*", metavar="FILE",
                    help="debug-state safetensors files from ./train --debug-state, each checked in turn "
                         "(one process, so PyTorch is imported once)")
    ap.add_argument("--self-test", action="store_true", help="test this checker on PyTorch-written files")
    ap.add_argument("--loss-tol", type=float, default=LOSS_REL_TOL, help="loss relative tolerance")
    ap.add_argument("--grad-tol", type=float, default=None,
                    help=f"gradient tolerance, relative to each tensor's max |g| (default {GRAD_REL_TOL:g}; "
                         f"{GRAD_REL_TOL_BF16:g} for a bf16 debug state)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    if args.self_test:
        with tempfile.TemporaryDirectory() as d:
            return self_test(d)
    if not args.files:
        ap.error("give a FILE or --self-test")
    worst = 0   # the exit code: each file's (0 passed, 1 failed, 2 not a debug state), the largest
    for f in args.files:
        worst = max(worst, check_file(f, args.loss_tol, args.grad_tol)[0])
    return worst


if __name__ == "__main__":
    sys.exit(main())
