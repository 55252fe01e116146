#!/usr/bin/env bash
# bench_mpi.sh: data-parallel training speed (`make bench-mpi`): ./train as
# one process with 2 threads against `mpirun -np 2 ./train` with 1 thread
# each, and PyTorch the same two ways (one process; DistributedDataParallel
# with the gloo backend, scripts/torch/torch_ddp.py), on configs S and M of
# `make bench` (bench/bench_model.c). Prints a Markdown table.
#
#   S: L=4 C=128 H=4 T=128 B=32 V=2048     M: L=6 C=256 H=8 T=256 B=8 V=4096
#
# The global batch is the config's B on every row: 2 processes run B/2 each.
# ropelab: tokens/s is the median of log.csv's tokens_per_s over the timed
# steps (training step only); the all-reduce time per step and its share of
# the step are ./train's own measurement under mpirun (time inside its one
# MPI_Allreduce after backward: the exposed communication). PyTorch: DDP's
# all-reduce overlaps backward; its exposed cost is the step time minus that
# of steps under no_sync() (scripts/torch/torch_ddp.py).
#
# Data: the KJV corpus tokenised at vocab 2048 and 4096 into build/bench_mpi/
# (./prepare, once; a second or so). Processes: mpirun binds each rank to a
# core (--bind-to core); one-process rows are not bound.
#
# Noise: each measurement is repeated ROUNDS times, the rows of one round
# one after the other (ropelab 1x2, ropelab 2x1, PyTorch 1x2, PyTorch 2x1,
# then again), and each row's fastest
# round (by tokens/s) is reported.
#
# Environment: STEPS (timed steps, default 20), WARMUP (untimed steps first,
# default 3), ROUNDS (default 3), CONFIGS (default "S M"), NO_TORCH=1 to skip
# PyTorch. A smoke run: STEPS=2 WARMUP=1 ROUNDS=1.
set -euo pipefail
cd "$(dirname "$0")/.."   # the repository root: this file is bench/NAME.sh

STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-"S M"}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
MPIRUN=(mpirun --bind-to core -np 2)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --bind-to core -np 2)
command -v mpirun >/dev/null || { echo "mpirun not found: sudo apt-get install -y openmpi-bin libopenmpi-dev" >&2; exit 1; }

have_torch=0
if [ -z "${NO_TORCH:-}" ] && "$PY" -c "import torch, torch.distributed" 2>/dev/null; then have_torch=1; fi

# Token files of each vocabulary size (the KJV text of scripts/run/get_data.sh).
[ -f data/kjv.txt ] || bash scripts/run/get_data.sh
for v in 2048 4096; do
    d=build/bench_mpi/v$v
    if [ ! -f $d/train.bin ]; then
        mkdir -p $d
        ./prepare --vocab-size $v --out-dir $d data/kjv.txt >/dev/null
    fi
done

kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }   # kv LINE KEY -> value
# The sizes of S and M from their one home (bench/util_bench.h), as build/bench_model lists them.
declare -A KEYS VOCAB BATCH SEQ
for cfg in S M; do
    line=$(build/bench_model --list-configs | grep "^bench_config config=$cfg ")
    KEYS[$cfg]="--n_layer=$(kv "$line" L) --d_model=$(kv "$line" C) --n_head=$(kv "$line" H) --block_size=$(kv "$line" T) --batch_size=$(kv "$line" B)"
    VOCAB[$cfg]=$(kv "$line" V); BATCH[$cfg]=$(kv "$line" B); SEQ[$cfg]=$(kv "$line" T)
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ropelab NPROC THREADS CONFIG: one line "tokens_per_s=... ms_per_step=... allreduce_ms=... allreduce_share=..."
ropelab() {
    local np=$1 threads=$2 cfg=$3 d=build/bench_mpi/v${VOCAB[$3]}
    local b=$((BATCH[$cfg] / np)) out=$work/run
    local args=(configs/small.ini ${KEYS[$cfg]} --batch_size=$b --threads=$threads --grad_accum=1
                --tokenizer=$d/tokenizer.bin --train_file=$d/train.bin --val_file=$d/val.bin
                --steps=$((WARMUP + STEPS)) --eval_every=0 --eval_batches=1 --save_every=0
                --out_dir=$out --overwrite)
    local err=$work/stderr
    if [ "$np" -eq 1 ]; then
        ./train "${args[@]}" 2>"$err" || { cat "$err" >&2; return 1; }
    else
        "${MPIRUN[@]}" ./train "${args[@]}" 2>"$err" || { cat "$err" >&2; return 1; }
    fi
    # median tokens/s of the timed steps (rows WARMUP+1 .. WARMUP+STEPS)
    local tok
    tok=$(awk -F, -v w="$WARMUP" 'NR > 1 && $1 > w {print $6}' "$out/log.csv" | sort -g |
          awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}')
    local line ar="0" share="0"
    line=$(grep '^mpi: .*all-reduce' "$err" || true)
    if [ -n "$line" ]; then
        ar=$(sed -n 's/.*all-reduce \([0-9.]*\) ms per step.*/\1/p' <<<"$line")
        share=$(sed -n 's/.* = \([0-9.]*\)% of the step.*/\1/p' <<<"$line")
    fi
    local ms
    ms=$(awk -v t="$tok" -v n=$((BATCH[$cfg] * SEQ[$cfg])) 'BEGIN{printf "%.1f", 1000 * n / t}')
    echo "tokens_per_s=$tok ms_per_step=$ms allreduce_ms=$ar allreduce_share=$share"
}

# torch NPROC THREADS CONFIG
torch_run() {
    local cfg=$3
    "$PY" scripts/torch/torch_ddp.py --config "$cfg" --nproc "$1" --threads "$2" --steps "$STEPS" --warmup "$WARMUP" \
        --tokens build/bench_mpi/v${VOCAB[$cfg]}/train.bin 2>/dev/null | grep '^torch_ddp ' || true
}

# better OLD NEW: the line with more tokens/s
better() {
    if [ -z "$1" ] || awk -v a="$(kv "$2" tokens_per_s)" -v b="$(kv "$1" tokens_per_s)" 'BEGIN{exit !(a > b)}'; then
        echo "$2"
    else
        echo "$1"
    fi
}

echo "# ropelab data-parallel benchmark ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(mpirun --version | head -1); $STEPS timed steps after $WARMUP warm-up steps, medians; best of $ROUNDS rounds"
[ $have_torch = 1 ] && echo "torch $("$PY" -c 'import torch; print(torch.__version__)'), gloo backend" ||
    echo "torch: not installed (or NO_TORCH set): ropelab only"
echo

declare -A BEST
rows=(r12 r21 t12 t21)
for cfg in $CONFIGS; do
    for round in $(seq "$ROUNDS"); do
        l=$(ropelab 1 2 "$cfg");            echo "$cfg ropelab 1x2: $l";            BEST[$cfg.r12]=$(better "${BEST[$cfg.r12]:-}" "$l")
        l=$(ropelab 2 1 "$cfg");            echo "$cfg ropelab 2x1: $l";            BEST[$cfg.r21]=$(better "${BEST[$cfg.r21]:-}" "$l")
        if [ $have_torch = 1 ]; then
            l=$(torch_run 1 2 "$cfg");      echo "$cfg torch 1x2: $l";              [ -n "$l" ] && BEST[$cfg.t12]=$(better "${BEST[$cfg.t12]:-}" "$l")
            l=$(torch_run 2 1 "$cfg");      echo "$cfg torch DDP 2x1: $l";          [ -n "$l" ] && BEST[$cfg.t21]=$(better "${BEST[$cfg.t21]:-}" "$l")
        fi
    done
done

echo
echo "| config | program | processes x threads | batch per process | tokens/s | ms/step | all-reduce ms/step | all-reduce share of the step | vs ropelab 1x2 |"
echo "|---|---|---|---|---|---|---|---|---|"
for cfg in $CONFIGS; do
    base=$(kv "${BEST[$cfg.r12]}" tokens_per_s)
    for r in "${rows[@]}"; do
        line=${BEST[$cfg.$r]:-}
        [ -n "$line" ] || continue
        case $r in
            r12)  name="ropelab"; px="1 x 2"; b=${BATCH[$cfg]} ;;
            r21)  name="ropelab"; px="2 x 1"; b=$((BATCH[$cfg] / 2)) ;;
            t12)  name="PyTorch"; px="1 x 2"; b=${BATCH[$cfg]} ;;
            t21)  name="PyTorch DDP (gloo)"; px="2 x 1"; b=$((BATCH[$cfg] / 2)) ;;
        esac
        tok=$(kv "$line" tokens_per_s); ms=$(kv "$line" ms_per_step)
        if [ "${r:0:1}" = r ]; then
            ar=$(kv "$line" allreduce_ms); share="$(kv "$line" allreduce_share)%"
        else
            ar=$(kv "$line" comm_ms); share=$(awk -v s="$(kv "$line" comm_share)" 'BEGIN{printf "%.1f%%", 100 * s}')
        fi
        [ "${px}" = "1 x 2" ] && { ar="-"; share="-"; }
        echo "| $cfg | $name | $px | $b | $(printf '%.0f' "$tok") | $ms | $ar | $share | $(awk -v a="$tok" -v b="$base" 'BEGIN{printf "%.2fx", a / b}') |"
    done
done
echo
echo "Global batch per step: S 32 x 128 tokens, M 8 x 256 tokens on every row. ropelab's all-reduce time is"
echo "the time inside MPI calls per step (mean of the steps after the first 2, from ./train's summary line);"
echo "PyTorch's is median(step) - median(step under no_sync()), DDP's all-reduce being overlapped with backward."
