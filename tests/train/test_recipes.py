"""The RL trainer's advantages for each reward recipe."""

import ml_collections
import numpy as np
import pytest

from precisecoder.train import recipes


def _rl(reward, advantage, **kw):
  return ml_collections.ConfigDict(dict(reward=reward, advantage=advantage, lam=1 / 3,
                                        group_size=2, scale_std=True, ea_alpha=0.5,
                                        ea_beta=0.5, **kw))


def test_recipes():
  terms = {"unit": np.array([1, 0, 1, 1.0]), "f1": np.array([0.5, 0.2, 1, 0.0]),
           "reward": np.array([0.8, 0.1, 1, 2 / 3]), "precision": np.zeros(4),
           "edit_cost": np.array([0.1, 0.5, 0.2, 0.4]), "recall_gated": np.zeros(4),
           "precision_only": np.zeros(4), "recall_only": np.zeros(4)}
  adv, reward = recipes.compute_advantages(_rl("unit", "grpo"), terms)
  np.testing.assert_array_equal(reward, terms["unit"])
  assert adv[0] > 0 > adv[1] and adv[2] == adv[3] == 0
  adv, _ = recipes.compute_advantages(_rl("r_lambda", "gdpo"), terms)
  assert adv[2] > adv[3] and adv[0] > adv[1]  # second group: unit equal, F1 decides
  adv, reward = recipes.compute_advantages(_rl("ea_grpo", "grpo"), terms)
  assert reward[1] == 0 and 0 < reward[0] <= 1
  with pytest.raises(ValueError, match="single scalar reward"):
    recipes.compute_advantages(_rl("ea_grpo", "gdpo"), terms)
  with pytest.raises(ValueError, match="rl.reward"):
    recipes.compute_advantages(_rl("bogus", "grpo"), terms)
