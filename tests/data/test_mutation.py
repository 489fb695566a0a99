"""Mutation operators and verified injection (PDB's rules)."""

import ast
import random

import pytest

from precisecoder import edits
from precisecoder.data import injection, mutation
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import apply_gt_diff

PROGRAM = '''import math


def summarize(nums, k):
    """Docstring lines are frozen."""
    # a comment is frozen too
    count = 0
    label = ", ".join(str(x) for x in nums)
    for i in range(len(nums)):
        if nums[i] > k and i % 2 == 0:
            count += 1
        elif not nums[i]:
            continue
    top = sorted(nums)[:count]
    return [count, math.floor(k / 2), label, max(nums), top, nums[0], divmod(count, 3)]
'''


def test_editable_lines_skip_frozen_kinds():
  editable = mutation.editable_lines(PROGRAM)
  lines = PROGRAM.splitlines()
  assert [lines[i - 1].strip().split()[0] for i in editable] == [
      "count", "label", "for", "if", "count", "elif", "continue", "top", "return"]
  assert mutation.editable_lines(PROGRAM, first_editable=9) == [n for n in editable if n >= 9]


def test_single_line_mutations_change_exactly_one_line_and_parse():
  muts = mutation.single_line_mutations(PROGRAM, mutation.editable_lines(PROGRAM))
  assert len(muts) > 40
  for m in muts:
    buggy = mutation.apply_mutations(PROGRAM, [m])
    ast.parse(buggy)
    diff = injection.bug_diff(PROGRAM, m)
    assert len(diff) == 1, (m, diff)
    assert m.start in mutation.editable_lines(PROGRAM)
  categories = {m.category for m in muts}
  assert categories == set(mutation.CATEGORIES)
  operators = {m.operator for m in muts}
  for op in ("boundary_shift", "comparison_swap", "boolean_flip", "negation_added",
             "negation_dropped", "arithmetic_swap", "constant_off_by_one", "wrong_constant",
             "wrong_variable", "index_shift", "slice_change", "range_bound", "argument_swap",
             "function_swap", "library_function_swap", "conversion_change", "line_deleted",
             "line_inserted", "loop_control_swap", "augassign_swap", "order_change"):
    assert op in operators, op


def test_rewrites_keep_the_rest_of_the_line_verbatim():
  muts = mutation.single_line_mutations(PROGRAM, mutation.editable_lines(PROGRAM))
  flips = [m.replacement[0] for m in muts if m.operator == "boolean_flip"]
  assert flips == ["        if nums[i] > k or i % 2 == 0:"]
  swaps = [m.replacement[0] for m in muts if m.operator == "function_swap" and m.start == 8]
  assert all('", "' in s for s in swaps)  # quotes kept, not re-rendered by ast.unparse


def test_multi_line_mutations_are_contiguous_blocks_of_two_to_four_lines():
  editable = mutation.editable_lines(PROGRAM)
  singles = mutation.single_line_mutations(PROGRAM, editable)
  blocks = mutation.multi_line_mutations(PROGRAM, editable, singles)
  assert {m.operator for m in blocks} >= {"statement_swap", "block_rewrite"}
  for m in blocks:
    assert 2 <= m.size <= 4
    assert set(range(m.start, m.end + 1)) <= set(editable)


ADD = '''def add_up(xs):
    total = 0
    unused = 1
    for x in xs:
        total += x
    return total
'''
TESTS = {"kind": "call", "entry_point": "add_up",
         "cases": [{"args": [[1, 2, 3]], "expected": 6}, {"args": [[]], "expected": 0}]}


def test_verify_keeps_failing_bugs_and_rejects_equivalent_ones():
  source = injection.Source("add", ADD, TESTS)
  dead = mutation.Mutation("constant_off_by_one", mutation.ASSIGNMENT, 3, 3, ("    unused = 2",))
  real = mutation.Mutation("constant_off_by_one", mutation.ASSIGNMENT, 2, 2, ("    total = 1",))
  stats = injection.Yield()
  kept = injection.verify([source], [[dead, real]], TrustedCallChecker(), stats=stats)
  assert kept == [[real]]
  assert stats.table()["operator"]["constant_off_by_one"] == {"attempted": 2, "kept": 1}


def test_multi_line_bug_must_be_atomic():
  source = injection.Source("add", ADD, TESTS)
  # Line 3's change is harmless, so reverting line 2 alone passes: not atomic.
  not_atomic = mutation.Mutation("block_rewrite", mutation.ASSIGNMENT, 2, 3,
                                 ("    total = 1", "    unused = 2"))
  # Each line alone breaks the sum, so no partial revert passes.
  atomic = mutation.Mutation("block_rewrite", mutation.ASSIGNMENT, 4, 5,
                             ("    for x in xs + [1]:", "        total += x - 1"))
  kept = injection.verify([source], [[not_atomic, atomic]], TrustedCallChecker())
  buggy = mutation.apply_mutations(ADD, [atomic])
  partial = injection.partial_reverts(buggy, injection.bug_diff(ADD, atomic))
  assert len(partial) == 2
  assert not any(TrustedCallChecker().passes([(p, TESTS) for p in partial]))
  assert kept == [[atomic]]


def test_compose_keeps_the_minimum_stride_and_round_trips():
  code = "\n".join(["def f(x):"] + [f"    x = x + {i}" for i in range(1, 13)] + ["    return x"])
  editable = mutation.editable_lines(code)
  bugs = [m for m in mutation.single_line_mutations(code, editable)
          if m.operator == "arithmetic_swap"]
  rng = random.Random(0)
  for k in (2, 3, 4):
    chosen = injection.compose(bugs, k, rng)
    assert chosen is not None and len(chosen) == k
    assert all(injection.gap(a, b) >= injection.SINGLE_STRIDE for a, b in zip(chosen, chosen[1:]))
    buggy, diff = injection.buggy_program(code, chosen)
    assert len(edits.parse_blocks(diff)) == k
    assert apply_gt_diff(buggy, diff) == code


def test_buggy_program_rejects_bugs_that_merge_into_one_block():
  code = "def f(x):\n    a = 1\n    b = 2\n    return a + b + x\n"
  one = mutation.Mutation("constant_off_by_one", mutation.ASSIGNMENT, 2, 2, ("    a = 2",))
  two = mutation.Mutation("constant_off_by_one", mutation.ASSIGNMENT, 3, 3, ("    b = 3",))
  with pytest.raises(ValueError, match="diff blocks"):
    injection.buggy_program(code, [one, two])
