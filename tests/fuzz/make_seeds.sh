#!/usr/bin/env bash
# make_seeds.sh: real input files for the fuzz targets, made by the real
# programs, into build/fuzz/seeds/NAME/ (make fuzz-seeds; nothing here is
# committed). Hand-made edge cases live in tests/fuzz/seeds/NAME/ instead.
#
#   tokenizer/    ./prepare's tokenizer.bin at vocabulary sizes 257 (the byte-class
#                 pre-tokenizer: version 1), 300 and 1024 (GPT-2's: version 2)
#   tokens/       ./prepare's train.bin and val.bin (vocabulary 300)
#   checkpoint/   checkpoint.safetensors of a 4-step ./train run of the fixed tiny
#                 configuration of fuzz_checkpoint.c (other keys at their defaults),
#                 config_hash set to the one the harness expects; also the
#                 untouched file and the run's model.safetensors
#   weights/      model.safetensors of one ./train step for every scheme, two
#                 --debug-state files, the checkpoint
#   safetensors/  a model, a debug state and a checkpoint
#   ini/          configs/*.ini and the resolved config.ini of the run
#   args/         command lines (one argument per line) naming those files
# Needs ./prepare and ./train (make builds them) and perl (Debian's perl-base).
set -euo pipefail
cd "$(dirname "$0")/../.."
S=build/fuzz/seeds
W=build/fuzz/seeds-work
rm -rf "$S" "$W"
mkdir -p "$W" "$S"/{safetensors,weights,checkpoint,tokens,tokenizer,ini,args}
# The programs' progress goes to a log, shown only if a step fails.
exec 3>&2 2>"$W/make_seeds.log"
trap 'echo "make_seeds: failed at line $LINENO; log:" >&3; cat "$W/make_seeds.log" >&3' ERR

# The fixed tiny configuration of the checkpoint harness, read from its source.
ckpt() { sed -n "s/^#define FUZZ_CKPT_$1 *//p" tests/fuzz/fuzz_checkpoint.c | tr -d '"'; }
VOCAB=$(ckpt VOCAB_SIZE)
HASH=$(ckpt HASH | sed 's/^0x//; s/ull$//')
[ ${#HASH} -eq 16 ] || { echo "make_seeds: FUZZ_CKPT_HASH is not 16 hex digits" >&3; exit 1; }

# Text: the start of the docs (whole lines, so the UTF-8 stays whole).
head -n 60 docs/ARCHITECTURE.md >"$W/small.txt"
cat README.md docs/*.md >"$W/large.txt"
./prepare --vocab-size "$VOCAB" --val-fraction 0.2 --out-dir "$W/data" "$W/small.txt" >/dev/null
./prepare --vocab-size 1024 --out-dir "$W/data1024" "$W/large.txt" >/dev/null
./prepare --vocab-size 257 --pretokenizer byte-classes --out-dir "$W/data257" "$W/small.txt" >/dev/null
want=$((28 + 8 * (VOCAB - 257)))   # a header of version 2
got=$(stat -c %s "$W/data/tokenizer.bin")
[ "$got" -eq "$want" ] || { echo "make_seeds: tokenizer has $got bytes, expected $want (vocab $VOCAB)" >&3; exit 1; }
cp "$W/data/tokenizer.bin" "$S/tokenizer/tokenizer-$VOCAB.bin"
cp "$W/data1024/tokenizer.bin" "$S/tokenizer/tokenizer-1024.bin"
cp "$W/data257/tokenizer.bin" "$S/tokenizer/tokenizer-257.bin"
cp "$W/data/train.bin" "$S/tokens/train.bin"
cp "$W/data/val.bin" "$S/tokens/val.bin"

# ./train on the tiny configuration; extra arguments after the common ones.
# No config file: every other model key stays at its default, as in the
# harness (checkpoint_load compares the file's model keys with the model's).
train() {
  ./train --tokenizer="$W/data/tokenizer.bin" --train_file="$W/data/train.bin" \
    --val_file="$W/data/val.bin" --n_layer="$(ckpt N_LAYER)" --n_head="$(ckpt N_HEAD)" \
    --d_model="$(ckpt D_MODEL)" --block_size="$(ckpt BLOCK_SIZE)" --batch_size=2 --eval_batches=1 \
    --lr=0.01 --min_lr=0.001 --warmup_steps=1 --threads=1 --quiet "$@" >/dev/null
}
train --pos="$(ckpt POS)" --steps=4 --eval_every=2 --save_every=2 --out_dir="$W/run" --overwrite
# The harness expects config_hash FUZZ_CKPT_HASH (the run's own hash depends on
# the paths above); the value has a fixed width, so the header length holds.
perl -0777 -pe "s/\"config_hash\":\"[0-9a-f]{16}\"/\"config_hash\":\"$HASH\"/" \
  "$W/run/checkpoint.safetensors" >"$S/checkpoint/checkpoint.safetensors"
grep -q "\"config_hash\":\"$HASH\"" "$S/checkpoint/checkpoint.safetensors" ||
  { echo "make_seeds: could not set config_hash in the checkpoint" >&3; exit 1; }
cp "$W/run/checkpoint.safetensors" "$S/checkpoint/checkpoint-other-hash.safetensors"
cp "$W/run/model.safetensors" "$S/checkpoint/model.safetensors"

for pos in rope learned sinusoidal t5 alibi none; do
  train --pos=$pos --steps=1 --eval_every=0 --save_every=0 --out_dir="$W/run-$pos" --overwrite
  cp "$W/run-$pos/model.safetensors" "$S/weights/model-$pos.safetensors"
done
for pos in rope t5; do
  train --pos=$pos --out_dir="$W/run-debug" --debug-state "$S/weights/debug-$pos.safetensors"
done
cp "$S/checkpoint/checkpoint.safetensors" "$S/weights/"
cp "$S/weights/model-learned.safetensors" "$S/weights/debug-rope.safetensors" \
   "$S/checkpoint/checkpoint.safetensors" "$S/safetensors/"

cp configs/*.ini "$S/ini/"
cp "$W/run/config.ini" "$S/ini/run-config.ini"

printf '%s\n' configs/tiny.ini --steps=3 --quiet >"$S/args/config"
printf '%s\n' "--resume=$W/run" --lr=0.001 >"$S/args/resume"
printf '%s\n' --resume "$W/run-rope" --steps=9 >"$S/args/resume-space"
printf '%s\n' "$W/run/config.ini" --debug-state x.safetensors --pos=t5 --t5-num-buckets=8 >"$S/args/debug-state"
printf '%s\n' --help >"$S/args/help"

n=$(find "$S" -type f | wc -l)
echo "make_seeds: $n seed files in $S ($(du -sh "$S" | cut -f1))"
