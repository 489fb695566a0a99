"""verl: compute_score called as its reward managers call it (verl 0.9.1): the naive
manager's per-sample keywords, the batch manager's lists, `reward_kwargs` merged over the
call's keywords as `get_custom_reward_fn` does, every result's keys collected as
`reward_extra_info` (GDPO reads its keys from there)."""

import collections
import functools
import math

import pytest

from integration_helpers import make_task_set, rows_for, score_command, term_of_record
from integration_helpers import DownBackend, share_backend, write_task_file
from precisecoder.integrations import verl


def _with_reward_kwargs(raw_fn, reward_kwargs):
  """verl's wrapper: the config's reward_kwargs win over the call's keywords."""

  def call(*args, **kwargs):
    return raw_fn(*args, **{**kwargs, **reward_kwargs})

  return functools.partial(call)


def _collect(scores):
  """The batch manager's loop: `score` is the reward, every key goes to reward_extra_info."""
  rewards, extra = [], collections.defaultdict(list)
  for score in scores:
    rewards.append(score["score"])
    for key, value in score.items():
      extra[key].append(value)
  return rewards, extra


def test_batch_and_per_sample_forms_equal_precisecoder_score(tmp_path):
  task_set = make_task_set()
  task_file = write_task_file(tmp_path, task_set)
  ids, completions = rows_for(task_set)
  records = score_command(tmp_path, task_file, ids, completions)
  reward_kwargs = {"tasks": str(task_file), "lam": 1 / 3}
  batch_fn = _with_reward_kwargs(verl.compute_score_batch, reward_kwargs)
  scores = batch_fn(
    data_sources=["precisecoder"] * len(ids),
    solution_strs=completions,
    ground_truths=ids,
    extra_infos=[{"index": i} for i in range(len(ids))],
  )
  rewards, extra = _collect(scores)
  assert rewards == pytest.approx([r["reward"] for r in records], abs=1e-9)
  for term in verl.DEFAULT_TERMS:
    assert len(extra[term]) == len(ids)
    assert extra[term] == pytest.approx([term_of_record(r, term) for r in records], abs=1e-9)

  sample_fn = _with_reward_kwargs(verl.compute_score, {**reward_kwargs, "reward": "unit"})
  for k in (0, 2, 3):
    score = sample_fn(
      data_source="precisecoder",
      solution_str=completions[k],
      ground_truth=ids[k],
      extra_info={"num_turns": None, "rollout_reward_scores": {}},
    )
    assert score["score"] == term_of_record(records[k], "unit")
    assert set(score) == {"score", *verl.DEFAULT_TERMS}


def test_not_scored_is_nan_in_every_key(tmp_path, monkeypatch):
  task_set = make_task_set()[:1]

  share_backend(DownBackend())
  [score] = verl.compute_score_batch(
    ["x"], ["```python\nx = 1\n```"], [task_set[0].task_id], tasks=task_set
  )
  assert set(score) == {"score", *verl.DEFAULT_TERMS}
  assert all(math.isnan(v) for v in score.values())


def test_tasks_from_the_environment_and_bad_ground_truth(tmp_path, monkeypatch):
  task_set = make_task_set()[:1]
  monkeypatch.setenv("PRECISECODER_TASKS", str(write_task_file(tmp_path, task_set)))
  with pytest.raises(ValueError, match=r"ground_truth\[0\]: unknown task_id 'nope'"):
    verl.compute_score("x", "y", "nope")
  rows = verl.dataset_rows(task_set)
  assert rows[0]["reward_model"] == {"style": "rule", "ground_truth": task_set[0].task_id}
