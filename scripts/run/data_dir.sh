#!/usr/bin/env bash
# data_dir.sh RECORD: the directory that holds the data of a data record
# (src/data/data_record.h: a run's RUN/data.txt, a study's
# docs/results/STUDY/data.txt, or a recipe alone such as configs/data/kjv.txt),
# made if it is not there; printed as the last line of stdout.
#
#   1. An input text of the recipe that is missing and is one of the corpora
#      of scripts/run/get_data.sh (data/kjv.txt, data/gcide.txt) is written.
#   2. ./prepare --record RECORD: the directory the record names holds its data
#      already (nothing to do), or is made there from the recipe and checked
#      against the record's checksums.
#   3. Where that directory holds other data (a user's, or made another way),
#      it is left alone and the record's data goes to a directory of its own,
#      DIR-HASH (HASH: the first 8 hex digits of the record's SHA-256 without its
#      comments), made or checked the same way.
# Any other failure (an input text that is not the record's, a recipe that
# makes other data here) is ./prepare's one line and a non-zero exit.
# Used by make run, make compare, the sweeps and make reproduce, so none of
# them trains on data that only has the right name.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is scripts/run/NAME.sh

record=${1:-}
if [ -z "$record" ] || [ "$record" = -h ] || [ "$record" = --help ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d'; [ -n "$record" ]; exit
fi
[ -f "$record" ] || { echo "data_dir: $record: no such data record" >&2; exit 2; }
bash scripts/run/build.sh prepare

while read -r input; do
  case "$input" in
    data/kjv.txt|data/gcide.txt) [ -f "$input" ] || bash scripts/run/get_data.sh "$(basename "$input" .txt)" >&2 ;;
  esac
done < <(sed -n 's/^input[[:space:]]*=[[:space:]]*//p' "$record")

train=$(sed -n 's/^train[[:space:]]*=[[:space:]]*//p' "$record" | head -1)
dir=$(dirname "$train")
rc=0
./prepare --record "$record" >&2 || rc=$?
if [ $rc -eq 2 ]; then   # the directory holds other data: the record's goes beside it
  own="$dir-$(grep -v '^[[:space:]]*;' "$record" | sha256sum | cut -c1-8)"
  echo "data_dir: $dir holds other data than $record; using $own for it" >&2
  ./prepare --record "$record" --out-dir "$own" >&2
  dir=$own
elif [ $rc -ne 0 ]; then
  exit $rc
fi
echo "$dir"
