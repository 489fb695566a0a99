"""Group-relative advantages: GRPO on one scalar reward, GDPO on several reward terms, and
EA-GRPO's group-relative reward.

Rows are prompt-major: the G samples of one prompt are adjacent (row = prompt * G + k), as
the sampler returns them. All functions are NumPy on the host; advantages are tiny arrays.

A group whose values are all equal carries no signal and gets advantage 0 (never NaN).
Standard deviations are the unbiased estimate (ddof=1), as in the TRL reference
implementation of GRPO and GDPO; `ddof=0` gives the population form.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

GDPO_EPS = 1e-4  # PAPER.md: A_k = (r_k - mean_G) / (std_G + 1e-4)


def _grouped(values: np.ndarray, group_size: int, name: str) -> np.ndarray:
  values = np.asarray(values, np.float64)
  if values.ndim != 1:
    raise ValueError(f"{name}: expected a 1-D array of rewards, got shape {values.shape}")
  if group_size < 1 or values.size % group_size:
    raise ValueError(f"{name}: {values.size} rewards do not split into groups of {group_size}")
  return values.reshape(-1, group_size)


def _std(x: np.ndarray, axis: int, ddof: int) -> np.ndarray:
  if x.shape[axis] <= ddof:
    return np.zeros(np.delete(x.shape, axis))
  return x.std(axis=axis, ddof=ddof)


def group_standardize(
  values: np.ndarray, group_size: int, *, scale: bool = True, eps: float = GDPO_EPS, ddof: int = 1
) -> np.ndarray:
  """(r - mean_G) / (std_G + eps) per group (or r - mean_G without `scale`); float64 [N]."""
  grouped = _grouped(values, group_size, "group_standardize")
  centred = grouped - grouped.mean(axis=1, keepdims=True)
  constant = (grouped == grouped[:, :1]).all(axis=1, keepdims=True)
  centred = np.where(constant, 0.0, centred)  # exact zero: the mean of equal floats may round
  if scale:
    centred = centred / (_std(grouped, 1, ddof)[:, None] + eps)
  return centred.reshape(-1)


def grpo_advantages(
  reward: np.ndarray,
  group_size: int,
  *,
  scale_std: bool = True,
  eps: float = GDPO_EPS,
  ddof: int = 1,
) -> np.ndarray:
  """GRPO: the reward centred on its group mean, divided by the group std unless `scale_std`
  is False (Dr. GRPO). float32 [N]."""
  return group_standardize(reward, group_size, scale=scale_std, eps=eps, ddof=ddof).astype(
    np.float32
  )


def gdpo_advantages(
  terms: Mapping[str, np.ndarray],
  weights: Mapping[str, float],
  group_size: int,
  *,
  eps: float = GDPO_EPS,
  ddof: int = 1,
) -> np.ndarray:
  """GDPO (PAPER.md): standardise each term within its group, sum with the weights, then
  standardise the sum over the whole batch. float32 [N]."""
  if not weights:
    raise ValueError("gdpo_advantages: no reward terms weighted")
  missing = sorted(set(weights) - set(terms))
  if missing:
    raise KeyError(f"gdpo_advantages: reward terms {missing} not among {sorted(terms)}")
  combined = sum(
    w * group_standardize(terms[k], group_size, eps=eps, ddof=ddof) for k, w in weights.items()
  )
  if np.all(combined == combined[0]):
    return np.zeros_like(combined, np.float32)
  normalized = (combined - combined.mean()) / (_std(combined, 0, ddof) + eps)
  return normalized.astype(np.float32)


def lambda_bound(group_size: int, *, eps: float = GDPO_EPS, ddof: int = 1) -> float:
  """The largest λ for which GDPO on r_λ = (1 - λ)·unit + λ·F1 ranks every passing sample
  above every failing sample of its group, whatever the F1 values in [0, 1].

  For a passing sample i and a failing sample j, advantage_i > advantage_j iff
  (1 - λ)·Δ_unit > λ·(F1-advantage_j − F1-advantage_i). The unit gap Δ_unit = 1 / (std + eps)
  is smallest when half the group passes; the F1 gap is largest when F1_i = 0, F1_j = 1 and
  every other sample sits at 1/2 (the spread of the rest is then smallest). The batch
  renormalisation is a positive affine map, so it keeps the order.
  """
  g = group_size
  if g < 2:
    raise ValueError(f"lambda_bound: group_size must be at least 2, got {g}")
  unit_gap = min(
    1.0 / (_std(np.array([1.0] * p + [0.0] * (g - p)), 0, ddof) + eps) for p in range(1, g)
  )
  f1 = np.array([0.0, 1.0] + [0.5] * (g - 2))
  f1_gap = 1.0 / (_std(f1, 0, ddof) + eps)
  return float(unit_gap / (unit_gap + f1_gap))


def ea_grpo_rewards(
  unit: np.ndarray, edit_cost: np.ndarray, group_size: int, alpha: float, beta: float
) -> np.ndarray:
  """EA-GRPO (PRepair) rewards for rows grouped prompt-major in groups of `group_size`.

  A failing sample gets 0. A passing one gets 1 − T·β·σ(z), where z is its edit
  cost standardised over the group's passing samples and T = 1 only once the
  group's pass rate reaches α.
  """
  unit = np.asarray(unit, dtype=np.float64)
  cost = np.asarray(edit_cost, dtype=np.float64)
  if unit.shape != cost.shape or unit.ndim != 1 or group_size <= 0 or unit.size % group_size:
    raise ValueError(
      f"unit {unit.shape} and edit_cost {cost.shape} must be [N] with N a multiple "
      f"of group_size={group_size}"
    )
  passed = (unit > 0.5).reshape(-1, group_size)
  cost = cost.reshape(-1, group_size)
  out = np.zeros_like(cost)
  for g in range(cost.shape[0]):
    ok = passed[g]
    if not ok.any():
      continue
    c = cost[g, ok]
    z = (c - c.mean()) / (c.std() + 1e-6)
    active = float(ok.mean() >= alpha)
    out[g, ok] = 1.0 - active * beta / (1.0 + np.exp(-z))
  return out.reshape(-1).astype(np.float32)
