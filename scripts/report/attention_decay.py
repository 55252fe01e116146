#!/usr/bin/python3
"""Long-term decay of rotary attention: the RoFormer bound, and what a trained model does.

    scripts/report/attention_decay.py [--head-dim 128] [--rope-base 10000] [--max-distance 256]
    scripts/report/attention_decay.py --weights RUN/model.safetensors --data data/kjv/val.bin [--seq-len 256]
    add --plot FILE.png to draw the curve(s)

1. The bound (RoFormer, section 3.4.3). With rotary embeddings the score is
   Re[sum_j h_j conj(...) e^{i (m-n) theta_j}] over the d/2 rotated pairs. Abel
   summation bounds |score| by (max_j |h_{j+1} - h_j|) * sum_j |S_j| with
   S_j = sum_{k<j} e^{i (m-n) theta_k}, theta_k = base^(-2k/d). The "relative
   upper bound" (1/(d/2)) sum_j |S_j| depends on the distance m-n only, and
   it falls (with oscillation) as the distance grows: far tokens can only get
   small scores. It is a property of the angles, not of any trained weights.

2. The measurement. For a trained checkpoint (any scheme), run windows of the
   validation file through the model (the PyTorch reference of
   scripts/torch/torch_model.py, which loads our safetensors files) and average the
   pre-softmax attention score s[h,i,j] = q_i.k_j/sqrt(D) + bias over every
   layer, head, window and query position, grouped by distance i-j.
"""
import argparse
import math
import os
import sys

import numpy as np

# torch_model.py (the PyTorch reference that loads our weights files) is in the sibling folder scripts/torch/
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))


def rope_bound(distances, head_dim, rope_base):
    """(1/(d/2)) sum_{j=1}^{d/2} |S_j|, S_j = sum_{k=0}^{j-1} exp(i r theta_k)."""
    half = head_dim // 2
    theta = rope_base ** (-2.0 * np.arange(half) / head_dim)
    out = []
    for r in distances:
        partial = np.cumsum(np.exp(1j * r * theta))      # S_1 .. S_{d/2}
        out.append(np.abs(partial).mean())
    return np.array(out)


def measured_scores(weights, data, seq_len, n_windows):
    import torch
    import torch_model as tm

    tensors, meta = tm.load_safetensors(weights)
    model = tm.model_from_metadata(meta)
    model.load_state_dict({k: v for k, v in tensors.items()}, strict=True)
    model.eval()
    cfg = model.cfg
    if cfg.pos == "learned" and seq_len > cfg.block_size:
        sys.exit(f"attention_decay.py: {weights}: learned positions stop at block_size {cfg.block_size}")
    try:
        tokens = tm.read_tokens(data)
    except ValueError as e:
        sys.exit(f"attention_decay.py: {e}")
    n_windows = min(n_windows, len(tokens) // seq_len)
    idx = torch.tensor(tokens[: n_windows * seq_len].astype(np.int64)).view(n_windows, seq_len)

    T, H, D = seq_len, cfg.n_head, cfg.d_model // cfg.n_head
    total = torch.zeros(T, dtype=torch.float64)
    count = torch.zeros(T, dtype=torch.float64)
    dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]          # i - j
    causal = dist >= 0
    with torch.no_grad():
        x = model.wte[idx]
        if cfg.pos == "learned":
            x = x + model.wpe[:T]
        elif cfg.pos == "sinusoidal":
            x = x + model._table("sinusoidal", T, x.dtype, x.device)
        rope = model._table("rope", T, x.dtype, x.device) if cfg.pos == "rope" else None
        bias = None
        if cfg.pos == "t5":
            bias = model.rel_bias[model._table("t5", T, x.dtype, x.device)].permute(2, 0, 1)
        elif cfg.pos == "alibi":
            bias = model._table("alibi", T, x.dtype, x.device)
        for block in model.h:
            a = block.ln_1(x)
            q, k, _ = block.attn.c_attn(a).split(cfg.d_model, dim=2)
            q = q.view(-1, T, H, D).transpose(1, 2)
            k = k.view(-1, T, H, D).transpose(1, 2)
            if rope is not None:
                q, k = tm.apply_rope(q, *rope), tm.apply_rope(k, *rope)
            s = (q @ k.transpose(-2, -1)) / math.sqrt(D)
            if bias is not None:
                s = s + bias
            s = s.double().sum(dim=(0, 1))                                # (T,T) summed over windows, heads
            for n in range(T):
                mask = (dist == n) & causal
                total[n] += s[mask].sum()
                count[n] += mask.sum() * idx.shape[0] * H
            x = block(x, rope, bias)
    return cfg.pos, (total / count).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--head-dim", type=int, default=128, help="d of the bound (RoFormer's figure: 128)")
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--max-distance", type=int, default=256)
    ap.add_argument("--weights", help="a trained model.safetensors: also measure mean score by distance")
    ap.add_argument("--data", help="token file for the measurement (e.g. data/kjv/val.bin)")
    ap.add_argument("--seq-len", type=int, default=0, help="window length (default: block_size)")
    ap.add_argument("--windows", type=int, default=16)
    ap.add_argument("--plot", help="write a PNG here")
    args = ap.parse_args()

    step = max(1, args.max_distance // 16)
    distances = np.arange(0, args.max_distance + 1)
    bound = rope_bound(distances, args.head_dim, args.rope_base)
    print(f"RoFormer relative upper bound, d={args.head_dim}, base={args.rope_base:g}")
    print("distance  bound")
    for r in distances[::step]:
        print(f"{r:8d}  {bound[r]:.3f}")

    measured = None
    if args.weights:
        if not args.data:
            sys.exit("attention_decay.py: --weights needs --data")
        from torch_model import load_safetensors
        meta = load_safetensors(args.weights)[1]
        seq_len = args.seq_len or int(meta["block_size"])
        pos, measured = measured_scores(args.weights, args.data, seq_len, args.windows)
        print(f"\nmean attention score by distance, {args.weights} (pos={pos}, T={seq_len})")
        print("distance  mean score")
        for r in range(0, seq_len, max(1, seq_len // 16)):
            print(f"{r:8d}  {measured[r]:+.4f}")

    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        n_axes = 2 if measured is not None else 1
        fig, axes = plt.subplots(1, n_axes, figsize=(6 * n_axes, 4), squeeze=False)
        axes[0][0].plot(distances, bound)
        axes[0][0].set(xlabel="relative distance m - n", ylabel="relative upper bound",
                       title=f"RoFormer bound (d={args.head_dim})")
        if measured is not None:
            axes[0][1].plot(np.arange(len(measured)), measured)
            axes[0][1].set(xlabel="distance i - j", ylabel="mean pre-softmax score",
                           title=f"trained model, pos={pos}")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
