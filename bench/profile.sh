#!/usr/bin/env bash
# profile.sh: where a training step's time goes, kernel by kernel.
#   bash bench/profile.sh [bench_model arguments]
# e.g. bash bench/profile.sh --config M --matmul onednn --precision bf16
# Runs build/bench_model under `perf record -e cpu-clock` (a software clock:
# it works on VMs without hardware counters), sampling only the timed steps:
# perf starts disabled and bench_model enables it through a control fifo
# after its warm-up (PERF_CTL_FIFO). Then prints the share of samples of
# each kernel group (bench/profile_report.py). Both threads are
# sampled, so a thread waiting for the other counts in libgomp's row.
# Defaults: 20 timed steps after 3 of warm-up (the arguments may override).
set -euo pipefail
cd "$(dirname "$0")/.."   # the repository root: this file is bench/NAME.sh
command -v perf >/dev/null || { echo "profile.sh: perf not found (Debian package linux-perf)" >&2; exit 1; }
[ -x build/bench_model ] || { echo "profile.sh: build/bench_model not built (make build/bench_model)" >&2; exit 1; }
dir=$(mktemp -d /tmp/ropelab-perf.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/ctl"
PERF_CTL_FIFO="$dir/ctl" perf record -q -D -1 --control "fifo:$dir/ctl" -e cpu-clock -F 2000 -o "$dir/perf.data" \
    build/bench_model --steps 20 --warmup 3 "$@" | grep '^ropelab' || true
perf script -i "$dir/perf.data" -F ip,sym,dso 2>/dev/null | python3 bench/profile_report.py
