#!/usr/bin/env bash
# bench.sh: training speed of ropelab against PyTorch, side by side, in one
# run and one environment. Run by `make bench` (after building build/bench_model).
#
# This script measures; scripts/bench_report.py reports. Every program's
# machine-readable line is appended, as it comes, to the results file
# ($BENCH_OUT) and echoed; at the end bench_report.py reads the file and
# prints the Markdown tables and the verdicts (paste into docs/PERFORMANCE.md).
# Run `scripts/bench_report.py FILE` again on a results file at any time; its
# docstring describes the format (one record a line: KIND key=value ...).
#
#   - OpenBLAS kernels, the same for BOTH sides: OPENBLAS_CORETYPE, if set,
#     is kept as it is. If unset, OpenBLAS's own choice stands, except the
#     one misdetection ./train corrects too (src/common/blas_cpu.c): SSE3
#     "Prescott" kernels on a CPU with AVX2 and FMA; then OPENBLAS_CORETYPE=
#     Haswell is exported. Each side's OpenBLAS core name is recorded.
#   - sgemm peak: measured before and after the runs with the same thread
#     count; every model-FLOP utilisation (MFU) is against the larger.
#   - per config (S, M) and scheme (rope, learned, sinusoidal, t5):
#     build/bench_model, then scripts/torch_baseline.py (when torch imports).
#   - the scheme overhead (bench_model --compare-schemes) and the RoPE
#     micro-benchmark (bench_model --rope-micro).
#
# Noise: this shared VM's speed drifts by +-10% from one run to the next
# (identical work, minutes apart), so each (config, scheme) is measured
# ROUNDS times, alternating ropelab and PyTorch, and the report takes each
# side's fastest run (by tokens/s). Same treatment for both sides.
#
# Environment: THREADS (default: all cores), STEPS (timed steps, default 8),
# ROUNDS (default 3), WARMUP (default 2), SCHEME_STEPS (rounds of the
# scheme-overhead comparison, default 32), CONFIGS (default "S M"), SCHEMES (default
# "rope learned sinusoidal t5"), NO_TORCH=1 to skip PyTorch, BENCH_OUT (the
# results file, default build/bench/results-<UTC time>.txt).
# A quick smoke test: STEPS=1 WARMUP=0 ROUNDS=1 SCHEME_STEPS=2 CONFIGS=S SCHEMES=rope THREADS=1
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-3}
SCHEME_STEPS=${SCHEME_STEPS:-32}
WARMUP=${WARMUP:-2}
CONFIGS=${CONFIGS:-"S M"}
SCHEMES=${SCHEMES:-"rope learned sinusoidal t5"}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
OUT=${BENCH_OUT:-build/bench/results-$(date -u '+%Y%m%dT%H%M%SZ').txt}

[ -x build/bench_model ] || make build/bench_model >/dev/null
mkdir -p "$(dirname "$OUT")"
: >"$OUT"

q() { local v=${1//\\/\\\\}; printf '"%s"' "${v//\"/\\\"}"; }   # a double-quoted record value
rec() { echo "$*" | tee -a "$OUT"; }                             # append a record and show it
# The lines on stdin whose first word matches the glob KIND, each with EXTRA
# (key=value ...) appended, as records.
# shellcheck disable=SC2053  # KIND is a glob on purpose
recs() { local kind=$1 extra=${2:-} line; while IFS= read -r line; do
    [[ ${line%% *} == $kind ]] && rec "$line${extra:+ $extra}"; done; return 0; }

# OpenBLAS's kernels: keep a set OPENBLAS_CORETYPE; otherwise correct only a
# misdetection (Prescott on an AVX2+FMA CPU), as src/common/blas_cpu.c does.
if [ -n "${OPENBLAS_CORETYPE+set}" ]; then
    core_rec="coretype source=environment value=$(q "$OPENBLAS_CORETYPE")"
else
    lib=$( { ldd build/bench_model 2>/dev/null || true; } | awk '/libopenblas/ {print $3; exit}')
    detected=$("$PY" - "${lib:-libopenblas.so.0}" <<'EOF' 2>/dev/null || echo "?"
import ctypes, sys
f = ctypes.CDLL(sys.argv[1]).openblas_get_corename
f.restype = ctypes.c_char_p
print(f().decode())
EOF
)
    flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
    if [ "${detected,,}" = prescott ] && [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
        export OPENBLAS_CORETYPE=Haswell
        core_rec="coretype source=override detected=$(q "$detected") value=Haswell"
    else
        core_rec="coretype source=openblas detected=$(q "$detected")"
    fi
fi

have_torch=0
if [ -z "${NO_TORCH:-}" ] && "$PY" -c "import torch" 2>/dev/null; then have_torch=1; fi

echo "# results file: $OUT"
rec "bench date=$(q "$(date -u '+%Y-%m-%d %H:%M UTC')") threads=$THREADS steps=$STEPS warmup=$WARMUP" \
    "rounds=$ROUNDS scheme_steps=$SCHEME_STEPS configs=$(q "$CONFIGS") schemes=$(q "$SCHEMES") torch=$have_torch"
rec "machine cores=$(nproc) cpu=$(q "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')")" \
    "load=$(q "$(cut -d' ' -f1-3 /proc/loadavg)")"
rec "$core_rec"

peak_out=$(build/bench_model --peak --threads "$THREADS")
# "# openblas core=NAME config=TEXT WITH SPACES threads=N" -> a blas record
ob=$(grep -m1 '^# openblas ' <<<"$peak_out" || true)
rec "blas side=ropelab core=$(sed -n 's/.* core=\([^ ]*\).*/\1/p' <<<"$ob")" \
    "config=$(q "$(sed -n 's/.* config=\(.*\) threads=.*/\1/p' <<<"$ob")")" \
    "threads=$(sed -n 's/.* threads=\([^ ]*\).*/\1/p' <<<"$ob")"
if [ $have_torch = 1 ]; then
    rec "$("$PY" - "$THREADS" <<'EOF'
import ctypes, shlex, sys, torch
torch.set_num_threads(int(sys.argv[1]))
x = torch.randn(256, 256); (x @ x).sum()
libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l and '.so' in l})
core = '?'
for lib in libs:
    try:
        f = ctypes.CDLL(lib).openblas_get_corename
        f.restype = ctypes.c_char_p
        core = f().decode()
        break
    except (OSError, AttributeError):
        pass
print(f"blas side=torch version={shlex.quote(torch.__version__)} core={shlex.quote(core)} "
      f"libs={shlex.quote(', '.join(libs))} threads={torch.get_num_threads()}")
EOF
)"
fi
recs sgemm "when=before" <<<"$peak_out"
recs sgemm_peak "when=before" <<<"$peak_out"
PEAK=$(sed -n 's/^sgemm_peak gflops=\([^ ]*\).*/\1/p' <<<"$peak_out")

for cfg in $CONFIGS; do
    for pos in $SCHEMES; do
        for round in $(seq "$ROUNDS"); do
            build/bench_model --config "$cfg" --pos "$pos" --steps "$STEPS" --warmup "$WARMUP" \
                --threads "$THREADS" --peak-gflops "${PEAK:-0}" | recs ropelab "round=$round"
            if [ $have_torch = 1 ]; then
                { "$PY" scripts/torch_baseline.py --config "$cfg" --pos "$pos" --threads "$THREADS" \
                    --steps "$STEPS" --warmup "$WARMUP" 2>/dev/null || true; } | recs torch "config=$cfg round=$round"
            fi
        done
    done
done

# The peak again, after the runs: the VM's speed drifts, so the report takes
# the larger of the two measurements as the reference.
build/bench_model --peak --threads "$THREADS" | recs sgemm_peak "when=after"

for cfg in $CONFIGS; do
    build/bench_model --compare-schemes --config "$cfg" --steps "$SCHEME_STEPS" --warmup 2 --threads "$THREADS" \
        | recs 'scheme_*'
done
build/bench_model --rope-micro --threads "$THREADS" | recs rope_micro

echo
"$PY" scripts/bench_report.py "$OUT"
