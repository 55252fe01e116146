#!/usr/bin/env bash
# step_costs.sh: each positional scheme's cost per training step, measured
# side by side, for "time to target" in the comparison reports.
#
#   scripts/run/step_costs.sh [--config FILE] [--rounds N] [--steps N] [--threads N] [--out FILE]
#                         [--variants "rope learned ..."] [--reproducible]
#
# A variant is compare.sh's (a scheme, optionally with its parts: rope-w64 is
# rope at width 64, 2 layers and 2 heads; compare.sh --help); --reproducible
# trains as compare.sh does by default (reproducible = 1: OpenBLAS fp32 with
# its Haswell kernels), so the figures are the study's own step costs.
# Runs ./train CONFIG with the variant's flags --steps=S for every variant, in rounds that
# alternate the variants (A B C ... A B C ...), so a slow moment of a shared
# machine falls on every variant alike; each run's cost is the median of
# its log's per-step times (tokens per step / tokens_per_s) after the first
# 10 steps, and a variant's cost is the median over the rounds. Writes
# variant,ms_per_step,rounds to FILE (default: stdout) and says which
# OpenBLAS kernels ran. Run it on a quiet machine: the figures are ratios
# between variants, but noise in one round still moves them.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh

config=configs/compare.ini; rounds=3; steps=60; threads=1; out=""; reproducible=()
variants="rope learned sinusoidal t5 alibi none"
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --steps) steps=$2; shift ;;
    --threads) threads=$2; shift ;;
    --out) out=$2; shift ;;
    --variants) variants=$2; shift ;;
    --reproducible) reproducible=(--reproducible=1) ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "step_costs.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
make --no-print-directory -s all
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
core=$(/usr/bin/python3 - <<'EOF'
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())
EOF
)
echo "step_costs: $config, $steps steps, $threads thread(s), $rounds rounds${reproducible:+, reproducible = 1}; OpenBLAS kernels: $core" \
     "(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" >&2
for r in $(seq 1 "$rounds"); do
  for v in $variants; do
    read -r -a flags <<< "$(bash scripts/run/compare.sh --variant-flags "$v")"
    ./train "$config" "${flags[@]}" "${reproducible[@]}" --steps="$steps" --threads="$threads" --eval_every=0 \
            --save_every=0 --out_dir="$tmp/$v-$r" --overwrite --quiet
    echo "$v,$r,$(/usr/bin/python3 - "$tmp/$v-$r/log.csv" <<'EOF'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["tokens_per_s"] and int(r["step"]) > 10]
print(statistics.median(float(r["tokens_per_s"]) for r in rows))
EOF
)" >> "$tmp/tps.csv"
  done
done
/usr/bin/python3 - "$tmp/tps.csv" "$config" "$out" <<'EOF'
import configparser, statistics, sys
path, config, out = sys.argv[1:]
ini = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
ini.read(config)
tokens = int(ini["optim"]["batch_size"]) * int(ini["model"]["block_size"]) * int(ini["optim"].get("grad_accum", "1"))
per = {}
for line in open(path):
    v, _, tps = line.strip().split(",")
    per.setdefault(v, []).append(1e3 * tokens / float(tps))
lines = ["variant,ms_per_step,rounds"] + [f"{v},{statistics.median(ms):.3f},{len(ms)}" for v, ms in per.items()]
text = "\n".join(lines) + "\n"
if out:
    open(out, "w").write(text)
sys.stdout.write(text)
EOF
