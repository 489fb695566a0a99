#!/usr/bin/env bash
# Builds the BigCodeBench task environment (requirements-bigcodebench.txt) into
# .venv-bigcodebench, for `precisecoder score|data --python .venv-bigcodebench/bin/python`
# (config: rl.python). Idempotent: a stamp file skips pip when the requirements have not changed.
#   scripts/bigcodebench_env.sh [VENV_DIR]
# It needs only the standard library of the interpreter it runs under: the pool's workers import
# nothing else. Use the trainer's Python version, so that programs travel compiled (else the pool
# sends their source, which works too, a little slower).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${1:-.venv-bigcodebench}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
stamp="$VENV/.installed-$(sha1sum requirements-bigcodebench.txt | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -r requirements-bigcodebench.txt
  rm -f "$VENV"/.installed-*; touch "$stamp"
fi
"$VENV/bin/python" - <<'PY'
import matplotlib, numpy, pandas, sklearn
print(f"BigCodeBench environment ready: matplotlib {matplotlib.__version__}, numpy "
      f"{numpy.__version__}, pandas {pandas.__version__}, scikit-learn {sklearn.__version__}")
PY
echo "use: precisecoder score ... --python $VENV/bin/python"
