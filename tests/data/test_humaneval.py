"""HumanEval task sets: test conversion, frozen prompt lines, clean set, shipped buggy sets."""

import pytest

from precisecoder import edits
from precisecoder.data import humaneval, injection, mutation
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import apply_gt_diff, parse_task, task_to_record


@pytest.fixture(scope="module")
def problems():
  return {p["task_id"]: p for p in humaneval.problems()}


def test_asserts_become_call_cases_only_when_exact(problems):
  tests = {tid: humaneval.convert_tests(p) for tid, p in problems.items()}
  kinds = [t["kind"] for t in tests.values()]
  assert len(kinds) == 164 and kinds.count("call") == 133 and kinds.count("assert") == 31
  t0 = tests["HumanEval/0"]
  assert t0["entry_point"] == "has_close_elements"
  assert t0["cases"][0] == {"args": [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3], "expected": True}
  # Tolerance checks (abs(candidate(x) - y) < 1e-6) cannot be a call case.
  assert tests["HumanEval/2"]["kind"] == "assert"
  assert tests["HumanEval/2"]["code"].rstrip().endswith("check(truncate_number)")


def test_converted_cases_accept_every_canonical_solution(problems):
  checker = TrustedCallChecker(max_lines=5_000_000)  # HumanEval's own canonical code
  for source in humaneval.sources():
    if source.tests["kind"] == "call":
      assert checker.passes_one(source.code, source.tests), source.key


def test_prompt_lines_are_frozen(problems):
  for source in humaneval.sources()[:40]:
    prompt_lines = len(problems[source.key]["prompt"].rstrip("\n").splitlines())
    editable = mutation.editable_lines(source.code, source.first_editable)
    assert editable and min(editable) > prompt_lines
    for m in injection.candidates(source, multi_line=True):
      assert m.start > prompt_lines


def test_clean_set():
  tasks = humaneval.load_tasks("clean")
  assert len(tasks) == 164
  for t in tasks:
    assert not t.is_buggy and t.buggy_code == t.gt_solution and t.gt_diff == {}
    assert parse_task(task_to_record(t), "roundtrip") == t


def test_a_slow_gold_passes_in_the_pool():
  """HumanEval/75's gold takes tens of milliseconds a check, so its checks reach the pool over
  several of the worker's ticks; judged a tick at a time, it was stopped as out of turn."""
  from precisecoder.execution import ExecutionPool, Job, Limits

  (task,) = [t for t in humaneval.load_tasks("clean") if t.task_id == "HumanEval/75_clean"]
  assert task.tests["kind"] == "assert"
  with ExecutionPool(workers=1) as pool:
    (result,) = pool.execute([Job(task.gt_solution, task.tests, Limits(timeout_s=60.0))])
    assert result.passed, result
    assert pool.stats()["stopped"] == 0


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_shipped_buggy_sets(kind):
  tasks = humaneval.load_tasks(kind)
  assert len(tasks) == {"single": 161, "multi": 125}[kind]  # 164 minus problems without a bug
  for t in tasks:
    fixed = apply_gt_diff(t.buggy_code, t.gt_diff)
    assert fixed.strip("\n") == edits.rstrip_lines(t.gt_solution).strip("\n")
    blocks = edits.parse_blocks(t.gt_diff)
    assert len(blocks) == t.bug_count
    if kind == "multi":
      assert t.bug_count == 1 and 2 <= len(t.gt_diff) <= 4
    else:
      assert 1 <= t.bug_count <= 4 and all(len(b.edits) == 1 for b in blocks)
  # A sample re-run here, in the sandboxed pool (the build verified every task there).
  from precisecoder.data import verification
  from precisecoder.data.checking import PoolChecker
  from precisecoder.execution import ExecutionPool

  sample = tasks[::16]
  with ExecutionPool(workers=2) as pool:
    report = verification.verify_tasks(sample, PoolChecker(pool))
  assert report.ok, report.failures
  assert report.checks >= 2 * len(sample)
