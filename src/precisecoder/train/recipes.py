"""The RL trainer's side of the reward recipes (config `rl.reward`, `rl.advantage`): the
recipe's scalar and advantages for a batch, both read from `reward_recipes.RECIPES`."""

from __future__ import annotations

import ml_collections
import numpy as np

from precisecoder import advantages, reward_recipes


def scalar_reward(rl: ml_collections.ConfigDict, terms: dict[str, np.ndarray]) -> np.ndarray:
  """The recipe's reward as one number per sample (logged for every recipe)."""
  return reward_recipes.scalar_reward(rl.reward, terms, rl)


def compute_advantages(rl: ml_collections.ConfigDict, terms: dict[str, np.ndarray]
                       ) -> tuple[np.ndarray, np.ndarray]:
  """(advantages [N], scalar reward [N]) for rows grouped prompt-major by `rl.group_size`."""
  problem = reward_recipes.problem(rl.reward, rl.advantage)
  if problem:
    raise ValueError(problem)
  reward = scalar_reward(rl, terms)
  if rl.advantage == "grpo":
    return advantages.grpo_advantages(reward, rl.group_size, scale_std=rl.scale_std), reward
  weights = reward_recipes.RECIPES[rl.reward].gdpo_weights(rl.lam)
  return advantages.gdpo_advantages(terms, weights, rl.group_size), reward
