"""The code around the program in the child: values reported with their exact types, and whole
runs of each test kind outside the sandbox, judged by the pool's verdicts (inside the sandbox:
test_pool.py; against attacks: test_harness_redteam.py; on an honest corpus:
test_harness_fidelity.py)."""

import collections
import decimal
import fractions
import json
import subprocess
import sys

import pytest

from precisecoder.execution.parent import expectations, verdicts
from precisecoder.execution.worker_side import harness
from precisecoder.execution.worker_side.harness import PlainDataError
from precisecoder.execution.shared.types import Limits, Status

NONCE = "n" * 32
# Runs the harness in a fresh interpreter, as a forked child would (`worker.py`), minus the
# sandbox: its channel goes to the file named in argv[2].
CHILD = (
  "import json, os, sys\n"
  "from precisecoder.execution.worker_side import harness\n"
  "job = json.loads(sys.argv[1])\n"
  "fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
  "harness.warm(job)\n"
  "harness.execute(fd, sys.argv[3], job)\n"
)


@pytest.mark.parametrize(
  "value",
  [
    [1, (2, 3)],
    (1,),
    {1, 2},
    frozenset({"a"}),
    {"k": [1.5, None]},
    {(1, 2): b"\x00"},
    2 + 3j,
    fractions.Fraction(1, 3),
    decimal.Decimal("1.10"),
    float("inf"),
    -0.0,
    True,
    {"a": 1}.keys(),
    collections.UserList([1, 2]),
  ],
)
def test_reported_values_come_back_with_their_exact_types(value):
  decoded = verdicts.decode_tagged(json.loads(json.dumps(harness.to_tagged(value))))
  assert repr(decoded) == repr(value if type(value) is not collections.UserList else [1, 2])
  if type(value) is not collections.UserList:
    assert type(decoded) is type(value)


def test_to_plain_keeps_json_data_and_refuses_objects():
  class Count(int):
    pass

  assert harness.to_plain({"a": [1, (2, Count(3))]}) == {"a": [1, [2, 3]]}
  assert type(harness.to_plain(Count(3))) is int
  with pytest.raises(PlainDataError):
    harness.to_plain({1, 2})
  with pytest.raises(PlainDataError):
    harness.to_plain({(1, 2): 3})
  with pytest.raises(PlainDataError):
    harness.to_plain(object())


def _run(tmp_path, program, tests, split=True):
  """The verdict on `program` run by the harness against `tests` (split as the pool splits;
  assert and unittest jobs run split, as the pool sends them, unless `split` is False)."""
  child_tests, expected = expectations.split(tests)
  job = {"id": 0, "program": program, "tests": child_tests, "limits": {}, "split": split}
  channel = tmp_path / "channel"
  done = subprocess.run(
    [sys.executable, "-c", CHILD, json.dumps(job), str(channel), NONCE],
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  run = {
    "ready": True,
    "exit": done.returncode,
    "signal": None,
    "timeout": False,
    "overflow": None,
    "stdout": done.stdout,
    "stderr": done.stderr,
    "channel": channel.read_text(),
    "nonce": NONCE,
    "duration_s": 0.0,
  }
  return verdicts.judge(expected, [run], Limits(timeout_s=60.0))


ADD = "def add(a, b):\n  return a + b\n"
WRONG = "def add(a, b):\n  return a - b\n"
TESTS = {
  "call": {
    "kind": "call",
    "entry_point": "add",
    "cases": [{"args": [2, 3], "expected": 5}, {"args": [0, 0], "expected": 0}],
  },
  "assert": {"kind": "assert", "code": "assert add(2, 3) == 5\nassert add(0, 0) == 0\n"},
  "unittest": {
    "kind": "unittest",
    "code": (
      "import unittest\nclass T(unittest.TestCase):\n  def test_add(self):\n"
      "    self.assertEqual(add(2, 3), 5)\n"
    ),
  },
}


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("kind", sorted(TESTS))
def test_a_run_of_each_kind_reports_what_the_pool_judges(tmp_path, kind, split):
  assert _run(tmp_path, ADD, TESTS[kind], split).status is Status.PASS
  wrong = _run(tmp_path, WRONG, TESTS[kind], split)
  assert wrong.status is Status.FAIL, wrong


def test_an_object_that_equals_anything_is_not_a_pass(tmp_path):
  forged = (
    "class Any:\n  def __eq__(self, other):\n    return True\ndef add(a, b):\n  return Any()\n"
  )
  result = _run(tmp_path, forged, TESTS["assert"])
  assert result.status is Status.FAIL, result
