"""Task parsing, writing and gt_diff round trips."""

import json

import pytest

from precisecoder import tasks

BUGGY = "def add(a, b):\n    s = a - b\n    return s\n"
FIXED = "def add(a, b):\n    s = a + b\n    return s\n"
TESTS = {"kind": "assert", "code": "assert add(2, 3) == 5"}


def _record(**overrides):
  record = {
    "task_id": "add_0",
    "prompt": "Add two numbers.",
    "buggy_code": BUGGY,
    "gt_solution": FIXED,
    "tests": TESTS,
    "timeout_s": 3,
    "is_buggy": True,
    "bug_count": 1,
    "source_dataset": "toy",
  }
  record.update(overrides)
  return record


def test_contract_record_derives_gt_diff_and_keeps_extras():
  task = tasks.parse_task(_record(difficulty="easy"), "t.jsonl:1")
  assert task.gt_diff == {
    "2": {"type": "Modify", "original": "    s = a - b", "modified": "    s = a + b"}
  }
  assert task.timeout_s == 3.0 and task.bug_count == 1 and task.extra == {"difficulty": "easy"}
  assert tasks.task_to_record(task)["difficulty"] == "easy"


def test_raw_pdb_record_literal_strings():
  gt_diff = "{'2': {'type': 'Modify', 'original': '    s = a - b', 'modified': '    s = a + b'}}"
  raw = {
    "task_id": "'add_0'",
    "task_prompt": "'Add two numbers.'",
    "buggy_code": repr(BUGGY),
    "gt_solution": repr(FIXED),
    "gt_diff": gt_diff,
    "bug_count": "1",
    "is_buggy": "True",
    "gt_length": "3",
    "source_model": "'gpt'",
  }
  task = tasks.parse_task(raw, "pdb.json[0]", tests_for=lambda tid, rec: TESTS)
  assert task.task_id == "add_0" and task.prompt == "Add two numbers."
  assert task.buggy_code == BUGGY and task.bug_count == 1 and task.is_buggy is True
  assert task.extra == {"gt_length": 3, "source_model": "gpt"}
  assert task.tests == TESTS


def test_gt_diff_as_json_string_and_disagreement():
  good = json.dumps(tasks.derive_gt_diff(BUGGY, FIXED))
  assert tasks.parse_task(_record(gt_diff=good), "t:1").gt_diff["2"]["type"] == "Modify"
  wrong = {"2": {"type": "Modify", "original": "    s = a - b", "modified": "    s = a * b"}}
  with pytest.raises(tasks.TaskError, match=r"t\.jsonl:4 \(add_0\): field 'gt_diff' disagrees"):
    tasks.parse_task(_record(gt_diff=wrong), "t.jsonl:4")


@pytest.mark.parametrize(
  "overrides, message",
  [
    ({"buggy_code": 3}, "field 'buggy_code' must be a string"),
    ({"tests": {"kind": "nope"}}, "field 'tests'.kind"),
    (
      {"tests": {"kind": "call", "entry_point": "add", "cases": [{"args": [1]}]}},
      r"cases\[0\]: missing 'expected'",
    ),
    ({"is_buggy": "maybe"}, "field 'is_buggy' must be a boolean"),
    ({"bug_count": -1}, "field 'bug_count' must not be negative"),
    ({"gt_diff": {"x": {"type": "Modify", "original": "", "modified": ""}}}, "bad line key"),
    ({"gt_diff": {"2": {"type": "Swap", "original": "", "modified": ""}}}, "type: 'Swap'"),
    ({"gt_solution": BUGGY}, "do not differ"),
    ({"is_buggy": False}, "gt_diff is not empty"),
  ],
)
def test_bad_fields_are_named(overrides, message):
  with pytest.raises(tasks.TaskError, match=message):
    tasks.parse_task(_record(**overrides), "f.jsonl:7")


def test_missing_tests_named_unless_allowed():
  record = _record()
  del record["tests"]
  with pytest.raises(tasks.TaskError, match="missing field 'tests'"):
    tasks.parse_task(record, "f:1")
  assert tasks.parse_task(record, "f:1", require_tests=False).tests == {}


def test_clean_task():
  task = tasks.parse_task(_record(buggy_code=FIXED, is_buggy=False, bug_count=0), "f:1")
  assert task.gt_diff == {} and not task.is_buggy


def test_load_write_round_trip_and_errors(tmp_path):
  task = tasks.parse_task(_record(extra_field=[1, 2]), "x")
  path = tmp_path / "out" / "tasks.jsonl"
  assert tasks.write_tasks(path, [task]) == 1
  assert tasks.load_tasks(path) == [task]
  bad = tmp_path / "bad.jsonl"
  bad.write_text(json.dumps(_record()) + "\n\n{not json\n")
  with pytest.raises(tasks.TaskError, match=r"bad\.jsonl:3: invalid JSON"):
    tasks.load_tasks(bad)
  dup = tmp_path / "dup.jsonl"
  dup.write_text((json.dumps(_record()) + "\n") * 2)
  with pytest.raises(tasks.TaskError, match=r"dup\.jsonl:2: duplicate task_id 'add_0'"):
    tasks.load_tasks(dup)
  with pytest.raises(tasks.TaskError, match="cannot read"):
    tasks.load_tasks(tmp_path / "missing.jsonl")


def test_json_array_file(tmp_path):
  path = tmp_path / "arr.json"
  path.write_text(json.dumps([_record(), _record(task_id="add_1")]))
  assert [t.task_id for t in tasks.load_tasks(path)] == ["add_0", "add_1"]


def test_several_adds_before_one_line_round_trip():
  buggy = "def f(x):\n    return x\n"
  fixed = "def f(x):\n    x += 1\n    x *= 2\n    return x\n"
  diff = tasks.derive_gt_diff(buggy, fixed)
  assert list(diff) == ["2", "2 "]
  assert [e["modified"] for e in diff.values()] == ["    x += 1", "    x *= 2"]
  assert tasks.apply_gt_diff(buggy, diff) == fixed.rstrip("\n")
