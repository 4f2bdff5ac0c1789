#!/usr/bin/env bash
# Creates the interop tier's virtualenv: tools/make_venv.sh PYTHON VENV REQUIREMENTS.
#
# The pinned peers take about 2.2 GB installed and 0.7 GB of wheels while they download. pip
# writes those wheels to its temporary folder, which on many machines is a small /tmp; here they
# go to a folder inside the virtualenv (same disk, removed at the end) and pip keeps no cache of
# its own, so one disk holds everything and the check below knows how much it needs.
set -euo pipefail

python=$1
venv=$2
requirements=$3
readonly kNeedKiB=$((3500 * 1024)) # 2.2 GB installed + 0.7 GB of wheels + room

parent=$(dirname "$(realpath -m "$venv")")
mkdir -p "$parent"
free_kib=$(df -Pk "$parent" | awk 'NR == 2 {print $4}')
if [ "$free_kib" -lt "$kNeedKiB" ]; then
  echo "make deps: $parent has $((free_kib / 1024)) MiB free; the virtualenv needs about" \
    "$((kNeedKiB / 1024)) MiB (2.2 GB installed, 0.7 GB of wheels while they download)" >&2
  exit 1
fi

rm -rf "$venv"
"$python" -m venv "$venv"
mkdir -p "$venv/.pip-tmp"
# One retry: a dropped connection to PyPI is the usual failure, and a second try usually passes.
for attempt in 1 2; do
  if TMPDIR="$(realpath "$venv/.pip-tmp")" "$venv/bin/pip" install -q --no-cache-dir \
    --disable-pip-version-check -r "$requirements"; then
    rm -rf "$venv/.pip-tmp"
    exit 0
  fi
  echo "make deps: pip install from $requirements failed (try $attempt of 2)" >&2
done
rm -rf "$venv"
exit 1
