#!/usr/bin/env bash
# `make reproduce RUN=...`: trains a finished run again and says whether its
# log comes out bit-identical, or where it first differs.
#
#   scripts/run/reproduce.sh RUN_DIR          a run directory of ./train (config.ini, log.csv)
#   scripts/run/reproduce.sh STUDY/logs/VARIANT-sSEED.csv
#                                             a committed study log: trained from the study's
#                                             config.ini (STUDY/config.ini) with the variant's
#                                             flags (compare.sh --variant-flags), seed SEED and
#                                             one thread, as make compare runs it
#
# The run's data files (config.ini's [data]) must be there; the KJV and GCIDE
# corpora are made as make compare makes them. The new run goes to a
# temporary directory (kept if it differs). Compared: every row's step,
# train_loss, val_loss, lr and grad_norm (not the timings), as text, so
# "bit-identical" means every printed digit of every row.
#
# A run made with reproducible = 1 (RUN_DIR/machine.txt says so) re-runs bit for
# bit on any x86-64 CPU with AVX2 and FMA; any other run only on a CPU, build
# and thread count like the ones that made it (docs/TRAINING.md, "Bit for bit on any CPU").
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh

run=${1:-}
if [ -z "$run" ] || [ "$run" = -h ] || [ "$run" = --help ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d'; [ -n "$run" ]; exit
fi
flags=()
if [ -d "$run" ]; then
  config=$run/config.ini; log=$run/log.csv
  for f in "$config" "$log"; do
    [ -f "$f" ] || { echo "reproduce: $f: no such file (RUN must be a run directory of ./train)" >&2; exit 2; }
  done
elif [ -f "$run" ] && [[ "$run" == */logs/*-s*.csv ]]; then
  log=$run; config=$(dirname "$(dirname "$run")")/config.ini
  [ -f "$config" ] || { echo "reproduce: $config: no such file (the study's config beside logs/)" >&2; exit 2; }
  name=$(basename "$run" .csv); variant=${name%-s*}; seed=${name##*-s}
  read -r -a flags <<< "$(bash scripts/run/compare.sh --variant-flags "$variant")"
  flags+=(--seed="$seed" --threads=1)
else
  echo "reproduce: $run: not a run directory nor a study log (STUDY/logs/VARIANT-sSEED.csv)" >&2; exit 2
fi

make --no-print-directory -s all
# The corpora make compare trains on, made the same way if missing.
for corpus in kjv gcide; do
  if grep -q "data/$corpus/" "$config" && [ ! -f "data/$corpus/val.bin" ]; then
    bash scripts/run/get_data.sh "$corpus"
    ./prepare --vocab-size 2048 --val-fraction 0.05 --pretokenizer byte-classes --out-dir "data/$corpus" "data/$corpus.txt"
  fi
done

machine=${log%.csv}.machine.txt   # a committed log's record (publish_results.sh)
[ -d "$run" ] && machine=$run/machine.txt
if [ -f "$machine" ] && grep -q '^reproducible = 1' "$machine"; then
  echo "reproduce: $run was made with reproducible = 1: it re-runs bit for bit on any x86-64 CPU with AVX2 and FMA"
  # and so is the re-run: a study's config.ini does not hold the key (compare.sh passes it on the
  # command line), and without it this CPU's own engine and kernels would run (matmul = auto)
  flags+=(--reproducible=1)
else
  echo "reproduce: $run was not made with reproducible = 1: its bits depend on the CPU, build and threads that made it" \
       "(${machine}: $( [ -f "$machine" ] && sed -n 's/^cpu = //p' "$machine" | head -1 || echo 'not recorded'))"
fi

out=$(mktemp -d /tmp/ropelab-reproduce.XXXXXX)
echo "reproduce: training again in $out/run ..."
./train "$config" "${flags[@]}" --out_dir="$out/run" --quiet
rc=0
/usr/bin/python3 - "$log" "$out/run/log.csv" <<'PY' || rc=$?
import csv, sys
cols = ["step", "train_loss", "val_loss", "lr", "grad_norm"]
def rows(path):
    with open(path) as f:
        return [[r[c] for c in cols] for r in csv.DictReader(f)]
old, new = rows(sys.argv[1]), rows(sys.argv[2])
for a, b in zip(old, new):
    if a != b:
        col = next(c for c, x, y in zip(cols, a, b) if x != y)
        print(f"reproduce: first difference at step {a[0]}, {col}: logged {a[cols.index(col)]}, "
              f"re-run {b[cols.index(col)]}")
        sys.exit(1)
if len(old) != len(new):
    print(f"reproduce: the logs agree on their first {min(len(old), len(new))} rows, but the logged run has "
          f"{len(old)} rows and the re-run {len(new)}")
    sys.exit(1)
print(f"reproduce: bit-identical ({len(old)} rows, steps {old[0][0]}..{old[-1][0]})")
PY
if [ $rc -eq 0 ]; then
  rm -rf "$out"
elif [ -f "$machine" ]; then   # where the two ran, when they did not run the same engine or kernels
  for key in engine openblas_kernels; do
    logged=$(sed -n "s/^$key = //p" "$machine" | head -1); rerun=$(sed -n "s/^$key = //p" "$out/run/machine.txt" | head -1)
    [ "$logged" = "$rerun" ] || echo "reproduce: $key: logged on '$logged', re-run on '$rerun'"
  done
fi
exit $rc
