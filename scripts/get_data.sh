#!/usr/bin/env bash
# get_data.sh: writes the default corpus, the King James Bible (public domain),
# to data/kjv.txt from Debian's bible-kjv package. Idempotent: does nothing if
# the file is already there.
#
# The text is exactly what `bible -l0 gen1:1-rev22:21` prints: a heading line
# per chapter ("Genesis 1") between blank lines, then one verse per line with
# its number ("  1 In the beginning God created the heaven and the earth.").
# -l0 turns off line wrapping, so the file does not depend on $COLUMNS.
# About 4.3 MB of ASCII.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/kjv.txt
if [ -s "$out" ]; then
  echo "get_data: $out is already there ($(wc -c < "$out") bytes)"
  exit 0
fi
if ! command -v bible >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "get_data: installing the bible-kjv package"
    DEBIAN_FRONTEND=noninteractive apt-get install -y bible-kjv >/dev/null \
      || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y bible-kjv >/dev/null; }
  else
    echo "get_data: the 'bible' program is missing; install it with:" >&2
    echo "  sudo apt-get install bible-kjv" >&2
    exit 1
  fi
fi
mkdir -p data
bible -l0 gen1:1-rev22:21 > "$out.tmp"
size=$(wc -c < "$out.tmp")
if [ "$size" -lt 4000000 ]; then
  echo "get_data: bible printed only $size bytes (expected about 4.3 MB)" >&2
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
echo "get_data: wrote $out ($size bytes)"
