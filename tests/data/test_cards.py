"""Data cards: counts, lengths and editable lines of a hand-built set, and their Markdown."""

from precisecoder import tasks as tasks_lib
from precisecoder.data import cards

TESTS = {"kind": "assert", "code": "assert f(1) == 2\n"}


def _task(task_id, buggy, fixed, **fields):
  return tasks_lib.Task(
    task_id=task_id,
    buggy_code=buggy,
    gt_solution=fixed,
    gt_diff=tasks_lib.derive_gt_diff(buggy, fixed),
    tests=TESTS,
    **fields,
  )


FIXED = "def f(x):\n\n    y = x + 1\n    return y\n"
SET = [
  _task(
    "a",
    FIXED.replace("x + 1", "x - 1"),
    FIXED,
    source_dataset="gen",
    extra={"bug_type": "operator", "bug_subtype": "arith_swap"},
  ),
  _task(
    "b",
    FIXED.replace("x + 1", "x * 1").replace("return y", "return -y"),
    FIXED,
    bug_count=2,
    source_dataset="gen",
    extra={
      "bug_type": ["operator", "sign"],
      "bug_subtype": ["arith_swap", "negate"],
      "multi_line": True,
      "editable_lines": 7,
    },
  ),
  _task("c", FIXED, FIXED, is_buggy=False, bug_count=0, source_dataset="clean"),
]


def test_card_counts_a_hand_built_set():
  card = cards.data_card(SET, "hand")
  assert card == {
    "name": "hand",
    "tasks": 3,
    "buggy": 2,
    "clean": 1,
    "by_bug_count": {"1": 1, "2": 1},
    "multi_line_tasks": 1,
    "by_category": {"operator": 2, "sign": 1},
    "by_operator": {"arith_swap": 2, "negate": 1},
    "by_source": {"clean": 1, "gen": 2},
    "by_test_kind": {"assert": 3},
    "program_lines_mean": 3.0,
    "program_lines_min_max": [3, 3],  # blank lines not counted
    # Two editable lines in the body (the def line is frozen); "b" says 7 itself.
    "editable_lines_mean": round((2 + 7 + 2) / 3, 2),
    "changed_lines_mean": 1.5,
  }


def test_untyped_bugs_are_unknown_and_an_empty_set_is_zeros():
  card = cards.data_card([_task("d", FIXED.replace("+", "-"), FIXED)], "untyped")
  assert card["by_category"] == card["by_operator"] == {"unknown": 1}
  empty = cards.data_card([], "empty")
  assert empty["tasks"] == 0 and empty["program_lines_min_max"] == [0, 0]
  assert empty["program_lines_mean"] == empty["changed_lines_mean"] == 0.0


def test_markdown_lists_every_nonempty_count():
  text = cards.card_markdown(cards.data_card(SET, "hand"))
  assert text.startswith("### hand\n\n3 tasks (2 buggy, 1 clean)")
  assert "1 tasks with a multi-line bug." in text
  for row in ("| 2 | 1 |", "| sign | 1 |", "| negate | 1 |", "| gen | 2 |", "| assert | 3 |"):
    assert row in text
  assert "| category | count |" in text
  empty = cards.card_markdown(cards.data_card([], "empty"))
  assert "| count |" not in empty
