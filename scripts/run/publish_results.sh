#!/usr/bin/env bash
# publish_results.sh: a study's finished runs into docs/results/NAME, the form
# the repository keeps them in: logs/RUN.csv (which compare.sh adopts as
# finished runs on another machine), config.ini, data.txt (the data record
# its runs share: make reproduce re-makes their data from it), wall_time.txt,
# extrapolation.csv, and the report made from those files alone.
#
#   scripts/run/publish_results.sh NAME OUT_DIR [--lr | --sweep budget|size|frontier | VARIANT ...]
#
# OUT_DIR is a compare.sh output directory (runs/compare-NAME). Only runs
# marked finished (RUN/done) are taken. The report is made by
# scripts/report/report.py in a scratch copy holding nothing but the
# published files (and docs/results/NAME/step_costs.csv, if present), so it
# is the report anyone re-makes from the committed logs. --lr: the
# learning-rate report (every SCHEME-lrX found); --sweep: a sweep's report
# (scripts/report/sweep_report.py, or frontier_report.py for the frontier,
# with each run's final_eval.txt, committed as logs/RUN.eval.txt); otherwise
# the VARIANTs, in
# the order the tables list them.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
name=$1 src=$2; shift 2
[ -f "$src/config.ini" ] || { echo "publish_results.sh: $src: not a compare.sh output directory (no config.ini)" >&2; exit 2; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
out=$root/runs/compare-$name
mkdir -p "$out"
n=0
for d in "$src"/*-s[0-9]*; do
  [ -f "$d/done" ] || continue
  r=$(basename "$d"); mkdir -p "$out/$r"; cp "$d/log.csv" "$out/$r/"; touch "$out/$r/done"; n=$((n+1))
  [ -f "$d/final_eval.txt" ] && cp "$d/final_eval.txt" "$out/$r/"
done
[ "$n" -gt 0 ] || { echo "publish_results.sh: $src holds no finished run" >&2; exit 1; }
for f in config.ini wall_time.txt extrapolation.csv; do [ -f "$src/$f" ] && cp "$src/$f" "$out/"; done
dst=docs/results/$name
mkdir -p "$dst/logs"
[ -f "$dst/step_costs.csv" ] && cp "$dst/step_costs.csv" "$out/"
here=$(pwd)
if [ "${1:-}" = --sweep ] && [ "${2:-}" = frontier ]; then
  train_bin=$(sed -n 's/^[[:space:]]*train_file[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p' "$src/config.ini" | head -1)
  tokens=$(od -An -t u4 -j 8 -N 4 "$train_bin" 2>/dev/null | tr -d ' ')
  (cd "$root" && /usr/bin/python3 "$here/scripts/report/frontier_report.py" "runs/compare-$name" \
     ${tokens:+--train-tokens=$tokens})
elif [ "${1:-}" = --sweep ]; then   # budget or size: scripts/report/sweep_report.py
  train_bin=$(sed -n 's/^[[:space:]]*train_file[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p' "$src/config.ini" | head -1)
  tokens=$(od -An -t u4 -j 8 -N 4 "$train_bin" 2>/dev/null | tr -d ' ')
  (cd "$root" && /usr/bin/python3 "$here/scripts/report/sweep_report.py" "$2" "runs/compare-$name" \
     ${tokens:+--train-tokens=$tokens})
elif [ "${1:-}" = --lr ]; then
  (cd "$root" && /usr/bin/python3 "$here/scripts/report/report.py" --lr "runs/compare-$name" \
     $(ls "runs/compare-$name" | sed -n 's/-s[0-9]*$//p' | sort -u) --name "$name")
else
  [ $# -gt 0 ] || { echo "publish_results.sh: name the variants (or --lr)" >&2; exit 2; }
  (cd "$root" && /usr/bin/python3 "$here/scripts/report/report.py" "runs/compare-$name" "$@" --name "$name")
fi
for d in "$out"/*-s[0-9]*; do cp "$d/log.csv" "$dst/logs/$(basename "$d").csv"; done
# what each run ran on (RUN/machine.txt: CPU, kernels, build, engine, reproducible),
# beside its log, for make reproduce
for d in "$src"/*-s[0-9]*; do
  [ -f "$d/done" ] && [ -f "$d/machine.txt" ] && cp "$d/machine.txt" "$dst/logs/$(basename "$d").machine.txt"
  # the whole validation split's loss of a sweep's run (compare.sh --final-eval)
  [ -f "$d/done" ] && [ -f "$d/final_eval.txt" ] && cp "$d/final_eval.txt" "$dst/logs/$(basename "$d").eval.txt"
done
# The study's data record: every run trained here records the data it used
# (RUN/data.txt), and they must all be the same data; adopted runs carry none.
record=""
for d in "$src"/*-s[0-9]*; do
  [ -f "$d/done" ] && [ -f "$d/data.txt" ] || continue
  if [ -z "$record" ]; then record=$d/data.txt
  elif ! diff -q <(grep -v '^;' "$record") <(grep -v '^;' "$d/data.txt") >/dev/null; then
    echo "publish_results.sh: $d/data.txt and $record record different data; a study is one corpus" >&2; exit 1
  fi
done
[ -n "$record" ] && cp "$record" "$dst/data.txt"
for f in "$out"/*; do [ -f "$f" ] && cp "$f" "$dst/"; done
echo "publish_results.sh: $n finished runs of $src in $dst"
