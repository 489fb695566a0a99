"""tunix: reward functions called as its SequenceRewardManager calls them (google-tunix
0.1.7): parameters matched against the algorithm config by signature, then
`f(prompts=, completions=, **batch_fields)`, the result put into a float array, the name
from `__name__`."""

import dataclasses
import inspect

import numpy as np
import pytest

from integration_helpers import make_task_set, rows_for, score_command, term_of_record
from integration_helpers import write_task_file
from precisecoder.integrations import tunix


@dataclasses.dataclass
class AlgoConfig:  # a few of tunix's GRPO config fields
  num_generations: int = 4
  beta: float = 0.04
  epsilon: float = 0.2


def _compute_rewards(reward_fns, prompts, completions, **kwargs):
  """tunix's reward manager loop (its logic, not its code)."""
  algo = dataclasses.asdict(AlgoConfig())
  rewards = np.zeros((len(prompts), len(reward_fns)))
  names = []
  for i, fn in enumerate(reward_fns):
    extra = {
      name: algo[name]
      for name in inspect.signature(fn).parameters
      if name not in ("self", "prompts", "completions", "kwargs")
      and name in algo
      and name not in kwargs
    }
    r = fn(prompts=prompts, completions=completions, **{**kwargs, **extra})
    assert r is not None and len(r) == len(prompts)
    rewards[:, i] = np.array(r)
    names.append(fn.__name__)
  return rewards, names


def test_called_as_tunix_calls_them_equal_precisecoder_score(tmp_path):
  task_set = make_task_set()
  task_file = write_task_file(tmp_path, task_set)
  ids, completions = rows_for(task_set)
  records = score_command(tmp_path, task_file, ids, completions)
  fns = tunix.reward_functions(task_set, terms=("r_lambda", "unit", "edit_lines"))
  rewards, names = _compute_rewards(
    fns, ["prompt"] * len(ids), completions, task_id=ids, mode="train"
  )
  assert names == ["r_lambda", "unit", "edit_lines"]
  for i, name in enumerate(names):
    assert rewards[:, i] == pytest.approx([term_of_record(r, name) for r in records], abs=1e-9)


def test_through_tunix_itself_where_it_imports(tmp_path):
  """tunix 0.1.7 pins safetensors<0.8 and pulls qwix, metrax, kagglehub...: not in our stack.
  Where it is installed, its own reward manager runs our functions."""
  reward_manager = pytest.importorskip("tunix.rl.reward_manager")
  algorithm_config = pytest.importorskip("tunix.rl.algorithm_config")
  task_set = make_task_set()
  ids, completions = rows_for(task_set)
  manager = reward_manager.SequenceRewardManager(
    tunix.reward_functions(task_set, terms=("unit",)), algorithm_config.AlgorithmConfig()
  )
  info = manager(prompts=["p"] * len(ids), completions=completions, task_id=ids, mode="train")
  assert len(info["rewards"]) == len(ids)
