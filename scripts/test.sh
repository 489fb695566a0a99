#!/usr/bin/env bash
# The test command: installs what it needs, then runs the default (fast, offline, CPU) suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh -m slow` or `scripts/test.sh tests/test_edits.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 JAX_PLATFORMS=cpu
# --durations: CI's log names the slowest tests, where the suite's time goes.
exec .venv/bin/python -m pytest -n 2 --durations=15 -q "$@"
