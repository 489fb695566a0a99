"""Greedy evaluation of a policy during training, in the paper's columns: pass, precision,
recall, F1 and edited lines on buggy tasks; no-op and damage rates on already-correct programs.
A multi-turn policy (`rl.turns` > 1) is evaluated as it trains, in episodes: the columns are
its last program's, and pass and edited lines are also given after each turn.
`Evaluator` is a trainer's: its evaluation sets, evaluated on this host's share and written to
eval/step_N.json and the metrics. (`precisecoder evaluate` evaluates a saved checkpoint, through
generate and score.)"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Sequence
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import logging
from jax.sharding import Mesh

from precisecoder import episodes, multihost
from precisecoder.rewards import PAPER_COLUMNS, RewardScorer
from precisecoder.tasks import Task
from precisecoder.train import metrics, rollout as rollout_lib, tasksets
from precisecoder.train.policy import Policy
from precisecoder.intmath import cdiv


def summarize(tasks: Sequence[Task], terms: dict[str, np.ndarray]) -> dict[str, float]:
  """Means of the paper's columns; buggy metrics over buggy tasks, no-op/damage over clean."""
  buggy = np.array([t.is_buggy for t in tasks], bool)
  out: dict[str, float] = {}
  for column, (term, rows) in PAPER_COLUMNS.items():
    select = buggy if rows == "buggy" else ~buggy
    if select.any():
      out[column] = float(np.mean(np.asarray(terms[term], np.float64)[select]))
  turn = 1
  while f"unit_turn{turn}" in terms and buggy.any():  # episodes: after each turn
    for term, column in (("unit", "pass"), ("edit_lines", "edit_lines")):
      values = np.asarray(terms[f"{term}_turn{turn}"], np.float64)[buggy]
      out[f"{column}_turn{turn}"] = float(np.mean(values))
    turn += 1
  out["num_buggy"] = int(buggy.sum())
  out["num_clean"] = int((~buggy).sum())
  if "broken_task" in terms:  # counted in no column: their rows score 0 (rewards.BROKEN_TASK)
    out["broken_tasks"] = int(np.count_nonzero(terms["broken_task"]))
  return out


def evaluate_greedy(
  policy: Policy,
  tasks: Sequence[Task],
  scorer: RewardScorer,
  *,
  max_new_tokens: int,
  batch_size: int = 16,
  include_tests: bool = True,
  seed: int = 0,
  prompt_bucket: int = 64,
  mesh: Mesh | None = None,
  agent: episodes.AgentConfig | None = None,
) -> tuple[dict[str, float], list[dict]]:
  """(summary, per-task records) for greedy completions of `tasks` (buggy and clean mixed);
  with `agent`, greedy episodes whose visible tests run in the scorer's pool."""
  t0 = time.perf_counter()
  parts = []
  for start in range(0, len(tasks), batch_size):
    chunk = list(tasks[start : start + batch_size])
    parts.append(
      rollout_lib.sample_rollout(
        policy,
        chunk,
        num_samples=1,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        seed=seed + start,
        include_tests=include_tests,
        prompt_bucket=prompt_bucket,
        mesh=mesh,
        agent=agent,
        pool=scorer,
      )
    )
    logging.info(
      "eval: sampled %d/%d tasks (%.0f s)",
      min(start + batch_size, len(tasks)),
      len(tasks),
      time.perf_counter() - t0,
    )
  completions = [c for p in parts for c in p.completions]
  programs = [x for p in parts for x in p.programs]
  t1 = time.perf_counter()
  terms = scorer.score(list(tasks), programs)
  transcripts = [t for p in parts for t in p.turns] if agent is not None else None
  if transcripts is not None:
    for k, turn_programs in enumerate(episodes.turn_programs(transcripts, agent.turns), 1):
      scored = terms if k == agent.turns else scorer.score(list(tasks), turn_programs)
      terms[f"unit_turn{k}"], terms[f"edit_lines_turn{k}"] = scored["unit"], scored["edit_lines"]
  summary = summarize(tasks, terms)
  summary["sample_s"] = t1 - t0
  summary["score_s"] = time.perf_counter() - t1
  records: list[dict[str, Any]] = []
  for i, task in enumerate(tasks):
    records.append(
      {
        "task_id": task.task_id,
        "is_buggy": task.is_buggy,
        "completion": completions[i],
        "program": programs[i],
        **{k: float(v[i]) for k, v in terms.items()},
      }
    )
    if transcripts is not None:
      records[-1]["turns"] = [turn.to_json() for turn in transcripts[i]]
  return summary, records


def evaluate_as_configured(
  cfg: ml_collections.ConfigDict,
  policy: Policy,
  tasks: Sequence[Task],
  scorer: RewardScorer,
  max_new_tokens: int,
  mesh: Mesh | None = None,
) -> tuple[dict[str, float], list[dict]]:
  """`evaluate_greedy` with a run's settings: its evaluation batch, prompts, seed and, for an
  agent arm, its episodes."""
  return evaluate_greedy(
    policy,
    tasks,
    scorer,
    max_new_tokens=max_new_tokens,
    batch_size=cfg.train.eval_batch_size,
    include_tests=cfg.data.include_tests_in_prompt,
    seed=cfg.seed,
    prompt_bucket=cfg.rl.prompt_bucket,
    mesh=mesh,
    agent=rollout_lib.agent_config(cfg.rl) if cfg.trainer == "rl" else None,
  )


class Evaluator:
  """Greedy evaluation during training on validation tasks and clean programs, and apart (each
  under its own key in the file and `eval_<split>/` in the metrics) on the held-in tasks and the
  multi-line split when the config asks for them; written to `workdir`/eval/step_N.json.

  `seen`: tasks the policy trained on before this run (its base's SFT corpus), which the
  held-in split leaves out. The evaluation sets are built here, once."""

  def __init__(
    self,
    cfg: ml_collections.ConfigDict,
    scorer: RewardScorer,
    mesh: Mesh | None,
    *,
    workdir: pathlib.Path,
    writer: metrics.MetricsWriter,
    primary: bool,
    seen: Sequence[Task] = (),
  ):
    self.cfg, self.scorer, self.mesh = cfg, scorer, mesh
    self.workdir, self.writer, self.primary = workdir, writer, primary
    self.tasks = tasksets.eval_tasks(cfg)
    self.splits = {
      "heldin": (tasksets.heldin_tasks(cfg, seen), cfg.train.eval_max_new_tokens),
      "multi": (tasksets.multi_tasks(cfg), cfg.train.eval_multi_max_new_tokens),
    }

  def __call__(self, step: int, policy: Policy) -> dict[str, float]:
    """The summary of `policy`'s evaluation at `step`, written (primary host) with its
    records and splits."""
    cfg = self.cfg
    summary, records = self._greedy(policy, self.tasks, cfg.train.eval_max_new_tokens)
    splits = {
      name: dict(zip(("summary", "records"), self._greedy(policy, tasks, max_new_tokens)))
      for name, (tasks, max_new_tokens) in self.splits.items()
      if tasks
    }
    if not self.primary:
      return summary
    out = self.workdir / "eval"
    out.mkdir(exist_ok=True)
    result = {"step": step, "summary": summary, "records": records, **splits}
    (out / f"step_{step}.json").write_text(json.dumps(result, indent=1) + "\n")
    self.writer.write(step, summary, prefix="eval/")
    metrics.record_broken_tasks(self.workdir, self.scorer.broken_tasks)
    for name, split in splits.items():
      self.writer.write(step, split["summary"], prefix=f"eval_{name}/")
    logging.info(
      "eval at step %d: %s",
      step,
      "  ".join(f"{k}={v:.3f}" for k, v in summary.items() if isinstance(v, float)),
    )
    return summary

  def _greedy(
    self, policy: Policy, tasks, max_new_tokens: int
  ) -> tuple[dict[str, float], list[dict]]:
    """(summary, per-task records) of `policy`'s greedy completions of `tasks`."""
    # Several hosts: each evaluates an equal share (the last task repeated to even it out),
    # then the records are gathered and summarised as one set.
    share = cdiv(len(tasks), jax.process_count())
    mine = tasks[multihost.host_slice(share * jax.process_count())] if len(tasks) else []
    mine = list(mine) + list(tasks[-1:]) * (share - len(mine))
    summary, records = evaluate_as_configured(
      self.cfg, policy, mine, self.scorer, max_new_tokens, self.mesh
    )
    if jax.process_count() > 1:
      records = [r for part in multihost.allgather_json(records) for r in part][: len(tasks)]
      timing = {k: summary[k] for k in ("sample_s", "score_s")}
      summary = {
        **summarize(
          tasks,
          {
            k: np.array([r[k] for r in records])
            for k in records[0]
            if isinstance(records[0][k], float)
          },
        ),
        **timing,
      }
    return summary, records
