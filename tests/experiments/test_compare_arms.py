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


def test_async_arms_differ_from_their_twin_in_the_schedule_only():
  """configs/*_async.py are their recipe's config with rl.max_staleness = 1: each is paired with
  its synchronous twin, and an asynchronous arm without its twin (which would confound the
  recipe with the schedule), or one differing from it in anything else, is refused."""
  arms = ("grpo", "precisecoder", "grpo_async", "precisecoder_async")
  configs = _configs(arms=arms)
  assert compare_arms.check_same_budget(configs) == {
    "grpo_async": "grpo",
    "precisecoder_async": "precisecoder",
  }
  assert {arm: c.rl.max_staleness for arm, c in configs.items()} == {
    "grpo": 0,
    "precisecoder": 0,
    "grpo_async": 1,
    "precisecoder_async": 1,
  }
  # The asynchronous arms alone share one schedule: a plain comparison of recipes.
  assert compare_arms.check_same_budget({a: configs[a] for a in arms[2:]}) == {}
  with pytest.raises(ValueError, match=r"without one: precisecoder_async \(.*max_staleness=1"):
    compare_arms.check_same_budget({a: configs[a] for a in ("grpo", "precisecoder_async")})
  configs["grpo_async"].rl.is_correction = "token_tis"
  assert compare_arms.check_same_budget(configs)["grpo_async"] == "grpo"
  configs["grpo_async"].rl.max_staleness = 2  # differs from precisecoder_async: still its twin's
  assert compare_arms.check_same_budget(configs)["grpo_async"] == "grpo"
  configs["grpo_async"].rl.group_size = 3
  with pytest.raises(ValueError, match="rl.group_size: grpo=.* grpo_async=3"):
    compare_arms.check_same_budget(configs)
