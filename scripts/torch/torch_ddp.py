#!/usr/bin/python3
"""torch_ddp.py: training speed of the contract model (scripts/torch/torch_model.py)
with PyTorch DistributedDataParallel on the CPU (gloo backend), for
`make bench-mpi` (bench/bench_mpi.sh) against `mpirun -np N ./train`.

    scripts/torch/torch_ddp.py --config S --nproc 2 --threads 1 --tokens build/bench_mpi/v2048/train.bin
    scripts/torch/torch_ddp.py --config M --nproc 1 --threads 2

--nproc N processes on this machine (torch.multiprocessing; gloo over TCP on
127.0.0.1), each with --threads threads and batch_size/N sequences, so the
global batch is the config's (or --batch-size's) B, as with ./train under
mpirun with batch_size B/N. Each process draws its own windows (numpy
generator seeded by (seed, rank)); with N > 1 and N x threads <= the CPUs,
process r is pinned to CPU r (as mpirun binds each rank to a core).
--nproc 1 is the same loop in one process without a process group.

A step: zero_grad, forward, backward (DDP all-reduces the gradient buckets
during backward, overlapped with it), AdamW (lr 3e-4, betas 0.9/0.95, decay on
wte and the linear weights, as ./train). The all-reduce's exposed cost is
measured by steps under model.no_sync() (backward without the all-reduce),
interleaved with the normal ones: comm_ms = median(step) - median(no_sync
step). (The ranks' weights drift apart after a no_sync step; that does not
change the timing.) Rank 0 prints one line, medians over the steps after the
warm-up:

    torch_ddp L=4 C=128 H=4 V=2048 T=128 B_global=32 nproc=2 threads=1 tokens_per_s=...
    ms_per_step=... nosync_ms_per_step=... comm_ms=... comm_share=... steps=... loss_last=...
"""

import argparse
import os
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402
from torch_baseline import add_size_args, apply_preset, random_batch, read_bench_tokens  # noqa: E402

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch DDP (gloo) CPU training speed of the ropelab model.")
    add_size_args(ap)
    ap.add_argument("--nproc", type=int, default=2, help="processes (DDP ranks); 1 = no process group")
    ap.add_argument("--threads", type=int, default=1, help="threads per process")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--tokens", help="llm.c token file to sample windows from (default: random tokens)")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args(argv)
    apply_preset(args)
    if args.steps < 1 or args.warmup < 0 or args.threads < 1 or args.nproc < 1:
        ap.error("--steps, --threads and --nproc must be >= 1, --warmup >= 0")
    if args.batch_size % args.nproc:
        ap.error(f"--batch-size {args.batch_size} is not divisible by --nproc {args.nproc}")
    return args


def worker(rank, args, port):
    nproc = args.nproc
    torch.set_num_threads(args.threads)
    if nproc > 1 and nproc * args.threads <= os.cpu_count():
        os.sched_setaffinity(0, set(range(rank * args.threads, (rank + 1) * args.threads)))
    if nproc > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nproc)
    B, T = args.batch_size // nproc, args.seq_len
    cfg = tm.GPTConfig(args.n_layer, args.n_head, args.d_model, args.vocab_size, T, pos=args.pos).validate()
    try:
        tokens = read_bench_tokens(args.tokens, T, cfg.vocab_size) if args.tokens else None
    except ValueError as e:
        raise SystemExit(str(e)) from None
    model = tm.GPT(cfg)
    model.init_weights(args.seed)   # the same weights on every rank (DDP also broadcasts rank 0's)
    net = torch.nn.parallel.DistributedDataParallel(model) if nproc > 1 else model
    opt = torch.optim.AdamW(tm.adamw_param_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng([args.seed, rank])

    def step(sync):
        inputs, targets = random_batch(rng, B, T, cfg.vocab_size, tokens)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if sync or nproc == 1:
            _, loss = net(inputs, targets)
            loss.backward()
        else:
            with net.no_sync():
                _, loss = net(inputs, targets)
                loss.backward()
        opt.step()
        return time.perf_counter() - t0, loss.item()

    synced, unsynced = [], []
    loss = float("nan")
    for i in range(args.warmup):
        step(True)
    for i in range(args.steps):
        dt, loss = step(True)
        synced.append(dt)
        if nproc > 1:
            unsynced.append(step(False)[0])
    if nproc > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return
    ms = 1000.0 * statistics.median(synced)
    nosync = 1000.0 * statistics.median(unsynced) if unsynced else ms
    comm = max(ms - nosync, 0.0)
    print(f"torch_ddp L={cfg.n_layer} C={cfg.d_model} H={cfg.n_head} V={cfg.vocab_size} T={T} "
          f"B_global={args.batch_size} nproc={nproc} threads={args.threads} "
          f"tokens_per_s={args.batch_size * T / (ms / 1000):.1f} ms_per_step={ms:.1f} "
          f"nosync_ms_per_step={nosync:.1f} comm_ms={comm:.1f} comm_share={comm / ms:.3f} "
          f"steps={args.steps} loss_last={loss:.4f}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print(f"# torch {torch.__version__}, gloo, {args.nproc} process(es) x {args.threads} thread(s)", file=sys.stderr)
    if args.nproc == 1:
        worker(0, args, 0)
    else:
        mp.spawn(worker, args=(args, free_port()), nprocs=args.nproc, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
