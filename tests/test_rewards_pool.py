"""The scorer on the real sandboxed ExecutionPool: same numbers as the hand-worked cases."""

import pytest

from precisecoder import rewards, tasks
from precisecoder.execution import ExecutionPool
from test_rewards import FIXED, ONE_BUG, replace

ASSERT_TASK = tasks.Task(**{**ONE_BUG.__dict__, "timeout_s": 1.0})
CALL_TASK = tasks.Task(
  task_id="call",
  buggy_code=ONE_BUG.buggy_code,
  gt_solution=FIXED,
  gt_diff=ONE_BUG.gt_diff,
  tests={
    "kind": "call",
    "entry_point": "f",
    "cases": [{"args": [x], "expected": 2 * (x + 1) - 3} for x in range(-2, 3)],
  },
  timeout_s=1.0,
)


@pytest.fixture(scope="module", name="pool")
def _pool():
  with ExecutionPool(workers=2) as pool:
    yield pool


@pytest.mark.parametrize("task", [ASSERT_TASK, CALL_TASK], ids=["assert", "call"])
def test_hand_worked_numbers_on_the_pool(pool, task):
  scorer = rewards.RewardScorer(pool)
  programs = [
    FIXED,  # exact: 1, 1, 1
    replace(FIXED, "c = b - 3", "c = (b - 3)"),  # adjacent over-edit: precision 1/2
    replace(task.buggy_code, "c = b - 3", "c = b * 2 // 3 - 3"),  # alternative fix: 1
    replace(task.buggy_code, "a * 3", "a * 4"),  # wrong fix: 0
    "def f(x):\n    while True:\n        pass\n",  # times out: 0
    "import os\ndef f(x):\n    os._exit(0)\n",  # exits early: never a pass
  ]
  arrays = scorer.score([task] * len(programs), programs)
  assert arrays["unit"].tolist() == [1, 1, 1, 0, 0, 0]
  assert arrays["precision"].tolist() == pytest.approx([1, 0.5, 1, 0, 0, 0])
  assert arrays["recall"].tolist() == [1, 1, 1, 0, 0, 0]
  # The exact fix needs no run of its own: it is the reference the task is verified with
  # (its buggy program is the one other verification run).
  assert scorer.stats()["programs_executed"] <= 8
  assert scorer.stats()["broken_tasks"] == 0


def test_tasks_timeout_reaches_the_pool(pool):
  slow = tasks.Task(**{**CALL_TASK.__dict__, "timeout_s": 0.5})
  scorer = rewards.RewardScorer(pool)
  (s,) = scorer.score_samples([slow], ["import time\ndef f(x):\n    time.sleep(5)\n"])
  assert s.unit == 0 and scorer.limits_for(slow).timeout_s == 0.5
