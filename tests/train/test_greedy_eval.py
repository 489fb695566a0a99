"""The training-time greedy evaluation's summary: the paper's columns over buggy and clean rows."""

import numpy as np

from precisecoder import tasks as tasks_lib
from precisecoder.train import greedy_eval


def _task(i, buggy=True):
  fixed = "def f(x):\n    return x + 1"
  code = "def f(x):\n    return x - 1" if buggy else fixed
  return tasks_lib.Task(
    task_id=f"t{i}",
    buggy_code=code,
    gt_solution=fixed,
    gt_diff=tasks_lib.derive_gt_diff(code, fixed),
    tests={"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 2}]},
    is_buggy=buggy,
  )


def test_summary_splits_buggy_and_clean_rows():
  tasks = [_task(0), _task(1), _task(2, buggy=False), _task(3, buggy=False)]
  terms = {
    "unit": np.array([1, 0, 1, 0.0]),
    "precision": np.array([0.5, 0, 1, 1.0]),
    "recall": np.array([1, 0, 0, 0.0]),
    "f1": np.array([2 / 3, 0, 0, 0.0]),
    "edit_lines": np.array([2, 4, 0, 1.0]),
    "noop": np.array([0, 0, 1, 0.0]),
    "damage": np.array([0, 0, 0, 1.0]),
  }
  s = greedy_eval.summarize(tasks, terms)
  assert s["pass"] == 0.5 and s["precision"] == 0.25 and s["edit_lines"] == 3.0
  assert s["noop"] == 0.5 and s["damage"] == 0.5
  assert s["num_buggy"] == 2 and s["num_clean"] == 2
  assert "broken_tasks" not in s  # terms from before reference verification
  terms["broken_task"] = np.array([0, 1, 0, 0.0])
  assert greedy_eval.summarize(tasks, terms)["broken_tasks"] == 1
