#!/usr/bin/env bash
# Runs every cmocka test binary given on the command line, keeps going past a
# failure, and ends with one line "N passed, N failed" (binaries, not cases).
set -u
passed=0; failed=0; failed_names=()
start=$(date +%s)
for t in "$@"; do
  echo "=== $t"
  t0=$(date +%s)
  if "$t"; then passed=$((passed+1)); else failed=$((failed+1)); failed_names+=("$t"); fi
  echo "=== $t: $(( $(date +%s) - t0 )) s"
done
echo "test suite: $(( $(date +%s) - start )) s"
[ $failed -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
