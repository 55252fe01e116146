#!/usr/bin/python3
"""Loss of a ropelab weights file, computed by the PyTorch reference.

    scripts/torch/torch_eval.py --weights RUN/model.safetensors --data val.bin \
        [--seq-len T] [--batch-size 8] [--batches K]

Loads the contract's safetensors file into scripts/torch/torch_model.py's GPT
(strict: every name and shape must match) and prints the mean loss over the
same fixed windows as ./eval (window w covers tokens w*T .. w*T+T, targets
shifted by one; batch k holds windows k*B .. k*B+B-1; the mean of the batch
means), in float64. It shows that a checkpoint written by ./train gives the
same loss in PyTorch.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--batches", type=int, default=1)
    args = ap.parse_args()
    tensors, meta = tm.load_safetensors(args.weights)
    model = tm.model_from_metadata(meta).double()
    model.load_state_dict({k: v.double() for k, v in tensors.items()}, strict=True)
    T = args.seq_len or model.cfg.block_size
    try:
        tokens = tm.read_tokens(args.data)
    except ValueError as e:
        sys.exit(f"torch_eval.py: {e}")
    n_windows = (len(tokens) - 1) // T
    losses = []
    with torch.no_grad():
        for k in range(args.batches):
            w = [(k * args.batch_size + b) % n_windows for b in range(args.batch_size)]
            x = torch.tensor(np.stack([tokens[i * T: i * T + T].astype(np.int64) for i in w]))
            y = torch.tensor(np.stack([tokens[i * T + 1: i * T + T + 1].astype(np.int64) for i in w]))
            losses.append(model(x, y)[1].item())
    print(f"torch_eval: loss={np.mean(losses):.6f}")


if __name__ == "__main__":
    main()
