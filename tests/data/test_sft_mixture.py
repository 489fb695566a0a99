"""The SFT mixture: each kind is what it claims (checked by running the programs here), draws
follow the weights, are deterministic, and bad weights are refused by name."""

import random

import pytest

from precisecoder import tasks as tasks_lib
from precisecoder.data import sft_mixture

from tests.data.test_rewrites import BUGGY, FIXED, TESTS, _passes

TASK = tasks_lib.Task(
  task_id="t0",
  buggy_code=BUGGY,
  gt_solution=FIXED,
  gt_diff=tasks_lib.derive_gt_diff(BUGGY, FIXED),
  tests=TESTS,
  prompt="Sum the lengths; double a total above 10.",
)


@pytest.mark.parametrize("kind", sft_mixture.KINDS)
def test_each_kind_is_what_it_claims(kind):
  (targets,) = sft_mixture.draw_targets([TASK], {kind: 1.0}, draws=3, seed=0)
  for t in targets:
    assert t.kind == kind
    if kind == "reference":
      assert t.program == FIXED
    elif kind == "noop":
      assert t.program == BUGGY
    elif kind == "extra_edits":
      assert t.program not in (FIXED, BUGGY) and _passes(t.program, TESTS)
    else:  # a wrong edit: changed, and still failing
      assert t.program not in (FIXED, BUGGY) and not _passes(t.program, TESTS)


def test_draws_follow_the_weights_and_are_deterministic():
  weights = {"reference": 0.5, "noop": 0.5}
  drawn = sft_mixture.draw_targets([TASK] * 200, weights, draws=2, seed=1)
  assert drawn == sft_mixture.draw_targets([TASK] * 200, weights, draws=2, seed=1)
  # Parts drawn apart (first_index) give the same targets as one pass.
  assert drawn[100:] == sft_mixture.draw_targets(
    [TASK] * 100, weights, draws=2, seed=1, first_index=100
  )
  share = sum(t.kind == "noop" for ts in drawn for t in ts) / 400
  assert 0.4 < share < 0.6


@pytest.mark.parametrize(
  "weights,message",
  [
    ({"reference": 1.0, "typo": 1.0}, "unknown SFT target kind(s) typo"),
    ({"reference": -1.0}, "must be >= 0"),
    ({"noop": 0.0}, "positive sum"),
  ],
)
def test_bad_weights_are_named(weights, message):
  with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
    sft_mixture.check_weights(weights)


def test_fresh_names_rename_the_task_and_its_targets_alike_and_keep_behaviour():
  task = tasks_lib.Task(
    task_id="t1",
    buggy_code=BUGGY,
    gt_solution=FIXED,
    gt_diff=TASK.gt_diff,
    tests=TESTS,
    prompt="Implement `total_len(words)`: sum the lengths of `words`.",
  )
  (targets,) = sft_mixture.draw_targets([task], {"extra_edits": 1.0}, draws=1, seed=0)
  programs = [FIXED, BUGGY, targets[0].program]
  renamed, renamed_programs = sft_mixture.with_fresh_names(task, programs, random.Random(3))
  names = dict(zip(sft_mixture.own_names(BUGGY), sft_mixture.own_names(renamed.buggy_code)))
  assert set(names) == {"total_len", "words", "total", "w"}
  assert not set(names) & set(names.values())  # every own name replaced, none by an old one
  assert renamed.gt_solution == renamed_programs[0] and renamed.buggy_code == renamed_programs[1]
  assert renamed.gt_diff == tasks_lib.derive_gt_diff(renamed.buggy_code, renamed.gt_solution)
  assert list(renamed.gt_diff) == list(task.gt_diff)  # the same lines
  assert renamed.prompt == (
    f"Implement `{names['total_len']}({names['words']})`: sum the lengths of `{names['words']}`."
  )
  # An alpha-renaming: every program behaves as before, and "len" (a builtin) is untouched.
  tests = dict(TESTS, entry_point=names["total_len"])
  assert [_passes(p, tests) for p in renamed_programs] == [_passes(p, TESTS) for p in programs]
  assert all("len(" in p for p in renamed_programs)
  assert sft_mixture.with_fresh_names(task, programs, random.Random(3)) == (
    renamed,
    renamed_programs,
  )
