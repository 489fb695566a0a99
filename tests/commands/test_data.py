"""`precisecoder data ...` end to end (small sets)."""

import gzip
import json
import sys

import pytest

from precisecoder import cli
from precisecoder.data import generator
from precisecoder.tasks import Task, load_tasks, write_tasks


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


def test_broken_gzip_and_bad_paths_are_one_line_errors(tmp_path, capsys):
  write_tasks(tmp_path / "t.jsonl.gz", generator.make_tasks("train", "easy", 3, seed=0))
  packed = (tmp_path / "t.jsonl.gz").read_bytes()
  (tmp_path / "truncated.jsonl.gz").write_bytes(packed[: len(packed) // 2])
  (tmp_path / "corrupt.jsonl.gz").write_bytes(packed[:10] + b"\xff" * 64)
  (tmp_path / "plain.jsonl.gz").write_bytes(gzip.decompress(packed))
  (tmp_path / "file").write_text("")
  cases = [
    (["card", "truncated.jsonl.gz"], "truncated.jsonl.gz: truncated gzip file"),
    (["verify", "truncated.jsonl.gz"], "truncated.jsonl.gz: truncated gzip file"),
    (["card", "corrupt.jsonl.gz"], "corrupt.jsonl.gz: corrupt gzip data"),
    (["verify", "plain.jsonl.gz"], "plain.jsonl.gz: cannot read (Not a gzipped file"),
    (["build", "generator", "--out", "file", "--train", "1"], "file: exists and is not a folder"),
    (["build", "generator", "--out", "file/sub", "--train", "1"], "file is a file"),
  ]
  for args, message in cases:
    args = [str(tmp_path / a) if a.endswith(".gz") or a.startswith("file") else a for a in args]
    assert cli.main(["data", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
  "args, message",
  [
    (
      ["verify", "t.jsonl", "--workers", "0"],
      "argument --workers: must be between 1 and 256, got 0",
    ),
    (["build", "humaneval", "--out", "o", "--workers", "1000"], "must be between 1 and 256"),
    (
      ["build", "generator", "--out", "o", "--train", "-1"],
      "argument --train: must not be negative",
    ),
    (["verify", "t.jsonl", "--timeout", "nan"], "argument --timeout: must be a positive number"),
  ],
)
def test_bad_flags_exit_2_before_any_work(tmp_path, capsys, args, message):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(["data", *args])
  assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_build_tfds(tmp_path, capsys):
  write_tasks(tmp_path / "t.jsonl", generator.make_tasks("train", "easy", 5, seed=0))
  assert (
    cli.main(
      [
        "data",
        "build",
        "tfds",
        "--split",
        f"train={tmp_path / 't.jsonl'}",
        "--data-dir",
        str(tmp_path / "tfds"),
        "--config",
        "easy",
      ]
    )
    == 0
  )
  assert "train: 5 tasks" in capsys.readouterr().out


def test_build_generator_verifies_everything_in_the_pool(tmp_path, capsys):
  out = tmp_path / "gen"
  assert (
    cli.main(
      [
        "data",
        "build",
        "generator",
        "--out",
        str(out),
        "--tier",
        "hard",
        "--train",
        "6",
        "--validation",
        "2",
        "--test",
        "2",
        "--clean",
        "2",
        "--workers",
        "2",
      ]
    )
    == 0
  )
  summary = json.loads((out / "summary.json").read_text())
  assert set(summary["verification"]) == {
    "hard_train",
    "hard_validation",
    "hard_test",
    "clean_validation",
    "clean_test",
  }
  assert all(v["failures"] == 0 for v in summary["verification"].values())
  assert len(load_tasks(out / "hard_train.jsonl")) == 6
  assert "OK" in capsys.readouterr().out


def test_verify_catches_a_broken_task(tmp_path, capsys):
  task = generator.make_tasks("train", "easy", 1, seed=0)[0]
  broken = task.__class__(
    **{
      **task.__dict__,
      "gt_solution": task.buggy_code,
      "gt_diff": {},
      "is_buggy": False,
      "bug_count": 0,
    }
  )
  write_tasks(tmp_path / "b.jsonl", [broken])
  assert cli.main(["data", "verify", str(tmp_path / "b.jsonl"), "--workers", "1"]) == 1
  assert "gold passes" in capsys.readouterr().out


def test_verifying_an_empty_task_file_is_an_error_not_ok(tmp_path, capsys):
  (tmp_path / "empty.jsonl").write_text("")
  assert cli.main(["data", "verify", str(tmp_path / "empty.jsonl")]) == 2
  assert capsys.readouterr().err == (
    f"precisecoder data: error: {tmp_path / 'empty.jsonl'}: no tasks (the file is empty)\n"
  )


def test_verify_names_the_environment_a_task_set_needs(tmp_path, capsys):
  program = "import precisecoder_no_such_library\ndef f(x):\n  return x\n"
  task = Task(
    task_id="BigCodeBench/7",
    buggy_code=program,
    gt_solution=program,
    gt_diff={},
    tests={"kind": "assert", "code": "assert f(1) == 1\n"},
    is_buggy=False,
    bug_count=0,
  )
  write_tasks(tmp_path / "bcb.jsonl", [task])
  assert (
    cli.main(
      ["data", "verify", str(tmp_path / "bcb.jsonl"), "--workers", "1", "--python", sys.executable]
    )
    == 1
  )
  err = capsys.readouterr().err
  assert f"could not import precisecoder_no_such_library under {sys.executable}" in err
  assert "the BigCodeBench environment (requirements-bigcodebench.txt)" in err


def test_build_bigcodebench_makes_clean_tasks_of_the_golds(tmp_path, capsys):
  record = {
    "task_id": "BigCodeBench/1",
    "code_prompt": "def task_func(x):\n",
    "canonical_solution": "    return x + 1\n",
    "test": "import unittest\nclass TestCases(unittest.TestCase):\n"
    "  def test_one(self):\n    self.assertEqual(task_func(1), 2)\n",
  }
  (tmp_path / "data.json").write_text(json.dumps({record["task_id"]: record}))  # PDB's layout
  out = tmp_path / "out"
  assert (
    cli.main(
      [
        "data",
        "build",
        "bigcodebench",
        "--records",
        str(tmp_path / "data.json"),
        "--out",
        str(out),
        "--workers",
        "1",
      ]
    )
    == 0
  )
  (task,) = load_tasks(out / "bigcodebench_clean.jsonl")
  assert task.gt_solution == task.buggy_code == "def task_func(x):\n\n    return x + 1\n"
  assert not task.is_buggy and task.tests["kind"] == "unittest" and task.timeout_s == 20.0
  assert "OK" in capsys.readouterr().out
