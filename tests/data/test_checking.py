"""The checkers that run programs against their tests (data/checking.py), called directly: the
in-process checker of our own programs (the contract's JSON comparison, `Solution().method`,
its line and CPU budgets, errors as failures) and the pool checker (sandboxed verdicts, and the
modules a run lacked, for advice)."""

import pytest

from precisecoder.data.checking import PoolChecker, TrustedCallChecker
from precisecoder.execution import ExecutionPool

PAIR = {"kind": "call", "entry_point": "pair", "cases": [{"args": [[1]], "expected": [1, [1]]}]}


def test_trusted_checker_follows_the_call_contract():
  checker = TrustedCallChecker(max_lines=10_000)
  # A tuple result equals a list after the JSON round trip; the argument is a copy, so the
  # program's in-place append does not change the expected value it is compared with.
  mutating = "def pair(xs):\n    xs.append(2)\n    return (1, xs[:1])\n"
  assert checker.passes_one(mutating, PAIR)
  assert not checker.passes_one(
    "def pair(xs):\n    return (1, xs)\n",
    {**PAIR, "cases": [{"args": [[1]], "expected": [1, [1]]}, {"args": [[2]], "expected": [1]}]},
  )
  method = {
    "kind": "call",
    "entry_point": "Solution().twice",
    "cases": [{"args": [3], "expected": 6}, {"kwargs": {"n": 0}, "expected": 0}],
  }
  assert checker.passes_one(
    "class Solution:\n    def twice(self, n):\n        return 2 * n\n", method
  )
  loops = (
    "def pair(xs):\n    while True:\n        try:\n            pass\n"
    "        except Exception:\n            pass\n"
  )
  broken = "def pair(xs):\n    return xs[5]\n"
  assert checker.passes([(loops, PAIR), (broken, PAIR), ("def pair(:", PAIR)]) == [False] * 3
  with pytest.raises(ValueError, match="runs only 'call' tests, got 'io'"):
    checker.passes_one("print(1)", {"kind": "io", "cases": []})


def test_trusted_checker_stops_a_program_whose_lines_get_ever_slower():
  # Few lines, each squaring ever longer numbers: the line budget alone would wait for ever.
  squares = "def pair(xs):\n    for x in xs:\n        xs.append(x * x)\n    return (1, xs)\n"
  squares_of_two = {**PAIR, "cases": [{"args": [[2]], "expected": [1, [2]]}]}
  assert not TrustedCallChecker(max_cpu_s=0.2).passes_one(squares, squares_of_two)


def test_pool_checker_gives_verdicts_and_the_modules_a_run_lacked():
  missing = "import no_such_module_here.sub\n\ndef pair(xs):\n    return [1, xs]\n"
  with ExecutionPool(workers=1) as pool:
    checker = PoolChecker(pool, timeout_s=10.0)
    assert checker.passes(
      [("def pair(xs):\n    return [1, xs]\n", PAIR), (missing, PAIR)],
      task_sets=["mine", "bigcodebench"],
    ) == [True, False]
  assert checker.missing_modules == [("bigcodebench", "no_such_module_here")]
