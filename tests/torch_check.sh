#!/usr/bin/env bash
# torch_check.sh: the PyTorch side of ropelab's checks (about 10 s on 2 cores).
#   1. tests/test_torch_model.py: scripts/torch/torch_model.py against a float64 loop
#      reference of the contract, the papers' scheme tables, causality, names,
#      the safetensors and token-file readers, and the facts shared with C:
#      the model keys' defaults (from ./train --help; skipped, saying so, if
#      ./train is not built) and which parameters AdamW decays;
#   2. check_debug_state.py --self-test: float32 debug states pass the float64
#      check, corrupted ones and deliberately wrong models fail (exit 1), bad
#      files give exit 2 with one line;
#   3. torch_baseline.py runs two steps of a tiny model and prints its line,
#      then two under --autocast bf16 (the bf16 baseline of make bench), then
#      two on windows of a tiny token file (the shared read_tokens).
# Optional: a debug-state file as $1 (e.g. from ./train --debug-state) is
# checked too. PYTHON defaults to /usr/bin/python3 (Debian's python3-torch).
set -u
cd "$(dirname "$0")/.." || exit 2
PY=${PYTHON:-/usr/bin/python3}
fail=0
echo "=== tests/test_torch_model.py"
"$PY" tests/test_torch_model.py || fail=1
echo "=== check_debug_state.py --self-test"
"$PY" scripts/torch/check_debug_state.py --self-test || fail=1
echo "=== torch_baseline.py (tiny)"
line=$("$PY" scripts/torch/torch_baseline.py --n-layer 1 --d-model 32 --n-head 4 --seq-len 16 \
        --batch-size 2 --vocab-size 64 --pos t5 --threads 1 --steps 2 --warmup 1 2>/dev/null)
echo "$line"
echo "$line" | grep -Eq '^torch pos=t5 .* tokens_per_s=[0-9.]+ ms_per_step=[0-9.]+ ' || { echo "baseline line malformed"; fail=1; }
line=$("$PY" scripts/torch/torch_baseline.py --n-layer 1 --d-model 32 --n-head 4 --seq-len 16 \
        --batch-size 2 --vocab-size 64 --pos rope --threads 1 --steps 2 --warmup 1 --autocast bf16 2>/dev/null)
echo "$line"
echo "$line" | grep -Eq '^torch pos=rope .* autocast=bf16 tokens_per_s=[0-9.]+ .* loss_last=[0-9.]+$' \
    || { echo "baseline under autocast bf16 failed"; fail=1; }
tmp=$(mktemp -d)
"$PY" -c 'import numpy as np, sys
h = np.zeros(256, "<i4"); h[:3] = (20240520, 1, 200)
open(sys.argv[1], "wb").write(h.tobytes() + (np.arange(200) % 64).astype("<u2").tobytes())' "$tmp/tokens.bin"
line=$("$PY" scripts/torch/torch_baseline.py --n-layer 1 --d-model 32 --n-head 4 --seq-len 16 \
        --batch-size 2 --vocab-size 64 --pos rope --threads 1 --steps 2 --warmup 0 --tokens "$tmp/tokens.bin" 2>&1)
echo "$line"
echo "$line" | grep -Eq '^torch pos=rope .* tokens_per_s=[0-9.]+ ' || { echo "baseline on a token file failed"; fail=1; }
rm -rf "$tmp"
if [ $# -ge 1 ]; then
  echo "=== check_debug_state.py $1"
  "$PY" scripts/torch/check_debug_state.py "$1" || fail=1
fi
[ $fail -eq 0 ] && echo "torch_check: all passed" || echo "torch_check: FAILED"
exit $fail
