#!/usr/bin/env bash
# Creates .venv (once) and installs the pinned stack and this package into it. Idempotent:
# a stamp file skips pip when requirements have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.installed-$(cat requirements.txt requirements-nodeps.txt pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  .venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
  .venv/bin/python -m pip install -q --no-deps -e .
  rm -f .venv/.installed-*; touch "$stamp"
fi
