"""Verified bug injection (data/injection.py, PDB's rules): a kept bug fails the tests, a
multi-line bug is atomic (no partial revert passes), composed bugs keep their stride and round
trip through their diff. The mutation operators themselves: test_mutation.py."""

import random

import pytest

from precisecoder import edits
from precisecoder.data import injection, mutation
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import apply_gt_diff


ADD = """def add_up(xs):
    total = 0
    unused = 1
    for x in xs:
        total += x
    return total
"""


TESTS = {
  "kind": "call",
  "entry_point": "add_up",
  "cases": [{"args": [[1, 2, 3]], "expected": 6}, {"args": [[]], "expected": 0}],
}


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
  not_atomic = mutation.Mutation(
    "block_rewrite", mutation.ASSIGNMENT, 2, 3, ("    total = 1", "    unused = 2")
  )
  # Each line alone breaks the sum, so no partial revert passes.
  atomic = mutation.Mutation(
    "block_rewrite", mutation.ASSIGNMENT, 4, 5, ("    for x in xs + [1]:", "        total += x - 1")
  )
  kept = injection.verify([source], [[not_atomic, atomic]], TrustedCallChecker())
  buggy = mutation.apply_mutations(ADD, [atomic])
  partial = injection.partial_reverts(buggy, injection.bug_diff(ADD, atomic))
  assert len(partial) == 2
  assert not any(TrustedCallChecker().passes([(p, TESTS) for p in partial]))
  assert kept == [[atomic]]


def test_compose_keeps_the_minimum_stride_and_round_trips():
  code = "\n".join(["def f(x):"] + [f"    x = x + {i}" for i in range(1, 13)] + ["    return x"])
  editable = mutation.editable_lines(code)
  bugs = [
    m for m in mutation.single_line_mutations(code, editable) if m.operator == "arithmetic_swap"
  ]
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
