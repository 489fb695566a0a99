"""DAPO's overlong handling: which samples the budget cut, the soft length penalty, the
filtered loss mask, the penalty in both advantage estimators, and the config's checks."""

import ml_collections
import numpy as np
import pytest

from precisecoder import advantages, reward_recipes
from precisecoder.train import config as config_lib, overlong, rollout as rollout_lib

EOS = (2, 7)


def test_truncated_means_the_budget_is_spent_without_an_end_token():
  tokens = np.array(
    [
      [5, 6, 9, 4],  # 4 tokens, no end: cut
      [5, 6, 9, 2],  # ends on the last token it may take: not cut
      [5, 7, 0, 0],  # ended early (the second end id)
      [5, 6, 9, 0],
    ]
  )  # 3 tokens, the budget not reached
  lengths = np.array([4, 4, 2, 3])
  np.testing.assert_array_equal(
    overlong.truncated(tokens, lengths, EOS, 4), [True, False, False, False]
  )
  # A rollout padded wider than the budget (chunks of several widths): lengths decide.
  assert overlong.truncated(np.pad(tokens, ((0, 0), (0, 3))), lengths, EOS, 3).tolist() == [
    True,
    False,
    False,
    True,
  ]


def test_cut_samples_of_a_rollout_and_none_of_episodes():
  tokens = np.array([[5, 6, 9], [5, 2, 0]])
  single = rollout_lib.Rollout(
    tasks=[None, None],
    prompt_ids=np.zeros((2, 1), np.int32),
    prompt_mask=np.ones((2, 1), bool),
    tokens=tokens,
    logprobs=np.zeros((2, 3), np.float32),
    lengths=np.array([3, 2]),
    completions=["", ""],
    programs=["", ""],
  )
  assert overlong.cut_samples(single, EOS, 3).tolist() == [True, False]
  single.model_mask = np.ones((2, 3), bool)  # an episode's tokens: no budget to compare with
  assert overlong.cut_samples(single, EOS, 3).tolist() == [False, False]


def test_soft_penalty_by_hand():
  """L_max 100, buffer 20 (DAPO eq. 13): 0 up to 80 tokens, then (80 - |y|) / 20 down to -1."""
  got = reward_recipes.soft_length_penalty(np.array([10, 80, 81, 90, 99, 100]), 100, 20)
  np.testing.assert_allclose(got, [0, 0, -0.05, -0.5, -0.95, -1.0], rtol=1e-6)
  assert got.dtype == np.float32


def test_filter_masks_whole_rows_of_cut_samples():
  mask = np.array([[True, True, False], [True, True, True], [True, False, False]])
  np.testing.assert_array_equal(
    overlong.filter_loss_mask(mask, np.array([False, True, False])),
    [[True, True, False], [False, False, False], [True, False, False]],
  )


def _rl(advantage, mode="soft"):
  return ml_collections.ConfigDict(
    dict(
      reward="r_lambda",
      advantage=advantage,
      lam=0.5,
      group_size=2,
      scale_std=True,
      max_new_tokens=100,
      overlong=mode,
      overlong_buffer=20,
      overlong_penalty=0.5,
    )
  )


def test_soft_penalty_enters_grpo_reward_and_gdpo_as_a_term():
  lengths = np.array([50, 90, 100, 60], np.float32)  # penalties 0, -0.5, -1, 0
  terms = {
    "unit": np.array([1, 1, 0, 0], np.float32),
    "f1": np.array([1, 0, 0.5, 0.5], np.float32),
    "lengths": lengths,
  }
  terms["reward"] = 0.5 * terms["unit"] + 0.5 * terms["f1"]
  adv, reward = reward_recipes.compute_advantages(_rl("grpo"), terms)
  np.testing.assert_allclose(reward, [1.0, 0.5 - 0.25, 0.25 - 0.5, 0.25], rtol=1e-6)
  np.testing.assert_array_equal(adv, advantages.grpo_advantages(reward, 2))
  adv, _ = reward_recipes.compute_advantages(_rl("gdpo"), terms)
  want = advantages.gdpo_advantages(
    {**terms, "overlong": np.array([0, -0.5, -1, 0], np.float32)},
    {"unit": 0.5, "f1": 0.5, "overlong": 0.5},
    2,
  )
  np.testing.assert_array_equal(adv, want)
  # Without "soft" the lengths change nothing.
  plain, _ = reward_recipes.compute_advantages(_rl("gdpo", "filter"), terms)
  np.testing.assert_array_equal(
    plain, advantages.gdpo_advantages(terms, {"unit": 0.5, "f1": 0.5}, 2)
  )


@pytest.mark.parametrize(
  "fields, message",
  [
    (dict(overlong="clip"), "rl.overlong='clip': must be one of none, filter, soft"),
    (dict(overlong="soft", overlong_buffer=0), "rl.overlong_buffer=0 must be in"),
    (dict(overlong="filter", turns=2), "needs single answers"),
    (dict(policy_loss="dapo"), "rl.policy_loss='dapo': must be one of ppo_clip, gspo"),
    (dict(kl_estimator="low_var_kl"), "rl.kl_estimator='low_var_kl'"),
    (dict(is_correction="tis"), "rl.is_correction='tis'"),
    (dict(is_cap=0.5), "rl.is_cap=0.5"),
    (dict(aggregation="token-sum"), "rl.aggregation='token-sum'"),
  ],
)
def test_config_refuses_unknown_variants_by_field(fields, message):
  cfg = config_lib.default("tiny")
  config_lib.validate(cfg)
  cfg.rl.update(fields)
  with pytest.raises(config_lib.ConfigError, match=message.replace("(", r"\(")):
    config_lib.validate(cfg)
