#!/usr/bin/env bash
# `make compare`: train every positional scheme on the same corpus and config
# for several seeds, then evaluate length extrapolation and write a report.
#
#   scripts/compare.sh [--quick] [--extras] [--seeds N] [--jobs N] [--config FILE] [--out DIR]
#
#   --quick    the tiny version (configs/compare-quick.ini, 2 seeds): a couple of minutes
#   --extras   also alibi and none
#   --seeds N  seeds 1..N (default 3)
#   --jobs N   runs at a time, each on one thread (default: the number of cores);
#              --jobs 1 runs one at a time on the config's threads.
#              Small models gain little from a second thread, so on 2 cores two
#              one-thread runs side by side finish the comparison sooner.
#
# Every run is identical but for --pos: same config, same seed -> same data
# order and the same initial values in every parameter the schemes share.
# Finished runs (RUN/done) are reused and an interrupted run resumes from its
# checkpoint, so an interrupted comparison continues where it stopped.
# Output in DIR (default runs/compare or runs/compare-quick):
#   RUN_DIRS pos-sSEED/, extrapolation.csv, report.md, val_loss_vs_step.png,
#   val_loss_vs_time.png
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0; extras=0; seeds=3; jobs=$(nproc); config=""; out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --extras) extras=1 ;;
    --seeds) seeds=$2; shift ;;
    --seeds=*) seeds=${1#*=} ;;
    --jobs) jobs=$2; shift ;;
    --jobs=*) jobs=${1#*=} ;;
    --config) config=$2; shift ;;
    --config=*) config=${1#*=} ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#*=} ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ $quick = 1 ]; then
  config=${config:-configs/compare-quick.ini}; out=${out:-runs/compare-quick}
  [ "$seeds" = 3 ] && seeds=2
else
  config=${config:-configs/compare.ini}; out=${out:-runs/compare}
fi
[ -f "$config" ] || { echo "compare.sh: $config: no such config file" >&2; exit 2; }
schemes=(rope learned sinusoidal t5)
[ $extras = 1 ] && schemes+=(alibi none)

# The plots need matplotlib; install it if missing (as root) or say how.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q python3-matplotlib >/dev/null
  else echo "compare.sh: needs python3-matplotlib: sudo apt-get install -y python3-matplotlib" >&2; exit 1; fi
fi
make --no-print-directory -s all

# The data the config points at must exist (the default corpus: make it).
data_file=$(sed -n 's/^[[:space:]]*train_file[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p' "$config" | head -1)
if [ -n "$data_file" ] && [ ! -f "$data_file" ] && [[ "$data_file" == data/kjv/* ]]; then
  bash scripts/get_data.sh
  ./prepare --vocab-size 2048 --val-fraction 0.05 --out-dir data/kjv data/kjv.txt
fi

mkdir -p "$out"
cp "$config" "$out/config.ini"
total=$(( ${#schemes[@]} * seeds ))
start_all=$(date +%s)

# One run: fresh, or resumed from its checkpoint; RUN/done marks it finished.
run_one() {
  local pos=$1 seed=$2 dir="$out/$1-s$2" extra=()
  [ "$jobs" -gt 1 ] && extra=(--threads=1 --quiet)
  if [ -f "$dir/checkpoint.safetensors" ]; then
    ./train --resume "$dir" "${extra[@]}"
  else
    rm -rf "$dir"
    ./train --pos="$pos" --seed="$seed" --out_dir="$dir" "${extra[@]}" "$config"
  fi && touch "$dir/done"
}

n=0; finished=0; reused=0; running=0; failed=0
for seed in $(seq 1 "$seeds"); do
  for pos in "${schemes[@]}"; do
    n=$((n+1))
    if [ -f "$out/$pos-s$seed/done" ]; then
      echo "[compare $n/$total] $pos seed $seed: finished earlier, reused"
      finished=$((finished+1)); reused=$((reused+1)); continue
    fi
    if [ "$running" -ge "$jobs" ]; then
      wait -n || failed=$((failed+1))
      running=$((running-1)); finished=$((finished+1))
    fi
    eta="?"
    spent=$(( $(date +%s) - start_all ))
    trained=$((finished - reused))     # runs trained by this call, for the ETA
    [ "$trained" -gt 0 ] && eta="$(( (total - finished) * spent / trained / 60 )) min"
    echo "[compare $n/$total] $pos seed $seed started ($finished finished; whole comparison ETA $eta)"
    if [ "$jobs" -gt 1 ]; then
      run_one "$pos" "$seed" > "$out/$pos-s$seed.log" 2>&1 &
      running=$((running+1))
    else
      run_one "$pos" "$seed" || failed=$((failed+1))
      finished=$((finished+1))
    fi
  done
done
while [ "$running" -gt 0 ]; do wait -n || failed=$((failed+1)); running=$((running-1)); done
if [ "$failed" -gt 0 ]; then
  echo "compare.sh: $failed run(s) failed; see $out/*.log (run again to continue)" >&2
  exit 1
fi

# Length extrapolation: each final model at T, 2T and 4T on the validation split.
T=$(sed -n 's/^[[:space:]]*block_size[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$config" | head -1)
val_file=$(sed -n 's/^[[:space:]]*val_file[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p' "$config" | head -1)
extrap="$out/extrapolation.csv"
if [ ! -f "$extrap" ] || [ "$(wc -l < "$extrap")" -ne $(( total * 3 + 1 )) ]; then
  echo "[compare] length extrapolation at T=$T, $((2*T)), $((4*T))"
  echo "pos,seed,seq_len,loss" > "$extrap.tmp"
  for seed in $(seq 1 "$seeds"); do
    for pos in "${schemes[@]}"; do
      for mult in 1 2 4; do
        len=$((T * mult))
        if [ "$pos" = learned ] && [ $mult -gt 1 ]; then
          echo "$pos,$seed,$len,nan" >> "$extrap.tmp"; continue
        fi
        # The same tokens at every length: 2T and 4T windows cover 4T-token spans.
        line=$(./eval --weights "$out/$pos-s$seed/model.safetensors" --data "$val_file" \
                      --seq-len "$len" --batch-size $((4 / mult)) --batches 32 --threads 0)
        loss=$(sed -n 's/.* loss=\([^ ]*\).*/\1/p' <<< "$line")
        echo "$pos,$seed,$len,$loss" >> "$extrap.tmp"
      done
    done
  done
  mv "$extrap.tmp" "$extrap"
fi

/usr/bin/python3 scripts/report.py "$out" "${schemes[@]}"
echo "[compare] done in $(( ($(date +%s) - start_all) / 60 )) min: $out/report.md"
