"""Rewrites keep behaviour: every kept rewrite passes the program's tests when run by a plain
interpreter here, leaves the lines the fix touched alone, and a candidate that changes
behaviour (string `a + b` -> `b + a`) is refused."""

import random

from precisecoder.data import rewrites

FIXED = """def total_len(words):
    total = 0
    for w in words:
        total += len(w)
    if total > 10:
        return total * 2
    return total
"""
BUGGY = FIXED.replace("total > 10", "total >= 10")
TESTS = {
  "kind": "call",
  "entry_point": "total_len",
  "cases": [
    {"args": [["ab", "c"]], "expected": 3},
    {"args": [["abcdef", "ghijk"]], "expected": 22},
    {"args": [["abcde", "fghij"]], "expected": 10},
    {"args": [[]], "expected": 0},
  ],
}


def _passes(program: str, tests) -> bool:
  scope: dict = {}
  exec(program, scope)  # pylint: disable=exec-used  # our own test programs
  return all(scope[tests["entry_point"]](*c["args"]) == c["expected"] for c in tests["cases"])


def test_rewrites_at_rate_one_edit_untouched_lines_and_keep_the_tests_passing():
  program, applied = rewrites.rewrite(FIXED, TESTS, random.Random(0), rate=1.0, avoid_like=BUGGY)
  assert applied and program != FIXED
  assert _passes(program, TESTS)
  # The fixed line is the one the reference changed: no rewrite may touch it.
  assert any(line.strip() == "if total > 10:" for line in program.splitlines())
  assert "total = total + len(w)" in program  # the habit's first style: reformat


def test_rate_zero_changes_nothing_and_the_same_seed_gives_the_same_program():
  assert rewrites.rewrite(FIXED, TESTS, random.Random(0), rate=0.0) == (FIXED, [])
  a = rewrites.rewrite(FIXED, TESTS, random.Random(3), rate=0.5, rename_rate=1.0)
  b = rewrites.rewrite(FIXED, TESTS, random.Random(3), rate=0.5, rename_rate=1.0)
  assert a == b and _passes(a[0], TESTS)


def test_a_candidate_that_changes_behaviour_is_refused():
  code = "def join(a, b):\n    return a + b\n"
  tests = {"kind": "call", "entry_point": "join", "cases": [{"args": ["x", "y"], "expected": "xy"}]}
  assert any("b + a" in new for _, _, new in rewrites.candidates(code, random.Random(0)))
  program, _ = rewrites.rewrite(code, tests, random.Random(0), rate=1.0)
  assert "b + a" not in program and _passes(program, tests)
