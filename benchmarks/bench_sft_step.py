"""The SFT step on a base preset's own batches: lengths padded to powers of two vs multiples.

Batches are made as `train.sft.train` makes them for the base (`group_by_length`), from the
base's cached SFT data and tokenizer, one batch per drawn unit, in two ways side by side:

  powers of two  `sft.length_multiple` 0 (the families' bases): tasks in bins of 256 answer
                 characters, prompt and answer each padded to 32 times a power of two (to
                 multiples of 32 where that would pass `sft.max_len`);
  multiples      `sft.length_multiple` 32 (cpu-programs): tasks sorted by answer length,
                 prompt and answer padded to multiples of 32 tokens.

For each: padded positions a step (each task's prompt once, its answers each), against the real
tokens; the distinct shapes (each one compiles); the seconds of the compiling calls; and the
mean and median of the other steps, which train the same model from the same weights. Also how
many answer rows of all the powers-of-two batches the rule before `sequence_batch`'s fallback
cut (powers of two past `sft.max_len` cut the answer to fit).

  python benchmarks/bench_sft_step.py [--preset cpu-programs] [--batches 60]

Needs the base built first (`precisecoder base --preset PRESET`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from precisecoder.experiments import base_model  # noqa: E402
from precisecoder.train import config as config_lib  # noqa: E402
from precisecoder.train import policy as policy_lib, sequences, sft, step as step_lib  # noqa: E402
from precisecoder.train import tasksets  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402


def _old_cut_rows(batch: dict[str, np.ndarray], max_len: int) -> int:
  """Answer rows the former rule cut: both lengths to powers of two, then the answer cut to
  fit max_len."""
  answers = batch["completion_mask"].sum(axis=1)
  columns = batch["tokens"].shape[1] - batch["completion_mask"].shape[1]
  prompt = int(batch["mask"][:, :columns].sum(axis=1).max())
  p, t = sequences.power_bucket(prompt, 32), sequences.power_bucket(int(answers.max()), 32)
  if p + t <= max_len:
    return 0
  return int(np.sum(answers > max(32, max_len - p)))


def _scheme(cfg, policy, demos, multiple: int, picks, graphdef, params0, tx) -> dict:
  bins = 1 if multiple else 256
  units = sft.length_units(demos, cfg.sft.batch_size, cfg.seed, bins)
  step_fn = step_lib.make_sft_step(graphdef, tx, len(sft.answers(demos[0])))
  params = jax.tree.map(lambda x: x.copy(), params0)
  opt_state = step_lib.init_optimizer(tx, params, None)
  out = {"padded": [], "real": [], "compile_s": 0.0, "warm": []}
  shapes = set()
  for i in picks:
    tasks = units[i]
    batch = sft.sft_batch(
      policy,
      tasks,
      include_tests=cfg.data.include_tests_in_prompt,
      max_len=cfg.sft.max_len,
      multiple=multiple or 32,
      power_of_two=not multiple,
    )
    group = len(sft.answers(tasks[0]))
    columns = batch["tokens"].shape[1] - batch["completion_mask"].shape[1]
    out["padded"].append(len(tasks) * columns + batch["completion_mask"].size)
    prompts = batch["mask"][::group, :columns].sum()
    out["real"].append(int(prompts + batch["completion_mask"].sum()))
    start = time.perf_counter()
    params, opt_state, m = step_fn(params, opt_state, step_lib.to_device(batch))
    jax.block_until_ready(m)
    seconds = time.perf_counter() - start
    shape = batch["tokens"].shape + batch["completion_mask"].shape
    if shape in shapes:
      out["warm"].append(seconds)
    else:
      shapes.add(shape)
      out["compile_s"] += seconds
  out["shapes"] = len(shapes)
  return out


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--preset", default="cpu-programs", help="a base preset (configs/base.py)")
  parser.add_argument("--batches", type=int, default=60, help="units drawn, the same for both")
  add_record_flag(parser)
  args = parser.parse_args()
  base = config_lib.base_config(args.preset)
  root = base_model.folder(base)
  if not (root / "tokenizer").exists():
    raise SystemExit(f"no base at {root}: run `precisecoder base --preset {args.preset}` first")
  task_file, _ = base_model.sft_data(base)
  cfg = base_model.sft_config(base, root / "tokenizer", task_file)
  policy = policy_lib.load_policy(cfg, None)
  graphdef, params = nnx.split(policy.model)
  policy = dataclasses.replace(policy, model=None)  # the weights live in the steps
  tx = step_lib.make_optimizer(cfg.optim)
  demos = [t for t in tasksets.train_tasks(cfg) if t.is_buggy]
  picks = np.random.default_rng(1).choice(len(demos) // cfg.sft.batch_size, args.batches)
  print(
    f"{args.preset}: {base.model}, {cfg.sft.batch_size} tasks x {len(sft.answers(demos[0]))} "
    f"answers a step, max_len {cfg.sft.max_len}, {args.batches} batches; "
    f"{jax.device_count()} {jax.default_backend()} device(s)"
  )
  print(
    f"{'padding':<14} {'padded/step':>11} {'real/step':>9} {'shapes':>6} {'compile s':>9} "
    f"{'mean s':>7} {'median s':>8}"
  )
  runs = {}
  for name, multiple in (("powers of two", 0), ("multiples", 32)):
    r = runs[name] = _scheme(cfg, policy, demos, multiple, picks, graphdef, params, tx)
    print(
      f"{name:<14} {np.mean(r['padded']):>11.0f} {np.mean(r['real']):>9.0f} {r['shapes']:>6} "
      f"{r['compile_s']:>9.1f} {np.mean(r['warm']):>7.3f} {statistics.median(r['warm']):>8.3f}"
    )
  before, after = (np.mean(runs[k]["warm"]) for k in ("powers of two", "multiples"))
  print(f"mean warm step, powers of two / multiples: {before / after:.2f}x")
  units = sft.length_units(demos, cfg.sft.batch_size, cfg.seed)
  batches = [
    sft.sft_batch(policy, u, include_tests=cfg.data.include_tests_in_prompt, power_of_two=True)
    for u in units
  ]
  cut = sum(_old_cut_rows(b, cfg.sft.max_len) for b in batches)
  rows = sum(len(b["tokens"]) for b in batches)
  print(f"answer rows the old rule cut, all {len(units)} powers-of-two batches: {cut / rows:.1%}")


if __name__ == "__main__":
  main()
