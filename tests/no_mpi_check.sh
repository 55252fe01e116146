#!/usr/bin/env bash
# no_mpi_check.sh (make test-no-mpi): ./train built without MPI, as a machine
# without Open MPI builds it, against the ./train of this build:
#   1. `make MPI=0 train` in build/no-mpi/, a tree of links to this one's
#      Makefile, src/ and tests/ with objects of its own (nothing of the
#      MPI build is reused); the binary must not link libmpi;
#   2. one tiny training (configs/tiny.ini, 20 steps, on a corpus written and
#      tokenised here) by each ./train: log.csv without its timings and
#      model.safetensors must be the same bits;
#   3. its --help says "MPI: not built";
#   4. started by an MPI launcher (OMPI_COMM_WORLD_SIZE=2 in the environment,
#      and mpirun -np 2 itself where mpirun is installed) it refuses to start,
#      says why, exits non-zero and writes no run directory.
# About 30 s on 2 cores (most of it the build). Run from the repository root
# with ./train and ./prepare built (make test-no-mpi builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "no_mpi_check: $*" >&2; exit 1; }

tree=build/no-mpi
mkdir -p "$tree"
for f in Makefile src tests scripts; do ln -sfn "../../$f" "$tree/$f"; done
echo "=== make MPI=0 train in $tree"
# The outer make's flags (jobserver, variables) are not the inner build's.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$tree" MPI=0 train || fail "make MPI=0 train failed"
nompi=$tree/train
if ldd "$nompi" | grep -q libmpi; then fail "$nompi links libmpi"; fi

w=$(mktemp -d /tmp/ropelab_nompi_XXXXXX)
trap 'rm -rf "$w"' EXIT
awk 'BEGIN { srand(42); split("the king,the people,his son,the lord,a man,the servant", s, ",");
             split("went,came,spake,looked,fled", v, ","); split("unto the city,into the house,over the river", o, ",");
             for (i = 0; i < 6000; i++) print i % 10, s[int(rand() * 6) + 1], v[int(rand() * 5) + 1], o[int(rand() * 3) + 1] "." }' \
    >"$w/corpus.txt"
./prepare --vocab-size 320 --val-fraction 0.1 --out-dir "$w/data" "$w/corpus.txt" >"$w/prepare.txt" 2>&1 ||
    { cat "$w/prepare.txt" >&2; fail "./prepare failed"; }
data=(--tokenizer="$w/data/tokenizer.bin" --train_file="$w/data/train.bin" --val_file="$w/data/val.bin")

echo "=== a tiny training by ./train and by $nompi"
# The second on the engine matmul = auto measured for the first (machine.txt):
# each start times both, and on a busy machine two starts can choose differently.
engine=()
for build in mpi no-mpi; do
    exe=./train; [ $build = no-mpi ] && exe=$nompi
    "$exe" configs/tiny.ini "${data[@]}" --steps=20 --eval_every=10 --threads=2 "${engine[@]}" \
        --out_dir="$w/run-$build" --quiet >"$w/train-$build.txt" 2>&1 ||
        { cat "$w/train-$build.txt" >&2; fail "$exe: training failed"; }
    cut -d, -f1-5 "$w/run-$build/log.csv" >"$w/log-$build.txt"
    engine=(--matmul="$(sed -n 's/^engine = \([a-z]*\) .*/\1/p' "$w/run-$build/machine.txt" | head -1)")
done
diff "$w/log-mpi.txt" "$w/log-no-mpi.txt" >&2 || fail "the logs differ (above: < ./train, > $nompi)"
cmp "$w/run-mpi/model.safetensors" "$w/run-no-mpi/model.safetensors" || fail "the models differ"
echo "same log ($(($(wc -l <"$w/log-mpi.txt") - 1)) rows) and model, bit for bit"

"$nompi" --help | grep -q "MPI: not built" || fail "$nompi --help does not say 'MPI: not built'"

echo "=== $nompi under a launcher"
# expect_refusal DESCRIPTION COMMAND...: the command must fail, say the build
# has no MPI and leave no run directory.
expect_refusal() {
    local what=$1 rc=0
    shift
    "$@" configs/tiny.ini "${data[@]}" --steps=2 --out_dir="$w/refused" >"$w/refusal.txt" 2>&1 || rc=$?
    [ $rc -ne 0 ] || fail "$what: trained (exit 0) instead of refusing"
    grep -q "built without MPI" "$w/refusal.txt" || { cat "$w/refusal.txt" >&2; fail "$what: no refusal message"; }
    [ ! -e "$w/refused" ] || fail "$what: wrote $w/refused"
    echo "$what: refused (exit $rc): $(grep -m1 "built without MPI" "$w/refusal.txt")"
}
expect_refusal "OMPI_COMM_WORLD_SIZE=2" env OMPI_COMM_WORLD_SIZE=2 "$nompi"
if command -v mpirun >/dev/null; then
    expect_refusal "mpirun -np 2" timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$nompi"
else
    echo "mpirun -np 2: not tried (no mpirun here)"
fi
echo "no_mpi_check: passed"
