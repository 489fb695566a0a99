"""The table of reward recipes (PAPER.md "The method", "Baselines"): what each recipe rewards,
how its scalar is computed and which advantage estimators accept it.

Everything that names a recipe reads `RECIPES`: the scorer's blended columns (and so the
`reward` of score output), config validation and the RL trainer's advantages
(`compute_advantages`). Adding a recipe is one row here.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

from precisecoder import advantages

ADVANTAGES = ("grpo", "gdpo")


def blend(unit: Any, x: Any, lam: float) -> Any:
  """r = (1 − λ)·unit + λ·X, the one formula every blended recipe uses."""
  return (1 - lam) * unit + lam * x


@dataclasses.dataclass(frozen=True)
class Recipe:
  """`column`: the per-sample array that holds the recipe's scalar reward (None: computed over
  a group by `group_reward`); `x`: the term X blended with unit (None: no blend, its column
  is a plain term); `advantages`: the estimators that accept it (GDPO needs terms to weight)."""

  column: str | None
  x: str | None = None
  advantages: tuple[str, ...] = ADVANTAGES
  group_reward: Callable[..., np.ndarray] | None = None

  def gdpo_weights(self, lam: float) -> dict[str, float]:
    """The weight of each term GDPO standardises (unit first, as the sum runs in this order)."""
    return {"unit": 1.0} if self.x is None else {"unit": 1 - lam, self.x: lam}


def _ea_grpo(terms: Mapping[str, np.ndarray], settings: Any) -> np.ndarray:
  return advantages.ea_grpo_rewards(
    terms["unit"], terms["edit_cost"], settings.group_size, settings.ea_alpha, settings.ea_beta
  )


RECIPES = {
  "unit": Recipe(column="unit"),
  "r_lambda": Recipe(column="reward", x="f1"),
  "precision_only": Recipe(column="precision_only", x="precision"),
  "recall_only": Recipe(column="recall_only", x="recall_gated"),
  "ea_grpo": Recipe(column=None, advantages=("grpo",), group_reward=_ea_grpo),
}
# The scorer's blended columns, in table order: {column: X}.
BLENDS = {r.column: r.x for r in RECIPES.values() if r.x is not None}


def blended_columns(values: Mapping[str, float], lam: float) -> dict[str, float]:
  """Every blended recipe's reward for one sample's term values."""
  return {column: blend(values["unit"], values[x], lam) for column, x in BLENDS.items()}


def problem(reward: str, advantage: str, prefix: str = "") -> str | None:
  """Why `rl.reward` and `rl.advantage` cannot work together (None: they can); `prefix`
  ("config.") goes before each field name."""
  if reward not in RECIPES:
    return f"{prefix}rl.reward={reward!r} must be one of {', '.join(RECIPES)}"
  if advantage not in ADVANTAGES:
    return f"{prefix}rl.advantage={advantage!r} must be one of {', '.join(ADVANTAGES)}"
  accepted = RECIPES[reward].advantages
  if advantage not in accepted:
    return (
      f"{prefix}rl.reward={reward!r} is a single scalar reward: use {prefix}rl.advantage="
      f"{' or '.join(map(repr, accepted))}"
    )
  return None


def scalar_reward(reward: str, terms: Mapping[str, np.ndarray], settings: Any) -> np.ndarray:
  """The recipe's reward as one float32 number per sample; `settings` carries group_size,
  ea_alpha and ea_beta (the rl config) for group-computed recipes."""
  recipe = RECIPES[reward]
  if recipe.group_reward is not None:
    return recipe.group_reward(terms, settings)
  return np.asarray(terms[recipe.column], np.float32)


def compute_advantages(rl: Any, terms: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
  """(advantages [N], the scalar reward [N]) of `rl.reward` by `rl.advantage` for rows grouped
  prompt-major by `rl.group_size`. `rl` is a validated config's (config.validate refuses an
  estimator the recipe does not accept, with `problem`'s message)."""
  reward = scalar_reward(rl.reward, terms, rl)
  penalty = overlong_penalty(rl, terms)
  if rl.advantage == "grpo":
    if penalty is not None:
      reward = (reward + rl.overlong_penalty * penalty).astype(np.float32)
    return advantages.grpo_advantages(reward, rl.group_size, scale_std=rl.scale_std), reward
  weights = RECIPES[rl.reward].gdpo_weights(rl.lam)
  if penalty is not None:
    # GDPO standardises each reward term in its group before weighting: the length penalty
    # is one more term, weighed by rl.overlong_penalty (as the GDPO paper's length reward).
    terms = {**terms, "overlong": penalty}
    weights = {**weights, "overlong": rl.overlong_penalty}
  return advantages.gdpo_advantages(terms, weights, rl.group_size), reward


def overlong_penalty(rl: Any, terms: Mapping[str, np.ndarray]) -> np.ndarray | None:
  """DAPO's soft length penalty in [-1, 0] per sample from `terms["lengths"]` (the samples'
  token counts) with `rl.overlong` = "soft"; None otherwise."""
  if rl.get("overlong", "none") != "soft":
    return None
  return soft_length_penalty(terms["lengths"], rl.max_new_tokens, rl.overlong_buffer)


def soft_length_penalty(lengths: np.ndarray, max_new_tokens: int, buffer: int) -> np.ndarray:
  """DAPO's R_length in [-1, 0], float32 [N]: 0 up to `max_new_tokens - buffer` tokens, then
  falling linearly to -1 at `max_new_tokens` (DAPO eq. 13; verl's `overlong_buffer_cfg`, scaled
  by its `penalty_factor` where it is used)."""
  expected = max_new_tokens - buffer
  over = np.asarray(lengths, np.float64) - expected
  return np.clip(-over / buffer, -1.0, 0.0).astype(np.float32)
