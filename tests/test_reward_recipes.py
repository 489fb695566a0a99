"""The reward recipe table: each recipe's scalar against its hand formula, GDPO weights, the
RL trainer's advantages, the scorer's columns and the advantage estimators each recipe
accepts."""

import ml_collections
import numpy as np
import pytest

from precisecoder import advantages, reward_recipes, rewards
from precisecoder.train import config as config_lib

LAM = 0.3
GROUP = 4
UNIT = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
F1 = [0.5, 1.0, 0.2, 0.8, 0.0, 0.4, 0.0, 1.0]
PRECISION = [0.25, 1.0, 0.3, 0.7, 0.0, 0.5, 0.0, 1.0]
RECALL_GATED = [1.0, 1.0, 0.5, 1.0, 0.0, 0.5, 0.0, 1.0]
EDIT_COST = [0.1, 0.3, 0.5, 0.2, 0.1, 0.1, 0.1, 0.9]


def _rl(reward, advantage="grpo"):
  return ml_collections.ConfigDict(
    dict(
      reward=reward,
      advantage=advantage,
      lam=LAM,
      group_size=GROUP,
      scale_std=True,
      ea_alpha=0.5,
      ea_beta=0.4,
    )
  )


def _terms():
  """The arrays the scorer hands the trainer, blended columns built as RewardScorer does."""
  rows = [
    {"unit": u, "f1": f, "precision": p, "recall_gated": r}
    for u, f, p, r in zip(UNIT, F1, PRECISION, RECALL_GATED)
  ]
  blended = [reward_recipes.blended_columns(row, LAM) for row in rows]
  terms = {
    "unit": UNIT,
    "f1": F1,
    "precision": PRECISION,
    "recall_gated": RECALL_GATED,
    "edit_cost": EDIT_COST,
    **{k: [b[k] for b in blended] for k in blended[0]},
  }
  return {k: np.asarray(v, np.float32) for k, v in terms.items()}


def _ea_grpo_by_hand(alpha=0.5, beta=0.4):
  out = []
  for g in range(0, len(UNIT), GROUP):
    unit, cost = np.array(UNIT[g : g + GROUP]), np.array(EDIT_COST[g : g + GROUP])
    ok = unit > 0.5
    z = (cost - cost[ok].mean()) / (cost[ok].std() + 1e-6)
    active = 1.0 if ok.mean() >= alpha else 0.0
    out += [1 - active * beta / (1 + np.exp(-z[k])) if ok[k] else 0.0 for k in range(GROUP)]
  return np.float32(out)


HAND = {  # recipe -> its scalar written out per sample, in float64 like the scorer's Python floats
  "unit": lambda: np.float32(UNIT),
  "r_lambda": lambda: np.float32([(1 - LAM) * u + LAM * f for u, f in zip(UNIT, F1)]),
  "precision_only": lambda: np.float32([(1 - LAM) * u + LAM * p for u, p in zip(UNIT, PRECISION)]),
  "recall_only": lambda: np.float32([(1 - LAM) * u + LAM * r for u, r in zip(UNIT, RECALL_GATED)]),
  "ea_grpo": _ea_grpo_by_hand,
}


def test_every_recipe_has_a_hand_formula():
  assert set(HAND) == set(reward_recipes.RECIPES)


@pytest.mark.parametrize("name", sorted(HAND))
def test_scalar_equals_the_hand_formula(name):
  scalar = reward_recipes.scalar_reward(name, _terms(), _rl(name))
  assert scalar.dtype == np.float32
  if name == "ea_grpo":  # a mean and a std over the group: equal up to rounding
    np.testing.assert_allclose(scalar, HAND[name](), rtol=1e-6)
  else:
    np.testing.assert_array_equal(scalar, HAND[name]())


@pytest.mark.parametrize(
  "name, weights",
  [
    ("unit", {"unit": 1.0}),
    ("r_lambda", {"unit": 1 - LAM, "f1": LAM}),
    ("precision_only", {"unit": 1 - LAM, "precision": LAM}),
    ("recall_only", {"unit": 1 - LAM, "recall_gated": LAM}),
  ],
)
def test_gdpo_weights_each_term(name, weights):
  assert reward_recipes.RECIPES[name].gdpo_weights(LAM) == weights
  terms = _terms()
  adv, scalar = reward_recipes.compute_advantages(_rl(name, "gdpo"), terms)
  np.testing.assert_array_equal(adv, advantages.gdpo_advantages(terms, weights, GROUP))
  np.testing.assert_array_equal(scalar, HAND[name]())


def test_scorer_columns_come_from_the_table():
  assert rewards.ARRAY_KEYS == (
    "unit",
    "precision",
    "recall",
    "recall_gated",
    "f1",
    "reward",
    "precision_only",
    "recall_only",
    "edit_lines",
    "edit_cost",
    "noop",
    "damage",
    "broken_task",
  )
  assert set(reward_recipes.BLENDS) == {"reward", "precision_only", "recall_only"}


def test_grpo_advantages_standardise_the_scalar_within_each_group():
  terms = _terms()
  adv, scalar = reward_recipes.compute_advantages(_rl("unit", "grpo"), terms)
  np.testing.assert_array_equal(scalar, np.float32(UNIT))
  np.testing.assert_array_equal(adv, advantages.grpo_advantages(scalar, GROUP, scale_std=True))
  assert adv[2] < 0 < adv[0] and adv[4] < 0 < adv[7]  # failures below passes in each group
  adv, scalar = reward_recipes.compute_advantages(_rl("ea_grpo", "grpo"), terms)
  np.testing.assert_allclose(scalar, _ea_grpo_by_hand(), rtol=1e-6)
  np.testing.assert_array_equal(adv, advantages.grpo_advantages(scalar, GROUP, scale_std=True))


def test_an_estimator_a_recipe_does_not_accept_is_refused_by_name():
  """Refused once, when the config is validated (the trainer then trusts it every step)."""
  assert reward_recipes.problem("ea_grpo", "grpo") is None
  cfg = config_lib.default("tiny")
  cfg.rl.update(reward="ea_grpo", advantage="gdpo")
  with pytest.raises(
    config_lib.ConfigError, match="config.rl.reward='ea_grpo' .* use config.rl.advantage='grpo'"
  ):
    config_lib.validate(cfg)
  assert "rl.reward='bogus'" in reward_recipes.problem("bogus", "grpo")
  assert "rl.advantage='ppo'" in reward_recipes.problem("unit", "ppo")
