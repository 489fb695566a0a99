"""Hand-worked PreciseCoder scores (PAPER.md "The method") for the issue's cases.

Programs run in an in-process fake pool: the numbers depend only on which
programs pass, so the arithmetic is checked exactly and quickly.
"""

import textwrap

import numpy as np
import pytest

from precisecoder import edits, prompts, rewards, tasks
from precisecoder.execution import Result, Status


class InProcessPool:
  """Runs `assert`-kind jobs with exec(); records every program it ran."""

  def __init__(self):
    self.ran = []

  def execute(self, jobs, deadline_s=None):
    del deadline_s
    out = []
    for job in jobs:
      self.ran.append(job.program)
      namespace = {}
      try:
        exec(compile(job.program, "<program>", "exec"), namespace)  # pylint: disable=exec-used
        exec(job.tests["code"], namespace)  # pylint: disable=exec-used
        out.append(Result(Status.PASS))
      except Exception as e:  # pylint: disable=broad-except
        out.append(Result(Status.FAIL, detail=repr(e)))
    return out


def code(text):
  return textwrap.dedent(text).lstrip("\n")


FIXED = code("""
    def f(x):
        a = x + 1
        b = a * 2
        c = b - 3
        d = c + 0
        return d
    """)
TESTS = {
  "kind": "assert",
  "code": "for x in range(-3, 6):\n    assert f(x) == 2 * (x + 1) - 3, x\n",
}


def make_task(buggy, fixed=FIXED, task_id="t"):
  return tasks.parse_task(
    {
      "task_id": task_id,
      "buggy_code": buggy,
      "gt_solution": fixed,
      "tests": TESTS,
      "is_buggy": buggy != fixed,
    },
    "test",
  )


def replace(program, old, new):
  assert old in program, old
  return program.replace(old, new, 1)


ONE_BUG = make_task(replace(FIXED, "a * 2", "a * 3"))  # bug on line 3


def score(task, program, **kwargs):
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool, **kwargs)
  (s,) = scorer.score_samples([task], [program])
  return s, pool, scorer


def check(s, unit, precision, recall, edit_lines, fixed=None):
  assert (s.unit, s.edit_lines) == (unit, edit_lines)
  assert s.precision == pytest.approx(precision) and s.recall == pytest.approx(recall)
  if fixed is not None:
    assert s.fixed == fixed


REFERENCE_RUNS = [edits.rstrip_lines(FIXED), edits.rstrip_lines(ONE_BUG.buggy_code)]


def test_exact_match_needs_no_run_beyond_the_task_check():
  s, pool, scorer = score(ONE_BUG, FIXED)
  check(s, 1, 1, 1, 1, [1])
  # The only runs verify the task: its reference fix passes, its buggy program fails.
  assert s.f1 == 1 and pool.ran == REFERENCE_RUNS
  assert [m.match.kind for m in s.matches] == ["exact"]
  scorer.score_samples(
    [ONE_BUG, make_task(ONE_BUG.buggy_code, task_id="same content")], [FIXED] * 2
  )
  assert pool.ran == REFERENCE_RUNS  # verified once per task content


def test_broken_tasks_are_errors_not_credit(caplog):
  wrong_tests = {"kind": "assert", "code": "assert f(0) == 12345\n"}
  failing_reference = tasks.Task(
    **{**ONE_BUG.__dict__, "task_id": "gold fails", "tests": wrong_tests}
  )
  blind_tests = {"kind": "assert", "code": "assert callable(f)\n"}
  passing_buggy = tasks.Task(**{**ONE_BUG.__dict__, "task_id": "bug passes", "tests": blind_tests})
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool)
  over = replace(FIXED, "c = b - 3", "c = (b - 3)")
  rows = scorer.score_samples(
    [failing_reference, failing_reference, passing_buggy, ONE_BUG], [FIXED, over, FIXED, FIXED]
  )
  assert [r.unit for r in rows] == [0, 0, 0, 1]
  assert [r.f1 for r in rows] == [0, 0, 0, 1]
  assert rows[0].error.startswith("broken task: its reference fix (gt_solution) fails")
  assert "AssertionError" in rows[0].error and rows[1].error == rows[0].error
  assert rows[2].error == (
    "broken task: its buggy program passes the tests: the tests cannot see the bug"
  )
  assert rows[3].error is None
  assert set(scorer.broken_tasks) == {"gold fails", "bug passes"}
  assert scorer.stats()["broken_tasks"] == 2
  assert sum("broken task" in r.getMessage() for r in caplog.records) == 2  # logged once each
  # What training sees: zero reward on every term, no exception.
  arrays = scorer.score([failing_reference, ONE_BUG], [FIXED, FIXED])
  np.testing.assert_array_equal(arrays["reward"], [0, 1])
  np.testing.assert_array_equal(arrays["broken_task"], [1, 0])  # training logs their share
  assert all(arrays[k][0] == 0 for k in ("unit", "f1", "precision", "recall", "precision_only"))
  ran = len(pool.ran)
  scorer.score_samples([passing_buggy], [over])  # remembered: no second check, still an error
  assert len(pool.ran) == ran
  assert scorer.references.task_problem(passing_buggy).startswith("its buggy")
  # Without verification the old shortcuts are gone too: everything runs, nothing is assumed.
  pool = InProcessPool()
  unverified = rewards.RewardScorer(pool, verify_references=False)
  (s,) = unverified.score_samples([failing_reference], [FIXED])
  assert s.unit == 0 and s.error is None and pool.ran == [edits.rstrip_lines(FIXED)]


def test_over_edit_next_to_the_bug():
  s, _, scorer = score(ONE_BUG, replace(FIXED, "c = b - 3", "c = (b - 3)"))
  # One block [3,4] wraps the reference; ess: line 3 alone fixes it -> credit 1 of 2 lines.
  check(s, 1, 1 / 2, 1, 2, [1])
  assert s.matches[0].match.kind == "wrap" and s.matches[0].ess_size == 1
  assert s.f1 == pytest.approx(2 / 3)
  assert scorer.reward_terms(s)["reward"] == pytest.approx(2 / 3 + 1 / 3 * 2 / 3)


def test_over_edit_far_from_the_bug():
  s, _, _ = score(ONE_BUG, replace(FIXED, "return d", "return (d)"))
  # Line 3 matches exactly, line 6 matches nothing: 1 credited line of 2.
  check(s, 1, 1 / 2, 1, 2, [1])
  assert [m.match.kind for m in s.matches] == ["exact"]


def test_alternative_fix_on_another_line():
  program = replace(ONE_BUG.buggy_code, "c = b - 3", "c = b * 2 // 3 - 3")
  s, _, _ = score(ONE_BUG, program)
  # Near match (shared context on both sides), verified by its counterfactual run.
  check(s, 1, 1, 1, 1, [1])
  assert s.matches[0].match.kind == "near"


def test_fix_spread_over_two_lines_where_one_is_needed():
  program = replace(FIXED, "a = x + 1", "a = 1 + x")
  s, pool, _ = score(ONE_BUG, program)
  check(s, 1, 1 / 2, 1, 2, [1])
  assert s.matches[0].ess_size == 1
  # Size 1 is settled by the block's second line alone (the verified reference fix): its
  # first line, alone, needs no run although it comes first in the block.
  assert pool.ran == REFERENCE_RUNS + [edits.rstrip_lines(program)]


def test_two_line_alternative_fix_gets_slack_and_the_released_quirk():
  program = replace(
    replace(replace(ONE_BUG.buggy_code, "a = x + 1", "a = (x + 1) * 2"), "b = a * 3", "b = a"),
    "c = b - 3",
    "c = (b - 3)",
  )
  # Block [2,4] (3 lines) for a 1-line reference, slack min(2, 3-1) = 2.
  # Paper: no single line fixes it, lines [2,3] do -> credit 1 + 1 = 2 of 3.
  s, _, _ = score(ONE_BUG, program)
  check(s, 1, 2 / 3, 1, 3, [1])
  assert s.matches[0].ess_size == 2
  # Released evaluator: its ess program keeps the reference fix, so the harmless line 4
  # alone "passes" -> credit equals the reference line count, 1 of 3.
  s, _, _ = score(ONE_BUG, program, pdb_compat=True)
  check(s, 1, 1 / 3, 1, 3, [1])
  assert s.matches[0].ess_size == 1


def test_partial_fix_of_a_two_bug_task():
  task = make_task(replace(replace(FIXED, "a * 2", "a * 3"), "c + 0", "c + 1"))
  s, _, scorer = score(task, replace(task.buggy_code, "a * 3", "a * 2"))
  check(s, 0, 1, 1 / 2, 1, [1, 0])
  assert s.recall_gated == 0.5 and s.f1 == pytest.approx(2 / 3)
  assert scorer.reward_terms(s)["reward"] == pytest.approx(2 / 9)


def test_wrong_fix():
  s, _, _ = score(ONE_BUG, replace(ONE_BUG.buggy_code, "a * 3", "a * 4"))
  check(s, 0, 0, 0, 1, [0])
  assert s.matches[0].fixed is False and s.f1 == 0


def test_noop_scores_zero_without_running():
  s, pool, scorer = score(ONE_BUG, ONE_BUG.buggy_code + "\n\n")
  check(s, 0, 0, 0, 0, [0])
  assert s.noop and s.f1 == 0 and scorer.reward_terms(s)["reward"] == 0
  assert pool.ran == REFERENCE_RUNS  # the task's check only


def test_full_rewrite():
  program = "def f(x):\n    return (x + 1) * 2 - 3\n"
  s, _, _ = score(ONE_BUG, program)
  # ndiff: Modify line 2 + Delete lines 3-6 -> one 5-line block wrapping the reference.
  # ess size 1: the Modify of line 2 alone returns early and passes -> credit 1 of 5.
  check(s, 1, 1 / 5, 1, 5, [1])
  assert s.f1 == pytest.approx(2 * 0.2 / 1.2)


MULTI = make_task(replace(replace(FIXED, "a * 2", "a * 3"), "b - 3", "b - 4"))  # block [3,4]


def test_multi_line_bug_epsilon_one():
  s, _, _ = score(MULTI, FIXED)
  check(s, 1, 1, 1, 2, [1])
  over = replace(FIXED, "d = c + 0", "d = (c + 0)")
  # Block [3,5] wraps the 2-line reference; slack min(1, 3-2) = 1; no single line fixes a
  # 2-line bug, so the slack stays: credit 2 + 1 = 3 of 3.
  s, _, _ = score(MULTI, over)
  check(s, 1, 1, 1, 3, [1])
  # With epsilon 0 the extra line is not forgiven.
  s, _, _ = score(MULTI, over, epsilon=0)
  check(s, 1, 2 / 3, 1, 3, [1])


def test_add_bug():
  buggy = code("""
      def f(x):
          a = x + 1
          b = a * 2
          c = b - 3
          return d
      """)
  task = make_task(buggy)
  assert task.gt_diff == {"5": {"type": "Add", "original": "", "modified": "    d = c + 0"}}
  s, _, _ = score(task, FIXED)
  check(s, 1, 1, 1, 1, [1])
  alternative = replace(buggy, "return d", "return c")
  s, _, _ = score(task, alternative)  # Modify line 5 wraps the Add at 5 and passes
  check(s, 1, 1, 1, 1, [1])


def test_delete_bug():
  buggy = replace(FIXED, "    c = b - 3\n", "    c = b - 3\n    c = c * 0\n")
  task = make_task(buggy)
  assert task.gt_diff == {"5": {"type": "Delete", "original": "    c = c * 0", "modified": ""}}
  s, _, _ = score(task, FIXED)
  check(s, 1, 1, 1, 1, [1])
  s, _, _ = score(task, replace(buggy, "c = c * 0", "c = c * 1"))
  check(s, 1, 1, 1, 1, [1])


def test_blank_line_and_trailing_space_changes_are_not_edits():
  program = FIXED.replace("    c = b - 3\n", "\n    c = b - 3   \n\n")
  s, _, _ = score(ONE_BUG, program)
  check(s, 1, 1, 1, 1, [1])


def test_indentation_only_changes_count():
  program = FIXED.replace("    ", "  ")  # re-indent every body line to two spaces
  s, _, _ = score(ONE_BUG, program)
  # Lines 2-6 all change (5 edits, one block); no 1- or 2-line part compiles alone,
  # so the slack stays at 2: credit 1 + 2 = 3 of 5.
  check(s, 1, 3 / 5, 1, 5, [1])
  assert s.matches[0].ess_size is None


def test_completion_with_thinking_and_no_code_block():
  completion = "<think>line 3 doubles, it should not triple</think>\n" + FIXED
  s, _, _ = score(ONE_BUG, prompts.extract_program(completion))
  check(s, 1, 1, 1, 1, [1])


def test_clean_task_noop_and_damage():
  clean = make_task(FIXED)
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool)
  broken = replace(FIXED, "c + 0", "c + 1")
  arrays = scorer.score([clean, clean, clean], [FIXED, replace(FIXED, "c + 0", "c - 0"), broken])
  np.testing.assert_array_equal(arrays["noop"], [1, 0, 0])
  np.testing.assert_array_equal(arrays["damage"], [0, 0, 1])
  np.testing.assert_array_equal(arrays["unit"], [1, 1, 0])
  record = scorer.score_records([clean], [broken])[0]
  assert record["damage"] is True and record["precision"] is None


def test_programs_run_once_per_batch_and_across_calls():
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool)
  over = replace(FIXED, "c = b - 3", "c = (b - 3)")
  scorer.score([ONE_BUG] * 4, [over, over, FIXED, over])
  assert len(pool.ran) == len(set(pool.ran))
  first = len(pool.ran)
  scorer.score([ONE_BUG], [over])
  assert len(pool.ran) == first  # every verdict is cached
  assert scorer.stats()["programs_executed"] == first


def test_programs_that_compile_alike_share_one_verdict():
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool)
  over = replace(FIXED, "c = b - 3", "c = (b - 3)")
  commented = replace(over, "c = (b - 3)", "c = (b - 3)  # tidy")
  noted_fix = replace(FIXED, "b = a * 2", "b = a * 2  # fixed")
  first, second, third = scorer.score_samples([ONE_BUG] * 3, [over, commented, noted_fix])
  # Beside the task's check, `over` runs itself only: its first size-1 ess candidate (line 3
  # alone) is the reference fix, already known to pass, so its sibling (line 4 alone) need
  # not run. The others compile to code already judged (or to the reference fix).
  assert pool.ran == REFERENCE_RUNS + [edits.rstrip_lines(over)]
  assert (second.unit, second.precision, second.recall) == (
    first.unit,
    first.precision,
    first.recall,
  )
  check(third, 1, 1, 1, 1, [1])
  # A pool whose verdicts read source text gets every distinct text.
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool, same_code_same_verdict=False)
  scorer.score_samples([ONE_BUG] * 2, [over, commented])
  assert pool.ran == REFERENCE_RUNS + [edits.rstrip_lines(over), edits.rstrip_lines(commented)]


def test_syntax_error_and_missing_programs():
  s, pool, _ = score(ONE_BUG, "def f(x):\n    return (\n")
  assert s.unit == 0 and s.note.startswith("syntax error") and pool.ran == REFERENCE_RUNS
  assert s.error is None  # scored: it has a diff, and no block of it fixes the bug
  pool = InProcessPool()
  records = rewards.RewardScorer(pool).score_records(
    [ONE_BUG, ONE_BUG], [None, "  \n"], samples=[3, 4]
  )
  assert [r["error"] for r in records] == ["no program", "empty program"]
  assert [r["sample"] for r in records] == [3, 4]


@pytest.mark.parametrize(
  "program, error",
  [
    (None, None),
    ("", None),
    ("\v" * 16, None),  # no program, empty, "16 vertical tabs"
    (FIXED * 50, "program of 301 lines exceeds --max-program-lines 100: not scored"),
  ],
  ids=["none", "empty", "vertical-tabs", "over-the-cap"],
)
@pytest.mark.parametrize("pdb_compat", [False, True])
def test_an_unusable_prediction_counts_as_deleting_the_whole_program(program, error, pdb_compat):
  """Every term 0, and the edit size of deleting every buggy line (what PDB's evaluator
  counts for an empty answer), not 0: a model that answers junk must not look precise."""
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool, pdb_compat=pdb_compat)
  (s,) = scorer.score_samples([ONE_BUG], [None if error else program], [error])
  assert s.error is not None
  assert (s.unit, s.precision, s.recall, s.f1) == (0, 0, 0, 0) and not s.noop
  assert s.edit_lines == 6 and s.edit_cost == 1.0  # all 6 lines of ONE_BUG deleted
  assert scorer.term_row(s)["reward"] == 0
  # The same holds for a clean task: damage, not a no-op.
  clean = make_task(FIXED)
  (c,) = scorer.score_samples([clean], [None if error else program], [error])
  assert c.edit_lines == 6 and not c.noop and c.damage is True
  # So a batch's mean of edited lines cannot drop below the precise model's by answering junk.
  (exact,) = scorer.score_samples([ONE_BUG], [FIXED])
  assert exact.edit_lines == 1 < s.edit_lines


@pytest.mark.parametrize("pdb_compat", [False, True])
def test_a_program_that_does_not_compile_is_scored_per_block_with_a_note(pdb_compat):
  """The paper's formula credits each defect's counterfactual, and PDB's evaluator credits an
  exact block without a run: a right fix beside a stray line that breaks compiling earns
  recall 1 and precision 1/2, unit 0. The row is scored (no `error`: not "unscorable"); the
  reason its unit run failed is in `note`."""
  program = "```\n" + FIXED  # a stray fence line and the exact fix
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool, pdb_compat=pdb_compat)
  (record,) = scorer.score_records([ONE_BUG], [program])
  assert record["error"] is None and record["note"].startswith("syntax error at line 1")
  assert (record["unit"], record["precision"], record["recall"]) == (0, 0.5, 1)
  assert record["f1"] == pytest.approx(2 / 3) and record["reward"] == pytest.approx(2 / 9)
  assert record["edit_lines"] == 2 and record["fixed"] == [1]


def test_infra_error_is_reported_not_cached():
  class Broken:
    def execute(self, jobs, deadline_s=None):
      return [Result(Status.INFRA_ERROR, detail="worker died")] * len(jobs)

  scorer = rewards.RewardScorer(Broken())
  (s,) = scorer.score_samples([ONE_BUG], [replace(FIXED, "return d", "return (d)")])
  assert s.unit == 0 and s.error == "infra_error: worker died"
  assert scorer.verdicts.get(next(iter(scorer.verdicts._passed), "")) is None  # pylint: disable=protected-access


def test_arrays_shapes_and_terms():
  pool = InProcessPool()
  scorer = rewards.RewardScorer(pool, lam=0.5)
  arrays = scorer.score([ONE_BUG, ONE_BUG], [FIXED, ONE_BUG.buggy_code])
  assert set(arrays) == set(rewards.ARRAY_KEYS)
  assert all(a.dtype == np.float32 and a.shape == (2,) for a in arrays.values())
  np.testing.assert_allclose(arrays["reward"], [1, 0])
  np.testing.assert_allclose(arrays["edit_cost"], [1 / 6, 0])
