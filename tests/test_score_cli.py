"""`precisecoder score` end to end (with the in-process fake pool)."""

import contextlib
import re
import json

import pytest

from precisecoder import cli, tasks
from precisecoder.commands import score as score_cmd
from test_rewards import FIXED, ONE_BUG, InProcessPool, make_task, replace


@pytest.fixture(name="files")
def _files(tmp_path, monkeypatch):
  pool = InProcessPool()
  monkeypatch.setattr(score_cmd, "_make_pool", lambda workers: contextlib.nullcontext(pool))
  clean = make_task(FIXED, task_id="clean")
  task_path = tmp_path / "tasks.jsonl"
  tasks.write_tasks(task_path, [ONE_BUG, clean])
  preds = [
      {"task_id": "t", "completion": f"<think>x</think>\n```python\n{FIXED}```"},  # exact fix
      {"task_id": "t", "program": ONE_BUG.buggy_code},  # no-op
      {"task_id": "t", "sample": 7},  # nothing to score
      {"task_id": "clean", "program": FIXED},
      {"task_id": "clean", "program": replace(FIXED, "c + 0", "c + 1")},  # damage
  ]
  pred_path = tmp_path / "preds.jsonl"
  pred_path.write_text("".join(json.dumps(p) + "\n" for p in preds))
  return task_path, pred_path, tmp_path / "out" / "scores.jsonl"


def test_scores_and_summary(files, capsys):
  task_path, pred_path, out_path = files
  rc = cli.main(["score", "--tasks", str(task_path), "--predictions", str(pred_path),
                 "--output", str(out_path), "--json"])
  assert rc == 0
  lines = [json.loads(l) for l in out_path.read_text().splitlines()]
  assert [(l["task_id"], l["sample"], l["unit"]) for l in lines] == [
      ("t", 0, 1), ("t", 1, 0), ("t", 7, 0), ("clean", 0, 1), ("clean", 1, 0)]
  first = lines[0]
  assert set(first) >= {"task_id", "sample", "unit", "precision", "recall", "f1", "reward",
                        "edit_lines", "noop", "damage", "fixed", "error"}
  assert first["fixed"] == [1] and first["error"] is None and first["damage"] is None
  assert lines[1]["noop"] is True and "no string 'completion'" in lines[2]["error"]
  assert [l["damage"] for l in lines[3:]] == [False, True]
  summary = json.loads(capsys.readouterr().out)
  # Task "t": samples score unit 1, 0, 0 -> 1/3; clean task: no-op 1/2, damage 1/2.
  assert summary["unit"] == pytest.approx(1 / 3) and summary["precision"] == pytest.approx(1 / 3)
  assert summary["noop_rate"] == 0.5 and summary["damage_rate"] == 0.5
  assert summary["errors"] == 1 and summary["predictions"] == 5


def test_table_output(files, capsys):
  task_path, pred_path, out_path = files
  assert cli.main(["score", "--tasks", str(task_path), "--predictions", str(pred_path),
                   "--output", str(out_path)]) == 0
  table = capsys.readouterr().out
  assert "unit (pass)" in table and "33.3%" in table and re.search(r"damage rate \(clean\) +50.0%", table)


def test_unusable_inputs_exit_2(files, capsys):
  task_path, pred_path, out_path = files
  bad = pred_path.parent / "bad.jsonl"
  bad.write_text('{"task_id": "t", "program": "x"}\n{"task_id": "nope", "program": "x"}\n')
  args = ["score", "--tasks", str(task_path), "--output", str(out_path)]
  assert cli.main(args + ["--predictions", str(bad)]) == 2
  assert "bad.jsonl:2: unknown task_id 'nope'" in capsys.readouterr().err
  assert cli.main(args + ["--predictions", str(pred_path.parent / "missing.jsonl")]) == 2
  assert "cannot read" in capsys.readouterr().err
  bad.write_text("{oops\n")
  assert cli.main(args + ["--predictions", str(bad)]) == 2
  assert "bad.jsonl:1: invalid JSON" in capsys.readouterr().err
  assert not out_path.exists()
