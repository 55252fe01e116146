#!/usr/bin/env bash
# Runs every cmocka test binary given on the command line, keeps going past a
# failure, and ends with one line "N passed, N failed, N skipped" (binaries,
# not cases). A binary counts as skipped when any of its cases was skipped
# (cmocka prints "[  SKIPPED ]"): a skip is never silent.
set -u
passed=0; failed=0; skipped=0; failed_names=(); skipped_names=()
start=$(date +%s)
for t in "$@"; do
  echo "=== $t"
  t0=$(date +%s)
  log=$(mktemp)
  "$t" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then failed=$((failed+1)); failed_names+=("$t")
  elif grep -q '^\[  SKIPPED \]' "$log"; then skipped=$((skipped+1)); skipped_names+=("$t")
  else passed=$((passed+1)); fi
  rm -f "$log"
  echo "=== $t: $(( $(date +%s) - t0 )) s"
done
echo "test suite: $(( $(date +%s) - start )) s"
[ $failed -gt 0 ] && echo "failed: ${failed_names[*]}"
[ $skipped -gt 0 ] && echo "skipped (see the messages above): ${skipped_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
