#!/usr/bin/env python3
"""Data-parallel scaling on paper (docs/SCALING.md).

A step on N machines = the compute of one machine on its share of the batch
(measured: tokens per step per machine / tokens/s) + one ring all-reduce of
the fp32 gradient (G = 4 bytes x parameters), which is not overlapped:

    t_allreduce = 2 (N-1)/N * G / bandwidth + 2 (N-1) * latency

(a ring sends and receives each of its N chunks twice: reduce-scatter, then
all-gather, in 2(N-1) rounds). Each rank sends and receives at once, so
`bandwidth` is the rate each direction of a link gets while both are busy:
a NIC's full-duplex line rate less the headers (docs/SCALING.md measures it
on a shaped link, where it is below the nominal rate). Efficiency = t_compute / (t_compute +
t_allreduce). Since both the compute and G grow with the parameter count P
(compute ~ 6 P flops per token), the bandwidth term's share depends on the
tokens per machine per step, not on P: efficiency >= 80% needs

    t_allreduce <= t_compute / 4,  i.e. tokens per machine per step
                                    >= 4 * (8 P / bw) * tokens_per_s

usage: scaling_estimate.py --params P --tokens-per-step B --tokens-per-s S
           [--machines "8 64"] [--gbit "10 25"] [--latency-us 50]
"""
import argparse


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", type=float, required=True, help="parameter count P")
    ap.add_argument("--tokens-per-step", type=float, required=True, help="tokens per machine per step")
    ap.add_argument("--tokens-per-s", type=float, required=True, help="measured tokens/s of one machine")
    ap.add_argument("--machines", default="8 64")
    ap.add_argument("--gbit", default="10 25",
                    help="link rates to tabulate, Gbit/s each direction with both directions busy")
    ap.add_argument("--latency-us", type=float, default=50.0, help="per message, TCP")
    a = ap.parse_args()
    t_c = a.tokens_per_step / a.tokens_per_s
    grad = 4 * a.params
    flops = 6 * a.params * a.tokens_per_s  # model flops per second this machine reaches
    print(f"compute {t_c * 1e3:.1f} ms per step, gradient {grad / 1e6:.1f} MB, "
          f"{flops / 1e9:.1f} GFLOP/s (6 P per token)")
    print("| machines | link | all-reduce ms | step ms | efficiency | global batch (tokens) |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in a.machines.split()):
        for g in (float(x) for x in a.gbit.split()):
            bw = g * 1e9 / 8
            t_ar = 2 * (n - 1) / n * grad / bw + 2 * (n - 1) * a.latency_us * 1e-6
            eff = t_c / (t_c + t_ar)
            print(f"| {n} | {g:g} Gbit/s | {t_ar * 1e3:.1f} | {(t_c + t_ar) * 1e3:.1f} | {eff:.0%} | "
                  f"{n * a.tokens_per_step:,.0f} |")
    for g in (float(x) for x in a.gbit.split()):
        bw = g * 1e9 / 8
        # tokens per machine per step for which the all-reduce (8 P / bw at
        # large N) is a quarter of the compute (b / tokens_per_s)
        b_min = 4 * (8 * a.params / bw) * a.tokens_per_s
        print(f"{g:g} Gbit/s: >= 80% efficiency (bandwidth term, large N) needs >= {b_min:,.0f} "
              f"tokens per machine per step")


if __name__ == "__main__":
    main()
