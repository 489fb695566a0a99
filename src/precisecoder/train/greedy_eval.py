"""Greedy evaluation of a policy during training, in the paper's columns: pass, precision,
recall, F1 and edited lines on buggy tasks; no-op and damage rates on already-correct programs.
A multi-turn policy (`rl.turns` > 1) is evaluated as it trains, in episodes: the columns are
its last program's, and pass and edited lines are also given after each turn.
(`precisecoder evaluate` evaluates a saved checkpoint, through generate and score.)"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from absl import logging
from jax.sharding import Mesh

from precisecoder import episodes
from precisecoder.rewards import PAPER_COLUMNS, RewardScorer
from precisecoder.tasks import Task
from precisecoder.train import rollout as rollout_lib
from precisecoder.train.policy import Policy


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


def evaluate_greedy(policy: Policy, tasks: Sequence[Task], scorer: RewardScorer, *,
                    max_new_tokens: int, batch_size: int = 16, include_tests: bool = True,
                    seed: int = 0, prompt_bucket: int = 64, mesh: Mesh | None = None,
                    agent: episodes.AgentConfig | None = None
                    ) -> tuple[dict[str, float], list[dict]]:
  """(summary, per-task records) for greedy completions of `tasks` (buggy and clean mixed);
  with `agent`, greedy episodes whose visible tests run in the scorer's pool."""
  t0 = time.perf_counter()
  parts = []
  for start in range(0, len(tasks), batch_size):
    chunk = list(tasks[start:start + batch_size])
    parts.append(rollout_lib.sample_rollout(
        policy, chunk, num_samples=1, max_new_tokens=max_new_tokens, temperature=0.0,
        seed=seed + start, include_tests=include_tests, prompt_bucket=prompt_bucket, mesh=mesh,
        agent=agent, pool=scorer))
    logging.info("eval: sampled %d/%d tasks (%.0f s)", min(start + batch_size, len(tasks)),
                 len(tasks), time.perf_counter() - t0)
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
    records.append({"task_id": task.task_id, "is_buggy": task.is_buggy,
                    "completion": completions[i], "program": programs[i],
                    **{k: float(v[i]) for k, v in terms.items()}})
    if transcripts is not None:
      records[-1]["turns"] = [turn.to_json() for turn in transcripts[i]]
  return summary, records
