#!/bin/bash
# gpt2_memory.sh: the peak memory (resident set, /usr/bin/time's maximum) of
# GPT-2 124M's shape at T 1,024 in ./eval, ./sample and a fine-tune step of
# ./train, with the head and loss in chunks (logits_rows 0: the default) and
# with the whole logits held (logits_rows = B*T).
#
#   bench/gpt2_memory.sh GPT2_TOKENIZER [TEXT]
#
# GPT2_TOKENIZER: GPT-2's tokenizer (a directory holding encoder.json and
# vocab.bpe, or a Hugging Face gpt2 directory's tokenizer.json: 50,257
# tokens); TEXT: the text to encode with it (default data/kjv.txt). The
# model is GPT-2 124M's shape (12 layers, 12 heads, width 768, learned
# positions, 1,024 positions), made by one step of ./train: its weights do
# not change what memory it takes. Prints one line per program and batch
# size, with the accounting's figure beside the measured one where the
# program prints it. Needs /usr/bin/time (Debian's package time).
set -euo pipefail
cd "$(dirname "$0")/.."
tok=${1:?usage: bench/gpt2_memory.sh GPT2_TOKENIZER [TEXT]}
text=${2:-data/kjv.txt}
[ -x /usr/bin/time ] || { echo "gpt2_memory: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
[ -f "$text" ] || { echo "gpt2_memory: $text: no such file (make data, or give a text)" >&2; exit 1; }
w=$(mktemp -d /tmp/ropelab_gpt2mem_XXXXXX)
trap 'rm -rf "$w"' EXIT
threads=${THREADS:-$(nproc)}

echo "=== $text encoded with $tok"
./prepare --tokenizer "$tok" --out-dir "$w/data" "$text" >/dev/null
data=(--tokenizer="$w/data/tokenizer.bin" --train_file="$w/data/train.bin" --val_file="$w/data/val.bin")
shape=(--n_layer=12 --n_head=12 --d_model=768 --block_size=1024 --pos=learned)

# peak LABEL CMD...: runs CMD, prints LABEL and its maximum resident set in MiB.
peak() {
    local label=$1; shift
    /usr/bin/time -f "%M" -o "$w/rss" "$@" >"$w/out" 2>&1 || { cat "$w/out" >&2; echo "gpt2_memory: $label failed" >&2; exit 1; }
    printf "%-40s %8.1f MiB peak RSS\n" "$label" "$(awk '{ print $1 / 1024 }' "$w/rss")"
}

echo "=== the model: one step of ./train at B 1"
./train "${shape[@]}" "${data[@]}" --batch_size=1 --steps=1 --eval_every=0 --save_every=0 --threads="$threads" \
    --quiet --out_dir="$w/base" >/dev/null
model=$w/base/model.safetensors

for B in 1 8; do
    whole=$((B * 1024))
    peak "./eval B $B (chunks)" ./eval --weights "$model" --data "$w/data/val.bin" --batch-size $B --batches 1 \
        --seq-len 1024 --threads "$threads"
    peak "./eval B $B (whole logits)" ./eval --weights "$model" --data "$w/data/val.bin" --batch-size $B --batches 1 \
        --seq-len 1024 --logits_rows $whole --threads "$threads"
    for rows in 0 $whole; do
        what=chunks; [ $rows = 0 ] || what="whole logits"
        peak "fine-tune step B $B ($what)" ./train "${shape[@]}" "${data[@]}" --init-from "$model" --batch_size=$B \
            --steps=1 --eval_every=0 --save_every=0 --logits_rows=$rows --threads="$threads" --quiet \
            --out_dir="$w/ft-$B-$rows"
    done
done
peak "./sample (1,024 positions)" ./sample --weights "$model" --tokenizer "$w/data/tokenizer.bin" --prompt "The" \
    --tokens 1023 --seed 1 --threads "$threads"
