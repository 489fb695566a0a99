"""RL step-time breakdown, synchronous vs asynchronous (rl.max_staleness k = 0, 1, 2), the
sampler on the learner's mesh or on devices of its own (rl.sampler_devices n).

  .venv/bin/python benchmarks/bench_rl_step.py [--steps 8] [--staleness 0,1,2] [--preset tiny]
      [--prompts 4] [--max-new-tokens 48] [--prompt-bucket 1088] [--sampler-devices 0]
      [--mesh ""] [--record]

  # shared vs disaggregated side by side on 4 CPU devices (the learner on 4, or 3 beside the
  # sampler's 1):
  XLA_FLAGS=--xla_force_host_platform_device_count=4 .venv/bin/python \
      benchmarks/bench_rl_step.py --staleness 1 --sampler-devices 0,1 --mesh fsdp

Runs the real loop (the train command's: train/rl.py; on the tiny preset a random model,
generator tasks, the execution pool in its own processes) once per (n, k), n = 0 only with
k = 0 (a sampler mesh of its own needs k >= 1), and prints mean seconds per step of each part:

  sample    decoding one step's rollouts: in the step, on the learner's mesh (`time/launch`:
            its own rollouts at k = 0, those of step t + k at k >= 1); with n >= 1 on the
            sampler's devices and thread, beside the learning (`time/sample`)
  reward    scoring them in the reward thread (overlapped with sampling, and for k >= 1 with
            the learning of the steps between)
  idle      the learner waiting for its rollouts: the part of scoring not done by then
            (`time/reward_exposed`), and with n >= 1 the sampler still sampling them
            (`time/sampler_wait`)
  train     the step's updates (forward, backward, optimiser)
  transfer  the new weights copied to the sampler's devices (`time/weight_transfer`); none
            when shared (the sampler reads the learner's own arrays before the update donates
            them)
  other     the rest of the step (drawing tasks, launching, advantages, metrics, host work)
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

import jax  # noqa: E402
from precisecoder.commands import train as train_command  # noqa: E402
from precisecoder.train import config as train_config  # noqa: E402
from precisecoder.train import metrics  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402

COLUMNS = ("sample", "reward", "idle", "train", "transfer", "other", "step")


def run(preset: str, steps: int, k: int, n: int, mesh: str, sizes: dict) -> dict[str, float]:
  """Mean seconds per step of each part of COLUMNS over the steady steps k + 2 .. `steps` - k,
  each of which samples one step's rollouts and learns from another's, with `n` sampler
  devices (0: shared) and the learner on `mesh` ("": the preset's)."""
  cfg = train_config.default(preset)
  cfg.rl.update(max_staleness=k, kl_beta=0.01, sampler_devices=n, **sizes)
  if mesh:
    cfg.model.mesh = mesh
  cfg.train.update(dict(steps=steps, eval_every=0, report=False, checkpoint_every=steps))
  with tempfile.TemporaryDirectory() as workdir:
    assert train_command.train(cfg, workdir) == 0
    rows = [
      r for r in metrics.read_metrics(os.path.join(workdir, "metrics.jsonl")) if "time/step" in r
    ][k + 1 : steps - k]

  def mean(key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)

  def mean_or_0(key: str) -> float:  # logged with a sampler mesh of its own only
    return mean(key) if all(key in r for r in rows) else 0.0

  parts = dict(
    sample=mean("time/sample") if n else mean("time/launch"),
    reward=mean("time/reward"),
    idle=mean("time/reward_exposed") + mean_or_0("time/sampler_wait"),
    train=mean("time/train"),
    transfer=mean_or_0("time/weight_transfer"),
    step=mean("time/step"),
  )
  on_path = mean("time/launch") + parts["idle"] + parts["train"] + parts["transfer"]
  parts["other"] = parts["step"] - on_path - mean("time/checkpoint")
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
  parser.add_argument(
    "--sampler-devices",
    default="0",
    help="comma-separated values of rl.sampler_devices (0: shared mesh; n >= 1: the last n "
    "devices, run with k >= 1 only)",
  )
  parser.add_argument("--mesh", default="", help="model.mesh, the learner's ('': the preset's)")
  add_record_flag(parser)
  args = parser.parse_args()
  ks = [int(k) for k in args.staleness.split(",")]
  ns = [int(n) for n in args.sampler_devices.split(",")]
  if args.steps < 2 * max(ks) + 2:
    parser.error(f"--steps {args.steps}: at least {2 * max(ks) + 2} for k up to {max(ks)}")
  arms = [(n, k) for n in ns for k in ks if k >= 1 or n == 0]
  if not arms:
    parser.error("--sampler-devices >= 1 needs a --staleness of 1 or more")
  sizes = {
    k: v
    for k, v in dict(
      prompts_per_step=args.prompts,
      max_new_tokens=args.max_new_tokens,
      prompt_bucket=args.prompt_bucket,
    ).items()
    if v
  }
  results = {(n, k): run(args.preset, args.steps, k, n, args.mesh, sizes) for n, k in arms}
  shown = ", ".join(f"rl.{k}={v}" for k, v in sizes.items()) or "its sizes"
  print(
    f"mean seconds per RL step ({args.preset} preset, {shown}, steps k+2..{args.steps}-k; "
    f"{jax.device_count()} {jax.devices()[0].platform} devices, model.mesh "
    f"{args.mesh or train_config.default(args.preset).model.mesh!r}; n: rl.sampler_devices, "
    "0 = shared mesh)"
  )
  if os.environ.get("XLA_FLAGS"):  # how a CPU run got its devices
    print(f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
  print()
  first = arms[0]
  print("| n | k | " + " | ".join(COLUMNS) + f" | step vs n={first[0]}, k={first[1]} |")
  print("|---" * (len(COLUMNS) + 3) + "|")
  base = results[first]["step"]
  for (n, k), r in results.items():
    cells = " | ".join(f"{r[c]:.3f}" for c in COLUMNS)
    print(f"| {n} | {k} | {cells} | {r['step'] / base:.2f}x |")


if __name__ == "__main__":
  main()
