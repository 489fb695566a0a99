#!/usr/bin/env bash
# The comparison at GPU size on one H200, then benchmarks/gpu_figures.py: one prepared command.
#
#   scripts/gpu_run.sh prepare        # here, on CPU: .device/ (wheels, task sets, SFT data)
#                                     # and the SmolLM2 GGUF in two halves (.device-gguf-{a,b})
#   scripts/gpu_run.sh stage-gguf     # GPU machine, call 1 (carry .device-gguf-a): half a -> /tmp
#   scripts/gpu_run.sh run OUT        # GPU machine, call 2 (carry .device, .device-gguf-b)
#   scripts/gpu_run.sh --quick [OUT]  # the CPU rehearsal: tiny presets, every stage of `run`
#
# `run` (budget ~11 minutes of one H200 including the machine's start-up):
#   1. `precisecoder compare --preset compare-gpu` (grpo, precisecoder; seed 0): the small
#      policy's GPU size (coder-gpu, ~27M parameters; its base built there from the carried SFT
#      data), 30 steps of 32 tasks x 8 samples, evaluated every 5 steps;
#   2. `precisecoder compare --preset compare-h200` (SmolLM2-135M from the bundled GGUF, the
#      two halves joined in /tmp), 20 steps;
#   3. benchmarks/gpu_figures.py (decode bandwidth, MFU, qwen3-4b at 1024 + 4096);
#   4. benchmarks/bench_rl_step.py: k = 0, 1, 2 on the shared mesh; with 2 devices or more,
#      also the sampler on a device of its own (rl.sampler_devices=1) at k = 1.
# Each stage's wall time goes to OUT/gpu_run.json; the reports are OUT/compare-*/report.md.
# The files over 64 MiB cannot travel in one device call, hence the GGUF halves
# (../shared/device/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  prepare|stage-gguf|run|--quick) shift ;;
  *) echo "usage: scripts/gpu_run.sh prepare | stage-gguf | run OUT | --quick [OUT]" >&2; exit 2 ;;
esac

if [ "$mode" = prepare ]; then
  scripts/bootstrap.sh
  ../shared/device/prepare.sh .device
  for folder in .device-gguf-a .device-gguf-b; do
    grep -qx "/$folder/" "$(git rev-parse --git-path info/exclude)" ||
      echo "/$folder/" >>"$(git rev-parse --git-path info/exclude)"
  done
  # Task sets and the GPU base's SFT data, generated here (pure Python, minutes of CPU).
  PRECISECODER_CACHE=$PWD/.device/cache .venv/bin/python - <<'PY'
from precisecoder.experiments import base_model
from precisecoder.train import config, tasksets
for preset in ("compare-gpu", "compare-h200"):
  cfg = config.default(preset)
  tasksets.train_tasks(cfg), tasksets.eval_tasks(cfg), tasksets.multi_tasks(cfg)
  if "base" in cfg:
    print(preset, "SFT data:", base_model.sft_data(cfg.base)[0])
PY
  gguf=$(.venv/bin/python -c 'from precisecoder.model import bundled_smollm2_gguf as b; print(b())')
  rm -rf .device-gguf-a .device-gguf-b && mkdir -p .device-gguf-a .device-gguf-b
  split -b 50M "$gguf" /tmp/smollm2.gguf.part-
  mv /tmp/smollm2.gguf.part-aa .device-gguf-a/ && mv /tmp/smollm2.gguf.part-ab .device-gguf-b/
  du -sh .device .device-gguf-a .device-gguf-b
  exit 0
fi

if [ "$mode" = stage-gguf ]; then  # /tmp survives between calls on a warm machine
  cp .device-gguf-a/smollm2.gguf.part-aa /tmp/
  exit 0
fi

out=${1:-runs/gpu_run}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
if [ "$mode" = --quick ]; then
  scripts/bootstrap.sh
  py=.venv/bin/python
  gpu_preset=tiny-base h200_preset=tiny figures=(--quick) steps=2
else
  bash .device/setup.sh
  export PYTHONPATH=/tmp/site:$PWD/src XLA_PYTHON_CLIENT_MEM_FRACTION=0.75
  export PRECISECODER_CACHE=$PWD/.device/cache
  cat /tmp/smollm2.gguf.part-aa .device-gguf-b/smollm2.gguf.part-ab >/tmp/smollm2.gguf
  export PRECISECODER_SMOLLM2_GGUF=/tmp/smollm2.gguf
  py=python3
  gpu_preset=compare-gpu h200_preset=compare-h200 figures=() steps=20
fi

declare -A seconds
stage() {  # stage NAME COMMAND...: runs it, records its wall time, keeps going if it fails
  local name=$1 start=$SECONDS
  shift
  echo "== $name: $*"
  if "$@" 2>&1 | tee "$out/$name.log"; then status=ok; else status=failed; fi
  seconds[$name]="$((SECONDS - start)) $status"
  echo "== $name: $status after $((SECONDS - start)) s"
}
stage compare-gpu $py -m precisecoder.cli compare --preset "$gpu_preset" --arms grpo,precisecoder \
  --seeds 0 --workdir "$out/compare-gpu"
stage compare-h200 $py -m precisecoder.cli compare --preset "$h200_preset" \
  --arms grpo,precisecoder --workdir "$out/compare-h200" --config.train.steps=$steps \
  --config.train.eval_every=$steps
stage gpu-figures $py benchmarks/gpu_figures.py "${figures[@]}" --json "$out/gpu_figures.json"
# The RL step's parts, synchronous vs rollouts 1 and 2 steps ahead (rl.max_staleness), on the
# GPU preset's own sizes (its base is built by then).
stage rl-step $py benchmarks/bench_rl_step.py --preset "$gpu_preset" --staleness 0,1,2 \
  --steps 8 --prompts 0 --max-new-tokens 0 --prompt-bucket 0
# The sampler on a device of its own (rl.sampler_devices=1) beside the shared mesh, at k = 1:
# one device cannot be split, so on a one-GPU machine (and in --quick, on CPU) it is skipped.
devices=$($py -c 'import jax; print(jax.device_count())' 2>/dev/null || echo 0)
if [ "$devices" -ge 2 ]; then
  stage rl-step-split $py benchmarks/bench_rl_step.py --preset "$gpu_preset" --staleness 1 \
    --sampler-devices 0,1 --mesh fsdp --steps 8 --prompts 0 --max-new-tokens 0 --prompt-bucket 0
else
  seconds[rl-step-split]="0 skipped"
  echo "== rl-step-split: skipped ($devices device(s); a sampler mesh of its own needs 2)"
fi

{
  echo "{"
  first=1
  for name in compare-gpu compare-h200 gpu-figures rl-step rl-step-split; do
    read -r s status <<<"${seconds[$name]}"
    [ $first = 1 ] || echo ","
    printf '  "%s": {"wall_s": %s, "status": "%s"}' "$name" "$s" "$status"
    first=0
  done
  printf '\n}\n'
} >"$out/gpu_run.json"
cat "$out/gpu_run.json"
