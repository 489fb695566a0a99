"""`precisecoder data ...` end to end (small sets)."""

import json

import pytest

from precisecoder import cli
from precisecoder.data import generator
from precisecoder.tasks import load_tasks, write_tasks


def _has_pool():
  try:
    from precisecoder.execution import ExecutionPool  # noqa: F401
  except ImportError:
    return False
  return True


def test_card_prints_counts(tmp_path, capsys):
  write_tasks(tmp_path / "t.jsonl", generator.make_tasks("train", "hard", 6, seed=0))
  assert cli.main(["data", "card", str(tmp_path / "t.jsonl"), "--json"]) == 0
  card = json.loads(capsys.readouterr().out)[0]
  assert card["tasks"] == card["buggy"] == 6
  assert sum(card["by_bug_count"].values()) == 6
  assert sum(card["by_category"].values()) == sum(card["by_operator"].values()) >= 6


def test_unusable_inputs_exit_2(tmp_path, capsys):
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"task_id": "x"}\n')
  assert cli.main(["data", "card", str(bad)]) == 2
  assert "bad.jsonl:1" in capsys.readouterr().err
  assert cli.main(["data", "build", "tfds", "--split", "oops", "--data-dir", str(tmp_path)]) == 2


def test_build_tfds(tmp_path, capsys):
  write_tasks(tmp_path / "t.jsonl", generator.make_tasks("train", "easy", 5, seed=0))
  assert cli.main(["data", "build", "tfds", "--split", f"train={tmp_path / 't.jsonl'}",
                   "--data-dir", str(tmp_path / "tfds"), "--config", "easy"]) == 0
  assert "train: 5 tasks" in capsys.readouterr().out


@pytest.mark.skipif(not _has_pool(), reason="execution pool not available")
def test_build_generator_verifies_everything_in_the_pool(tmp_path, capsys):
  out = tmp_path / "gen"
  assert cli.main(["data", "build", "generator", "--out", str(out), "--tier", "hard",
                   "--train", "6", "--validation", "2", "--test", "2", "--clean", "2",
                   "--workers", "2"]) == 0
  summary = json.loads((out / "summary.json").read_text())
  assert set(summary["verification"]) == {"hard_train", "hard_validation", "hard_test",
                                          "clean_validation", "clean_test"}
  assert all(v["failures"] == 0 for v in summary["verification"].values())
  assert len(load_tasks(out / "hard_train.jsonl")) == 6
  assert "OK" in capsys.readouterr().out


@pytest.mark.skipif(not _has_pool(), reason="execution pool not available")
def test_verify_catches_a_broken_task(tmp_path, capsys):
  task = generator.make_tasks("train", "easy", 1, seed=0)[0]
  broken = task.__class__(**{**task.__dict__, "gt_solution": task.buggy_code, "gt_diff": {},
                             "is_buggy": False, "bug_count": 0})
  write_tasks(tmp_path / "b.jsonl", [broken])
  assert cli.main(["data", "verify", str(tmp_path / "b.jsonl"), "--workers", "1"]) == 1
  assert "gold passes" in capsys.readouterr().out
