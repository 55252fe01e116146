#!/usr/bin/env bash
# The long-context study: how each scheme's final models of a comparison do
# beyond their training length T, and what RoPE's context-extension methods
# (position interpolation, NTK-aware, YaRN as the ecosystem computes it and as
# the paper states it, dynamic NTK) change, with and without a short fine-tune at 4T.
#
#   scripts/run/long_context.sh [--compare DIR] [--out DIR] [--mults "1 2 4 8 16"]
#                           [--finetune-steps N] [--finetune-mult M] [--seeds N] [--quick]
#
#   --compare DIR        the finished comparison (default runs/compare, `make compare`):
#                        DIR/<scheme>-s<seed>/model.safetensors and DIR/config.ini
#   --out DIR            results (default DIR/long_context)
#   --mults "..."        evaluation lengths as multiples of T (default 1 2 4 8 16)
#   --finetune-steps N   steps of the fine-tune at M*T (default 30: 5% of the 600 steps
#                        of the default experiment), for each rope variant and seed
#   --finetune-mult M    the fine-tune's length as a multiple of T (default 4)
#   --quick              for tests: --mults "1 2 4", --finetune-steps 4, 1 seed
#
# Variants: rope (no scaling), rope-linear, rope-ntk, rope-yarn (Hugging Face's
# and llama.cpp's YaRN), rope-yarn_paper (the paper's ramp) (each scaled by
# factor = length / T at every length), rope-dynamic (Hugging Face's dynamic
# NTK at factor 2, its documented example, at every length: its base grows with
# the length by itself), alibi, t5, sinusoidal, none, and learned at T only. Every length scores the same validation tokens: every
# whole window of 16T tokens of the split, each cut into windows of the length. Then each rope
# variant is fine-tuned from each seed's final weights at M*T with factor M
# (dynamic: 2) (./train --init-from, which keeps T as rope_original_length; same
# schedule shape, lr/10) and evaluated at M*T and 16T (factor length/T as before).
# Output: results.csv (variant, finetuned, seed, mult, seq_len, loss),
# positions.csv (loss at each position of a 16T window, mean over the split's windows), report.md,
# loss_vs_length.png, loss_vs_position.png.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh

compare=runs/compare; out=""; mults="1 2 4 8 16"; ft_steps=30; ft_mult=4; seeds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --compare) compare=$2; shift ;;
    --out) out=$2; shift ;;
    --mults) mults=$2; shift ;;
    --finetune-steps) ft_steps=$2; shift ;;
    --finetune-mult) ft_mult=$2; shift ;;
    --seeds) seeds=$2; shift ;;
    --quick) mults="1 2 4"; ft_steps=4; seeds=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "long_context.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
out=${out:-$compare/long_context}
config="$compare/config.ini"
[ -f "$config" ] || { echo "long_context.sh: $config: no comparison there (run make compare first)" >&2; exit 1; }
key() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\([^;#[:space:]]*\).*/\1/p" "$config" | head -1; }
T=$(key block_size); val_file=$(key val_file)
max_mult=$(tr ' ' '\n' <<< "$mults" | sort -n | tail -1)
# The tokens scored at every length: every whole window of the longest length
# in the validation split (the token count is header word 2 of the llm.c file).
n_val=$(od -An -t d4 -j 8 -N 4 "$val_file" | tr -d ' ')
span=$(( (n_val - 1) / (T * max_mult) * T * max_mult ))
[ "$span" -gt 0 ] || { echo "long_context.sh: $val_file: fewer than $((T * max_mult + 1)) tokens" >&2; exit 1; }
mkdir -p "$out"
start=$(date +%s)

rope_variants=(rope rope-linear rope-ntk rope-yarn rope-yarn_paper rope-dynamic)
dynamic_factor=2
others=(alibi t5 sinusoidal none learned)

# The flags of a rope variant evaluated at mult x its trained length.
scaling_flags() {   # variant mult
  case "$1" in
    rope) echo "" ;;
    rope-dynamic) echo "--rope_scaling=dynamic --rope_scaling_factor=$dynamic_factor" ;;
    rope-*) echo "--rope_scaling=${1#rope-} --rope_scaling_factor=$2" ;;
  esac
}

# Mean validation loss of weights at seq_len over the first $span tokens.
eval_loss() {   # weights seq_len [flags...]
  local w=$1 len=$2; shift 2
  ./eval --weights "$w" --data "$val_file" --seq-len "$len" --batch-size 1 --batches $(( span / len )) \
         --threads 0 "$@" | sed -n 's/.* loss=\([^ ]*\).*/\1/p'
}

results="$out/results.csv"
echo "variant,finetuned,seed,mult,seq_len,loss" > "$results.tmp"
for seed in $(seq 1 "$seeds"); do
  for v in "${rope_variants[@]}" "${others[@]}"; do
    base=${v%%-*}
    w="$compare/$base-s$seed/model.safetensors"
    [ -f "$w" ] || { echo "long_context.sh: $w: missing (the comparison lacks $base)" >&2; exit 1; }
    for m in $mults; do
      len=$(( T * m ))
      if [ "$v" = learned ] && [ "$m" -gt 1 ]; then continue; fi
      # shellcheck disable=SC2046
      loss=$(eval_loss "$w" "$len" $(scaling_flags "$v" "$m"))
      echo "$v,0,$seed,$m,$len,$loss" >> "$results.tmp"
    done
  done
  echo "[long_context] seed $seed evaluated ($(( $(date +%s) - start )) s)"
done

# The fine-tunes: each rope variant from each seed's final weights, at ft_mult x T.
ft_len=$(( T * ft_mult ))
ft_start=$(date +%s)
for seed in $(seq 1 "$seeds"); do
  for v in "${rope_variants[@]}"; do
    dir="$out/ft-$v-s$seed"
    if [ ! -f "$dir/done" ]; then
      lr=$(key lr); min_lr=$(key min_lr)
      lr=$(python3 -c "print($lr / 10)"); min_lr=$(python3 -c "print($min_lr / 10)")
      # shellcheck disable=SC2046
      ./train "$config" --pos=rope --seed="$seed" --out_dir="$dir" --overwrite --quiet --threads=0 --reproducible=1 \
              --init-from="$compare/rope-s$seed/model.safetensors" --block_size="$ft_len" \
              $(scaling_flags "$v" "$ft_mult") \
              --steps="$ft_steps" --warmup_steps=$(( ft_steps / 10 + 1 )) --lr="$lr" --min_lr="$min_lr" \
              --batch_size=$(( $(key batch_size) * T / ft_len > 0 ? $(key batch_size) * T / ft_len : 1 )) \
              --eval_every=0 --eval_batches=2 --save_every=0
      touch "$dir/done"
    fi
    for m in $mults; do
      [ "$m" -ge "$ft_mult" ] || continue
      len=$(( T * m ))
      # The fine-tuned model was trained at ft_len with factor ft_mult; at len it
      # is scaled by len/T overall, as the untuned variants are.
      # shellcheck disable=SC2046
      loss=$(eval_loss "$dir/model.safetensors" "$len" $(scaling_flags "$v" "$m"))
      echo "$v,1,$seed,$m,$len,$loss" >> "$results.tmp"
    done
  done
done
ft_s=$(( $(date +%s) - ft_start ))
mv "$results.tmp" "$results"

# Loss at each position of a window of the longest length (seed 1, no fine-tune),
# averaged over every such window of the validation split.
positions="$out/positions.csv"
echo "variant,position,loss" > "$positions.tmp"
for v in "${rope_variants[@]}" alibi t5 sinusoidal none; do
  base=${v%%-*}
  # shellcheck disable=SC2046
  ./eval --weights "$compare/$base-s1/model.safetensors" --data "$val_file" --seq-len $(( T * max_mult )) \
         --batch-size 1 --batches 0 --threads 0 --per-position "$out/pos.tmp" --overwrite $(scaling_flags "$v" "$max_mult") \
         >/dev/null
  tail -n +2 "$out/pos.tmp" | sed "s/^/$v,/" >> "$positions.tmp"
done
rm -f "$out/pos.tmp"
mv "$positions.tmp" "$positions"
echo "wall_s=$(( $(date +%s) - start ))" > "$out/wall_time.txt"
echo "finetune_s=$ft_s" >> "$out/wall_time.txt"
echo "finetune_steps=$ft_steps finetune_len=$ft_len" >> "$out/wall_time.txt"
/usr/bin/python3 scripts/report/long_context_report.py "$out" "$T" "$ft_steps" "$ft_mult"
echo "[long_context] done in $(( ($(date +%s) - start) / 60 )) min: $out/report.md"
