"""The comparison's arms (experiments/compare_arms.py): their config checks (no training); the
command end to end is tests/commands/test_compare.py."""

import pytest

from precisecoder.experiments import compare_arms


def _configs(*overrides, arms=("grpo", "precisecoder")):
  configs_dir = compare_arms.default_configs_dir()
  return {
    arm: compare_arms.resolve_config(configs_dir / f"{arm}.py", "tiny", list(overrides))
    for arm in arms
  }


def test_arms_share_all_but_the_reward_recipe():
  configs = _configs("--config.train.steps=7")
  assert configs["grpo"].rl.reward == "unit" and configs["precisecoder"].rl.reward == "r_lambda"
  assert configs["grpo"].train.steps == configs["precisecoder"].train.steps == 7
  compare_arms.check_same_budget(configs)
  configs["precisecoder"].data.num_train = 99
  with pytest.raises(ValueError, match="data.num_train: grpo=16 precisecoder=99"):
    compare_arms.check_same_budget(configs)
  with pytest.raises(ValueError, match="train.nonexistent"):
    _configs("--config.train.nonexistent=1")


def test_agent_arms_stand_beside_single_turn_arms():
  """configs/*_agent.py are the single-turn recipes as 5-turn episodes: comparable arms."""
  configs = _configs(arms=compare_arms.KNOWN_ARMS)
  compare_arms.check_same_budget(configs)
  assert {arm: c.rl.turns for arm, c in configs.items()} == {
    arm: 5 if arm.endswith("_agent") else 1 for arm in compare_arms.KNOWN_ARMS
  }
  assert configs["precisecoder_agent"].rl.reward == "r_lambda"
  assert configs["grpo_agent"].rl.reward == "unit"
