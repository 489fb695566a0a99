"""The comparison runner's config checks (no training); the command end to end is
tests/commands/test_compare.py."""

import pytest

from precisecoder.train import compare


def _configs(*overrides):
  configs_dir = compare.default_configs_dir()
  return {arm: compare.resolve_config(configs_dir / f"{arm}.py", "tiny", list(overrides))
          for arm in ("grpo", "precisecoder")}


def test_arms_share_all_but_the_reward_recipe():
  configs = _configs("--config.train.steps=7")
  assert configs["grpo"].rl.reward == "unit" and configs["precisecoder"].rl.reward == "r_lambda"
  assert configs["grpo"].train.steps == configs["precisecoder"].train.steps == 7
  compare.check_same_budget(configs)
  configs["precisecoder"].data.num_train = 99
  with pytest.raises(ValueError, match="data.num_train: grpo=16 precisecoder=99"):
    compare.check_same_budget(configs)
  with pytest.raises(ValueError, match="train.nonexistent"):
    _configs("--config.train.nonexistent=1")
