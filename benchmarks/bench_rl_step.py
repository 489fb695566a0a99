"""RL step-time breakdown on the tiny config: sample, reward, exposed reward, train, checkpoint.

  .venv/bin/python benchmarks/bench_rl_step.py [--steps 4] [--chunks 2]

Runs the real loop (tiny random model, generator tasks, the execution pool) twice side by
side: scoring overlapped with sampling (`rl.rollout_chunks`) and not overlapped (one chunk,
so the whole reward time is exposed), and prints mean seconds per step for each part. The
first step (compilation) is left out of the means.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from precisecoder.train import config as train_config  # noqa: E402
from precisecoder.train import metrics, rl  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402

PARTS = (
  "time/sample",
  "time/reward",
  "time/reward_exposed",
  "time/train",
  "time/checkpoint",
  "time/step",
)


def run(steps: int, chunks: int) -> dict[str, float]:
  cfg = train_config.default("tiny")
  cfg.rl.prompts_per_step = 4
  cfg.rl.rollout_chunks = chunks
  cfg.rl.max_new_tokens = 48
  cfg.train.update(dict(steps=steps, eval_every=0, report=False, checkpoint_every=1))
  with tempfile.TemporaryDirectory() as workdir:
    rl.train(cfg, workdir)
    rows = [
      r for r in metrics.read_metrics(os.path.join(workdir, "metrics.jsonl")) if "time/step" in r
    ][1:]
  return {k: sum(r[k] for r in rows) / len(rows) for k in PARTS}


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=4)
  parser.add_argument("--chunks", type=int, default=2)
  add_record_flag(parser)
  args = parser.parse_args()
  results = {
    f"overlapped ({args.chunks} chunks)": run(args.steps, args.chunks),
    "serial (1 chunk)": run(args.steps, 1),
  }
  print(f"\nmean seconds per RL step (tiny config, steps 2..{args.steps})")
  print(f"{'':24s}" + "".join(f"{p.split('/')[1]:>16s}" for p in PARTS) + f"{'exposed %':>12s}")
  for name, r in results.items():
    print(
      f"{name:24s}"
      + "".join(f"{r[p]:16.3f}" for p in PARTS)
      + f"{100 * r['time/reward_exposed'] / r['time/step']:11.1f}%"
    )


if __name__ == "__main__":
  main()
