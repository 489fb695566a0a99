"""DAPO's dynamic sampling: which groups have variance, the rounds of extra draws, the batch
they make (varied groups first, then fillers), its metrics, and the config's bound."""

import ml_collections
import numpy as np
import pytest

from precisecoder.tasks import Task
from precisecoder.train import config as config_lib, dynamic_sampling, rollout as rollout_lib

G = 2


def _rl(advantage="grpo", reward="unit", max_rounds=2, overlong="none"):
  return ml_collections.ConfigDict(
    dict(
      reward=reward,
      advantage=advantage,
      lam=0.5,
      group_size=G,
      scale_std=True,
      ea_alpha=0.5,
      ea_beta=0.5,
      rollout_chunks=2,
      dynamic_sampling_max_rounds=max_rounds,
      overlong=overlong,
      max_new_tokens=8,
      overlong_buffer=4,
      overlong_penalty=1.0,
    )
  )


def test_group_has_variance_by_recipe():
  terms = {
    "unit": np.array([1, 1, 0, 1, 0, 0], np.float32),
    "f1": np.array([0.5, 0.5, 0.2, 0.2, 0.3, 0.9], np.float32),
    "lengths": np.array([3, 3, 3, 3, 8, 3]),
  }
  terms["reward"] = 0.5 * terms["unit"] + 0.5 * terms["f1"]
  np.testing.assert_array_equal(
    dynamic_sampling.group_has_variance(_rl(), terms), [False, True, False]
  )
  # GDPO on r_lambda: unit or F1 varying in a group is enough.
  np.testing.assert_array_equal(
    dynamic_sampling.group_has_variance(_rl("gdpo", "r_lambda"), terms), [False, True, True]
  )
  # The soft length penalty is one more term (8 tokens, past the 4-token buffer's start).
  np.testing.assert_array_equal(
    dynamic_sampling.group_has_variance(_rl(overlong="soft"), terms), [False, True, True]
  )


def _task(name):
  return Task(task_id=name, buggy_code="", gt_solution="", gt_diff={}, tests={})


def _sampler(units, calls):
  """sample(tasks, offset): a rollout of G rows per task whose unit reward is `units[task]`
  (a pair), recording each call's tasks and seed offset in `calls`."""

  def sample(tasks, offset):
    calls.append(([t.task_id for t in tasks], offset))
    n = len(tasks) * G
    rows = [t for t in tasks for _ in range(G)]
    rollout = rollout_lib.Rollout(
      tasks=rows,
      prompt_ids=np.zeros((n, 4), np.int32),
      prompt_mask=np.ones((n, 4), bool),
      tokens=np.tile(np.arange(n)[:, None], (1, 3)).astype(np.int32),
      logprobs=np.zeros((n, 3), np.float32),
      lengths=np.full(n, 3, np.int32),
      completions=[f"{t.task_id}/{k}" for t in tasks for k in range(G)],
      programs=[""] * n,
    )
    unit = np.array([u for t in tasks for u in units[t.task_id]], np.float32)
    return rollout, {"unit": unit}, {"time/sample": 1.0}

  return sample


def _draws(names):
  batches = iter(names)
  return lambda: [_task(n) for n in next(batches)]


def test_rounds_draw_until_the_batch_holds_only_varied_groups():
  units = {"a": (1, 1), "b": (0, 1), "c": (0, 0), "d": (1, 0), "e": (1, 0), "f": (0, 1)}
  calls = []
  rollout, terms, metrics = dynamic_sampling.collect(
    _rl(),
    _sampler(units, calls),
    [_task("a"), _task("b")],
    _draws([["c", "d"], ["e", "f"]]),
    pad_id=0,
  )
  # Round 1 keeps b, round 2 keeps d: full, no third draw. Seeds from each round's own parts.
  assert calls == [(["a", "b"], 0), (["c", "d"], 2)]
  assert [t.task_id for t in rollout.tasks] == ["b", "b", "d", "d"]
  assert rollout.completions == ["b/0", "b/1", "d/0", "d/1"]
  np.testing.assert_array_equal(terms["unit"], [0, 1, 1, 0])
  assert metrics == {
    "time/sample": 2.0,
    "dynamic/groups_drawn": 4,
    "dynamic/groups_kept": 2,
    "dynamic/groups_filled": 0,
    "dynamic/rounds": 2,
  }


def test_a_batch_still_short_after_the_last_round_is_filled_and_says_so():
  units = {"a": (1, 1), "b": (0, 0), "c": (0, 0), "d": (1, 0), "e": (0, 0), "f": (1, 1)}
  calls = []
  rollout, terms, metrics = dynamic_sampling.collect(
    _rl(max_rounds=1),
    _sampler(units, calls),
    [_task("a"), _task("b")],
    _draws([["c", "d"], ["e", "f"]]),
    pad_id=0,
  )
  assert [c[0] for c in calls] == [["a", "b"], ["c", "d"]]  # 1 extra round, then stop
  # d (varied) first, then the first group drawn without variance (a) fills the batch.
  assert [t.task_id for t in rollout.tasks] == ["d", "d", "a", "a"]
  np.testing.assert_array_equal(terms["unit"], [1, 0, 1, 1])
  assert metrics["dynamic/groups_kept"] == 1 and metrics["dynamic/groups_filled"] == 1
  assert metrics["dynamic/rounds"] == 2 and metrics["dynamic/groups_drawn"] == 4


def test_no_extra_round_when_the_first_batch_is_full():
  calls = []
  _, _, metrics = dynamic_sampling.collect(
    _rl(),
    _sampler({"a": (1, 0), "b": (0, 1)}, calls),
    [_task("a"), _task("b")],
    _draws([]),
    pad_id=0,
  )
  assert len(calls) == 1 and metrics["dynamic/rounds"] == 1


def test_config_bounds_the_rounds():
  cfg = config_lib.default("tiny")
  cfg.rl.update(dynamic_sampling=True, dynamic_sampling_max_rounds=3)
  config_lib.validate(cfg)
  for rounds, message in ((-1, "must be an integer >= 0"), (2000, "must be at most 1009")):
    cfg.rl.dynamic_sampling_max_rounds = rounds
    with pytest.raises(config_lib.ConfigError, match=message):
      config_lib.validate(cfg)
