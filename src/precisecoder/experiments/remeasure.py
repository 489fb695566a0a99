"""The wider measurement of a finished comparison (`precisecoder compare --remeasure N`).

The evaluation during training runs every few steps, so its sets are small and its intervals
wide. This one runs once per checkpoint: the base and each run's last one, greedily, on N
held-out buggy tasks and N held-out correct programs drawn apart from the evaluation sets
(tasksets.wide_tasks), and, where the runs evaluate held-in tasks, on N of those and N held-in
correct programs likewise (tasksets.wide_heldin_tasks). Intervals over tasks shrink as one over
the square root of N.

Each result goes to `<run>/eval/<split>_step_<step>.json` (the base's, step 0, to every run's
folder) in the layout of a split of `eval/step_<step>.json`, and the reports read it as the
split "wide" or "wide_heldin" (analysis/report.py). A file already written for the same tasks
is kept: a rerun measures only what is missing.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from collections.abc import Sequence

import ml_collections
from absl import logging

from precisecoder import sampling
from precisecoder.experiments import base_model, compare_arms
from precisecoder.tasks import Task
from precisecoder.train import greedy_eval, policy as policy_lib, rollout as rollout_lib, scoring
from precisecoder.train import tasksets


def result_path(workdir: pathlib.Path, step: int, split: str) -> pathlib.Path:
  return workdir / "eval" / f"{split}_step_{step}.json"


def wide_splits(
  cfg: ml_collections.ConfigDict, n: int, seen: Sequence[Task]
) -> dict[str, list[Task]]:
  """The tasks of each wider split `cfg`'s runs are measured on: held-out ones always, held-in
  ones (none of `seen`, the base's corpus) where the runs' evaluation has a held-in split."""
  splits = {"wide": tasksets.wide_tasks(cfg, n)}
  if cfg.data.num_heldin or cfg.data.num_heldin_clean:
    splits["wide_heldin"] = tasksets.wide_heldin_tasks(cfg, n, seen)
  return splits


def remeasure(runs: Sequence[compare_arms.RunSpec], n: int) -> None:
  """Measures the base and the last checkpoint of each of `runs` (all finished) on `n` + `n`
  fresh tasks of each wider split, skipping what is already measured on them."""
  sampling.enable_compilation_cache()  # as the trainers do: the same programs compile once
  # The runs share their base: compare refuses arms that differ beyond the reward and schedule.
  base, seen = base_model.resolve(runs[0].cfg)
  for split, tasks in wide_splits(runs[0].cfg, n, seen).items():
    digest = _digest(tasks)
    for spec in runs:
      path = result_path(spec.workdir, 0, split)
      if not _measured(path, digest):  # the base: once per way of evaluating
        measured = _measured_base(runs, spec, split, digest) or _measure(
          spec.cfg, base, tasks, digest, step=0, name=f"the base, {split}"
        )
        _write(path, measured)
      step = spec.cfg.train.steps
      path = result_path(spec.workdir, step, split)
      if _measured(path, digest):
        continue
      checkpoint = spec.workdir / "checkpoints" / str(step)
      if not checkpoint.is_dir():
        raise ValueError(f"{spec.name}: no checkpoint of its last step, {checkpoint}")
      name = f"{spec.name}, {split}"
      _write(path, _measure(spec.cfg, str(checkpoint), tasks, digest, step=step, name=name))


def _measured_base(
  runs: Sequence[compare_arms.RunSpec], like: compare_arms.RunSpec, split: str, digest: str
) -> dict | None:
  """The base's result on these tasks in some run's folder, evaluated as `like` evaluates (an
  agent arm evaluates in episodes)."""
  mode = rollout_lib.agent_config(like.cfg.rl)
  for spec in runs:
    path = result_path(spec.workdir, 0, split)
    if rollout_lib.agent_config(spec.cfg.rl) == mode and _measured(path, digest):
      return json.loads(path.read_text())
  return None


def _measure(
  cfg: ml_collections.ConfigDict,
  checkpoint: str | None,
  tasks: Sequence[Task],
  digest: str,
  *,
  step: int,
  name: str,
) -> dict:
  logging.info("remeasure: %s on %d tasks", name, len(tasks))
  policy = policy_lib.load_policy(cfg, checkpoint=checkpoint)
  with scoring.open_scorer(cfg.rl) as scorer:
    summary, records = greedy_eval.evaluate_as_configured(
      cfg, policy, tasks, scorer, cfg.train.eval_max_new_tokens
    )
  logging.info(
    "remeasure: %s: %s",
    name,
    "  ".join(f"{k}={v:.3f}" for k, v in summary.items() if isinstance(v, float)),
  )
  return {
    "step": step,
    "checkpoint": policy.source,  # what was measured
    "tasks": digest,
    "summary": summary,
    "records": records,
  }


def _digest(tasks: Sequence[Task]) -> str:
  """What identifies the measured tasks: their ids and programs."""
  text = json.dumps([[t.task_id, t.buggy_code] for t in tasks])
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _measured(path: pathlib.Path, digest: str) -> bool:
  return path.exists() and json.loads(path.read_text()).get("tasks") == digest


def _write(path: pathlib.Path, result: dict) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  temporary = path.with_suffix(".tmp")
  temporary.write_text(json.dumps(result, indent=1) + "\n")
  temporary.replace(path)  # whole or absent: a killed rerun measures it again
