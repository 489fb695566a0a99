"""Mutation operators (data/mutation.py): editable lines, single- and multi-line mutations.
Verified injection of them (PDB's rules): test_injection.py."""

import ast

from precisecoder.data import injection, mutation

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
    "count",
    "label",
    "for",
    "if",
    "count",
    "elif",
    "continue",
    "top",
    "return",
  ]
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
  for op in (
    "boundary_shift",
    "comparison_swap",
    "boolean_flip",
    "negation_added",
    "negation_dropped",
    "arithmetic_swap",
    "constant_off_by_one",
    "wrong_constant",
    "wrong_variable",
    "index_shift",
    "slice_change",
    "range_bound",
    "argument_swap",
    "function_swap",
    "library_function_swap",
    "conversion_change",
    "line_deleted",
    "line_inserted",
    "loop_control_swap",
    "augassign_swap",
    "order_change",
  ):
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
