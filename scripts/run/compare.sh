#!/usr/bin/env bash
# `make compare`: train every positional scheme on the same corpus and config
# for several seeds, evaluate length extrapolation and write a report.
#
#   scripts/run/compare.sh [--setup NAME] [--seeds N] [--jobs N] [--config FILE --out DIR] [--variants "a b ..."]
#
#   --setup NAME  one of the replication's setups (default: default):
#                   default  configs/compare.ini on the KJV: rope, learned,
#                            sinusoidal, t5, alibi, none, and three
#                            sinusoidal_scale ablations (about 45 min)
#                   gcide    the same config on the GCIDE dictionary (about 25 min)
#                   medium   configs/compare-medium.ini on the KJV (about 2 h on 2 quiet cores: 15 runs of about 15 min, two at a time)
#                   all      the three above, then docs-ready summary
#                            runs/compare-summary.md
#                   paired   configs/compare.ini, the six schemes for 10 seeds
#                            (runs/compare-paired; paired statistics, about 2 h)
#                   lr       configs/compare.ini, the six schemes at every lr of
#                            --lrs, 3 seeds (runs/compare-lr; each lr with
#                            min_lr = lr/10 as in the config; the config's own
#                            lr reuses the paired setup's finished runs; plus
#                            1.6e-2 for sinusoidal, t5 and learned)
#                   llama    configs/compare-llama.ini (the default experiment on the
#                            LLaMA-style block): the six schemes, 3 seeds (about 40 min)
#                   llama-lr the same block, rope and learned at every lr of --lrs, 1 seed
#                            (runs/compare-llama-lr; the config's lr reuses the llama runs),
#                            and rope at 1.6e-2
#                   gcide-lr the gcide setup, rope and learned at every lr of --lrs, 1 seed
#                            (runs/compare-gcide-lr; the config's lr reuses the gcide runs),
#                            and rope at 1.6e-2
#                   medium-lr configs/compare-medium.ini, rope and learned at 5e-4, 2e-3
#                            and 4e-3 (the config's is 1e-3), 1 seed (about 17-40 min a run)
#                   budget   rope, alibi and learned on GCIDE, each with its own schedule at
#                            300 to 4,800 steps (learned to 9,600), 3 seeds (scripts/run/sweep.sh;
#                            about 14 CPU-hours)
#                   size     rope and learned on GCIDE at widths 64 to 192, each at its own lr,
#                            3 seeds, learned also at 2x and 4x the steps (scripts/run/sweep.sh;
#                            about 6.5 CPU-hours)
#                   frontier rope and learned on GCIDE at 3 compute budgets over 8x (learned
#                            also a 4th), 4-5 widths each, each at its lr rule's lr, 2 seeds,
#                            3 at each best size: the compute-optimal frontier
#                            (scripts/run/sweep.sh, frontier_plan.py; about 17 CPU-hours)
#                   quick    configs/compare-quick.ini, 2 seeds (a couple of minutes)
#   --seeds N     seeds 1..N (default 3)
#   --jobs N      runs at a time, each on one thread (default: the number of cores);
#                 --jobs 1 runs one at a time on the config's threads.
#   --config FILE --out DIR   a custom comparison (variants rope learned sinusoidal t5)
#   --variants "..."          replaces the setup's list
#   --train-flags "..."       added to every run (e.g. "--precision=bf16": the bf16 replication)
#   --lrs "..."               the lr setup's grid (default "0.0005 0.001 0.002 0.004 0.008")
#   --no-extrapolation        skip the length-extrapolation evaluations
#   --no-reproducible         train without reproducible = 1 (by default every run is
#                             reproducible: the same bits on any x86-64 CPU with AVX2
#                             and FMA; docs/TRAINING.md, "Bit for bit on any CPU")
#   --retrain                 train every run here, even one whose log is committed
#                             (docs/results/NAME/logs, otherwise adopted as finished):
#                             how a committed study is re-made
#   --committed DIR           a custom comparison's committed logs (DIR/VARIANT-sSEED.csv), adopted
#   --data-record FILE        the data record of a custom comparison's data (src/data/data_record.h;
#                             default: the committed study's STUDY/data.txt, else the setup's corpus
#                             recipe configs/data/*.txt, else none: the config's data as it is)
#   --final-eval              after each run, ./eval of its model on the whole validation split
#                             into RUN/final_eval.txt (committed as logs/VARIANT-sSEED.eval.txt)
#   --no-report               no report at the end (a sweep calls this script once per budget or size)
#   --variant-flags VARIANT   print the ./train flags of VARIANT and exit
# A variant is a scheme, optionally followed by -scaleS (sinusoidal_scale=S),
# -lrX (lr=X, min_lr=X/10), -stepsN (N steps, warmup, evaluations and
# checkpoints every N/12 steps: the schedule scaled to the budget) and -wW
# (width W, W/32 layers and W/32 heads of 32 dims): sinusoidal-scale0.02,
# learned-lr0.004, rope-lr0.004-steps4800, learned-w192-lr0.002.
#
# SETUP=budget, size and frontier are the sweeps of scripts/run/sweep.sh, which
# calls this script once per budget, size or batch of runs.
#
# Every run is identical but for its variant: same config, same seed -> same
# data order and the same initial values in every parameter the schemes
# share. Finished runs (RUN/done) are reused and an interrupted run resumes
# from its checkpoint, so an interrupted comparison continues where it stopped.
# Output in DIR: RUN_DIRS variant-sSEED/, extrapolation.csv, report.md,
# summary.json, val_loss_vs_step.png, val_loss_vs_time.png, wall_time.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh

# The flags of one variant: SCHEME[-scaleS][-lrX].
variant_flags() {
  local rest=${1#*-} flags="--pos=${1%%-*}" part
  [ "$rest" = "$1" ] && rest=""
  for part in ${rest//-/ }; do
    case "$part" in
      scale*) flags+=" --sinusoidal_scale=${part#scale}" ;;
      lr*)    flags+=" --lr=${part#lr} --min_lr=$(awk -v x="${part#lr}" 'BEGIN { printf "%.10g", x / 10 }')" ;;
      steps*) local n=${part#steps}
              flags+=" --steps=$n --warmup_steps=$((n / 12)) --eval_every=$((n / 12)) --save_every=$((n / 12))" ;;
      w*)     local w=${part#w}
              flags+=" --d_model=$w --n_layer=$((w / 32)) --n_head=$((w / 32))" ;;
      *) echo "compare.sh: variant '$1': unknown part '$part'" >&2; return 2 ;;
    esac
  done
  echo "$flags"
}

setup=default; seeds=3; jobs=$(nproc); config=""; out=""; variants=""; train_flags=""; data_record=""
lrs="0.0005 0.001 0.002 0.004 0.008"; extrapolate=1; reproducible=1; retrain=0; final_eval=0; report=1; reuse=""; reuse_committed=""; committed=""
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
    --lrs) lrs=$2; shift ;;
    --lrs=*) lrs=${1#*=} ;;
    --no-extrapolation) extrapolate=0 ;;
    --no-reproducible) reproducible=0 ;;
    --retrain) retrain=1 ;;
    --committed) committed=$2; shift ;;
    --committed=*) committed=${1#*=} ;;
    --data-record) data_record=$2; shift ;;
    --data-record=*) data_record=${1#*=} ;;
    --final-eval) final_eval=1 ;;
    --no-report) report=0 ;;
    --variant-flags) variant_flags "$2"; exit ;;   # scripts/run/reproduce.sh: a committed log's flags
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$setup" = budget ] || [ "$setup" = size ] || [ "$setup" = frontier ]; then
  exec bash scripts/run/sweep.sh "$setup" --jobs "$jobs" $([ "$retrain" = 1 ] && echo --retrain)
fi

if [ "$setup" = all ]; then
  for s in default gcide medium; do
    bash "$0" --setup "$s" --seeds "$seeds" --jobs "$jobs"
  done
  /usr/bin/python3 scripts/report/report.py --summary runs/compare-summary.md runs/compare runs/compare-gcide runs/compare-medium
  exit 0
fi

# SCHEME-lrX for every scheme given and every lr of the grid.
lr_variants() { local s l; for s in $1; do for l in $lrs; do printf '%s-lr%s ' "$s" "$l"; done; done; }

corpus=kjv
case "$setup" in
  default) config=configs/compare.ini; out=${out:-runs/compare}
           v="rope learned sinusoidal t5 alibi none sinusoidal-scale1 sinusoidal-scale0.0883883 sinusoidal-scale0.00125" ;;
  gcide)   config=configs/compare-gcide.ini; out=${out:-runs/compare-gcide}; corpus=gcide
           v="rope learned sinusoidal t5 alibi" ;;
  medium)  config=configs/compare-medium.ini; out=${out:-runs/compare-medium}
           v="rope learned sinusoidal t5 alibi" ;;
  paired)  config=configs/compare.ini; out=${out:-runs/compare-paired}; committed=docs/results/paired/logs
           [ "$seeds" = 3 ] && seeds=10; final_eval=1
           v="rope learned sinusoidal t5 alibi none" ;;
  lr)      config=configs/compare.ini; out=${out:-runs/compare-lr}; extrapolate=0; committed=docs/results/lr/logs
           reuse=runs/compare-paired; reuse_committed=docs/results/paired/logs
           # + 1.6e-2 where a scheme's best lay at 8e-3, the grid's edge, on some seed
           v="$(lr_variants "rope learned sinusoidal t5 alibi none")sinusoidal-lr0.016 t5-lr0.016 learned-lr0.016" ;;
  llama)   config=configs/compare-llama.ini; out=${out:-runs/compare-llama}; extrapolate=0
           committed=docs/results/llama/logs
           v="rope learned sinusoidal t5 alibi none" ;;
  llama-lr) config=configs/compare-llama.ini; out=${out:-runs/compare-llama-lr}; extrapolate=0
           committed=docs/results/llama-lr/logs; reuse=runs/compare-llama; reuse_committed=docs/results/llama/logs
           [ "$seeds" = 3 ] && seeds=1
           v="$(lr_variants "rope learned")rope-lr0.016" ;;
  gcide-lr) config=configs/compare-gcide.ini; out=${out:-runs/compare-gcide-lr}; corpus=gcide; extrapolate=0
           committed=docs/results/gcide-lr/logs; reuse=runs/compare-gcide; reuse_committed=docs/results/gcide/logs
           [ "$seeds" = 3 ] && seeds=1
           v="$(lr_variants "rope learned")rope-lr0.016" ;;
  medium-lr) config=configs/compare-medium.ini; out=${out:-runs/compare-medium-lr}; extrapolate=0
           committed=docs/results/medium-lr/logs; reuse=runs/compare-medium; reuse_committed=docs/results/medium/logs
           [ "$seeds" = 3 ] && seeds=1
           [ "$lrs" = "0.0005 0.001 0.002 0.004 0.008" ] && lrs="0.0005 0.001 0.002 0.004"
           v=$(lr_variants "rope learned") ;;
  quick)   config=configs/compare-quick.ini; out=${out:-runs/compare-quick}
           [ "$seeds" = 3 ] && seeds=2
           v="rope learned sinusoidal t5" ;;
  custom)  [ -n "$out" ] || { echo "compare.sh: --config needs --out DIR" >&2; exit 2; }
           v="rope learned sinusoidal t5" ;;
  *) echo "compare.sh: unknown setup '$setup' (default, gcide, medium, paired, lr, llama, llama-lr, gcide-lr, medium-lr," \
          "budget, size, frontier, all, quick)" >&2; exit 2 ;;
esac
variants=${variants:-$v}
[ -f "$config" ] || { echo "compare.sh: $config: no such config file" >&2; exit 2; }

# The plots need matplotlib; install it if missing (as root) or say how.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q python3-matplotlib >/dev/null
  else echo "compare.sh: needs python3-matplotlib: sudo apt-get install -y python3-matplotlib" >&2; exit 1; fi
fi
bash scripts/run/build.sh all

# The data every run trains on, found or made by its record (scripts/run/data_dir.sh):
# the committed study's (the data its logs were trained on, with their checksums),
# else --data-record, else the setup's corpus recipe (the byte-class pre-tokenizer of
# the studies' tokenizers: docs/DATA.md). A custom comparison without a record
# trains on the config's data as it is (each run still records what it was).
study_record=""
if [ -n "$committed" ]; then study_record=$(dirname "$committed")/data.txt
elif [ "$setup" != custom ]; then study_record=docs/results/$setup/data.txt
fi
if [ -n "$study_record" ] && [ -f "$study_record" ]; then data_record=$study_record
elif [ -z "$data_record" ] && [ "$setup" != custom ]; then data_record=configs/data/$corpus-byte-classes.txt
fi
data_flags=()
val_file=$(sed -n 's/^[[:space:]]*val_file[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p' "$config" | head -1)
if [ -n "$data_record" ]; then
  data=$(bash scripts/run/data_dir.sh "$data_record" | tail -1)
  data_flags=(--tokenizer="$data/tokenizer.bin" --train_file="$data/train.bin" --val_file="$data/val.bin")
  val_file=$data/val.bin
  echo "[compare] data: $data (the data of $data_record)"
fi

# Only OpenBLAS fp32 is reproducible: a replication on another engine or in
# bf16 (--train-flags) trains without it.
case " $train_flags " in
  *" --precision=bf16 "*|*" --matmul=onednn "*|*" --matmul=reference "*) reproducible=0 ;;
esac
# The config's own lr: a -lrX variant at that lr is the plain scheme's run.
config_lr=$(sed -n 's/^[[:space:]]*lr[[:space:]]*=[[:space:]]*\([0-9.eE+-]*\).*/\1/p' "$config" | head -1)

mkdir -p "$out"
cp "$config" "$out/config.ini"
read -r -a vlist <<< "$variants"
total=$(( ${#vlist[@]} * seeds ))
start_all=$(date +%s)
# The study's wall time over every call that trained its runs (a study stopped and
# resumed adds its calls up), written after each finished run, so that a call
# that is stopped loses at most the time since its last finished run.
wall_before=$(sed -n 's/^wall_s=//p' "$out/wall_time.txt" 2>/dev/null || true)
wall_before=${wall_before:-0}
record_wall() { echo "wall_s=$(( wall_before + $(date +%s) - start_all ))" > "$out/wall_time.txt"; }

T=$(sed -n 's/^[[:space:]]*block_size[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$config" | head -1)
eval_flags=()
[ "$reproducible" = 1 ] && eval_flags+=(--reproducible)

# The whole validation split's loss of DIR's model into DIR/final_eval.txt (with the
# seconds it took), on THREADS threads (0: all); written whole or not at all.
final_eval_of() {
  local dir=$1 threads=$2 t0=$SECONDS
  ./eval --weights "$dir/model.safetensors" --data "$val_file" --batch-size 8 --threads "$threads" \
    "${eval_flags[@]}" > "$dir/final_eval.txt.tmp" && echo "eval_s=$((SECONDS - t0))" >> "$dir/final_eval.txt.tmp" &&
    mv "$dir/final_eval.txt.tmp" "$dir/final_eval.txt"
}

# One run: fresh, or resumed from its checkpoint; RUN/done marks it finished.
# With --final-eval, the whole validation split's loss is part of the run.
run_one() {
  local variant=$1 seed=$2 dir="$out/$1-s$2" extra=() flags
  [ "$jobs" -gt 1 ] && extra=(--threads=1 --quiet)
  flags=$(variant_flags "$variant") || return 2
  if [ -f "$dir/checkpoint.safetensors" ]; then   # (a finished run: nothing to train)
    ./train --resume "$dir" "${extra[@]}" || return 1
  else
    rm -rf "$dir"
    # shellcheck disable=SC2046,SC2086
    ./train $flags --reproducible="$reproducible" $train_flags --seed="$seed" --out_dir="$dir" "${extra[@]}" \
      "${data_flags[@]}" "$config" ||
      return 1
  fi
  if [ "$final_eval" = 1 ]; then
    final_eval_of "$dir" "$([ "$jobs" -gt 1 ] && echo 1 || echo 0)" || return 1
  fi
  touch "$dir/done"
}

# A run another setup already finished with exactly these flags (an lr
# setup at the config's lr: the plain scheme's run of the setup it extends)
# is linked, not trained; or, if only its committed log is here, adopted.
link_reused() {
  local variant=$1 seed=$2 base
  [ -n "$reuse" ] && [ ! -e "$out/$variant-s$seed" ] || return 0
  [ "${variant##*-lr}" != "$variant" ] && awk -v a="${variant##*-lr}" -v b="$config_lr" 'BEGIN { exit !(a + 0 == b + 0) }' || return 0
  base=${variant%-lr*}
  if [ -f "$reuse/$base-s$seed/done" ]; then
    ln -s "$(cd "$reuse/$base-s$seed" && pwd)" "$out/$variant-s$seed"
  elif [ "$retrain" = 0 ] && [ -n "$reuse_committed" ] && [ -f "$reuse_committed/$base-s$seed.csv" ]; then
    mkdir -p "$out/$variant-s$seed" && cp "$reuse_committed/$base-s$seed.csv" "$out/$variant-s$seed/log.csv" &&
      touch "$out/$variant-s$seed/done"
  fi
  return 0
}

# A run whose log was committed (COMMITTED/VARIANT-sSEED.csv, a long study
# carried over from another machine) counts as finished: its log is what the
# report reads; only the extrapolation, which needs its model, skips it.
adopt_committed() {
  local variant=$1 seed=$2 log
  log="$committed/$variant-s$seed.csv"
  [ "$retrain" = 0 ] && [ -n "$committed" ] && [ -f "$log" ] && [ ! -e "$out/$variant-s$seed" ] || return 0
  mkdir -p "$out/$variant-s$seed" && cp "$log" "$out/$variant-s$seed/log.csv" || return 1
  if [ -f "${log%.csv}.eval.txt" ]; then cp "${log%.csv}.eval.txt" "$out/$variant-s$seed/final_eval.txt" || return 1; fi
  touch "$out/$variant-s$seed/done"
}

# The step costs published beside a study's logs (scripts/run/step_costs.sh)
# give its report the speed-ups in time; one measured here is kept.
if [ -n "$committed" ] && [ -f "$(dirname "$committed")/step_costs.csv" ] && [ ! -f "$out/step_costs.csv" ]; then
  cp "$(dirname "$committed")/step_costs.csv" "$out/"
fi

n=0; finished=0; reused=0; running=0; failed=0
for seed in $(seq 1 "$seeds"); do
  for variant in "${vlist[@]}"; do
    n=$((n+1))
    link_reused "$variant" "$seed"
    adopt_committed "$variant" "$seed"
    if [ -f "$out/$variant-s$seed/done" ]; then
      echo "[compare $n/$total] $variant seed $seed: finished earlier, reused"
      finished=$((finished+1)); reused=$((reused+1)); continue
    fi
    if [ "$running" -ge "$jobs" ]; then
      wait -n || failed=$((failed+1))
      running=$((running-1)); finished=$((finished+1)); record_wall
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
      finished=$((finished+1)); record_wall
    fi
  done
done
while [ "$running" -gt 0 ]; do wait -n || failed=$((failed+1)); running=$((running-1)); record_wall; done
# --final-eval for runs finished before it was asked for (or by an older compare.sh).
if [ "$final_eval" = 1 ]; then
  for seed in $(seq 1 "$seeds"); do
    for variant in "${vlist[@]}"; do
      dir="$out/$variant-s$seed"
      [ -f "$dir/done" ] && [ -f "$dir/model.safetensors" ] && [ ! -f "$dir/final_eval.txt" ] || continue
      echo "[compare] $variant seed $seed: the final model on the whole validation split"
      final_eval_of "$dir" 0 || failed=$((failed+1))
    done
  done
fi
if [ "$failed" -gt 0 ]; then
  echo "compare.sh: $failed run(s) failed; see $out/*.log (run again to continue)" >&2
  exit 1
fi
if [ "$reused" -lt "$total" ]; then record_wall; fi   # this call trained something (and ran its final evals)

# Length extrapolation: each final model at T, 2T and 4T on the validation split.
extrap="$out/extrapolation.csv"
if [ "$extrapolate" = 1 ] && { [ ! -f "$extrap" ] || [ "$(wc -l < "$extrap")" -ne $(( total * 3 + 1 )) ]; }; then
  echo "[compare] length extrapolation at T=$T, $((2*T)), $((4*T))"
  echo "pos,seed,seq_len,loss" > "$extrap.tmp"
  for seed in $(seq 1 "$seeds"); do
    for variant in "${vlist[@]}"; do
      for mult in 1 2 4; do
        len=$((T * mult))
        if { [ "$variant" = learned ] && [ $mult -gt 1 ]; } || [ ! -f "$out/$variant-s$seed/model.safetensors" ]; then
          echo "$variant,$seed,$len,nan" >> "$extrap.tmp"; continue
        fi
        # The same tokens at every length: 2T and 4T windows cover 4T-token spans.
        line=$(./eval --weights "$out/$variant-s$seed/model.safetensors" --data "$val_file" \
                      --seq-len "$len" --batch-size $((4 / mult)) --batches 32 --threads 0 \
                      $([ "$reproducible" = 1 ] && echo --reproducible))
        loss=$(sed -n 's/.* loss=\([^ ]*\).*/\1/p' <<< "$line")
        echo "$variant,$seed,$len,$loss" >> "$extrap.tmp"
      done
    done
  done
  mv "$extrap.tmp" "$extrap"
fi

if [ "$report" = 0 ]; then
  echo "[compare] done in $(( ($(date +%s) - start_all) / 60 )) min: $out"
  exit 0
fi
if [ "${setup%lr}" != "$setup" ]; then   # lr, llama-lr, gcide-lr, medium-lr
  # every lr finished in DIR, so a grid extended by --lrs or --variants is reported whole
  /usr/bin/python3 scripts/report/report.py --lr "$out" $(ls "$out" | sed -n 's/-s[0-9]*$//p' | sort -u) --name "$setup"
else
  /usr/bin/python3 scripts/report/report.py "$out" "${vlist[@]}" --name "$setup"
fi
echo "[compare] done in $(( ($(date +%s) - start_all) / 60 )) min: $out/report.md"
