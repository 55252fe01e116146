#!/usr/bin/env bash
# Installs the Debian packages ropelab needs, if any is missing.
#   build: gcc libc6-dev (the C library's headers: gcc only recommends them, and
#          --no-install-recommends below leaves them out) make
#          libopenblas-openmp-dev (OpenBLAS built on OpenMP, so BLAS and
#          our loops share one pool of threads), libcjson-dev (safetensors
#          headers), libinih-dev (config files), libcmocka-dev (tests)
#   MPI:   openmpi-bin libopenmpi-dev (mpicc and mpirun: make builds ./train with
#          Open MPI where mpicc is found, for mpirun -np N ./train; the tests
#          need them; without them ./train is built for one process)
#   data:  bible-kjv (the default corpus), dict-gcide (the second corpus)
#   tests: unicode-data (the UCD: the Unicode table's check, a text of every
#          character for make test-llamacpp), python3-regex (GPT-2's regex in
#          the regex engine its encoder.py uses, against our pre-tokenizer)
#   tools: python3-torch (cross-check and baseline), python3-matplotlib (plots),
#          python3-scipy (the t quantiles of the reports' paired statistics)
#   make fuzz, make tsan (ROPELAB_CLANG_DEPS=1): clang libclang-rt-14-dev libomp-14-dev
#          (libFuzzer, the sanitizers' runtimes, LLVM's OpenMP with Archer)
# With package names as arguments it installs those instead (tests/llamacpp/run.sh:
# nodejs npm, when npm is missing).
# As root it runs apt-get; otherwise it prints the one line to run and fails.
set -euo pipefail
pkgs=(gcc libc6-dev make libopenblas-openmp-dev libdnnl-dev libcjson-dev libinih-dev libcmocka-dev openmpi-bin libopenmpi-dev bible-kjv dict-gcide
      unicode-data python3-regex python3-numpy python3-scipy python3-torch python3-matplotlib)
[ "${ROPELAB_MINIMAL_DEPS:-0}" = 1 ] && pkgs=(gcc libc6-dev make libopenblas-openmp-dev libdnnl-dev libcjson-dev libinih-dev libcmocka-dev bible-kjv)
[ "${ROPELAB_CLANG_DEPS:-0}" = 1 ] && pkgs+=(clang libclang-rt-14-dev libomp-14-dev)
[ $# -gt 0 ] && pkgs=("$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "ropelab needs these Debian packages; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
