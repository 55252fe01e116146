#!/usr/bin/env bash
# get_data.sh [CORPUS]: writes a training corpus from a Debian package.
# Idempotent: does nothing if the file is already there.
#
#   scripts/run/get_data.sh          the default, same as `scripts/run/get_data.sh kjv`
#   scripts/run/get_data.sh kjv      data/kjv.txt: the King James Bible (public domain)
#   scripts/run/get_data.sh gcide    data/gcide.txt: GCIDE, a dictionary (GPL)
#   scripts/run/get_data.sh --help   this list
#
# ROPELAB_DATA_DIR=DIR writes DIR/NAME.txt instead of data/NAME.txt (a relative
# DIR is taken from the current directory); the tests use it to stay out of data/.
#
# kjv: the text is exactly what `bible -l0 gen1:1-rev22:21` prints: a heading
# line per chapter ("Genesis 1") between blank lines, then one verse per line
# with its number ("  1 In the beginning God created the heaven and the
# earth."). -l0 turns off line wrapping, so the file does not depend on
# $COLUMNS. About 4.3 MB of ASCII.
#
# gcide: the GNU Collaborative International Dictionary of English (Webster's
# 1913 with WordNet 1.5 and later additions) from the dict-gcide package's dictd
# database, turned into plain UTF-8 text by scripts/run/gcide_to_text.py: one entry
# per paragraph (headword, pronunciation, part of speech, etymology, one line per
# sense, quotation or note), paragraphs separated by a blank line. About 29 MB.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/run/get_data.sh [CORPUS]
Writes a corpus from a Debian package to data/CORPUS.txt (nothing to do if it is there).
Corpora:
  kjv     the King James Bible, package bible-kjv (public domain), 4.3 MB (default)
  gcide   the GNU Collaborative International Dictionary of English, package
          dict-gcide (GPL), 29 MB, one dictionary entry per paragraph
Environment: ROPELAB_DATA_DIR=DIR writes DIR/CORPUS.txt instead.
EOF
}

corpus=kjv
if [ $# -gt 1 ]; then
  echo "get_data: too many arguments (see --help)" >&2
  exit 2
fi
if [ $# -eq 1 ]; then
  case "$1" in
    -h|--help) usage; exit 0 ;;
    kjv|gcide) corpus=$1 ;;
    *) echo "get_data: unknown corpus '$1' (known: kjv, gcide; see --help)" >&2; exit 2 ;;
  esac
fi

# The output directory: data/ in the repository, or $ROPELAB_DATA_DIR.
datadir=${ROPELAB_DATA_DIR:-}
if [ -n "$datadir" ] && [ "${datadir#/}" = "$datadir" ]; then
  datadir="$PWD/$datadir"
fi
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh
datadir=${datadir:-data}
out=$datadir/$corpus.txt
if [ -s "$out" ]; then
  echo "get_data: $out is already there ($(wc -c < "$out") bytes)"
  exit 0
fi

# install_package PACKAGE WHAT: as root with apt-get; otherwise says WHAT is
# missing, prints the apt-get line and exits 1.
install_package() {
  if [ "$(id -u)" -eq 0 ]; then
    echo "get_data: installing the $1 package"
    DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null \
      || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null; }
  else
    echo "get_data: $2 is missing; install it with:" >&2
    echo "  sudo apt-get install $1" >&2
    exit 1
  fi
}

if [ "$corpus" = kjv ]; then
  if ! command -v bible >/dev/null 2>&1; then
    install_package bible-kjv "the 'bible' program"
  fi
  mkdir -p "$datadir"
  tmp=$out.tmp.$$   # this process's own: two that make the corpus at once each rename a whole file
  bible -l0 gen1:1-rev22:21 > "$tmp"
  size=$(wc -c < "$tmp")
  if [ "$size" -lt 4000000 ]; then
    echo "get_data: bible printed only $size bytes (expected about 4.3 MB)" >&2
    rm -f "$tmp"
    exit 1
  fi
  mv "$tmp" "$out"
  echo "get_data: wrote $out ($size bytes)"
  exit 0
fi

# gcide
dictdir=/usr/share/dictd
if [ ! -f "$dictdir/gcide.dict.dz" ] || [ ! -f "$dictdir/gcide.index" ]; then
  install_package dict-gcide "the dict-gcide package ($dictdir/gcide.dict.dz, gcide.index)"
fi
mkdir -p "$datadir"
# gcide_to_text.py writes a temporary file of its own beside $out, then renames it; it prints the summary line.
/usr/bin/python3 scripts/run/gcide_to_text.py --dict "$dictdir/gcide.dict.dz" --index "$dictdir/gcide.index" -o "$out"
size=$(wc -c < "$out")
if [ "$size" -lt 25000000 ]; then
  echo "get_data: $out has only $size bytes (expected about 29 MB)" >&2
  rm -f "$out"
  exit 1
fi
echo "get_data: wrote $out ($size bytes)"
