"""References verified, not assumed: `score` runs each task's reference fix and buggy program.

A task whose reference fails, or whose buggy program passes, is an error on
each of its rows, named in the summary, and `score` exits 1. A sound task
whose reference returns objects of the tests' own class (the issue's case)
is verified in the real sandbox and credited.
"""

import json

import pytest

from precisecoder import cli, tasks

NODE_TESTS = {
  "kind": "assert",
  "code": (
    "class Node:\n"
    "  def __init__(self, val, next=None):\n    self.val, self.next = val, next\n"
    "def values(node):\n  out = []\n  while node:\n    out.append(node.val)\n    node = node.next\n"
    "  return out\n"
    "head = Node(1, Node(2, Node(3)))\n"
    "assert values(reverse(head)) == [3, 2, 1]\n"
  ),
}
FIXED = (
  "def reverse(head):\n    prev = None\n    while head:\n"
  "        head.next, prev, head = prev, head, head.next\n    return prev\n"
)
BUGGY = FIXED.replace("return prev", "return head")


def _task(task_id, tests, buggy=BUGGY, fixed=FIXED):
  return tasks.parse_task(
    {"task_id": task_id, "buggy_code": buggy, "gt_solution": fixed, "tests": tests}, "test"
  )


@pytest.fixture(name="paths")
def _paths(tmp_path):
  sound = _task("sound", NODE_TESTS)
  failing_reference = _task(
    "gold fails",
    {"kind": "call", "entry_point": "reverse", "cases": [{"args": [None], "expected": 1}]},
  )
  blind = _task("blind tests", {"kind": "assert", "code": "assert callable(reverse)\n"})
  task_path = tmp_path / "tasks.jsonl"
  tasks.write_tasks(task_path, [sound, failing_reference, blind])
  preds = [
    {"task_id": t, "program": FIXED, "sample": s}
    for t in ("sound", "gold fails", "blind tests")
    for s in (0, 1)
  ]
  pred_path = tmp_path / "preds.jsonl"
  pred_path.write_text("".join(json.dumps(p) + "\n" for p in preds))
  return task_path, pred_path, tmp_path / "scores.jsonl"


def test_broken_tasks_are_named_and_exit_1(paths, capsys):
  task_path, pred_path, out_path = paths
  rc = cli.main(
    [
      "score",
      "--tasks",
      str(task_path),
      "--predictions",
      str(pred_path),
      "--output",
      str(out_path),
      "--workers",
      "2",
      "--json",
    ]
  )
  captured = capsys.readouterr()
  assert rc == 1, captured.err
  summary = json.loads(captured.out)
  assert sorted(summary["broken"]) == ["blind tests", "gold fails"]
  assert summary["broken"]["gold fails"].startswith("its reference fix (gt_solution) fails")
  assert "buggy program passes" in summary["broken"]["blind tests"]
  assert summary["broken_tasks"] == 2 and "2 broken task(s)" in captured.err
  lines = [json.loads(line) for line in out_path.read_text().splitlines()]
  by_task = {}
  for line in lines:
    by_task.setdefault(line["task_id"], []).append(line)
  assert [(r["unit"], r["f1"], r["error"]) for r in by_task["sound"]] == [(1, 1.0, None)] * 2
  for task_id in ("gold fails", "blind tests"):
    assert all(
      r["unit"] == 0 and r["reward"] == 0 and r["error"].startswith("broken task: ")
      for r in by_task[task_id]
    )


def test_table_names_broken_tasks(paths, capsys):
  task_path, pred_path, out_path = paths
  rc = cli.main(
    [
      "score",
      "--tasks",
      str(task_path),
      "--predictions",
      str(pred_path),
      "--output",
      str(out_path),
      "--workers",
      "1",
    ]
  )
  out = capsys.readouterr().out
  assert rc == 1
  assert "broken task gold fails: its reference fix" in out
  assert "broken task blind tests: its buggy program passes" in out
