"""DAPO's dynamic sampling (Yu et al. 2025; verl `algorithm.filter_groups`): a step trains on
groups whose rewards vary, drawing and sampling more tasks until it has a full batch of them.

A group whose samples all got the same reward has advantage 0 under GRPO and GDPO: it adds
nothing to the gradient but still dilutes a token- or sequence-mean loss. Here each round
samples and scores one more batch of tasks (the next ones of the checkpointed iterator, so a
resumed run draws exactly what the uninterrupted one drew), keeps its groups with variance in
the recipe's terms, and stops when the batch is full or after `rl.dynamic_sampling_max_rounds`
extra rounds. A batch still short is filled with groups without variance (advantage 0: the
step's shapes stay fixed, and it trains on what it found) and the step says so in its metrics.

On several hosts every host samples in every round (sampling is collective on the mesh), the
rounds stop when no host is short, and each host fills its own share of the batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import ml_collections
import numpy as np

from precisecoder import multihost, reward_recipes
from precisecoder.train import rollout as rollout_lib

# sample_seed(seed, step, part) = ... + step * 1009 + part: the parts of one step's rounds
# stay below the next step's.
SEED_PARTS_PER_STEP = 1009


def rounds_problem(rl: ml_collections.ConfigDict) -> str | None:
  """Why `rl.dynamic_sampling_max_rounds` cannot work (None: it can)."""
  rounds = rl.dynamic_sampling_max_rounds
  if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
    return f"config.rl.dynamic_sampling_max_rounds={rounds!r}: must be an integer >= 0"
  if (rounds + 1) * rl.rollout_chunks > SEED_PARTS_PER_STEP:
    return (
      f"config.rl.dynamic_sampling_max_rounds={rounds}: (rounds + 1) x rl.rollout_chunks "
      f"must be at most {SEED_PARTS_PER_STEP} (each round's chunks take their own seeds)"
    )
  return None


def group_has_variance(rl: ml_collections.ConfigDict, terms: dict[str, np.ndarray]) -> np.ndarray:
  """bool [groups]: the groups (rows prompt-major, `rl.group_size` each) whose advantage can
  be non-zero: GRPO's scalar reward varies in them, or one of GDPO's weighted terms does
  (with `rl.overlong="soft"`, the length penalty counts as one more). `terms` hold
  `lengths` beside the scorer's terms."""
  g = rl.group_size
  penalty = reward_recipes.overlong_penalty(rl, terms)
  if rl.advantage == "grpo":
    columns = [reward_recipes.scalar_reward(rl.reward, terms, rl)]
  else:
    weights = reward_recipes.RECIPES[rl.reward].gdpo_weights(rl.lam)
    columns = [terms[k] for k, w in weights.items() if w]
  if penalty is not None:
    columns.append(penalty)
  varied = np.zeros(len(columns[0]) // g, bool)
  for column in columns:
    grouped = np.asarray(column).reshape(-1, g)
    varied |= (grouped != grouped[:, :1]).any(axis=1)
  return varied


def select_rows(rollout: rollout_lib.Rollout, rows: np.ndarray) -> rollout_lib.Rollout:
  """The rollout's `rows`, in that order."""
  picked = {}
  for field in dataclasses.fields(rollout):
    value = getattr(rollout, field.name)
    if value is None:
      picked[field.name] = None
    elif isinstance(value, np.ndarray):
      picked[field.name] = value[rows]
    else:
      picked[field.name] = [value[i] for i in rows]
  return rollout_lib.Rollout(**picked)


def _group_rows(groups: np.ndarray, g: int) -> np.ndarray:
  return (np.asarray(groups, np.int64)[:, None] * g + np.arange(g)).ravel()


def collect(
  rl: ml_collections.ConfigDict,
  sample: Callable[..., tuple],
  first_tasks: list,
  next_tasks: Callable[[], list],
  pad_id: int,
) -> tuple[rollout_lib.Rollout, dict[str, np.ndarray], dict[str, float]]:
  """(rollout, terms, metrics) of a batch of `len(first_tasks)` groups, those with reward
  variance first, from `first_tasks` and up to `rl.dynamic_sampling_max_rounds` more draws of
  `next_tasks()`. `sample(tasks, part_offset)` samples and scores tasks as
  rl.sample_and_score does, waited for (returning rollout, terms and timings), its chunks
  seeded from `part_offset` on."""
  g, quota = rl.group_size, len(first_tasks)
  kept, spare, timing = [], [], {}
  n_kept = drawn = rounds = 0
  tasks = first_tasks
  while True:
    rollout, terms, times = sample(tasks, rounds * rl.rollout_chunks)
    for k, v in times.items():
      timing[k] = timing.get(k, 0.0) + v
    drawn += len(tasks)
    lengths = rollout.loss_mask.sum(axis=1, dtype=np.int32)
    varied = group_has_variance(rl, {**terms, "lengths": lengths})
    take = np.flatnonzero(varied)[: quota - n_kept]
    n_kept += len(take)
    kept.append((rollout, terms, take))
    spare.append((rollout, terms, np.flatnonzero(~varied)))
    rounds += 1
    # Every host samples in every round: the rounds go on while any host is short.
    if multihost.global_max(quota - n_kept) == 0 or rounds > rl.dynamic_sampling_max_rounds:
      break
    tasks = next_tasks()
  filled = quota - n_kept
  for rollout, terms, groups in spare:  # zero-variance groups, as drawn, for a short batch
    take = groups[: quota - n_kept]
    n_kept += len(take)
    kept.append((rollout, terms, take))
  parts = [
    (select_rows(r, _group_rows(gr, g)), {k: v[_group_rows(gr, g)] for k, v in t.items()})
    for r, t, gr in kept
    if len(gr)
  ]
  rollout = rollout_lib.concat_rollouts([p for p, _ in parts], pad_id)
  terms = {k: np.concatenate([t[k] for _, t in parts]) for k in parts[0][1]}
  totals = np.sum(multihost.allgather_json([drawn, quota - filled, filled]), axis=0)
  metrics: dict[str, Any] = {
    "dynamic/groups_drawn": float(totals[0]),
    "dynamic/groups_kept": float(totals[1]),
    "dynamic/groups_filled": float(totals[2]),
    "dynamic/rounds": float(rounds),
  }
  return rollout, terms, {**timing, **metrics}
