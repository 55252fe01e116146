#!/usr/bin/env bash
# The sweeps of `make compare SETUP=budget|size|frontier` (issue: how much
# faster, and does it last?), each one resumable command: every run is a
# compare.sh run (reproducible = 1, one thread, two at a time), a finished or
# committed run is never trained again, and the whole validation split's loss
# of each model is part of its run (compare.sh --final-eval).
#
#   scripts/run/sweep.sh budget|size|frontier [--jobs N] [--retrain]
#
# All train the default model's setup on GCIDE (configs/compare-gcide.ini:
# 10.7M training tokens; in budget and size the longest run, 9,600 steps of
# 8 x 128 tokens, draws 0.92 epochs and no run goes round the corpus).
#
# budget  rope, alibi and learned, each with its own whole schedule (warmup,
#         cosine and evaluations scaled to the budget: compare.sh's -stepsN)
#         at 300, 600, 1,200, 2,400 and 4,800 steps, 3 seeds, each scheme at
#         its best lr for this corpus: learned 4e-3, its best on GCIDE
#         (SETUP=gcide-lr: 4.6371 against 4.6570 at 8e-3; the KJV lr study's
#         8e-3 is within 0.001 of its 4e-3 there, undecided), rope 4e-3 (tied
#         with 8e-3 on GCIDE within 0.001, and best in the lr study), alibi
#         4e-3 (the lr study's; no GCIDE check). Learned also at 9,600 steps,
#         so that the budget it needs to match rope at 4,800 is bracketed. The
#         lr checks (1 seed): at 4,800 steps half each scheme's lr, and learned
#         at 8e-3, the KJV study's best; learned's first runs at 8e-3 (300 and
#         600 steps, 3 seeds) are kept as the same check at small budgets. The
#         report takes each scheme's lr with the most runs as its line and
#         every other lr as a check. Budgets in increasing order: a sweep
#         stopped early has its smaller budgets whole.
# size    widths 64, 96, 128 and 192 with width/32 layers and heads
#         (head_dim 32 throughout: 98k to 2.65M non-embedding parameters, 27x),
#         rope against learned at 600 steps (the same 614k tokens at every
#         size). Per width: lr 2e-3, 4e-3 and 8e-3 on seed 1, one more lr
#         beyond the grid's end where a scheme's best lies on it, then seeds 2
#         and 3 at each scheme's best (by the whole validation split's loss);
#         then learned at its best lr with 1,200 and 2,400 steps (seeds 1 and
#         2), so that the budget learned needs to match rope at 600 steps (the
#         multiplier K) is read at each size as in the budget sweep.
#         Widths in increasing order.
# frontier the compute-optimal frontier of rope and learned (issue 48): three
#         compute budgets over 8x (learned also a fourth), 4-5 widths each
#         (more where a scheme's minimum falls on an edge), each run's steps
#         from its budget by the study's FLOP count, each width at its lr
#         rule's lr, seeds 1-2 and seed 3 at each best size; the lr checks
#         first, then the budgets in increasing order. The budgets, sizes,
#         lrs, FLOP count, order and every decision taken from finished runs
#         are scripts/run/frontier_plan.py's, which documents them (`next`
#         prints the batch to train). FRONTIER_SCALE=S: the same plan with
#         every budget / S, into runs/compare-frontier-scaleS, evaluated on
#         the validation split's first 64 windows (one batch at each twelfth):
#         the pipeline's smoke run.
#
# Output: runs/compare-budget/, runs/compare-size/, runs/compare-frontier/
# (RUN_DIRs as compare.sh makes them); committed logs in docs/results/NAME/
# are adopted. The reports: scripts/report/sweep_report.py (budget, size),
# scripts/report/frontier_report.py (frontier).
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh
[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
setup=$1; shift
config=configs/compare-gcide.ini
out=runs/compare-$setup
committed=docs/results/$setup/logs
# The data: the committed study's record (docs/results/SETUP/data.txt) where there
# is one, else the GCIDE studies' recipe (compare.sh finds or makes it, and checks it).
data_record=configs/data/gcide-byte-classes.txt


scale=${FRONTIER_SCALE:-1}
if [ "$setup" = frontier ] && [ "$scale" != 1 ]; then
  # The smoke run: a directory of its own, no committed logs, and a config whose
  # validation split is the first 64 windows of GCIDE's, one batch of it at each
  # twelfth (the whole split's evaluation of each run would cost more than the run).
  out=runs/compare-frontier-scale$scale; committed=""
  mkdir -p "$out/smoke"
  data=$(bash scripts/run/data_dir.sh "$data_record" | tail -1)   # the studies' GCIDE data, checked
  data_record=""   # (the config below names it, with the smaller validation split)
  /usr/bin/python3 - "$data/val.bin" "$out/smoke/val.bin" <<'EOF'
import struct, sys
src, dst = sys.argv[1:]
data = open(src, "rb").read()
n = 64 * 128 + 1                       # 64 windows and the last one's target
head = bytearray(data[:1024])          # 256 int32: magic, version, count, tokenizer checksum, 0...
struct.pack_into("<i", head, 8, n)
open(dst, "wb").write(bytes(head) + data[1024:1024 + 2 * n])
EOF
  sed -e "s|^tokenizer *=.*|tokenizer = $data/tokenizer.bin|" -e "s|^train_file *=.*|train_file = $data/train.bin|" \
      -e "s|^val_file *=.*|val_file = $out/smoke/val.bin|" -e "s|^eval_batches *=.*|eval_batches = 1|" "$config" \
    > "$out/smoke/compare-gcide.ini"
  config=$out/smoke/compare-gcide.ini
fi
common=(--config "$config" --out "$out" ${committed:+--committed "$committed"} ${data_record:+--data-record "$data_record"}
        --no-extrapolation --final-eval --no-report "$@")

compare() { bash scripts/run/compare.sh "${common[@]}" "$@"; }

# The whole validation split's loss of RUN (compare.sh --final-eval), or nothing.
final_loss() { sed -n 's/.* loss=\([^ ]*\).*/\1/p' "$out/$1/final_eval.txt" 2>/dev/null; }

# The lr of the lowest final loss among SCHEME-wW-lrX-steps600-s1 for X in LRS.
best_lr() {
  local scheme=$1 w=$2 lr loss best="" best_loss=""
  for lr in $3; do
    loss=$(final_loss "$scheme-w$w-lr$lr-steps600-s1")
    [ -n "$loss" ] || continue
    if [ -z "$best" ] || awk -v a="$loss" -v b="$best_loss" 'BEGIN { exit !(a < b) }'; then
      best=$lr best_loss=$loss
    fi
  done
  echo "$best"
}

case "$setup" in
  budget)
    for n in 300 600 1200 2400 4800; do
      echo "[sweep budget] $n steps"
      compare --seeds 3 --variants "rope-lr0.004-steps$n alibi-lr0.004-steps$n learned-lr0.004-steps$n"
    done
    echo "[sweep budget] learned at 9600 steps"
    compare --seeds 3 --variants "learned-lr0.004-steps9600"
    echo "[sweep budget] the lr checks at 4800 steps"
    compare --seeds 1 --variants "rope-lr0.002-steps4800 alibi-lr0.002-steps4800 learned-lr0.002-steps4800 learned-lr0.008-steps4800"
    ;;
  size)
    grid="0.002 0.004 0.008"
    for w in 64 96 128 192; do
      echo "[sweep size] width $w: lr $grid, seed 1"
      compare --seeds 1 --variants "$(for s in rope learned; do for lr in $grid; do printf '%s ' "$s-w$w-lr$lr-steps600"; done; done)"
      best=()
      for s in rope learned; do
        lr=$(best_lr "$s" "$w" "$grid")
        case "$lr" in   # on the grid's edge: one step further
          0.002) more=0.001 ;;
          0.008) more=0.016 ;;
          *) more="" ;;
        esac
        if [ -n "$more" ]; then
          echo "[sweep size] width $w: $s is best at the grid's end ($lr); lr $more too"
          compare --seeds 1 --variants "$s-w$w-lr$more-steps600"
          lr=$(best_lr "$s" "$w" "$grid $more")
        fi
        [ -n "$lr" ] || { echo "sweep.sh: width $w, $s: no finished run to pick an lr from" >&2; exit 1; }
        best+=("$s-w$w-lr$lr")
      done
      echo "[sweep size] width $w: seeds 1-3 at the best lr: ${best[*]}"
      compare --seeds 3 --variants "${best[0]}-steps600 ${best[1]}-steps600"
      echo "[sweep size] width $w: ${best[1]} at 1200 and 2400 steps, seeds 1-2"
      compare --seeds 2 --variants "${best[1]}-steps1200 ${best[1]}-steps2400"
    done
    ;;
  frontier)
    export FRONTIER_SCALE=$scale
    prev=""
    while :; do
      # "SEEDS VARIANT ...": the first batch not finished (exit 3: an lr check failed)
      batch=$(/usr/bin/python3 scripts/run/frontier_plan.py next "$out")
      [ -n "$batch" ] || break
      [ "$batch" != "$prev" ] || { echo "sweep.sh: frontier: the batch '$batch' is still not finished" >&2; exit 1; }
      prev=$batch
      compare --seeds "${batch%% *}" --variants "${batch#* }"
    done
    /usr/bin/python3 scripts/report/frontier_report.py "$out"
    echo "[sweep frontier] done: $out/report.md"
    exit 0
    ;;
  *) echo "sweep.sh: unknown sweep '$setup' (budget, size, frontier)" >&2; exit 2 ;;
esac
/usr/bin/python3 scripts/report/sweep_report.py "$setup" "$out"
echo "[sweep $setup] done: $out/report.md"
