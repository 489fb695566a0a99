#!/usr/bin/env bash
# Creates .venv (once) and installs the pinned stack and this package into it. Idempotent:
# a stamp file skips pip when requirements have not changed.
# PRECISECODER_ACCELERATOR=cuda|tpu adds requirements-cuda.txt / requirements-tpu.txt (the same
# jax built for that accelerator); unset or "cpu": the CPU stack only.
# PRECISECODER_INTEGRATIONS=1 adds requirements-integrations.txt (TRL, for the adapter tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ACCEL=${PRECISECODER_ACCELERATOR:-cpu}
extra=()
case "$ACCEL" in
  cpu) ;;
  cuda|tpu) extra=("requirements-$ACCEL.txt") ;;
  *) echo "PRECISECODER_ACCELERATOR=$ACCEL: want cpu, cuda or tpu" >&2; exit 2 ;;
esac
[ "${PRECISECODER_INTEGRATIONS:-0}" = 1 ] && extra+=("requirements-integrations.txt")
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.installed-$(cat requirements.txt requirements-nodeps.txt pyproject.toml "${extra[@]}" | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  for file in "${extra[@]}"; do .venv/bin/python -m pip install -q -r "$file"; done
  .venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
  .venv/bin/python -m pip install -q --no-deps -e .
  rm -f .venv/.installed-*; touch "$stamp"
fi
