#!/usr/bin/env bash
# `make compare`: train every positional scheme on the same corpus and config
# for several seeds, evaluate length extrapolation and write a report.
#
#   scripts/compare.sh [--setup NAME] [--seeds N] [--jobs N] [--config FILE --out DIR] [--variants "a b ..."]
#
#   --setup NAME  one of the replication's setups (default: default):
#                   default  configs/compare.ini on the KJV: rope, learned,
#                            sinusoidal, t5, alibi, none, and three
#                            sinusoidal_scale ablations (about 45 min)
#                   gcide    the same config on the GCIDE dictionary (about 25 min)
#                   medium   configs/compare-medium.ini on the KJV (about 2 h on 2 quiet cores: 15 runs of about 15 min, two at a time)
#                   all      the three above, then docs-ready summary
#                            runs/compare-summary.md
#                   quick    configs/compare-quick.ini, 2 seeds (a couple of minutes)
#   --seeds N     seeds 1..N (default 3)
#   --jobs N      runs at a time, each on one thread (default: the number of cores);
#                 --jobs 1 runs one at a time on the config's threads.
#   --config FILE --out DIR   a custom comparison (variants rope learned sinusoidal t5)
#   --variants "..."          replaces the setup's list
#   --train-flags "..."       added to every run (e.g. "--precision=bf16": the bf16 replication)
# A variant is a scheme, or sinusoidal-scaleS (sinusoidal with sinusoidal_scale=S).
#
# Every run is identical but for its variant: same config, same seed -> same
# data order and the same initial values in every parameter the schemes
# share. Finished runs (RUN/done) are reused and an interrupted run resumes
# from its checkpoint, so an interrupted comparison continues where it stopped.
# Output in DIR: RUN_DIRS variant-sSEED/, extrapolation.csv, report.md,
# summary.json, val_loss_vs_step.png, val_loss_vs_time.png, wall_time.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

setup=default; seeds=3; jobs=$(nproc); config=""; out=""; variants=""; train_flags=""
while [ $# -gt 0 ]; do
  case "$1" in
    --setup) setup=$2; shift ;;
    --setup=*) setup=${1#*=} ;;
    --quick) setup=quick ;;
    --seeds) seeds=$2; shift ;;
    --seeds=*) seeds=${1#*=} ;;
    --jobs) jobs=$2; shift ;;
    --jobs=*) jobs=${1#*=} ;;
    --config) config=$2; setup=custom; shift ;;
    --config=*) config=${1#*=}; setup=custom ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#*=} ;;
    --variants) variants=$2; shift ;;
    --variants=*) variants=${1#*=} ;;
    --train-flags) train_flags=$2; shift ;;
    --train-flags=*) train_flags=${1#*=} ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$setup" = all ]; then
  for s in default gcide medium; do
    bash "$0" --setup "$s" --seeds "$seeds" --jobs "$jobs"
  done
  /usr/bin/python3 scripts/report.py --summary runs/compare-summary.md runs/compare runs/compare-gcide runs/compare-medium
  exit 0
fi

corpus=kjv
case "$setup" in
  default) config=configs/compare.ini; out=${out:-runs/compare}
           v="rope learned sinusoidal t5 alibi none sinusoidal-scale1 sinusoidal-scale0.0883883 sinusoidal-scale0.00125" ;;
  gcide)   config=configs/compare-gcide.ini; out=${out:-runs/compare-gcide}; corpus=gcide
           v="rope learned sinusoidal t5 alibi" ;;
  medium)  config=configs/compare-medium.ini; out=${out:-runs/compare-medium}
           v="rope learned sinusoidal t5 alibi" ;;
  quick)   config=configs/compare-quick.ini; out=${out:-runs/compare-quick}
           [ "$seeds" = 3 ] && seeds=2
           v="rope learned sinusoidal t5" ;;
  custom)  [ -n "$out" ] || { echo "compare.sh: --config needs --out DIR" >&2; exit 2; }
           v="rope learned sinusoidal t5" ;;
  *) echo "compare.sh: unknown setup '$setup' (default, gcide, medium, all, quick)" >&2; exit 2 ;;
esac
variants=${variants:-$v}
[ -f "$config" ] || { echo "compare.sh: $config: no such config file" >&2; exit 2; }

# The plots need matplotlib; install it if missing (as root) or say how.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q python3-matplotlib >/dev/null
  else echo "compare.sh: needs python3-matplotlib: sudo apt-get install -y python3-matplotlib" >&2; exit 1; fi
fi
make --no-print-directory -s all

# The corpus the setup trains on must exist: make it (KJV or GCIDE).
if [ "$setup" != custom ] && [ ! -f "data/$corpus/val.bin" ]; then
  bash scripts/get_data.sh "$corpus"
  ./prepare --vocab-size 2048 --val-fraction 0.05 --out-dir "data/$corpus" "data/$corpus.txt"
fi

# The flags of one variant.
variant_flags() {
  case "$1" in
    sinusoidal-scale*) echo "--pos=sinusoidal --sinusoidal_scale=${1#sinusoidal-scale}" ;;
    *) echo "--pos=$1" ;;
  esac
}

mkdir -p "$out"
cp "$config" "$out/config.ini"
read -r -a vlist <<< "$variants"
total=$(( ${#vlist[@]} * seeds ))
start_all=$(date +%s)

# One run: fresh, or resumed from its checkpoint; RUN/done marks it finished.
run_one() {
  local variant=$1 seed=$2 dir="$out/$1-s$2" extra=()
  [ "$jobs" -gt 1 ] && extra=(--threads=1 --quiet)
  if [ -f "$dir/checkpoint.safetensors" ]; then
    ./train --resume "$dir" "${extra[@]}"
  else
    rm -rf "$dir"
    # shellcheck disable=SC2046,SC2086
    ./train $(variant_flags "$variant") $train_flags --seed="$seed" --out_dir="$dir" "${extra[@]}" "$config"
  fi && touch "$dir/done"
}

n=0; finished=0; reused=0; running=0; failed=0
for seed in $(seq 1 "$seeds"); do
  for variant in "${vlist[@]}"; do
    n=$((n+1))
    if [ -f "$out/$variant-s$seed/done" ]; then
      echo "[compare $n/$total] $variant seed $seed: finished earlier, reused"
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
    echo "[compare $n/$total] $variant seed $seed started ($finished finished; whole comparison ETA $eta)"
    if [ "$jobs" -gt 1 ]; then
      run_one "$variant" "$seed" > "$out/$variant-s$seed.log" 2>&1 &
      running=$((running+1))
    else
      run_one "$variant" "$seed" || failed=$((failed+1))
      finished=$((finished+1))
    fi
  done
done
while [ "$running" -gt 0 ]; do wait -n || failed=$((failed+1)); running=$((running-1)); done
if [ "$failed" -gt 0 ]; then
  echo "compare.sh: $failed run(s) failed; see $out/*.log (run again to continue)" >&2
  exit 1
fi
if [ "$reused" -lt "$total" ]; then   # this call trained something: record its wall time
  echo "wall_s=$(( $(date +%s) - start_all ))" > "$out/wall_time.txt"
fi

# Length extrapolation: each final model at T, 2T and 4T on the validation split.
T=$(sed -n 's/^[[:space:]]*block_size[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$config" | head -1)
val_file=$(sed -n 's/^[[:space:]]*val_file[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p' "$config" | head -1)
extrap="$out/extrapolation.csv"
if [ ! -f "$extrap" ] || [ "$(wc -l < "$extrap")" -ne $(( total * 3 + 1 )) ]; then
  echo "[compare] length extrapolation at T=$T, $((2*T)), $((4*T))"
  echo "pos,seed,seq_len,loss" > "$extrap.tmp"
  for seed in $(seq 1 "$seeds"); do
    for variant in "${vlist[@]}"; do
      for mult in 1 2 4; do
        len=$((T * mult))
        if [ "$variant" = learned ] && [ $mult -gt 1 ]; then
          echo "$variant,$seed,$len,nan" >> "$extrap.tmp"; continue
        fi
        # The same tokens at every length: 2T and 4T windows cover 4T-token spans.
        line=$(./eval --weights "$out/$variant-s$seed/model.safetensors" --data "$val_file" \
                      --seq-len "$len" --batch-size $((4 / mult)) --batches 32 --threads 0)
        loss=$(sed -n 's/.* loss=\([^ ]*\).*/\1/p' <<< "$line")
        echo "$variant,$seed,$len,$loss" >> "$extrap.tmp"
      done
    done
  done
  mv "$extrap.tmp" "$extrap"
fi

/usr/bin/python3 scripts/report.py "$out" "${vlist[@]}" --name "$setup"
echo "[compare] done in $(( ($(date +%s) - start_all) / 60 )) min: $out/report.md"
