#!/usr/bin/env bash
# Harbor 0.26 (the task format's reference implementation) in its own venv, .venv-harbor, for
# tests/harbor and bench/harbor_compat.py. Harbor needs Python >= 3.12 (Debian 12 has 3.11):
# a python3.12+ on PATH or under pyenv, else uv's own download of one.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-harbor
SPEC='harbor==0.26.*'
if [ -x "$VENV/bin/harbor" ]; then echo "harbor: $($VENV/bin/harbor --version 2>/dev/null | tail -1) ready"; exit 0; fi
PY=""
for p in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    PY=$(command -v "$p"); break
  fi
done
rm -rf "$VENV"
if [ -n "$PY" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q -U pip
  "$VENV/bin/pip" install -q "$SPEC"
else
  .venv/bin/pip install -q uv
  .venv/bin/uv venv -q --python 3.12 "$VENV"
  .venv/bin/uv pip install -q --python "$VENV/bin/python" "$SPEC"
fi
echo "harbor: $($VENV/bin/harbor --version 2>/dev/null | tail -1) installed in $VENV"
