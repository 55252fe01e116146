#!/usr/bin/env bash
# bench.sh: training speed of ropelab against PyTorch, side by side, in one
# run and one environment. Run by `make bench` (after building build/bench_model).
#
# This script measures; bench/bench_report.py reports. Every program's
# machine-readable line is appended, as it comes, to the results file
# ($BENCH_OUT) and echoed; at the end bench_report.py reads the file and
# prints the Markdown tables and the verdicts (docs/PERFORMANCE.md reads them).
# Run `bench/bench_report.py FILE` again on a results file at any time; its
# docstring describes the format (one record a line: KIND key=value ...).
#
#   - OpenBLAS kernels, the same for BOTH sides: OPENBLAS_CORETYPE, if set,
#     is kept as it is. If unset, OpenBLAS's own choice stands, except the
#     one misdetection ./train corrects too (src/common/blas_cpu.c): SSE3
#     "Prescott" kernels on a CPU with AVX2 and FMA; then OPENBLAS_CORETYPE=
#     Haswell is exported. Each side's OpenBLAS core name is recorded.
#   - ropelab's matmul engines (ENGINES; gpt_set_matmul, src/engine/engine.h):
#     openblas-fp32 (the default of ./train), onednn-fp32, onednn-bf16 (inputs
#     of the products rounded to bf16, fp32 accumulation and weights). An
#     engine this CPU cannot run (bf16 where oneDNN has no bf16 products: below AVX-512) is
#     recorded as unavailable and left out.
#   - PyTorch's modes (TORCH_MODES): fp32, and bf16 = torch.autocast("cpu",
#     dtype=torch.bfloat16) around forward and loss (scripts/torch/torch_baseline.py
#     --autocast bf16). fp32 engines are compared with PyTorch fp32, bf16 with
#     PyTorch autocast bf16.
#   - what the default ./train (matmul = auto) runs here in fp32, per config:
#     bench_model --auto's "# auto fp32 = ..." line (the trainer's trial,
#     src/train/matmul_auto.h), as an auto record with config=; the report
#     sets M's against the fastest fp32 engine.
#   - peaks, measured before and after the runs with the same thread count,
#     one per engine (build/bench_model --peak --matmul M --precision P):
#     openblas-fp32: sgemm on square 1024/1536/2048; onednn-*: the engine's
#     forward product at N = 2048 rows and C, OC in 1024..4096. Each engine's
#     model-FLOP utilisation (MFU) is against the larger of its own two.
#   - the configs (sizes in bench/util_bench.h for C and in
#     scripts/torch/torch_baseline.py's PRESETS for Python): S and M by
#     default, and L, GPT-2 small's shape (12 layers, width 768, 12 heads,
#     T 1024; vocabulary 4096, B 4), on request: CONFIGS="S M L" make bench.
#     Before measuring, each config's sizes from build/bench_model
#     --list-configs are checked against PRESETS (a mismatch stops the run)
#     and recorded with their parameters, model FLOPs per step and memory by
#     docs/MODEL.md's formula (bench_config records): the report's scaling
#     table sets those beside the measured ms/step and peak RSS.
#   - per config and scheme (rope, learned, sinusoidal, t5):
#     build/bench_model on each engine, then scripts/torch/torch_baseline.py in each
#     mode (when torch imports).
#   - the scheme overhead (bench_model --compare-schemes, on each engine of
#     SCHEME_ENGINES, for the configs of SCHEME_CONFIGS), the RoPE
#     micro-benchmark (bench_model --rope-micro) and attention alone on each
#     engine, blocked and fused (build/bench_attention, S and M).
#   - memory and the longest context (build/bench_memory, MEMORY_CONFIGS): from
#     the program's accounting alone (footprint_train; nothing is trained), per
#     config and setup (OpenBLAS and oneDNN fp32, blocked and fused attention;
#     oneDNN bf16) the memory at the config's T, what one more token of context
#     costs and the largest T that fits in the memory the same engine's blocked
#     attention needs at T ("today's"), and in MEM_GIB GiB.
#
# Why L is not in the default CONFIGS: a training step of L is 2.40 TFLOP
# (S 0.027, M 0.076: 32x M's), so one round of L (every engine and every
# PyTorch mode once, WARMUP + STEPS = 10 steps each, one scheme) is 24 TFLOP
# per setup: 100 s at a sustained 240 GFLOP/s, and more for PyTorch, whose
# attention stores and softmaxes (B, H, T, T) tensors. The default 3 rounds
# x 4 schemes would add hours on a few cores. The scheme comparison builds
# four models at once (4 x ~4 GiB on L) and is left to S and M
# (SCHEME_CONFIGS). L's memory at B = 4 is in bench/util_bench.h (ropelab
# about 4 GiB, PyTorch roughly twice that).
#
# Noise: a machine's speed drifts from one run of identical work to the
# next, so each (config, scheme) is measured ROUNDS times, each round every
# engine and then every PyTorch mode, one after the other (A B C D E A B C
# D E ...), and the report takes each setup's fastest run (by tokens/s).
# Same treatment for both sides.
#
# Environment: THREADS (default: all cores), STEPS (timed steps, default 8),
# ROUNDS (default 3), WARMUP (default 2), SCHEME_STEPS (rounds of the
# scheme-overhead comparison, default 32), CONFIGS (default "S M"; "S M L" adds
# L), SCHEME_CONFIGS (the configs of the scheme-overhead comparison, default:
# those of CONFIGS other than L), SCHEMES (default
# "rope learned sinusoidal t5"), ENGINES (default "openblas-fp32 onednn-fp32
# onednn-bf16"), TORCH_MODES (default "fp32 bf16"), SCHEME_ENGINES (engines of
# the scheme-overhead comparison, default "openblas-fp32 onednn-bf16"; those
# not in ENGINES are skipped), MEMORY_CONFIGS (the configs of the memory stage,
# default "M L"), MEM_GIB (its fixed budget, default 16), NO_TORCH=1 to skip
# PyTorch, BENCH_OUT (the results file, default build/bench/results-<UTC time>.txt).
# Time with the defaults on 2 cores: about 10-15 minutes (config M is 2/3 of it).
# With CONFIGS="S M L": 1.5-2 hours more on 2 cores, or longer
# (with SCHEMES=rope ROUNDS=1, L adds about 9 minutes or more).
# A quick smoke test: STEPS=1 WARMUP=0 ROUNDS=1 SCHEME_STEPS=2 CONFIGS=S SCHEMES=rope THREADS=1
# L end to end, one engine, one step (a few minutes on one core):
#   STEPS=1 WARMUP=0 ROUNDS=1 CONFIGS=L SCHEMES=rope ENGINES=openblas-fp32 NO_TORCH=1 THREADS=1
set -euo pipefail
cd "$(dirname "$0")/.."   # the repository root: this file is bench/NAME.sh

THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-3}
SCHEME_STEPS=${SCHEME_STEPS:-32}
WARMUP=${WARMUP:-2}
CONFIGS=${CONFIGS:-"S M"}
SCHEME_CONFIGS=${SCHEME_CONFIGS-$(for c in $CONFIGS; do [ "$c" = L ] || printf '%s ' "$c"; done)}
SCHEME_CONFIGS=${SCHEME_CONFIGS% }
SCHEMES=${SCHEMES:-"rope learned sinusoidal t5"}
ENGINES=${ENGINES:-"openblas-fp32 onednn-fp32 onednn-bf16"}
TORCH_MODES=${TORCH_MODES:-"fp32 bf16"}
SCHEME_ENGINES=${SCHEME_ENGINES:-"openblas-fp32 onednn-bf16"}
MEMORY_CONFIGS=${MEMORY_CONFIGS:-"M L"}
MEM_GIB=${MEM_GIB:-16}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
OUT=${BENCH_OUT:-build/bench/results-$(date -u '+%Y%m%dT%H%M%SZ').txt}

for e in $ENGINES $SCHEME_ENGINES; do
    case $e in openblas-fp32 | onednn-fp32 | onednn-bf16) ;;
        *) echo "bench.sh: unknown engine '$e' (openblas-fp32, onednn-fp32, onednn-bf16)" >&2; exit 2 ;; esac
done
for m in $TORCH_MODES; do
    case $m in fp32 | bf16) ;; *) echo "bench.sh: unknown PyTorch mode '$m' (fp32, bf16)" >&2; exit 2 ;; esac
done
# engine name -> bench_model's flags: onednn-bf16 -> --matmul onednn --precision bf16
engine_flags() { echo "--matmul ${1%-*} --precision ${1#*-}"; }

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

[ $have_torch = 1 ] || TORCH_MODES=""

echo "# results file: $OUT"
rec "bench date=$(q "$(date -u '+%Y-%m-%d %H:%M UTC')") threads=$THREADS steps=$STEPS warmup=$WARMUP" \
    "rounds=$ROUNDS scheme_steps=$SCHEME_STEPS configs=$(q "$CONFIGS") schemes=$(q "$SCHEMES") torch=$have_torch" \
    "engines=$(q "$ENGINES") torch_modes=$(q "$TORCH_MODES") scheme_engines=$(q "$SCHEME_ENGINES")" \
    "scheme_configs=$(q "$SCHEME_CONFIGS") memory_configs=$(q "$MEMORY_CONFIGS") mem_gib=$MEM_GIB"
# The CPU: its name, vendor, family and model (a VM's name can be just "AMD EPYC"), and
# the ISA extensions the products' speed depends on (AVX-512, native bf16, AMX).
cpuinfo() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'; }
cpu_flags=" $(cpuinfo flags) "
isa=$(for f in avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile; do
          if [[ $cpu_flags == *" $f "* ]]; then printf '%s ' "$f"; fi; done)
rec "machine cores=$(nproc) cpu=$(q "$(cpuinfo 'model name')") vendor=$(q "$(cpuinfo vendor_id)")" \
    "family=$(q "$(cpuinfo 'cpu family')") model=$(q "$(cpuinfo model)") isa=$(q "${isa% }")" \
    "load=$(q "$(cut -d' ' -f1-3 /proc/loadavg)")" \
    "mem_total_mb=$(awk '/^MemTotal:/ {printf "%.0f", $2 / 1024}' /proc/meminfo)" \
    "mem_available_mb=$(awk '/^MemAvailable:/ {printf "%.0f", $2 / 1024}' /proc/meminfo)"
rec "$core_rec"

# The configs: bench_model's sizes (bench/util_bench.h) must be PyTorch's
# (torch_baseline.PRESETS, read here without importing torch), size for
# size, or the run stops before measuring. Each config run is recorded as a
# bench_config record: sizes, parameters, model FLOPs per step, memory by
# docs/MODEL.md's formula.
configs_out=$(build/bench_model --list-configs)
presets=$("$PY" - <<'PYEOF'
import ast
src = open("scripts/torch/torch_baseline.py", encoding="utf-8").read()
node = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Assign)
            and any(getattr(t, "id", None) == "PRESETS" for t in n.targets))
presets = eval(compile(ast.Expression(node.value), "PRESETS", "eval"), {"__builtins__": {}, "dict": dict})
keys = dict(n_layer="L", d_model="C", n_head="H", seq_len="T", batch_size="B", vocab_size="V")
for name, p in presets.items():
    print(name, " ".join(f"{keys[k]}={p[k]}" for k in keys))
PYEOF
)
for cfg in $CONFIGS $SCHEME_CONFIGS $MEMORY_CONFIGS; do
    line=$(grep "^bench_config config=$cfg " <<<"$configs_out" || true)
    [ -n "$line" ] || { echo "bench.sh: unknown config '$cfg' (build/bench_model --list-configs)" >&2; exit 2; }
    mine=$(for k in L C H T B V; do sed -n "s/.* $k=\([^ ]*\).*/$k=\1/p" <<<"$line"; done | paste -sd' ')
    theirs=$(sed -n "s/^$cfg //p" <<<"$presets")
    if [ "$mine" != "$theirs" ]; then
        echo "bench.sh: config $cfg: bench/util_bench.h has '$mine'," \
             "scripts/torch/torch_baseline.py's PRESETS '${theirs:-nothing}'; make them agree" >&2
        exit 2
    fi
done
for cfg in $CONFIGS; do
    grep "^bench_config config=$cfg " <<<"$configs_out" | recs bench_config
done

# Each engine's peak (see the top), as records with when=WHEN (`sgemm*` and
# `linear*` records; before the runs also each engine's `matmul_engine`
# description). The measurement before the runs fills PEAK[engine], passed to
# bench_model for the MFU on its own line (the report recomputes the MFU
# against the larger of before and after). Before the runs, an engine whose
# peak fails (bf16 where oneDNN has no bf16 products) is recorded as
# unavailable and dropped from ENGINES and SCHEME_ENGINES.
declare -A PEAK
first_out=""
measure_peaks() {
    local when=$1 e out kept="" errf
    errf=$(mktemp)
    for e in $ENGINES; do
        # shellcheck disable=SC2046  # engine_flags: two flags and their values
        if out=$(build/bench_model --peak --threads "$THREADS" $(engine_flags "$e") 2>"$errf"); then
            kept="$kept $e"
            recs 'sgemm*' "when=$when" <<<"$out"
            recs 'linear*' "when=$when" <<<"$out"
            if [ "$when" = before ]; then
                recs matmul_engine <<<"$out"
                # openblas-fp32: the sgemm peak; onednn-*: the engine's linear peak
                PEAK[$e]=$(sed -n -e 's/^sgemm_peak gflops=\([^ ]*\).*/\1/p' \
                                  -e 's/^linear_peak engine=onednn .*gflops=\([^ ]*\).*/\1/p' <<<"$out" | head -1)
                [ -n "$first_out" ] || first_out=$out
            fi
        elif [ "$when" = before ]; then
            rec "engine_unavailable engine=${e%-*} precision=${e#*-} reason=$(q "$(tail -1 "$errf")")"
        else
            echo "bench.sh: $e: the peak after the runs failed: $(tail -1 "$errf")" >&2
            kept="$kept $e"
        fi
    done
    rm -f "$errf"
    ENGINES=${kept# }
    kept=""
    for e in $SCHEME_ENGINES; do [[ " $ENGINES " == *" $e "* ]] && kept="$kept $e"; done
    SCHEME_ENGINES=${kept# }
    return 0
}
measure_peaks before
# PyTorch's autocast bf16 is the baseline of ropelab's bf16 engine only: where
# that engine cannot run, its rows would compare with nothing (and autocast
# without native bf16 is slow: on an AVX2 CPU, M's step takes minutes).
if [[ " $ENGINES " != *" onednn-bf16 "* && " $TORCH_MODES " == *" bf16 "* ]]; then
    TORCH_MODES=$(for m in $TORCH_MODES; do [ "$m" = bf16 ] || printf '%s ' "$m"; done)
    TORCH_MODES=${TORCH_MODES% }
    rec "torch_mode_dropped mode=bf16 reason=\"ropelab's bf16 engine is unavailable here, so nothing compares with it\""
fi

# "# openblas core=NAME config=TEXT WITH SPACES threads=N" (every bench_model
# run prints it) -> a blas record
ob=$(grep -m1 '^# openblas ' <<<"$first_out" || true)
rec "blas side=ropelab core=$(sed -n 's/.* core=\([^ ]*\).*/\1/p' <<<"$ob")" \
    "config=$(q "$(sed -n 's/.* config=\(.*\) threads=.*/\1/p' <<<"$ob")")" \
    "threads=$(sed -n 's/.* threads=\([^ ]*\).*/\1/p' <<<"$ob")"
# "# auto fp32 = ENGINE (CHOICE)" (bench_model --auto: the trainer's trial for the default
# ./train, matmul = auto, on each config's model) -> an auto record, for the report's #37 targets
for cfg in $CONFIGS; do
    au=$(build/bench_model --auto --config "$cfg" --threads "$THREADS" | grep -m1 '^# auto fp32 = ' || true)
    if [ -n "$au" ]; then
        au=${au#\# auto fp32 = }
        au_choice=${au#* (}
        rec "auto config=$cfg precision=fp32 engine=${au%% *} choice=$(q "${au_choice%)}")"
    fi
done
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

for cfg in $CONFIGS; do
    for pos in $SCHEMES; do
        for round in $(seq "$ROUNDS"); do
            for e in $ENGINES; do
                # shellcheck disable=SC2046
                build/bench_model --config "$cfg" --pos "$pos" --steps "$STEPS" --warmup "$WARMUP" \
                    --threads "$THREADS" $(engine_flags "$e") --peak-gflops "${PEAK[$e]:-0}" \
                    | recs ropelab "round=$round"
            done
            for mode in $TORCH_MODES; do
                { "$PY" scripts/torch/torch_baseline.py --config "$cfg" --pos "$pos" --threads "$THREADS" \
                    --steps "$STEPS" --warmup "$WARMUP" --autocast "${mode/fp32/off}" 2>/dev/null || true; } \
                    | recs torch "config=$cfg round=$round"
            done
        done
    done
done

# The peaks again, after the runs: the machine's speed drifts, so the report takes
# the larger of the two measurements as each engine's reference.
measure_peaks after

for cfg in $SCHEME_CONFIGS; do
    for e in $SCHEME_ENGINES; do
        # shellcheck disable=SC2046
        build/bench_model --compare-schemes --config "$cfg" --steps "$SCHEME_STEPS" --warmup 2 \
            --threads "$THREADS" $(engine_flags "$e") | recs 'scheme_*'
    done
done
build/bench_model --rope-micro --threads "$THREADS" | recs rope_micro
# Attention alone, on each engine (the products on OpenBLAS, oneDNN fp32, oneDNN bf16), blocked and fused.
[ -x build/bench_attention ] || make build/bench_attention >/dev/null
build/bench_attention --threads "$THREADS" | recs attention
# Memory and the longest context, from the accounting (no training, no timing).
[ -x build/bench_memory ] || make build/bench_memory >/dev/null
for cfg in $MEMORY_CONFIGS; do
    build/bench_memory --config "$cfg" --mem-gib "$MEM_GIB" --threads "$THREADS" | recs 'memory*'
done

echo
"$PY" bench/bench_report.py "$OUT"
