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
bash scripts/run/build.sh -j2 all
step "3/5 default corpus"
# the KJV with GPT-2's pre-tokenizer (configs/data/kjv.txt): data/kjv, or beside it where
# data/kjv holds data made another way (scripts/run/data_dir.sh)
data=$(bash scripts/run/data_dir.sh configs/data/kjv.txt | tail -1)
step "4/5 train $CONFIG with --pos=$POS"
run_dir=runs/small-$POS
if [ -f "$run_dir/checkpoint.safetensors" ]; then
  ./train --resume "$run_dir"          # continues an interrupted run; a finished one says so
else
  ./train --pos="$POS" --out_dir="$run_dir" --tokenizer="$data/tokenizer.bin" --train_file="$data/train.bin" \
          --val_file="$data/val.bin" "$CONFIG"
fi
step "5/5 a sample from $run_dir"
tokenizer=$(sed -n 's/^tokenizer = //p' "$run_dir/data.txt" 2>/dev/null | head -1)
./sample --weights "$run_dir/model.safetensors" --tokenizer "${tokenizer:-$data/tokenizer.bin}" \
         --prompt "And God said" --tokens 120 --temperature 0.8 --top-k 40 --seed 1
