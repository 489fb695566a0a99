"""GRPO, GDPO and EA-GRPO against hand-computed values, and the paper's λ bound."""

import itertools

import numpy as np
import pytest

from precisecoder import advantages


def test_grpo_hand_computed():
  # Group [1, 0, 0, 1]: mean 0.5, unbiased std sqrt(1/3).
  adv = advantages.grpo_advantages(np.array([1.0, 0, 0, 1, 2, 2, 2, 2]), 4)
  s = np.sqrt(1 / 3)
  a = 0.5 / (s + 1e-4)
  np.testing.assert_allclose(adv[:4], [a, -a, -a, a], rtol=1e-6)
  np.testing.assert_array_equal(adv[4:], 0.0)  # constant group: exactly zero


def test_dr_grpo_only_centres():
  adv = advantages.grpo_advantages(np.array([3.0, 1.0]), 2, scale_std=False)
  np.testing.assert_allclose(adv, [1.0, -1.0])


def test_gdpo_hand_computed():
  # Two groups of 3. unit: [1,0,0], [1,1,1]; f1: [0.9, 0.3, 0.0], [0.2, 0.5, 0.8].
  unit = np.array([1.0, 0, 0, 1, 1, 1])
  f1 = np.array([0.9, 0.3, 0.0, 0.2, 0.5, 0.8])
  adv = advantages.gdpo_advantages({"unit": unit, "f1": f1}, {"unit": 2 / 3, "f1": 1 / 3}, 3)
  # By hand: unit group 1 mean 1/3, std sqrt(1/3); group 2 constant -> 0.
  su = np.sqrt(1 / 3) + 1e-4
  a_unit = np.array([2 / 3 / su, -1 / 3 / su, -1 / 3 / su, 0, 0, 0])
  # f1 group 1 mean 0.4, deviations [.5, -.1, -.4], std sqrt(.42/2); group 2 std 0.3.
  s1, s2 = np.sqrt(0.42 / 2) + 1e-4, 0.3 + 1e-4
  a_f1 = np.array([0.5 / s1, -0.1 / s1, -0.4 / s1, -0.3 / s2, 0, 0.3 / s2])
  s = 2 / 3 * a_unit + 1 / 3 * a_f1
  want = (s - s.mean()) / (s.std(ddof=1) + 1e-4)
  np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-6)
  assert adv.dtype == np.float32


def test_gdpo_all_constant_is_zero_not_nan():
  terms = {"unit": np.ones(8), "f1": np.full(8, 0.1)}
  adv = advantages.gdpo_advantages(terms, {"unit": 1, "f1": 1}, 4)
  np.testing.assert_array_equal(adv, 0.0)


def test_gdpo_differs_from_grpo_on_summed_reward():
  # Unit constant within the group: GRPO on the sum reduces to standardising F1 alone.
  unit = np.array([1.0, 1, 0, 0])
  f1 = np.array([0.2, 0.9, 0.5, 0.1])
  gdpo = advantages.gdpo_advantages({"unit": unit, "f1": f1}, {"unit": 2 / 3, "f1": 1 / 3}, 4)
  grpo = advantages.grpo_advantages(2 / 3 * unit + 1 / 3 * f1, 4)
  assert not np.allclose(gdpo, grpo)


def test_bad_shapes_name_the_problem():
  with pytest.raises(ValueError, match="groups of 4"):
    advantages.grpo_advantages(np.zeros(6), 4)
  with pytest.raises(KeyError, match="recall"):
    advantages.gdpo_advantages({"unit": np.zeros(4)}, {"recall": 1.0}, 2)


def _passing_always_above_failing(lam: float, group_size: int) -> bool:
  """Exhaustive check over every unit pattern and F1 values on a {0, 1/2, 1} grid."""
  g = group_size
  units = np.array([u for u in itertools.product([0.0, 1.0], repeat=g) if 0 < sum(u) < g])
  f1s = np.array(list(itertools.product([0.0, 0.5, 1.0], repeat=g)))
  unit = np.repeat(units, len(f1s), axis=0)
  f1 = np.tile(f1s, (len(units), 1))
  adv = advantages.gdpo_advantages(
    {"unit": unit.reshape(-1), "f1": f1.reshape(-1)}, {"unit": 1 - lam, "f1": lam}, g
  ).reshape(-1, g)
  worst_pass = np.where(unit == 1, adv, np.inf).min(axis=1)
  best_fail = np.where(unit == 0, adv, -np.inf).max(axis=1)
  return bool(np.all(worst_pass > best_fail))


def test_lambda_bound_for_group_of_six():
  bound = advantages.lambda_bound(6)
  print(f"lambda bound for G=6: {bound:.4f}")
  assert 0.36 < bound < 0.37  # the paper: any λ < 0.37 with G = 6
  assert 1 / 3 < bound
  assert _passing_always_above_failing(bound - 1e-3, 6)
  assert not _passing_always_above_failing(bound + 1e-3, 6)


def test_ea_grpo_rewards():
  unit = np.array([1, 1, 0, 1, 0, 0, 0, 1], np.float32)
  cost = np.array([0.1, 0.3, 0.5, 0.2, 0.1, 0.1, 0.1, 0.9], np.float32)
  out = advantages.ea_grpo_rewards(unit, cost, group_size=4, alpha=0.5, beta=0.4)
  # Group 1: pass rate 3/4 >= alpha; costs .1 .3 .2 -> z = -1.2247, 1.2247, 0.
  z = np.array([-1.2247449, 1.2247449, 0.0])
  expected = 1 - 0.4 / (1 + np.exp(-z))
  np.testing.assert_allclose(out[[0, 1, 3]], expected, rtol=1e-5)
  assert out[2] == 0 and out[4] == 0
  # Group 2: pass rate 1/4 < alpha -> no penalty.
  np.testing.assert_allclose(out[4:], [0, 0, 0, 1])
  with pytest.raises(ValueError):
    advantages.ea_grpo_rewards(unit, cost, group_size=3, alpha=0.5, beta=0.4)
