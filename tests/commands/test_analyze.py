"""`precisecoder analyze traces`: unusable inputs and outputs are one line and exit 2, before
any statistics are computed. (The statistics themselves: tests/analysis/test_traces.py.)"""

import json

from conftest import read_only_folder

from precisecoder import cli, tasks as tasks_lib

_BUGGY, _FIXED = "def inc(x):\n    return x - 1\n", "def inc(x):\n    return x + 1\n"


def _files(tmp_path):
  task = tasks_lib.Task(
    task_id="inc_0",
    buggy_code=_BUGGY,
    gt_solution=_FIXED,
    gt_diff=tasks_lib.derive_gt_diff(_BUGGY, _FIXED),
    tests={"kind": "call", "entry_point": "inc", "cases": [{"args": [1], "expected": 2}]},
  )
  tasks_lib.write_tasks(tmp_path / "tasks.jsonl", [task])
  (tmp_path / "p.jsonl").write_text(
    json.dumps({"task_id": "inc_0", "completion": "<think>x - 1 is wrong</think>"}) + "\n"
  )
  return [
    "analyze",
    "traces",
    "--tasks",
    str(tmp_path / "tasks.jsonl"),
    "--predictions",
    str(tmp_path / "p.jsonl"),
  ]


def test_a_read_only_output_folder_is_one_line(tmp_path, capsys):
  out = read_only_folder(tmp_path) / "traces"
  assert cli.main(_files(tmp_path) + ["--output", str(out)]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"precisecoder analyze: error: --output {out}.json: ")
  assert "not writable" in err and len(err.splitlines()) == 1
  assert cli.main(_files(tmp_path) + ["--output", str(tmp_path / "out" / "traces")]) == 0
  assert json.loads((tmp_path / "out" / "traces.json").read_text())["completions"] == 1


def test_an_empty_predictions_file_or_unknown_run_is_one_line(tmp_path, capsys):
  argv = _files(tmp_path)
  (tmp_path / "p.jsonl").write_text("")
  assert cli.main(argv) == 2
  assert capsys.readouterr().err == (
    f"precisecoder analyze: error: {tmp_path / 'p.jsonl'}: no predictions (the file is empty)\n"
  )
  assert cli.main(["analyze", "traces", "--run", str(tmp_path / "nope")]) == 2
  err = capsys.readouterr().err
  assert (
    err.startswith(f"precisecoder analyze: error: {tmp_path / 'nope'}: not an evaluate directory")
    and len(err.splitlines()) == 1
  )
