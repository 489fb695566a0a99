"""One test-spec validator: what task loading accepts the pool runs; what it rejects is rejected
by both, naming the same field."""

import re

import pytest

from precisecoder import tasks
from precisecoder.execution import ExecutionPool, Job, Limits, Status
from precisecoder.execution.parent import expectations, specs

ADD = "def add(a, b):\n  return a + b\n"
IO_ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
PRINT = "print('hi')\n"
ACCEPTED = [
  (
    ADD,
    {
      "kind": "call",
      "entry_point": "add",
      "cases": [{"args": [1, 2], "expected": 3}, {"kwargs": {"a": 1, "b": 1}, "expected": 2}],
    },
  ),
  (ADD, {"kind": "assert", "code": "assert add(1, 2) == 3\n"}),
  (
    ADD,
    {
      "kind": "unittest",
      "code": "import unittest\nclass T(unittest.TestCase):\n"
      "  def test_add(self):\n"
      "    self.assertEqual(add(1, 2), 3)\n",
    },
  ),
  (IO_ADD, {"kind": "io", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}]}),
  (PRINT, {"kind": "io", "cases": [{"stdin": "", "stdout": "hi"}]}),
]
REJECTED = [
  ([], "field 'tests'"),
  ({"kind": "fuzz"}, "field 'tests'.kind"),
  ({"kind": "assert", "code": "  \n"}, "field 'tests'.code"),
  ({"kind": "unittest", "code": "x = 1\n"}, "field 'tests'.code: the unittest code defines no"),
  ({"kind": "unittest", "code": "class T(:\n"}, "field 'tests'.code: unittest code line 1"),
  ({"kind": "call", "entry_point": "", "cases": [{"expected": 1}]}, "field 'tests'.entry_point"),
  ({"kind": "call", "entry_point": "add", "cases": []}, "field 'tests'.cases"),
  ({"kind": "call", "entry_point": "add", "cases": [3]}, "field 'tests'.cases[0]: must be an"),
  (
    {"kind": "call", "entry_point": "add", "cases": [{"args": [1]}]},
    "field 'tests'.cases[0]: missing 'expected'",
  ),
  (
    {"kind": "call", "entry_point": "add", "cases": [{"args": 1, "expected": 1}]},
    "field 'tests'.cases[0].args",
  ),
  (
    {"kind": "call", "entry_point": "add", "cases": [{"kwargs": [], "expected": 1}]},
    "field 'tests'.cases[0].kwargs",
  ),
  (
    {"kind": "call", "entry_point": "add", "cases": [{"args": [], "expected": {1}}]},
    "field 'tests'.cases[0].expected: not JSON data",
  ),
  # The two checks used to disagree here: the pool ran an io case without stdin.
  ({"kind": "io", "cases": [{"stdout": "hi"}]}, "field 'tests'.cases[0]: missing 'stdin'"),
  ({"kind": "io", "cases": [{"stdin": "", "stdout": 3}]}, "field 'tests'.cases[0].stdout"),
  ({"kind": "io", "cases": []}, "field 'tests'.cases"),
]


def _record(tests):
  return {"task_id": "t_0", "buggy_code": "x = 1\n", "gt_solution": "x = 2\n", "tests": tests}


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


def test_what_task_loading_accepts_the_pool_runs(pool):
  loaded = [tasks.parse_task(_record(tests), "f.jsonl:1").tests for _, tests in ACCEPTED]
  results = pool.execute(
    [Job(program, tests, Limits(timeout_s=5)) for (program, _), tests in zip(ACCEPTED, loaded)]
  )
  assert [r.status for r in results] == [Status.PASS] * len(ACCEPTED), results


@pytest.mark.parametrize("tests, message", REJECTED)
def test_what_one_rejects_every_layer_rejects_naming_the_field(pool, tests, message):
  with pytest.raises(specs.InvalidTests, match=re.escape(message)):
    specs.validate(tests)
  with pytest.raises(specs.InvalidTests, match=re.escape(message)):
    expectations.split(tests)
  with pytest.raises(tasks.TaskError, match=re.escape(f"f.jsonl:1 (t_0): {message}")):
    tasks.parse_task(_record(tests), "f.jsonl:1")
  result = pool.execute([Job(ADD, tests, Limits(timeout_s=5))])[0]
  assert result.status is Status.INFRA_ERROR and message in result.detail


UNITTEST = (
  "import unittest\n"
  "class Base(unittest.TestCase):\n"
  "  def setUp(self):\n    self.pair = (2, 3)\n"
  "  def test_pair(self):\n    self.assertEqual(add(*self.pair), 5)\n"
  "class More(Base):\n"
  "  def test_negative(self):\n    self.assertEqual(add(-1, 1), 0)\n"
)


def test_unittest_names_come_from_the_ast():
  classes, names = specs.test_names(UNITTEST)
  assert classes == ["Base", "More"]
  assert names == ["Base.test_pair", "More.test_negative", "More.test_pair"]
