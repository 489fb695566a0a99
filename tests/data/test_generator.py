"""The seeded task generator: determinism, verified bugs per tier (its families and splits:
test_families.py)."""

import collections

import pytest

from precisecoder import edits
from precisecoder.data import bug_choice, generator, injection
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import apply_gt_diff, parse_task, task_to_record

CHECKER = TrustedCallChecker()


def _code_lines(code):
  return [line for line in code.splitlines() if line.strip()]


def test_same_seed_same_tasks_other_seed_other_tasks():
  a = [task_to_record(t) for t in generator.make_tasks("train", "easy", 12, seed=3)]
  b = [task_to_record(t) for t in generator.make_tasks("train", "easy", 12, seed=3)]
  c = [task_to_record(t) for t in generator.make_tasks("train", "easy", 12, seed=4)]
  assert a == b
  assert a != c


def _check_task(task):
  assert parse_task(task_to_record(task), "roundtrip") == task
  assert apply_gt_diff(task.buggy_code, task.gt_diff) == task.gt_solution.rstrip("\n")
  assert len(edits.parse_blocks(task.gt_diff)) == task.bug_count
  assert CHECKER.passes_one(task.gt_solution, task.tests), task.task_id
  assert not CHECKER.passes_one(task.buggy_code, task.tests), task.task_id
  assert task.tests["kind"] == "call" and len(task.tests["cases"]) == generator.NUM_CASES


def test_easy_tasks_are_short_single_bug_and_verified():
  tasks = generator.make_tasks("train", "easy", 40, seed=0)
  assert len({t.task_id for t in tasks}) == 40
  for t in tasks:
    _check_task(t)
    assert 3 <= len(_code_lines(t.gt_solution)) <= 12
    assert t.bug_count == 1 and len(t.gt_diff) == 1
    assert t.extra["bug_subtype"][0] in bug_choice.EASY_OPERATORS
    assert t.prompt.startswith("Implement `")
  assert len({t.extra["family"] for t in tasks}) >= 20


def test_medium_and_hard_tiers():
  medium = generator.make_tasks("validation", "medium", 8, seed=1)
  for t in medium:
    _check_task(t)
    assert 8 <= len(_code_lines(t.gt_solution)) <= 30 and t.bug_count == 1
  hard = generator.make_tasks("train", "hard", 16, seed=1)
  for t in hard:
    _check_task(t)
    assert t.bug_count >= 2 or t.extra["multi_line"]
  counts = collections.Counter(t.bug_count for t in hard)
  assert len(counts) >= 2
  for t in hard:  # every multi-line block is atomic
    for block in edits.parse_blocks(t.gt_diff):
      if len(block.edits) > 1:
        fixed_others = edits.apply_diff(
          t.buggy_code, {k: v for k, v in t.gt_diff.items() if k not in block.edits}
        )
        only_this = edits.parse_blocks(edits.line_diff(fixed_others, t.gt_solution))[0].edits
        for partial in injection.partial_reverts(fixed_others, only_this):
          assert not CHECKER.passes_one(partial, t.tests)


def test_clean_tasks_pass_and_are_not_buggy():
  tasks = generator.make_clean_tasks("test", 10, seed=0)
  assert len({t.buggy_code for t in tasks}) == 10
  for t in tasks:
    assert not t.is_buggy and t.gt_diff == {} and t.buggy_code == t.gt_solution
    assert CHECKER.passes_one(t.gt_solution, t.tests)
    assert parse_task(task_to_record(t), "roundtrip") == t


def test_bad_arguments_are_named():
  with pytest.raises(ValueError, match="tier"):
    generator.make_tasks("train", "impossible", 1)
  with pytest.raises(ValueError, match="split"):
    generator.make_tasks("dev", "easy", 1)
