#!/usr/bin/env bash
# `make test-llamacpp`: ropelab's exported models run in llama.cpp
# (tests/llamacpp_check.c). On a clean machine it installs what it needs:
#   1. the Debian packages and the default corpus and model: `make run`
#      (scripts/run/run.sh; skips what is done, so a second run costs nothing),
#   2. llama.cpp: node-llama-cpp's prebuilt CPU binaries, exactly the versions of
#      package-lock.json (`npm ci --ignore-scripts`: no install script runs, so
#      nothing is downloaded or compiled beyond the locked packages; check.mjs
#      loads with build "never"), again only when the lock file is newer,
#   3. builds ./export and the check, and runs it.
# Node.js 20 or newer and npm must be installed (node-llama-cpp 3.21.1 needs
# node >= 20).
set -euo pipefail
cd "$(dirname "$0")/../.."
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ] || ! command -v npm >/dev/null; then
  echo "test-llamacpp: needs Node.js >= 20 and npm (found: $(node --version 2>/dev/null || echo no node))" >&2
  exit 1
fi
bash scripts/run/run.sh
if [ ! -f tests/llamacpp/node_modules/.package-lock.json ] ||
   [ tests/llamacpp/package-lock.json -nt tests/llamacpp/node_modules/.package-lock.json ]; then
  (cd tests/llamacpp && npm ci --ignore-scripts --no-audit --no-fund)
fi
make -s --no-print-directory all build/tests/llamacpp_check
bash scripts/run/run_tests.sh build/tests/llamacpp_check
