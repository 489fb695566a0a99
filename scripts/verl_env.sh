#!/usr/bin/env bash
# Builds verl's reference environment (requirements-verl.txt) into .venv-verl, where
# tests/reference/ compares our losses, KL estimators, advantages and importance-sampling
# weights with verl's own functions. verl installs with --no-deps: its full dependency set
# (vllm-era transformers, ray[default], wandb, ...) cannot share the trainer's stack, and the
# functions compared need only the pinned few. Idempotent: a stamp file skips pip when the
# requirements have not changed.
#   scripts/verl_env.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${1:-.venv-verl}
source scripts/bootstrap.sh  # its check_space: verl's environment fills up to 1.4 GiB
if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$(dirname "$VENV")"
  check_space "$(dirname "$VENV")" 2048 "verl's environment" || exit 1
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
stamp="$VENV/.installed-$(sha1sum requirements-verl.txt | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  # pip's notice for an index folder that lacks the package is configuration noise.
  "$VENV/bin/python" -m pip install -q --no-deps -r requirements-verl.txt 2>&1 \
    | { grep -v -E "^WARNING: Location '[^']*' is ignored" >&2 || true; }
  rm -f "$VENV"/.installed-*; touch "$stamp"
fi
"$VENV/bin/python" -c "import verl, verl.trainer.ppo.core_algos, verl.trainer.ppo.rollout_corr_helper
print(f'verl reference environment ready: verl {verl.__version__}')"
