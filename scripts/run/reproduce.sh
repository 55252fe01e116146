#!/usr/bin/env bash
# `make reproduce RUN=... [STEPS=N]`: trains a finished run again and says
# whether its log comes out bit-identical, or where it first differs.
#
#   scripts/run/reproduce.sh RUN_DIR [--steps N]
#                     a run directory of ./train (config.ini, log.csv, data.txt)
#   scripts/run/reproduce.sh STUDY/logs/VARIANT-sSEED.csv [--steps N]
#                     a committed study log: trained from the study's config.ini
#                     (STUDY/config.ini) with the variant's flags (compare.sh
#                     --variant-flags), seed SEED and one thread, as make compare
#                     runs it, on the study's data (STUDY/data.txt)
#   --steps N         check only steps 0..N (a quick answer; the run is the same
#                     run, stopped there)
#
# The data first: the run's data record (RUN_DIR/data.txt, STUDY/data.txt)
# names the tokenizer and token files with their checksums and the recipe
# that makes them; scripts/run/data_dir.sh finds them, or makes them from
# the recipe (and the KJV or GCIDE text) into a directory of their own,
# never replacing data/NAME a user made. Data that differs from the record
# is refused in one line naming both checksums, before any training: a
# difference in the log is then never a difference of data.
#
# The re-run goes to a temporary directory, removed on every exit. Its log is
# compared with the logged one row by row while it trains, and training stops
# at the first row that differs (or after step N). Compared: every row's
# step, train_loss, val_loss, lr and grad_norm (not the timings), as text, so
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
shift
steps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=${2:-}; shift ;;
    --steps=*) steps=${1#*=} ;;
    *) echo "reproduce: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$steps" ] && ! [[ "$steps" =~ ^[1-9][0-9]*$ ]]; then
  echo "reproduce: --steps $steps: expected a whole number of steps, 1 or more" >&2; exit 2
fi

flags=()
if [ -d "$run" ]; then
  config=$run/config.ini; log=$run/log.csv; record=$run/data.txt; machine=$run/machine.txt
  for f in "$config" "$log"; do
    [ -f "$f" ] || { echo "reproduce: $f: no such file (RUN must be a run directory of ./train)" >&2; exit 2; }
  done
elif [ -f "$run" ] && [[ "$run" == */logs/*-s*.csv ]]; then
  study=$(dirname "$(dirname "$run")")
  log=$run; config=$study/config.ini; record=$study/data.txt; machine=${log%.csv}.machine.txt
  [ -f "$config" ] || { echo "reproduce: $config: no such file (the study's config beside logs/)" >&2; exit 2; }
  name=$(basename "$run" .csv); variant=${name%-s*}; seed=${name##*-s}
  read -r -a flags <<< "$(bash scripts/run/compare.sh --variant-flags "$variant")"
  flags+=(--seed="$seed" --threads=1)
else
  echo "reproduce: $run: not a run directory nor a study log (STUDY/logs/VARIANT-sSEED.csv)" >&2; exit 2
fi

bash scripts/run/build.sh all
if [ -f "$record" ]; then
  data=$(bash scripts/run/data_dir.sh "$record" | tail -1)
  flags+=(--tokenizer="$data/tokenizer.bin" --train_file="$data/train.bin" --val_file="$data/val.bin")
  echo "reproduce: the data of $record: $data (the recorded checksums)"
else
  echo "reproduce: $record: no data record (a run of an older ./train): the data config.ini names is used as" \
       "it is, unchecked"
fi

if [ -f "$machine" ] && grep -q '^reproducible = 1' "$machine"; then
  echo "reproduce: $run was made with reproducible = 1: it re-runs bit for bit on any x86-64 CPU with AVX2 and FMA"
  # and so is the re-run: a study's config.ini does not hold the key (compare.sh passes it on the
  # command line), and without it this CPU's own engine and kernels would run (matmul = auto)
  flags+=(--reproducible=1)
else
  echo "reproduce: $run was not made with reproducible = 1: its bits depend on the CPU, build and threads that made it" \
       "(${machine}: $( [ -f "$machine" ] && sed -n 's/^cpu = //p' "$machine" | head -1 || echo 'not recorded'))"
  # and on its engine: matmul = auto measures both at each start, so the re-run takes the one recorded
  engine=$( [ -f "$machine" ] && sed -n 's/^engine = \([a-z]*\) .*/\1/p' "$machine" | head -1 || true)
  if [ -n "$engine" ]; then
    flags+=(--matmul="$engine")
    echo "reproduce: on the engine it trained on, $engine ($machine)"
  fi
fi

out=$(mktemp -d /tmp/ropelab-reproduce.XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "reproduce: training again in $out/run${steps:+ up to step $steps}, compared row by row as it goes ..."
rc=0
/usr/bin/python3 - "$log" "$out/run" "${steps:-0}" ./train "$config" "${flags[@]}" --out_dir="$out/run" --quiet <<'PY' || rc=$?
# Starts ./train, follows its log.csv as it grows and compares each whole row
# with the logged run's; stops training at the first difference, or after
# the asked step.
import csv, io, os, signal, subprocess, sys, time
cols = ["step", "train_loss", "val_loss", "lr", "grad_norm"]
logged_path, run_dir, stop_at, cmd = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
with open(logged_path) as f:
    logged = [[r[c] for c in cols] for r in csv.DictReader(f)]
last = len(logged) - 1 if stop_at == 0 else min(stop_at, len(logged) - 1)
train = subprocess.Popen(cmd)
header, rows, buf, offset = None, 0, "", 0
def verdict(code, text):
    if train.poll() is None:
        train.send_signal(signal.SIGKILL)
    train.wait()
    print("reproduce: " + text)
    sys.exit(code)
while True:
    done = train.poll() is not None
    try:
        with open(os.path.join(run_dir, "log.csv")) as f:
            f.seek(offset)
            chunk = f.read()
            offset += len(chunk.encode())
    except FileNotFoundError:
        chunk = ""
    buf += chunk
    *lines, buf = buf.split("\n")
    for line in lines:
        if header is None:
            header = line.split(",")
            continue
        row = dict(zip(header, line.split(",")))
        new = [row.get(c, "") for c in cols]
        if rows >= len(logged):
            verdict(1, f"the re-run has more rows than the logged run's {len(logged)}")
        if new != logged[rows]:
            col = next(c for c, x, y in zip(cols, logged[rows], new) if x != y)
            verdict(1, f"first difference at step {logged[rows][0]}, {col}: logged {logged[rows][cols.index(col)]}, "
                       f"re-run {new[cols.index(col)]}")
        rows += 1
        if rows > last:
            what = f"{rows} rows, steps {logged[0][0]}..{logged[last][0]}"
            if last < len(logged) - 1:
                what += f", of the logged {len(logged)}"
            verdict(0, f"bit-identical ({what})")
    if done:
        if train.returncode != 0:
            print(f"reproduce: ./train stopped with exit status {train.returncode} after {rows} agreeing rows")
            sys.exit(2)
        verdict(1, f"the logs agree on their first {rows} rows, but the logged run has {len(logged)} rows "
                   f"and the re-run {rows}")
    time.sleep(0.2)
PY
if [ $rc -ne 0 ] && [ -f "$machine" ] && [ -f "$out/run/machine.txt" ]; then
  # where the two ran, when they did not run the same engine or kernels
  for key in engine openblas_kernels; do
    logged=$(sed -n "s/^$key = //p" "$machine" | head -1); rerun=$(sed -n "s/^$key = //p" "$out/run/machine.txt" | head -1)
    [ "$logged" = "$rerun" ] || echo "reproduce: $key: logged on '$logged', re-run on '$rerun'"
  done
fi
exit $rc
