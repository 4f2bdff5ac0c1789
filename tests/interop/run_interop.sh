#!/usr/bin/env bash
# run_interop.sh VENV SCRIPT [ARGS...]: runs SCRIPT with the virtualenv's Python, or exits 77
# (ctest: skipped) saying why when the virtualenv is absent.
set -euo pipefail
venv=$1
shift
if [ ! -x "$venv/bin/python" ]; then
  echo "SKIPPED: no interop virtualenv at $venv; run 'make deps' to create it"
  exit 77
fi
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" "$@"
