#!/bin/bash
# reproducible_cost.sh: what `reproducible = 1` costs on this CPU, fp32,
# rope, configs S and M, in alternating rounds (A B C A B C ...):
#   A  the reproducible mode's engine: OpenBLAS on its Haswell kernels
#      (OPENBLAS_CORETYPE=Haswell), linear layers in 64-row calls, blocked attention
#   B  OpenBLAS on the kernels it picks for this CPU (OPENBLAS_CORETYPE unset)
#   C  what `matmul = auto` runs here without the mode, per config (bench_model --auto)
#
#   bench/reproducible_cost.sh [ROUNDS] [THREADS]      (default 3 rounds, nproc threads)
#
# Prints each run's tokens/s, then per config the best of the rounds and the
# mode's cost against B and C. Needs build/bench_model (make bench builds it).
# Time it on a quiet machine: every other process shifts the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${2:-$(nproc)}
[ -x build/bench_model ] || { echo "reproducible_cost: build/bench_model missing (make bench)" >&2; exit 1; }
declare -A auto
for cfg in S M; do
    auto[$cfg]=$(env -u OPENBLAS_CORETYPE ./build/bench_model --auto --config $cfg --threads "$threads" 2>&1 |
                 sed -n 's/^# auto fp32 = \([a-z]*\).*/\1/p' | head -1)
    [ -n "${auto[$cfg]}" ] || auto[$cfg]=openblas
done
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads;" \
     "auto fp32 = ${auto[S]} on S, ${auto[M]} on M"
declare -A best
for r in $(seq 1 "$rounds"); do
    for cfg in S M; do
        for side in A B C; do
            case $side in
                A) out=$(OPENBLAS_CORETYPE=Haswell ./build/bench_model --config $cfg --threads "$threads" --matmul openblas 2>&1) ;;
                B) out=$(env -u OPENBLAS_CORETYPE ./build/bench_model --config $cfg --threads "$threads" --matmul openblas 2>&1) ;;
                C) out=$(env -u OPENBLAS_CORETYPE ./build/bench_model --config $cfg --threads "$threads" --matmul "${auto[$cfg]}" 2>&1) ;;
            esac
            tps=$(printf '%s\n' "$out" | grep -o 'tokens_per_s=[0-9.]*' | head -1 | cut -d= -f2)
            core=$(printf '%s\n' "$out" | grep -o 'openblas core=[A-Za-z0-9]*' | head -1 | cut -d= -f2)
            [ -n "$tps" ] || { printf '%s\n' "$out" >&2; echo "reproducible_cost: no tokens_per_s" >&2; exit 1; }
            echo "round $r $cfg $side tokens_per_s=$tps openblas_core=${core:-?}"
            k="$cfg$side"
            if [ -z "${best[$k]:-}" ] || awk -v a="$tps" -v b="${best[$k]}" 'BEGIN { exit !(a > b) }'; then best[$k]=$tps; fi
        done
    done
done
for cfg in S M; do
    awk -v c=$cfg -v a="${best[${cfg}A]}" -v b="${best[${cfg}B]}" -v x="${best[${cfg}C]}" -v auto="${auto[$cfg]}" 'BEGIN {
        printf "%s best of rounds: reproducible %.0f tokens/s, OpenBLAS own kernels %.0f (%.2fx), auto (%s) %.0f (%.2fx)\n",
               c, a, b, b / a, auto, x, x / a }'
done
