"""Test feedback: which tests are visible, what the message says, and that nothing of a hidden
test reaches it (the programs run in the real pool)."""

import json

import pytest

from precisecoder import feedback as feedback_lib
from precisecoder.execution import ExecutionPool
from precisecoder.feedback import Visibility, feedback, feedback_many, visible_tests
from precisecoder.rewards import RewardScorer
from precisecoder.tasks import Task

SECRET = "HIDDEN-7731"  # only ever in hidden tests


def _task(
  tests, buggy="def f(x):\n    return x\n", fixed="def f(x):\n    return x + 1\n", timeout_s=6.0
):
  return Task(
    task_id="t", buggy_code=buggy, gt_solution=fixed, gt_diff={}, tests=tests, timeout_s=timeout_s
  )


CALL = _task(
  {
    "kind": "call",
    "entry_point": "f",
    "cases": [
      {"args": [1], "expected": 2},
      {"args": [5], "expected": 6},
      {"args": [0], "expected": 1},
      {"args": [SECRET], "expected": SECRET + "1"},
      {"args": [7], "expected": SECRET},
    ],
  }
)
IO = _task(
  {
    "kind": "io",
    "cases": [{"stdin": "1\n", "stdout": "2\n"}, {"stdin": SECRET + "\n", "stdout": SECRET + "\n"}],
  },
  buggy="print(int(input()))\n",
  fixed="print(int(input()) + 1)\n",
)
ASSERT = _task(
  {
    "kind": "assert",
    "code": (
      "def check(candidate):\n"
      "    assert candidate(1) == 2\n"
      f"    assert candidate(2) == 3, '{SECRET}'\n"
      "    assert candidate(3) == \\\n"
      "        4\n"
      f"    for x in range(3):\n        assert candidate(x) == x + 1, '{SECRET}'\n"
      "check(f)\n"
    ),
  }
)
UNITTEST = _task(
  {
    "kind": "unittest",
    "code": (
      "import unittest\n"
      "class TestF(unittest.TestCase):\n"
      "    def test_one(self):\n        self.assertEqual(f(1), 2)\n"
      "    def test_two(self):\n"
      f"        self.assertEqual(f(2), 3, '{SECRET}')\n"
      "    @unittest.skipIf(False, 'never')\n"
      "    def test_three(self):\n        raise ValueError('boom')\n"
      "    def test_four(self):\n"
      f"        self.assertEqual(f(4), '{SECRET}')\n"
    ),
  }
)


@pytest.fixture(scope="module", name="pool")
def _pool():
  with ExecutionPool(workers=2) as pool:
    yield pool


def test_visibility_counts():
  v = Visibility(count=3, fraction=0.5)
  assert [v.visible(n) for n in (1, 2, 5, 8, 20)] == [1, 1, 2, 3, 3]
  with pytest.raises(ValueError):
    Visibility(count=0)


def test_which_tests_are_visible_and_that_their_specs_hold_nothing_hidden():
  shown, hidden = visible_tests(CALL)
  assert [t.name for t in shown] == ["f(1)", "f(5)"] and hidden == 3  # the first cases
  assert [t.expected for t in shown] == ["2", "6"]
  assert all(len(t.tests["cases"]) == 1 for t in shown)
  shown, hidden = visible_tests(IO)
  assert [(t.name, t.stdin) for t in shown] == [("input #1", "1\n")] and hidden == 1
  # Asserts spread over the code (4 of them: 0 and 2 visible); the others become `pass` on
  # as many lines, so line numbers in error messages are the original code's.
  shown, hidden = visible_tests(ASSERT)
  assert [t.name for t in shown] == ["assert candidate(1) == 2", "assert candidate(3) == 4"]
  assert hidden == 2
  for test in shown:
    code = test.tests["code"]
    assert code.count("\n") == ASSERT.tests["code"].count("\n")
    assert SECRET not in code and code.count("assert") == 1
  assert shown[1].tests["code"].splitlines()[3] == "    assert candidate(3) == \\"
  shown, hidden = visible_tests(UNITTEST)
  assert [t.name for t in shown] == ["TestF.test_one", "TestF.test_three"] and hidden == 2
  assert all(SECRET not in json.dumps(t.tests) for t in shown)
  for everything in (CALL, IO, ASSERT, UNITTEST):
    assert len(visible_tests(everything, Visibility(count=99, fraction=1.0))[0]) >= 2


def test_messages_name_the_test_expected_and_got(pool):
  outcome, message = feedback(pool, CALL, CALL.buggy_code)
  assert (outcome.visible, outcome.hidden, outcome.failed, outcome.passed) == (2, 3, 2, False)
  assert message.startswith("Your program failed 2 of 2 visible tests.")
  assert "Test 1: f(1)\n  expected: 2\n  got: 1" in message
  assert "Test 2: f(5)\n  expected: 6\n  got: 5" in message
  _, message = feedback(pool, IO, IO.buggy_code)
  assert "Test 1: input #1\n  stdin: 1\n  expected: 2\n  got: 1" in message
  _, message = feedback(pool, ASSERT, ASSERT.buggy_code)
  assert "Test 1: assert candidate(1) == 2\n  error: got 1, expected == 2" in message
  outcome, message = feedback(pool, UNITTEST, UNITTEST.buggy_code)
  assert outcome.failed == 2
  assert "Test 1: TestF.test_one\n  error: got 1, expected == 2" in message
  assert "Test 2: TestF.test_three\n  error: ValueError: boom" in message
  assert "<tests>" not in message  # lines of test code the agent never saw are left out
  for task in (CALL, IO, ASSERT, UNITTEST):
    assert SECRET not in feedback(pool, task, task.buggy_code)[1]


def test_errors_timeouts_compile_errors_passes_and_no_program(pool):
  raising = "def f(x):\n    return x / 0\n"
  _, message = feedback(pool, CALL, raising)
  assert "  error: ZeroDivisionError: division by zero (<program>:2)" in message
  slow = _task(CALL.tests, timeout_s=0.5)
  outcome, message = feedback(pool, slow, "def f(x):\n    while True:\n        pass\n")
  assert [f.error for f in outcome.failures] == ["timed out"] * 2 and "error: timed out" in message
  outcome, message = feedback(pool, CALL, "def f(x:\n")
  assert outcome.compile_error.startswith("syntax error at line 1")
  assert message.startswith("Your program does not compile: syntax error at line 1")
  assert "Test 1" not in message
  assert feedback(pool, CALL, CALL.gt_solution) == (feedback_lib.Outcome(2, 3), "")
  outcome, message = feedback(pool, CALL, "  \n")
  assert outcome.no_program and not outcome.passed and message == ""
  # A scorer stands in for its pool (its limits and deadline).
  assert (
    feedback(RewardScorer(pool), CALL, CALL.buggy_code)[1]
    == feedback(pool, CALL, CALL.buggy_code)[1]
  )


def test_long_values_are_cut_in_the_middle_and_the_message_is_bounded(pool):
  program = "def f(x):\n    return 'a' * 5000 + 'TAIL'\n"
  results = feedback_many(pool, [CALL, CALL], [program, program], max_chars=1000)
  assert results[0] == results[1]  # deterministic
  outcome, message = results[0]
  got = outcome.failures[0].got
  assert got.startswith('"aaa') and got.endswith('aTAIL"') and "characters cut" in got
  assert len(message) <= 1000 and message.endswith("original buggy code.")
  assert feedback_lib.cut_middle("x" * 10, 20) == "x" * 10
  assert len(feedback_lib.cut_middle("y" * 500, 100)) <= 100
