#!/usr/bin/env bash
# The main job: PreciseCoder (GDPO on r_lambda) on SmolLM2-135M-Instruct (bundled GGUF),
# the generator's easy tier, offline on CPU; evaluation before and after, then a report.
#   scripts/main_job.sh [WORKDIR] [--config.a.b=v ...]
# Running it again in the same WORKDIR resumes (or, once finished, just rewrites the report).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
workdir=${1:-runs/main}
shift || true
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)
.venv/bin/python -m precisecoder.train --config=configs/precisecoder.py:local \
  --workdir="$workdir" "$@"
echo "main job: $(( $(date +%s) - start )) s; report: $workdir/report.md"
