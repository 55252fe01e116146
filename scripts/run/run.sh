#!/usr/bin/env bash
# `make run`: the first command a new user types. On a fresh Debian machine it
#   1. installs the missing Debian packages (as root; otherwise prints the apt-get line),
#   2. builds the programs,
#   3. fetches the default corpus (King James Bible, Debian's bible-kjv) and
#      tokenises it (data/kjv/: tokenizer.bin, train.bin, val.bin),
#   4. trains configs/small.ini with rotary positions, showing progress,
#   5. prints a sample from the trained model.
# Everything already done is skipped, so running it again is cheap.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh
POS=${POS:-rope}
CONFIG=${CONFIG:-configs/small.ini}

step() { printf '\n== %s\n' "$*"; }

step "1/5 Debian packages"
ROPELAB_MINIMAL_DEPS=1 bash scripts/run/install_deps.sh
step "2/5 build"
make -j2 --no-print-directory all
step "3/5 default corpus"
bash scripts/run/get_data.sh
if [ ! -f data/kjv/val.bin ]; then   # the studies' corpus: their byte-class pre-tokenizer (docs/DATA.md)
  ./prepare --vocab-size 2048 --val-fraction 0.05 --pretokenizer byte-classes --out-dir data/kjv data/kjv.txt
fi
step "4/5 train $CONFIG with --pos=$POS"
run_dir=runs/small-$POS
if [ -f "$run_dir/checkpoint.safetensors" ]; then
  ./train --resume "$run_dir"          # continues an interrupted run; a finished one says so
else
  ./train --pos="$POS" --out_dir="$run_dir" "$CONFIG"
fi
step "5/5 a sample from $run_dir"
./sample --weights "$run_dir/model.safetensors" --tokenizer data/kjv/tokenizer.bin \
         --prompt "And God said" --tokens 120 --temperature 0.8 --top-k 40 --seed 1
