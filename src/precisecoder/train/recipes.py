"""Reward recipes: which reward terms feed the advantage, and how (config `rl.reward`,
`rl.advantage`). PAPER.md "The method" and "Baselines"."""

from __future__ import annotations

import ml_collections
import numpy as np

from precisecoder import advantages, rewards

# Recipe -> (scalar reward term for GRPO, GDPO weights as a function of λ).
_RECIPES = {
    "unit": ("unit", lambda lam: {"unit": 1.0}),
    "r_lambda": ("reward", lambda lam: {"unit": 1 - lam, "f1": lam}),
    "precision_only": ("precision_only", lambda lam: {"unit": 1 - lam, "precision": lam}),
    "recall_only": ("recall_only", lambda lam: {"unit": 1 - lam, "recall_gated": lam}),
    "ea_grpo": ("ea_grpo", None),
}


def scalar_reward(rl: ml_collections.ConfigDict, terms: dict[str, np.ndarray]) -> np.ndarray:
  """The recipe's reward as one number per sample (logged for every recipe)."""
  if rl.reward not in _RECIPES:
    raise ValueError(f"rl.reward={rl.reward!r}; known: {sorted(_RECIPES)}")
  if rl.reward == "ea_grpo":
    return rewards.ea_grpo_rewards(terms["unit"], terms["edit_cost"], rl.group_size,
                                   rl.ea_alpha, rl.ea_beta)
  return np.asarray(terms[_RECIPES[rl.reward][0]], np.float32)


def compute_advantages(rl: ml_collections.ConfigDict, terms: dict[str, np.ndarray]
                       ) -> tuple[np.ndarray, np.ndarray]:
  """(advantages [N], scalar reward [N]) for rows grouped prompt-major by `rl.group_size`."""
  reward = scalar_reward(rl, terms)
  if rl.advantage == "grpo":
    return advantages.grpo_advantages(reward, rl.group_size, scale_std=rl.scale_std), reward
  if rl.advantage == "gdpo":
    weights = _RECIPES[rl.reward][1]
    if weights is None:
      raise ValueError(f"rl.reward={rl.reward!r} is a single scalar: use rl.advantage='grpo'")
    return advantages.gdpo_advantages(terms, weights(rl.lam), rl.group_size), reward
  raise ValueError(f"rl.advantage={rl.advantage!r}; known: grpo, gdpo")
