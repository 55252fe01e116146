#!/usr/bin/python3
"""torch_baseline.py: trains the contract model (scripts/torch/torch_model.py) in
PyTorch on the CPU and reports its speed, as a baseline for ./train.

    scripts/torch/torch_baseline.py --config S --pos rope --threads 2
    scripts/torch/torch_baseline.py --config S --pos rope --threads 2 --autocast bf16
    scripts/torch/torch_baseline.py --n-layer 6 --d-model 256 --n-head 8 --seq-len 256 \
        --batch-size 8 --vocab-size 4096 --pos learned --tokens data/train.bin

Batches are random tokens, or random windows of an llm.c token file (--tokens).
AdamW (torch.optim.AdamW, lr 3e-4, betas 0.9/0.95), with weight decay on wte
and the linear weight matrices only, as ./train (torch_model.decay_param_names).

--autocast bf16: the forward pass and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's own mixed precision
(its autocast op lists decide which ops run in bf16: the matrix products do);
backward follows the forward's dtypes, and the parameters, their gradients
and the optimizer stay fp32. The comparison for ropelab's onednn bf16
engine. Default: off (everything fp32).

The last line is machine-readable, e.g.

    torch pos=rope L=4 C=128 H=4 V=2048 B=32 T=128 threads=2 autocast=off tokens_per_s=4012.3
    ms_per_step=1021.0 fwd_ms=... bwd_ms=... opt_ms=... rss_mb=... steps=10 loss_first=... loss_last=...

(one line): medians over the steps after the warm-up; rss_mb is the process's
peak resident memory (getrusage), MiB, as bench_model's.
"""

import argparse
import contextlib
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402

# The benchmark sizes S, M, L: the one home for Python; bench/util_bench.h's
# CONFIGS is the one for C, and bench/bench.sh checks that the two agree
# before it measures. L is GPT-2 small's shape with M's vocabulary (4096, not
# 50257) and B = 4 (memory: bench/util_bench.h).
PRESETS = {
    "S": dict(n_layer=4, d_model=128, n_head=4, seq_len=128, batch_size=32, vocab_size=2048),
    "M": dict(n_layer=6, d_model=256, n_head=8, seq_len=256, batch_size=8, vocab_size=4096),
    "L": dict(n_layer=12, d_model=768, n_head=12, seq_len=1024, batch_size=4, vocab_size=4096),
}

def add_size_args(ap):
    """--config (a preset: the S, M and L sizes of `make bench`) and the size flags
    that override it, and --pos; shared with torch_ddp.py. apply_preset fills
    what was not given."""
    ap.add_argument("--config", choices=sorted(PRESETS), help="preset sizes (explicit flags override)")
    for name in PRESETS["S"]:
        ap.add_argument("--" + name.replace("_", "-"), type=int, dest=name)
    ap.add_argument("--pos", default="rope", choices=tm.POS_KINDS)


def apply_preset(args):
    """Every size not given on the command line from the preset (S by default)."""
    for k, v in PRESETS.get(args.config, PRESETS["S"]).items():
        if getattr(args, k) is None:
            setattr(args, k, v)


def read_bench_tokens(path, T, vocab_size):
    """The token file of --tokens, checked for the model: at least T+1 tokens, each
    < vocab_size. Raises ValueError("path: problem")."""
    tokens = tm.read_tokens(path)
    if tokens.size < T + 1:
        raise ValueError(f"{path}: {tokens.size} tokens, need at least T+1 = {T + 1}")
    top = int(tokens.max())
    if top >= vocab_size:
        raise ValueError(f"{path}: token {top} >= vocab_size {vocab_size}")
    return tokens


def random_batch(rng, B, T, vocab_size, tokens=None):
    """(inputs, targets) of B sequences of T: random tokens from the numpy
    generator rng, or, with tokens (an llm.c token file's), B windows of T+1
    at random offsets; targets are the inputs shifted by one. The benchmarks'
    one batch sampler (torch_baseline.py, torch_ddp.py)."""
    if tokens is None:
        x = torch.from_numpy(rng.integers(0, vocab_size, (B, T + 1)))
    else:
        starts = rng.integers(0, tokens.size - T, B)
        x = torch.from_numpy(np.stack([tokens[s:s + T + 1].astype(np.int64) for s in starts]))
    return x[:, :-1], x[:, 1:]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch CPU training-speed baseline of the ropelab model.")
    add_size_args(ap)
    ap.add_argument("--rope-dims", type=int, default=0, help="0 = head_dim")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--tokens", help="llm.c token file to sample windows from (default: random tokens)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--autocast", choices=("off", "bf16"), default="off",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args(argv)
    apply_preset(args)
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--steps and --threads must be >= 1, --warmup >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    B, T = args.batch_size, args.seq_len
    try:
        cfg = tm.GPTConfig(args.n_layer, args.n_head, args.d_model, args.vocab_size, T,
                           pos=args.pos, rope_dims=args.rope_dims).validate()
    except ValueError as e:
        print(f"torch_baseline: {e}", file=sys.stderr)
        return 2
    tokens = None
    if args.tokens:
        try:
            tokens = read_bench_tokens(args.tokens, T, cfg.vocab_size)
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2

    model = tm.GPT(cfg)
    model.init_weights(args.seed)
    opt = torch.optim.AdamW(tm.adamw_param_groups(model, args.weight_decay),
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(args.seed)

    def autocast():
        if args.autocast == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    fwd, bwd, opt_t, total, losses = [], [], [], [], []
    for step in range(args.warmup + args.steps):
        inputs, targets = random_batch(rng, B, T, cfg.vocab_size, tokens)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast():
            _, loss = model(inputs, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        losses.append(loss.item())
        if step >= args.warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            opt_t.append(t3 - t2)
            total.append(t3 - t0)
    ms = lambda xs: 1000.0 * statistics.median(xs)  # noqa: E731
    step_ms = ms(total)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"# torch {torch.__version__}, {n_params} parameters, median of {args.steps} steps "
          f"after {args.warmup} warm-up", file=sys.stderr)
    print(f"torch pos={cfg.pos} L={cfg.n_layer} C={cfg.d_model} H={cfg.n_head} V={cfg.vocab_size} "
          f"B={B} T={T} threads={args.threads} autocast={args.autocast} "
          f"tokens_per_s={B * T / (step_ms / 1000):.1f} "
          f"ms_per_step={step_ms:.1f} fwd_ms={ms(fwd):.1f} bwd_ms={ms(bwd):.1f} opt_ms={ms(opt_t):.1f} "
          f"rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} steps={args.steps} loss_first={losses[0]:.4f} loss_last={losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
