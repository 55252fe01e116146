#!/usr/bin/env bash
# run_fuzz.sh TARGET...: runs build/fuzz/fuzz_TARGET for FUZZ_SECONDS seconds
# each (make fuzz), one after the other, and ends with one table: executions,
# coverage, corpus and findings (crash, leak, timeout, oom) per target.
# Exit status 1 if any target found something or did not run.
#
# Corpus directories, in libFuzzer's order (new inputs go to the first):
#   build/fuzz/corpus/NAME     grows from run to run
#   build/fuzz/seeds/NAME      real files made by make_seeds.sh
#   tests/fuzz/seeds/NAME      hand-made edge cases (committed)
#   tests/fuzz/regress/NAME    every input that once found a bug (committed)
# Findings are written to build/fuzz/artifacts/NAME/ (crash-*, leak-*,
# timeout-*, oom-*), the whole output to build/fuzz/logs/NAME.log.
# Runs from the repository root (the args target opens paths relative to it).
set -u
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-60}
extra=${FUZZ_FLAGS:-}

# Longest input and per-input time limit, per kind of input. max_len is above
# the largest seed of make_seeds.sh (libFuzzer would cut longer seeds).
declare -A MAX_LEN=([safetensors]=65536 [weights]=65536 [checkpoint]=65536 [tokens]=16384
                    [tokenizer]=16384 [ini]=4096 [args]=2048)
declare -A TIMEOUT=([safetensors]=5 [weights]=10 [checkpoint]=5 [tokens]=5
                    [tokenizer]=5 [ini]=5 [args]=5)

mkdir -p build/fuzz/logs build/fuzz/tmp
rows=()
bad=0
for t in "$@"; do
  bin=build/fuzz/fuzz_$t
  if [ -z "${MAX_LEN[$t]:-}" ] || [ ! -x "$bin" ]; then
    rows+=("$t|-|-|-|-|no such target ($bin)"); bad=1; continue
  fi
  corpus=build/fuzz/corpus/$t
  art=build/fuzz/artifacts/$t
  log=build/fuzz/logs/$t.log
  rm -rf "$art"
  mkdir -p "$corpus" "$art"
  dirs=("$corpus")
  for d in build/fuzz/seeds/$t tests/fuzz/seeds/$t tests/fuzz/regress/$t; do
    [ -d "$d" ] && dirs+=("$d")
  done
  echo "=== fuzz_$t: ${secs} s, log in $log"
  # One thread: the harnesses are single-threaded and OpenMP's pool would only
  # compete with the fuzzer. Findings are fatal for UBSan too (see fuzz.mk).
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 TMPDIR="$PWD/build/fuzz/tmp" UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout="${TIMEOUT[$t]}" \
    -max_len="${MAX_LEN[$t]}" -artifact_prefix="$art/" -print_final_stats=1 \
    $extra "${dirs[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corp=$(find "$corpus" -type f | wc -l)
  findings=()
  for kind in crash leak timeout oom; do
    n=$(find "$art" -name "$kind-*" | wc -l)
    [ "$n" -gt 0 ] && findings+=("$kind: $(find "$art" -name "$kind-*" | head -1)")
  done
  if [ ${#findings[@]} -gt 0 ]; then
    result="${findings[*]}"
    bad=1
    # the first error line and the sanitizer's one-line summary (with the location)
    grep -m1 -E '^(==[0-9]+== ?ERROR|.*runtime error:|fuzz_[a-z]+: )' "$log" | sed 's/^/    /'
    grep -m1 '^SUMMARY:' "$log" | sed 's/^/    /'
    grep -m1 -E '^ +#[0-9]+ .* in .*/src/' "$log" | sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ /    first frame in src\/: /'
  elif [ $rc -ne 0 ]; then
    result="exit status $rc, no artifact (see $log)"
    bad=1
  else
    result="none"
  fi
  rows+=("$t|${execs:-?}|${rate:-?}|${cov:-?}|$corp|$result")
done

echo
printf '%-12s %10s %8s %6s %7s  %s\n' target executions exec/s cov corpus findings
for r in "${rows[@]}"; do
  IFS='|' read -r t e x c n f <<<"$r"
  printf '%-12s %10s %8s %6s %7s  %s\n' "$t" "$e" "$x" "$c" "$n" "$f"
done
if [ $bad -ne 0 ]; then
  echo "fuzz: findings above (reproduce: build/fuzz/fuzz_NAME FILE; see tests/fuzz/README.md)"
  exit 1
fi
echo "fuzz: no findings in ${secs} s per target"
