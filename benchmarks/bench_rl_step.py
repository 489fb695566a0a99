"""RL step-time breakdown, synchronous vs asynchronous (rl.max_staleness k = 0, 1, 2).

  .venv/bin/python benchmarks/bench_rl_step.py [--steps 8] [--staleness 0,1,2] [--preset tiny]
      [--prompts 4] [--max-new-tokens 48] [--prompt-bucket 1088] [--record]

Runs the real loop (the train command's: train/rl.py; on the tiny preset a random model,
generator tasks, the execution pool in its own processes) once per k and prints mean seconds
per step of each part:

  sample    decoding done in the step (`time/launch`: its own rollouts at k = 0, those of
            step t + k at k >= 1)
  reward    scoring them in the reward thread (overlapped with sampling, and for k >= 1 with
            the learning of the steps between)
  exposed   the part of scoring the loop waited for (the learner idle on rewards)
  train     the step's updates (forward, backward, optimiser)
  transfer  weights moved to the sampler: none here (interleaved placement: the sampler
            reads the learner's own device arrays before the update donates them)
  other     the rest of the step (advantages, metrics, host work)
  step      the whole step

`rl.kl_beta` is set so every step updates: a random policy gets no reward variance, and a
step without variance or a KL term skips its update (rl.py), which would time nothing. The
prompt bucket puts every prompt of the tiny preset's tasks (909-1065 tokens) in one width, so
nothing compiles after the first steps (a run that compiled in a timed step, or read another
run's compilations from the cache, would not compare). The
means are over the steady steps k + 2 .. steps - k: step 1 compiles and samples k + 1 steps'
rollouts, and the last k steps sample none, so --steps must be at least 2 k + 2.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from precisecoder.commands import train as train_command  # noqa: E402
from precisecoder.train import config as train_config  # noqa: E402
from precisecoder.train import metrics  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402

COLUMNS = ("sample", "reward", "exposed", "train", "transfer", "other", "step")


def run(preset: str, steps: int, k: int, sizes: dict[str, int]) -> dict[str, float]:
  """Mean seconds per step of each part of COLUMNS over the steady steps k + 2 .. `steps` - k,
  each of which samples one step's rollouts and learns from another's."""
  cfg = train_config.default(preset)
  cfg.rl.update(max_staleness=k, kl_beta=0.01, **sizes)
  cfg.train.update(dict(steps=steps, eval_every=0, report=False, checkpoint_every=steps))
  with tempfile.TemporaryDirectory() as workdir:
    assert train_command.train(cfg, workdir) == 0
    rows = [
      r for r in metrics.read_metrics(os.path.join(workdir, "metrics.jsonl")) if "time/step" in r
    ][k + 1 : steps - k]

  def mean(key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)

  parts = dict(
    sample=mean("time/launch"),
    reward=mean("time/reward"),
    exposed=mean("time/reward_exposed"),
    train=mean("time/train"),
    transfer=0.0,
    step=mean("time/step"),
  )
  busy = parts["sample"] + parts["exposed"] + parts["train"] + mean("time/checkpoint")
  parts["other"] = parts["step"] - busy
  return parts


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=8)
  parser.add_argument("--staleness", default="0,1,2", help="comma-separated values of k")
  parser.add_argument("--preset", default="tiny", help="the run preset (train/config.py)")
  parser.add_argument("--prompts", type=int, default=4, help="rl.prompts_per_step (0: preset's)")
  parser.add_argument("--max-new-tokens", type=int, default=48, help="0: the preset's")
  parser.add_argument("--prompt-bucket", type=int, default=1088, help="0: the preset's")
  add_record_flag(parser)
  args = parser.parse_args()
  ks = [int(k) for k in args.staleness.split(",")]
  if args.steps < 2 * max(ks) + 2:
    parser.error(f"--steps {args.steps}: at least {2 * max(ks) + 2} for k up to {max(ks)}")
  sizes = {
    k: v
    for k, v in dict(
      prompts_per_step=args.prompts,
      max_new_tokens=args.max_new_tokens,
      prompt_bucket=args.prompt_bucket,
    ).items()
    if v
  }
  results = {k: run(args.preset, args.steps, k, sizes) for k in ks}
  shown = ", ".join(f"rl.{k}={v}" for k, v in sizes.items()) or "its sizes"
  print(
    f"mean seconds per RL step ({args.preset} preset, {shown}, steps k+2..{args.steps}-k; "
    "interleaved placement)\n"
  )
  print("| k | " + " | ".join(COLUMNS) + f" | step vs k={ks[0]} |")
  print("|---" * (len(COLUMNS) + 2) + "|")
  base = results[ks[0]]["step"]
  for k, r in results.items():
    cells = " | ".join(f"{r[c]:.3f}" for c in COLUMNS)
    print(f"| {k} | {cells} | {r['step'] / base:.2f}x |")


if __name__ == "__main__":
  main()
