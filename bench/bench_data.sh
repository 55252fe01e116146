#!/usr/bin/env bash
# bench_data.sh: BPE training time, encoding speed and bytes per token on the
# default corpus (fetched first if missing). Run by `make bench-data`.
set -euo pipefail
cd "$(dirname "$0")/.."   # the repository root: this file is bench/NAME.sh
[ -s data/kjv.txt ] || bash scripts/run/get_data.sh
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
build/bench_data data/kjv.txt
