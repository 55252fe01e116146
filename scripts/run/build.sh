#!/usr/bin/env bash
# build.sh [TARGET...]: `make TARGET...` (default: all) under a lock on
# build/.lock, for the scripts that build before they run (make reproduce,
# make compare, the sweeps, make run, data_dir.sh): two of them started at
# once never compile into the one build directory together.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh
mkdir -p build
[ $# -gt 0 ] || set -- all
exec flock build/.lock make --no-print-directory -s "$@"
