"""Held jobs (docs/sandbox.md, "Held jobs"): assert jobs whose test code only reports the
program's return values for checks the pool holds run in one process, as call jobs do.

The pool requires each held check reported exactly once, in the order of the test code. Hostile
programs here write the harness's records themselves (they find its channel and nonce in their
own process) with the right answers but skipped, repeated, reordered or extra, or with answers
guessed: none passes. A control that forges the right answers in the right order passes: the
verdict certifies the values reported, as for a call job, and the failures come from the rule.
"""

from __future__ import annotations

import itertools
import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status
from precisecoder.execution.parent import expectations, verdicts
from precisecoder.execution.parent.pool import _message

LIMITS = Limits(timeout_s=20.0, memory_mb=1024)
HELD_ASSERT = {
  "kind": "assert",
  "code": textwrap.dedent("""
    METADATA = {'author': 'x'}
    def check(candidate):
      '''Adds.'''
      import math
      assert candidate(2, 3) == 5
      assert True, 'reached'
      assert abs(candidate(0.5, 0.25) - 0.75) < 1e-9
      assert candidate(40, 2) == 42
    check(add)
    """),
}
RIGHT = "def add(a, b):\n  return a + b\n"


def _order(code: str):
  return expectations.split({"kind": "assert", "code": textwrap.dedent(code)})[1].order


def test_held_order_of_plain_checks():
  assert _order(HELD_ASSERT["code"]) == (0, 1, 2)
  assert _order("assert f(1) == 2\nassert f(-(2 ** 3), key='a' + 'b') == [1]\n") == (0, 1)
  assert _order("def c(g):\n  assert g(1) == 1\nassert f(0) == 0\nc(f)\n") == (1, 0)


@pytest.mark.parametrize(
  "code",
  [
    "for x in range(3):\n  assert f(x) == 1\n",  # a loop: reported three times
    "if f(0):\n  assert f(1) == 1\n",  # a branch the program decides
    "try:\n  assert f(1) == 1\nexcept Exception:\n  pass\n",
    "assert f(1) == 1\nassert f(2) == f(3)\n",  # a check the pool does not hold
    "assert len(f(1)) == 3\n",  # the tests compute on what the program returned
    "assert isinstance(f(1), list)\n",
    "assert f(1)[0] == 2\n",
    "x = 2\nassert f(x) == 1\nx = 3\n",  # an argument the tests compute (a name)
    "assert f(g(1)) == 1\n",
    "def c(g):\n  assert g(1) == 1\nc(f)\nc(f)\n",  # each check exactly once
    "def c(g):\n  assert g(1) == 1\nc(lambda x: f(x) + 1)\n",  # the tests' own function
    "def c(g):\n  assert g(1) == 1\n  return\nc(f)\n",
    "def c(g, h=1):\n  assert g(1) == 1\nc(f)\n",
    "@staticmethod\ndef c(g):\n  assert g(1) == 1\nc(f)\n",
    "from os import *\nassert f(1) == 1\n",
    "assert f(1) == 1\nraise SystemExit(0)\n",
    "assert f(1) == 1\nassert False\n",
    "assert f(1) == 1\nprint(f(2))\n",
    "def f(x):\n  return x\nassert f(1) == 1\n",  # the tests' function, not the program's
    "print('no checks')\n",
  ],
)
def test_no_held_order_where_the_tests_could_decide(code):
  assert _order(code) is None


def test_pool_routes_held_jobs_to_one_process():
  held, expected = expectations.split(HELD_ASSERT)
  other, unheld = expectations.split({"kind": "assert", "code": "assert len(f(1)) == 3\n"})
  assert "held" in _message(0, RIGHT, held, {}, False, True, expected.order is not None)
  assert _message(0, RIGHT, other, {}, False, True, unheld.order is not None).get("split")
  assert "held" not in _message(0, RIGHT, held, {}, False, False, True)  # split runs off


NONCE = "n" * 32
HONEST_REPORTS = [(0, 5), (1, 0.75), (2, 42)]  # (check, value) of HELD_ASSERT's honest run


def _channel(*reports, expects=None):
  """The lines of a run that reported `reports` and then signed its end."""
  lines = ['{"ready": "x"}']
  lines += [f'{{"expect": {k}, "value": {v}, "nonce": "{NONCE}"}}' for k, v in reports]
  count = len(reports) if expects is None else expects
  return [*lines, f'{{"end": "assert", "expects": {count}, "nonce": "{NONCE}"}}']


def _verdict(expected, lines):
  run = {
    "channel": "\n".join(lines),
    "nonce": NONCE,
    "ready": True,
    "timeout": False,
    "overflow": None,
    "signal": None,
    "exit": 0,
    "stdout": "",
    "stderr": "",
    "duration_s": 0.0,
  }
  return verdicts.judge(expected, [run], LIMITS).status


def test_the_judge_requires_the_order():
  _, expected = expectations.split(HELD_ASSERT)

  def verdict(*reports, expects=None):
    return _verdict(expected, _channel(*reports, expects=expects))

  right = HONEST_REPORTS
  assert verdict(*right) is Status.PASS
  assert verdict(right[1], right[0], right[2]) is Status.FAIL  # reordered
  assert verdict(*right, right[2]) is Status.FAIL  # repeated
  assert verdict(right[0], right[2]) is Status.FAIL  # skipped
  assert verdict(*right[:2], expects=3) is Status.FAIL
  lines = f'{{"expect": 1, "value": 0.75, "nonce": "{NONCE}"}}\n'
  assert verdicts.RunningChecks(expected, NONCE).fail_now(lines)  # stopped at the first out of turn


def test_a_running_run_is_stopped_where_the_judge_fails_it_wherever_its_ticks_fall():
  """The worker passes a running run's lines on a few at each tick; where the ticks cut them
  changes nothing: the run is stopped once if the judge fails it on a check, never otherwise."""
  _, expected = expectations.split(HELD_ASSERT)
  right = HONEST_REPORTS
  runs = [right, [right[1], right[0], right[2]], [*right, right[2]], [right[0], right[2]]]
  runs.append([right[0], (1, 0.5), right[2]])  # a wrong value
  for reports in runs:
    lines = _channel(*reports)
    failed = _verdict(expected, lines) is Status.FAIL
    for first, second in itertools.combinations(range(len(lines) + 1), 2):
      ticks = [lines[:first], lines[first:second], lines[second:]]
      running = verdicts.RunningChecks(expected, NONCE)
      stops = [running.fail_now("".join(line + "\n" for line in tick)) for tick in ticks]
      assert sum(stops) == failed, (reports, first, second, stops)


# The harness's records, written by the program itself with the right answers: what a program
# that found the channel's fd and nonce (both in its own process) can do at most.
FORGE = textwrap.dedent("""
  import json, os, sys
  def forge(records):
    frame, channel = sys._getframe(), None
    while frame is not None and channel is None:
      channel = frame.f_locals.get('channel')
      frame = frame.f_back
    for record in records:
      os.write(3, (json.dumps(dict(record, nonce=channel._nonce)) + '\\n').encode())
    os._exit(0)
  """)
RIGHT_REPORTS = [
  {"expect": 0, "value": 5},
  {"expect": 1, "value": 0.75},
  {"expect": 2, "value": 42},
]


def _forger(reports, expects=None):
  end = {"end": "assert", "expects": len(reports) if expects is None else expects}
  return FORGE + f"forge({[*reports, end]!r})\n"


FORGERIES = [
  ("a check skipped", _forger([RIGHT_REPORTS[0], RIGHT_REPORTS[2]])),
  ("a check skipped, the count made up", _forger(RIGHT_REPORTS[:2], expects=3)),
  ("two checks reordered", _forger([RIGHT_REPORTS[1], RIGHT_REPORTS[0], RIGHT_REPORTS[2]])),
  ("a check repeated", _forger([*RIGHT_REPORTS, RIGHT_REPORTS[2]])),
  (
    "a check reported twice, wrong then right",
    _forger([{"expect": 0, "value": 4}, *RIGHT_REPORTS]),
  ),
  ("an extra check", _forger([*RIGHT_REPORTS, {"expect": 3, "value": 1}])),
  ("answers guessed", _forger([{"expect": k, "value": 1} for k in range(3)])),
  ("a truth reported for a value", _forger([{"expect": k, "truthy": True} for k in range(3)])),
  ("no report, only the end", _forger([])),
  (
    "a right answer, then the run ended by a forged end record",
    FORGE
    + "def add(a, b):\n  if (a, b) == (2, 3):\n    return 5\n"
    + "  forge([{'end': 'assert', 'expects': 1}])\n",
  ),
]


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


def test_held_jobs_pass_right_programs_and_fail_wrong_ones(pool):
  right, wrong, raises, control = pool.execute(
    [
      Job(RIGHT, HELD_ASSERT, LIMITS),
      Job("def add(a, b):\n  return a - b\n", HELD_ASSERT, LIMITS),
      Job("def add(a, b):\n  raise ValueError(a)\n", HELD_ASSERT, LIMITS),
      Job(_forger(RIGHT_REPORTS), HELD_ASSERT, LIMITS),
    ]
  )
  assert right.passed, right
  assert wrong.status is Status.FAIL and "assert #0 failed" in wrong.detail, wrong
  assert raises.status is Status.FAIL and "ValueError" in raises.detail, raises
  # The forging works: with the right answers in the right order it passes, as a program that
  # returns them does. What it cannot do is pass without them.
  assert control.passed, control


def test_forged_reports_out_of_order_or_count_never_pass(pool):
  results = pool.execute([Job(program, HELD_ASSERT, LIMITS) for _, program in FORGERIES])
  forged = [f"{name}: {r.detail}" for (name, _), r in zip(FORGERIES, results) if r.passed]
  assert not forged, "\n".join(forged)
  assert all(r.status is Status.FAIL for r in results), results
