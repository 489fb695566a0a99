"""Generalisation sets: the generator's `multi` tier (one atomic 2-4-line bug) and the
repository-level set (modules of several functions, one edited), built and verified."""

import json

from precisecoder import cli, edits
from precisecoder.data import generator, repository, verification
from precisecoder.data.checking import PoolChecker
from precisecoder.execution import ExecutionPool
from precisecoder.tasks import load_tasks


def test_multi_tier_has_one_atomic_multi_line_bug():
  tasks = generator.make_tasks("validation", "multi", 6, seed=0)
  for t in tasks:
    (block,) = edits.parse_blocks(t.gt_diff)
    assert t.bug_count == 1 and t.extra["multi_line"] and 2 <= len(block.edits) <= 4


def test_repository_modules_have_one_edited_function():
  tasks = repository.make_tasks("test", 6, seed=0)
  assert [t.task_id for t in tasks] == [t.task_id for t in repository.make_tasks("test", 6, seed=0)]
  assert any(t.extra["multi_line"] for t in tasks) and not all(t.extra["multi_line"] for t in tasks)
  for t in tasks:
    names = t.extra["functions"]
    assert 3 <= len(names) <= 5 and t.extra["edited_function"] in names
    assert t.buggy_code.count("\ndef ") == len(names) - 1 and t.bug_count == 1
    # Only the edited function's lines change.
    gold_lines = t.gt_solution.splitlines()
    starts = [i for i, line in enumerate(gold_lines) if line.startswith("def ")] + [len(gold_lines)]
    target = names.index(t.extra["edited_function"])
    changed = [int(k) for k in t.gt_diff]
    assert all(starts[target] < k <= starts[target + 1] for k in changed)
    # The tests call every function; the prompt describes each one.
    assert t.tests["kind"] == "assert"
    for name in names:
      assert f"assert {name}(" in t.tests["code"] and f"`{name}(" in t.prompt
  clean = repository.make_tasks("validation", 2, seed=0, buggy=False)
  assert all(not t.is_buggy and t.buggy_code == t.gt_solution for t in clean)


def test_repository_tasks_verify_in_the_pool():
  tasks = repository.make_tasks("validation", 4, seed=1)
  with ExecutionPool(workers=1) as pool:
    report = verification.verify_tasks(tasks, PoolChecker(pool, timeout_s=3.0))
  assert report.ok, report.failures
  assert report.checks >= 2 * len(tasks)


def test_build_repository_command(tmp_path, capsys):
  out = tmp_path / "repo"
  assert (
    cli.main(
      [
        "data",
        "build",
        "repository",
        "--validation",
        "2",
        "--test",
        "2",
        "--clean",
        "1",
        "--out",
        str(out),
        "--workers",
        "1",
      ]
    )
    == 0
  )
  assert "repository_test: verified 2 tasks" in capsys.readouterr().out
  assert len(load_tasks(out / "repository_test.jsonl")) == 2
  cards = {c["name"]: c for c in json.loads((out / "card.json").read_text())}
  assert cards["repository_clean_validation"]["clean"] == 1
  assert cards["repository_test"]["by_test_kind"] == {"assert": 2}
