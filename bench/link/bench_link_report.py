#!/usr/bin/env python3
"""The table of bench/link/bench_link.sh: measured all-reduce time against the model.

Reads the raw lines of bench_link.sh (one per run: key=value, see
bench/link/link_allreduce.c) and prints a Markdown table, one row per
config x link: the median over the repetitions of each run's median all-reduce
time, and scripts/report/scaling_estimate.py's all-reduce time for N = 2
machines at the link's rate and at the measured one-way latency of that link
(half the round trip of a 4-byte MPI message: the added delay plus the
stack's own). The model is run as a program, as it stands, and not fitted:

    t = 2 (N-1)/N * G / bandwidth + 2 (N-1) * latency = G / bandwidth + 2 latency   (N = 2)

twice: with the link's nominal rate as the bandwidth, and with the rate the
link measurably gives each direction while both carry G at once (the
exchange of link_allreduce.c, the all-reduce's own floor with 2 ranks). A
ring keeps every link busy both ways, so the second is the bandwidth the
model's ring term stands for; the two agree on a link that is full-duplex
at its rate. Runs recorded before the exchange was measured lack its
columns. Rows on the delay line (link=line: the TUN pair that
bench/link/delay_line.c forwards, where the kernel has no netem) say so in
the link column; runs without a link field are on the veth pair.

usage: bench_link_report.py RAW_FILE
"""
import os
import re
import subprocess
import sys
from statistics import median

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # this file is bench/link/
ESTIMATE = os.path.join(ROOT, "scripts", "report", "scaling_estimate.py")


def model_ms(params, gbit, latency_us):
    """scaling_estimate.py's all-reduce ms for 2 machines (its table's third column)."""
    out = subprocess.run([sys.executable, ESTIMATE, "--params", str(params), "--tokens-per-step", "1",
                          "--tokens-per-s", "1", "--machines", "2", "--gbit", str(gbit),
                          "--latency-us", f"{latency_us:.3f}"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\|\s*2\s*\|\s*[0-9.e+]+ Gbit/s\s*\|\s*([0-9.]+)\s*\|", line)
        if m:
            return float(m.group(1))
    raise SystemExit(f"bench_link_report: no 2-machine row in scaling_estimate.py's output:\n{out}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    runs = []
    for line in open(sys.argv[1]):
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "allreduce_ms" in kv:
            runs.append(kv)
    groups = {}
    for r in runs:
        kind = r.get("link", "veth")
        groups.setdefault((r["config"], float(r["gbit"]), kind != "veth", float(r["delay_ms"])), []).append(r)
    lines = any(key[2] for key in groups)

    train = any("train_allreduce_ms" in r for r in runs)
    exchange = all("exchange_gbit" in r for r in runs)
    head = ["config", "link", "added delay (one way)", "payload MB", "reps",
            "all-reduce ms (median)", "range of reps", "model ms", "measured / model",
            "one-way latency us", "one message of G: Gbit/s", "qdisc drops", "TCP retransmits"]
    if exchange:
        head[9:9] = ["G both ways at once: Gbit/s each way", "model ms at that rate", "measured / that"]
    if train:
        head[-2:-2] = ["./train all-reduce ms/step", "./train step ms"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for (cfg, gbit, on_line, delay), rs in sorted(groups.items()):
        params = int(rs[0]["params"])
        ar = [float(r["allreduce_ms"]) for r in rs]
        lat = median(float(r["latency_us"]) for r in rs)
        pred = model_ms(params, gbit, lat)
        meas = median(ar)
        row = [cfg, f"{gbit:g} Gbit/s" + (", delay line" if on_line else ""), f"{delay:g} ms", f"{4 * params / 1e6:.1f}", str(len(rs)),
               f"{meas:.1f}", f"{min(ar):.1f}-{max(ar):.1f}", f"{pred:.1f}", f"{meas / pred:.2f}",
               f"{lat:.0f}", f"{median(float(r['p2p_gbit']) for r in rs):.2f}",
               str(sum(int(r.get("drops", 0)) + int(r.get("train_drops", 0)) for r in rs)),
               str(sum(int(r.get("retrans", 0)) + int(r.get("train_retrans", 0)) for r in rs))]
        if exchange:
            xg = median(float(r["exchange_gbit"]) for r in rs)
            xpred = model_ms(params, xg, lat)
            row[9:9] = [f"{xg:.2f}", f"{xpred:.1f}", f"{meas / xpred:.2f}"]
        if train:
            tr = [float(r["train_allreduce_ms"]) for r in rs if "train_allreduce_ms" in r]
            ts = [float(r["train_step_ms"]) for r in rs if "train_step_ms" in r]
            row[-2:-2] = [f"{median(tr):.1f}" if tr else "-", f"{median(ts):.0f}" if ts else "-"]
        print("| " + " | ".join(row) + " |")
    print()
    print("model: scripts/report/scaling_estimate.py, 2 machines, the link's rate, latency = the measured one-way")
    print("latency; measured / model within 0.8-1.2 is the target. The tbf rate counts Ethernet, IP and TCP headers")
    print("(about 4.4% of 1500-byte frames), as a NIC's line rate does; the model counts payload only.")
    if exchange:
        print("'at that rate': the same model with the bandwidth each direction measurably gets while both")
        print("ranks send G to each other at once (MPI_Sendrecv, the slower rank): the rate a ring needs.")
    if lines:
        print("'delay line': a TUN pair (MTU 65000) whose packets build/delay_line (bench/link/delay_line.c)")
        print("forwards between the namespaces after the added delay, tbf on each end as on veth; its row with")
        print("no added delay is the line's own cost.")


if __name__ == "__main__":
    main()
