"""Full verification of a task set (data/verification.py), called directly on hand-built tasks:
a two-bug task passes every check (gold passes, buggy fails, each bug alone fails), and a
harmless bug, a wrong gt_diff and a wrong bug count are each named. Whole task sets verified
in the pool: test_repository.py, test_humaneval.py."""

import dataclasses

from precisecoder import edits
from precisecoder.data import verification
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import Task

GOLD = "def f(x):\n    a = x + 1\n    p = 0\n    q = 0\n    r = 0\n    b = a * 2\n    return b\n"
TESTS = {"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 4}]}


def _task(task_id, buggy, bug_count=2, **fields):
  return Task(
    task_id=task_id,
    buggy_code=buggy,
    gt_solution=GOLD,
    gt_diff=edits.line_diff(buggy, GOLD),
    tests=TESTS,
    bug_count=bug_count,
    **fields,
  )


def test_two_necessary_bugs_verify_and_each_broken_promise_is_named():
  good = _task("good", GOLD.replace("x + 1", "x + 2").replace("a * 2", "a * 3"))
  harmless = _task("harmless", GOLD.replace("x + 1", "x + 2").replace("a * 2", "a * 2 + 0"))
  miscounted = _task("miscounted", GOLD.replace("x + 1", "x + 2"))
  wrong_diff = dataclasses.replace(  # a diff that fixes another line than the bug's
    _task("wrong_diff", GOLD.replace("x + 1", "x - 1"), bug_count=1),
    gt_diff=edits.line_diff(GOLD.replace("p = 0", "p = 1"), GOLD),
  )
  clean = _task("clean", GOLD, bug_count=0, is_buggy=False)
  assert [w for w, _, _ in verification.runs_for(good)] == [
    "gold passes",
    "buggy fails",
    "bug 1 alone fails",
    "bug 2 alone fails",
  ]
  report = verification.verify_tasks([good], TrustedCallChecker(), batch_size=3)
  assert report.ok and report.summary() == {"tasks": 1, "checks": 4, "failures": 0}
  report = verification.verify_tasks(
    [harmless, miscounted, wrong_diff, clean], TrustedCallChecker()
  )
  assert report.failures == [
    "miscounted: bug_count 2 but 1 diff blocks",
    "wrong_diff: gt_diff does not turn buggy_code into gt_solution",
    "harmless: expected 'bug 2 alone fails'",
  ]
