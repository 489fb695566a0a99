"""Bootstrap intervals over tasks and Pearson correlations, against hand-worked values."""

import math

import numpy as np
import pytest

from precisecoder.analysis import statistics


def test_task_means_average_samples_first_and_skip_missing():
  means = statistics.task_means(["a", "a", "b", "c", "c"], [1, 0, None, 0.5, float("nan")])
  # b has no value at all and is dropped; c keeps its one finite sample.
  np.testing.assert_allclose(means, [0.5, 0.5])


def test_bootstrap_interval_brackets_mean_and_shrinks_with_n():
  rng = np.random.default_rng(0)
  small = statistics.bootstrap_interval(rng.integers(0, 2, 20))
  large = statistics.bootstrap_interval(rng.integers(0, 2, 2000))
  for iv in (small, large):
    assert iv.low <= iv.mean <= iv.high
  assert (large.high - large.low) < (small.high - small.low) / 4
  # Binomial p ~ 0.5, n = 2000: half-width ~ 1.96 * sqrt(.25 / 2000) = 0.0219.
  assert (large.high - large.low) / 2 == pytest.approx(0.0219, abs=0.003)


def test_bootstrap_of_constant_is_a_point_and_empty_is_nan():
  iv = statistics.bootstrap_interval([1.0, 1.0, 1.0])
  assert (iv.mean, iv.low, iv.high, iv.n) == (1.0, 1.0, 1.0, 3)
  empty = statistics.bootstrap_interval([])
  assert empty.n == 0 and math.isnan(empty.mean) and empty.format() == "–"


def test_pearson_matches_hand_worked_example():
  # x = 1..5, y = 2, 4, 5, 4, 5: sxy = 6, sxx = 10, syy = 6 -> r = 6 / sqrt(60) = 0.7746.
  c = statistics.pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])
  assert c.r == pytest.approx(6 / math.sqrt(60), abs=1e-12)
  # Fisher z: atanh(r) +- 1.95996 / sqrt(2).
  z = math.atanh(c.r)
  assert c.low == pytest.approx(math.tanh(z - 1.959964 / math.sqrt(2)), abs=1e-5)
  assert c.high == pytest.approx(math.tanh(z + 1.959964 / math.sqrt(2)), abs=1e-5)
  assert math.isnan(statistics.pearson([1, 1, 1], [1, 2, 3]).r)  # constant side: undefined
  assert statistics.pearson([1, 2, 3], [1, 3, 2]).format() == "+0.50 (n = 3, no interval)"
  assert (
    statistics.pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]).format() == "+0.77 [-0.34, +0.98] (n = 5)"
  )


def test_paper_table_splits_buggy_and_clean_and_groups_by_task():
  rows = [
    {
      "task_id": "a",
      "is_buggy": True,
      "unit": 1,
      "precision": 1.0,
      "recall": 1.0,
      "f1": 1.0,
      "edit_lines": 1,
      "noop": False,
      "damage": None,
    },
    {
      "task_id": "a",
      "is_buggy": True,
      "unit": 0,
      "precision": 0.0,
      "recall": 0.0,
      "f1": 0.0,
      "edit_lines": 5,
      "noop": False,
      "damage": None,
    },
    {
      "task_id": "b",
      "is_buggy": True,
      "unit": 1,
      "precision": 0.5,
      "recall": 1.0,
      "f1": 2 / 3,
      "edit_lines": 2,
      "noop": False,
      "damage": None,
    },
    {
      "task_id": "c",
      "is_buggy": False,
      "unit": 1,
      "precision": None,
      "recall": None,
      "f1": None,
      "edit_lines": 0,
      "noop": True,
      "damage": False,
    },
    {
      "task_id": "d",
      "is_buggy": False,
      "unit": 0,
      "precision": None,
      "recall": None,
      "f1": None,
      "edit_lines": 3,
      "noop": False,
      "damage": True,
    },
  ]
  table = statistics.paper_table(rows)
  assert table["pass"].mean == pytest.approx((0.5 + 1) / 2)  # task a: 1/2, task b: 1
  assert table["edit_lines"].mean == pytest.approx((3 + 2) / 2)
  assert table["precision"].n == 2
  assert table["noop"].mean == 0.5 and table["damage"].mean == 0.5 and table["noop"].n == 2
  md = statistics.markdown_table({"arm": table}, label="arm")
  assert md.splitlines()[2].startswith("| arm | 75.0 [")


def test_edit_size_unit_correlation_uses_negative_edit_size():
  rows = [
    {"task_id": str(i), "is_buggy": True, "edit_lines": n, "unit": u}
    for i, (n, u) in enumerate([(1, 1), (2, 1), (8, 0), (9, 0)])
  ]
  assert statistics.edit_size_unit_correlation(rows).r > 0.9  # smaller edits pass here


def test_paired_differences_pair_by_task_and_ignore_unshared_tasks():
  def rows(units, noops):
    return [
      {"task_id": f"b{i}", "is_buggy": True, "unit": u, "edit_lines": 2}
      for i, u in enumerate(units)
    ] + [
      {"task_id": f"c{i}", "is_buggy": False, "noop": n, "damage": 0} for i, n in enumerate(noops)
    ]

  before = rows([0, 0, 1, 0], [1, 0, 0])
  after = rows([1, 1, 1, 0, 1], [1, 1, 1])  # b4 has no "before": left out of the pairs
  diff = statistics.paired_differences(before, after)
  assert diff["pass"].mean == pytest.approx(0.5) and diff["pass"].n == 4
  assert diff["noop"].mean == pytest.approx(2 / 3)
  assert diff["edit_lines"].format(sign=True) == "+0.00 [+0.00, +0.00]"
  assert not diff["pass"].excludes(0)  # 2 of 4 tasks improved: could be noise
  # The same tasks, every one improved: the paired interval excludes zero.
  assert statistics.paired_differences(rows([0] * 8, []), rows([1] * 8, []))["pass"].excludes(0)
  assert math.isnan(diff["precision"].mean)  # no precision values at all


def test_a_mean_without_an_interval_excludes_nothing():
  """One seed's mean has no interval over seeds: no star, whatever its value."""
  one = statistics.seed_interval([0.3])
  assert one.n == 1 and not one.excludes(0.0)
  assert statistics.cell(one, "pass", difference=True) == "+30.0"
  assert statistics.seed_interval([0.3, 0.31]).excludes(0.0)
