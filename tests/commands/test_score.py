"""`precisecoder score` end to end (with the in-process fake pool)."""

import contextlib
import gzip
import json
import os
import re

import pytest

from precisecoder import cli, tasks
from precisecoder.commands import score as score_cmd
from test_rewards import FIXED, ONE_BUG, InProcessPool, make_task, replace


@pytest.fixture(name="files")
def _files(tmp_path, monkeypatch):
  pool = InProcessPool()
  monkeypatch.setattr(
    score_cmd, "_make_pool", lambda workers, python=None: contextlib.nullcontext(pool)
  )
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
  rc = cli.main(
    [
      "score",
      "--tasks",
      str(task_path),
      "--predictions",
      str(pred_path),
      "--output",
      str(out_path),
      "--json",
    ]
  )
  assert rc == 0
  lines = [json.loads(l) for l in out_path.read_text().splitlines()]
  assert [(l["task_id"], l["sample"], l["unit"]) for l in lines] == [
    ("t", 0, 1),
    ("t", 1, 0),
    ("t", 7, 0),
    ("clean", 0, 1),
    ("clean", 1, 0),
  ]
  first = lines[0]
  assert set(first) >= {
    "task_id",
    "sample",
    "unit",
    "precision",
    "recall",
    "f1",
    "reward",
    "edit_lines",
    "noop",
    "damage",
    "fixed",
    "error",
  }
  assert first["fixed"] == [1] and first["error"] is None and first["damage"] is None
  assert lines[1]["noop"] is True and "no string 'completion'" in lines[2]["error"]
  assert [l["damage"] for l in lines[3:]] == [False, True]
  summary = json.loads(capsys.readouterr().out)
  # Task "t": samples score unit 1, 0, 0 -> 1/3; clean task: no-op 1/2, damage 1/2.
  assert summary["unit"] == pytest.approx(1 / 3) and summary["precision"] == pytest.approx(1 / 3)
  assert summary["noop_rate"] == 0.5 and summary["damage_rate"] == 0.5
  assert summary["errors"] == 1 and summary["predictions"] == 5
  # The line with nothing to score counts as deleting all 6 lines: (1 + 0 + 6) / 3 for task "t".
  assert lines[2]["edit_lines"] == 6 and summary["edit_lines"] == pytest.approx(7 / 3)


def test_the_summary_counts_what_the_rows_say(tmp_path, monkeypatch, capsys):
  """Unscorable = the rows with an `error` (every term 0); a program that does not compile is
  scored (unit 0, per-block credit) and counted apart, with its reason in `note`."""
  monkeypatch.setattr(
    score_cmd, "_make_pool", lambda workers, python=None: contextlib.nullcontext(InProcessPool())
  )
  task_path, pred_path = tmp_path / "t.jsonl", tmp_path / "p.jsonl"
  tasks.write_tasks(task_path, [ONE_BUG])
  preds = [
    {"task_id": "t", "program": "```\n" + FIXED},  # the fix and a stray fence line
    {"task_id": "t", "completion": "\v" * 16},
  ]  # junk
  pred_path.write_text("".join(json.dumps(p) + "\n" for p in preds))
  assert _score(task_path, pred_path, tmp_path / "s.jsonl", "--json") == 0
  stray, junk = [json.loads(l) for l in (tmp_path / "s.jsonl").read_text().splitlines()]
  assert stray["error"] is None and stray["note"].startswith("syntax error at line 1")
  assert stray["f1"] == pytest.approx(2 / 3) and stray["reward"] == pytest.approx(2 / 9)
  assert junk["error"] == "empty program" and junk["f1"] == junk["reward"] == 0
  assert junk["edit_lines"] == 6 and junk["noop"] is False
  summary = json.loads(capsys.readouterr().out)
  assert (summary["errors"], summary["noted"]) == (1, 1)
  assert summary["edit_lines"] == pytest.approx((2 + 6) / 2)


def test_table_output(files, capsys):
  task_path, pred_path, out_path = files
  assert (
    cli.main(
      [
        "score",
        "--tasks",
        str(task_path),
        "--predictions",
        str(pred_path),
        "--output",
        str(out_path),
      ]
    )
    == 0
  )
  table = capsys.readouterr().out
  assert "unit (pass)" in table and "33.3%" in table
  assert re.search(r"damage rate \(clean\) +50.0%", table)


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
  assert not out_path.parent.exists()  # a refused run makes no folder


# ---------------------------------------------------------------------------
# Nothing lost, nothing hangs (issue 10, item 3)
# ---------------------------------------------------------------------------


def _score(task_path, pred_path, out_path, *extra):
  return cli.main(
    [
      "score",
      "--tasks",
      str(task_path),
      "--predictions",
      str(pred_path),
      "--output",
      str(out_path),
      *extra,
    ]
  )


def test_output_that_is_an_input_is_refused(files, capsys):
  task_path, pred_path, _ = files
  before = (task_path.read_bytes(), pred_path.read_bytes())
  (pred_path.parent / "link.jsonl").symlink_to(pred_path)
  os.link(task_path, pred_path.parent / "hard.jsonl")
  for out, named in [
    (pred_path, "--predictions"),
    (pred_path.parent / "link.jsonl", "--predictions"),
    (pred_path.parent / "sub" / ".." / pred_path.name, "--predictions"),
    (pred_path.parent / "hard.jsonl", "--tasks"),
  ]:
    (pred_path.parent / "sub").mkdir(exist_ok=True)
    assert _score(task_path, pred_path, out) == 2
    assert f"is the {named} file" in capsys.readouterr().err
  assert (task_path.read_bytes(), pred_path.read_bytes()) == before


def test_a_failed_run_leaves_no_tmp_and_no_output(files, monkeypatch):
  task_path, pred_path, out_path = files

  class BrokenPool:
    def execute(self, jobs, deadline_s=None):
      raise RuntimeError("pool died")

  monkeypatch.setattr(
    score_cmd, "_make_pool", lambda workers, python=None: contextlib.nullcontext(BrokenPool())
  )
  out_path.parent.mkdir()
  with pytest.raises(RuntimeError, match="pool died"):
    _score(task_path, pred_path, out_path)
  assert list(out_path.parent.iterdir()) == []


@pytest.mark.parametrize(
  "lines, message",
  [
    (
      [{"task_id": "t", "program": "x"}, {"task_id": "t", "sample": 0, "program": "y"}],
      "preds.jsonl:2: duplicate (task_id, sample) ('t', 0); first at",
    ),
    (
      [
        {"task_id": "t", "sample": 3, "program": "x"},
        {"task_id": "t", "sample": 3, "program": "x"},
      ],
      "preds.jsonl:2: duplicate (task_id, sample) ('t', 3)",
    ),
    ([{"task_id": "t", "sample": "0", "program": "x"}], "preds.jsonl:1: field 'sample' must be"),
    ([{"task_id": "t", "sample": 1.0, "program": "x"}], "field 'sample' must be a non-negative"),
    ([{"task_id": "t", "sample": True, "program": "x"}], "field 'sample' must be"),
    ([{"task_id": "t", "sample": -1, "program": "x"}], "field 'sample' must be"),
    ([], "preds.jsonl: no predictions (the file is empty)"),
    (["\ud800"], "preds.jsonl:1: field 'task_id' holds a lone UTF-16 surrogate"),
  ],
)
def test_bad_prediction_files_exit_2(files, capsys, lines, message):
  task_path, pred_path, out_path = files
  pred_path.write_text(
    "".join(
      (json.dumps({"task_id": l, "program": "x"}) if isinstance(l, str) else json.dumps(l)) + "\n"
      for l in lines
    )
  )
  assert _score(task_path, pred_path, out_path) == 2
  err = capsys.readouterr().err
  assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
  assert not out_path.parent.exists()


def test_gzipped_predictions_read_like_task_files(files):
  task_path, pred_path, out_path = files
  assert _score(task_path, pred_path, out_path) == 0
  plain = out_path.read_text()
  gz_path = pred_path.with_name("preds.jsonl.gz")
  gz_path.write_bytes(gzip.compress(pred_path.read_bytes()))
  assert _score(task_path, gz_path, out_path) == 0
  assert out_path.read_text() == plain.replace("preds.jsonl:", "preds.jsonl.gz:")  # in 'error'


def test_huge_completions_score_fast_with_a_reason(files, capsys, monkeypatch):
  # 2 MB completions in three shapes: many short lines (over the line cap), one long line (over
  # the character cap), and a long thinking trace before a small program (scored as usual).
  # Fast because the capped ones are neither diffed nor run (the seconds it takes:
  # benchmarks/bench_huge_predictions.py).
  task_path, pred_path, out_path = files
  pool = InProcessPool()
  monkeypatch.setattr(
    score_cmd, "_make_pool", lambda workers, python=None: contextlib.nullcontext(pool)
  )
  program = "".join(f"v{i} = {i}\n" for i in range(300_000))[:2_000_000]
  preds = [
    {"task_id": "t", "completion": f"```python\n{FIXED}{program}```"},
    {"task_id": "t", "completion": f"```python\n{FIXED}s = '{'x' * 2_000_000}'\n```"},
    {"task_id": "t", "completion": f"<think>{'why? ' * 400_000}</think>```python\n{FIXED}```"},
  ]
  pred_path.write_text("".join(json.dumps(p) + "\n" for p in preds))
  assert _score(task_path, pred_path, out_path, "--json") == 0
  lines = [json.loads(l) for l in out_path.read_text().splitlines()]
  assert "exceeds --max-program-lines 10000" in lines[0]["error"] and lines[0]["unit"] == 0
  assert "characters exceeds 1000000" in lines[1]["error"] and lines[1]["unit"] == 0
  assert lines[2]["error"] is None and lines[2]["unit"] == 1
  assert json.loads(capsys.readouterr().out)["programs_executed"] == len(pool.ran) <= 2
  assert max(map(len, pool.ran)) < 1000  # the task's own programs: nothing huge ran
  # The cap is a flag: raised, the long program is scored (edits appended after the fix).
  pred_path.write_text(json.dumps({"task_id": "t", "program": FIXED + program[:60_000]}) + "\n")
  assert _score(task_path, pred_path, out_path, "--max-program-lines", "20000") == 0
  assert json.loads(out_path.read_text())["error"] is None


def test_a_run_stopped_by_the_output_cap_says_so(tmp_path):
  # The real pool: the harness's output cap is what stops this program.
  task_path, pred_path, out_path = tmp_path / "t.jsonl", tmp_path / "p.jsonl", tmp_path / "s.jsonl"
  tasks.write_tasks(task_path, [ONE_BUG])
  flood = FIXED + "print('x' * 3_000_000)\n"
  pred_path.write_text(json.dumps({"task_id": "t", "program": flood}) + "\n")
  assert _score(task_path, pred_path, out_path, "--workers", "1") == 0
  line = json.loads(out_path.read_text())
  assert line["unit"] == 0 and line["error"] is None  # scored: the program ran, and failed
  assert line["note"] == "unit run stopped by the output cap: stdout exceeded 1048576 bytes"


# ---------------------------------------------------------------------------
# Messages, not tracebacks (issue 10, item 4)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
  "extra, message",
  [
    (["--workers", "0"], "argument --workers: must be between 1 and 256, got 0"),
    (["--workers", "1000"], "argument --workers: must be between 1 and 256, got 1000"),
    (["--workers", "two"], "argument --workers: not an integer: 'two'"),
    (["--epsilon", "-1"], "argument --epsilon: must not be negative, got -1"),
    (["--lam", "nan"], "argument --lam: must be in [0, 1], got nan"),
    (["--lam", "1.5"], "argument --lam: must be in [0, 1], got 1.5"),
    (["--lam", "-0.1"], "argument --lam: must be in [0, 1], got -0.1"),
    (["--batch-size", "0"], "argument --batch-size: must be a positive integer, got 0"),
  ],
)
def test_bad_arguments_exit_2_naming_the_flag(files, capsys, extra, message):
  task_path, pred_path, out_path = files
  with pytest.raises(SystemExit) as exit_info:
    _score(task_path, pred_path, out_path, *extra)
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.strip().splitlines()[-1] == f"precisecoder score: error: {message}"
  assert "Traceback" not in err


def test_unusable_outputs_and_task_files_exit_2(files, capsys):
  task_path, pred_path, out_path = files
  blocker = task_path.parent / "blocker"
  blocker.write_text("")
  packed = gzip.compress(task_path.read_bytes())
  truncated, corrupt = task_path.with_name("t.jsonl.gz"), task_path.with_name("c.jsonl.gz")
  truncated.write_bytes(packed[: len(packed) // 2])
  corrupt.write_bytes(packed[:10] + b"\xff" * 64)
  surrogate = task_path.with_name("s.jsonl")
  surrogate.write_text(task_path.read_text().replace('"task_id": "t"', '"task_id": "t\\udc80"'))
  cases = [
    (task_path, task_path.parent, "--output " + str(task_path.parent) + ": is a folder"),
    (task_path, blocker / "s.jsonl", f"cannot make folder {blocker}: {blocker} is a file"),
    (
      task_path,
      blocker / "a" / "b" / "s.jsonl",
      f"cannot make folder {blocker / 'a' / 'b'}: {blocker} is a file",
    ),
    (truncated, out_path, f"{truncated}: truncated gzip file"),
    (corrupt, out_path, f"{corrupt}: corrupt gzip data"),
    (surrogate, out_path, f"{surrogate}:1: field 'task_id' holds a lone UTF-16 surrogate"),
  ]
  for tasks_file, output, message in cases:
    assert _score(tasks_file, pred_path, output) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_wrong_prediction_key_on_every_line_is_an_error(files, capsys):
  """Not a table of zeros: no line has 'completion' or 'program', so nothing can be scored."""
  task_path, pred_path, out_path = files
  pred_path.write_text(
    "".join(json.dumps({"task_id": t, "output": "x"}) + "\n" for t in ("t", "clean"))
  )
  assert _score(task_path, pred_path, out_path) == 2
  err = capsys.readouterr().err
  assert err == (
    f"precisecoder score: error: {pred_path}:1: no 'completion' or 'program' field "
    f"(it has output, task_id); no line of {pred_path} has one\n"
  )
  assert not out_path.exists()


def test_an_empty_task_file_is_an_error(files, capsys):
  task_path, pred_path, out_path = files
  task_path.write_text("\n")
  assert _score(task_path, pred_path, out_path) == 2
  assert capsys.readouterr().err == (
    f"precisecoder score: error: {task_path}: no tasks (the file is empty)\n"
  )


def test_an_interpreter_that_does_not_exist_is_refused(files, capsys):
  task_path, pred_path, out_path = files
  with pytest.raises(SystemExit) as exit_info:
    cli.main(
      [
        "score",
        "--tasks",
        str(task_path),
        "--predictions",
        str(pred_path),
        "--output",
        str(out_path),
        "--python",
        "/no/such/python",
      ]
    )
  assert exit_info.value.code == 2
  assert "--python: no such executable: '/no/such/python'" in capsys.readouterr().err


def test_a_task_set_whose_programs_lack_a_library_is_told_which_environment(
  tmp_path, capsys, monkeypatch
):
  pool = InProcessPool()
  monkeypatch.setattr(
    score_cmd, "_make_pool", lambda workers, python=None: contextlib.nullcontext(pool)
  )
  program = "import precisecoder_no_such_library\ndef f(x):\n  return x\n"
  task = tasks.Task(
    task_id="BigCodeBench/1",
    buggy_code=program,
    gt_solution=program,
    gt_diff={},
    tests={"kind": "assert", "code": "assert f(1) == 1\n"},
    is_buggy=False,
    bug_count=0,
  )
  tasks.write_tasks(tmp_path / "tasks.jsonl", [task])
  (tmp_path / "preds.jsonl").write_text(
    json.dumps({"task_id": "BigCodeBench/1", "program": program}) + "\n"
  )
  assert _score(tmp_path / "tasks.jsonl", tmp_path / "preds.jsonl", tmp_path / "scores.jsonl") == 1
  err = capsys.readouterr().err
  assert "1 run(s) of bigcodebench could not import precisecoder_no_such_library" in err
  assert "requirements-bigcodebench.txt" in err and "scripts/bigcodebench_env.sh" in err


def _interrupt_on_call(monkeypatch, n):
  """RewardScorer.score_records raises KeyboardInterrupt (Ctrl-C) once, on its n-th call;
  returns the list of each call's number of predictions."""
  from precisecoder import rewards

  calls, real, interrupted = [], rewards.RewardScorer.score_records, []

  def score_records(self, tasks_, programs, **kwargs):
    calls.append(len(programs))
    if len(calls) == n and not interrupted:
      interrupted.append(True)
      raise KeyboardInterrupt
    return real(self, tasks_, programs, **kwargs)

  monkeypatch.setattr(rewards.RewardScorer, "score_records", score_records)
  return calls


def test_ctrl_c_keeps_the_scored_batches_and_the_same_command_resumes(
  files, capsys, monkeypatch, tmp_path
):
  task_path, pred_path, out_path = files
  assert _score(task_path, pred_path, tmp_path / "whole.jsonl", "--batch-size", "2") == 0
  whole = (tmp_path / "whole.jsonl").read_text()
  capsys.readouterr()
  calls = _interrupt_on_call(monkeypatch, 2)
  assert _score(task_path, pred_path, out_path, "--batch-size", "2") == 130
  err = capsys.readouterr().err.strip()
  assert "Traceback" not in err and err.splitlines()[-1] == (
    f"precisecoder score: interrupted; the scored batches are kept in {out_path}.partial: "
    "rerun the same command to resume"
  )
  assert not out_path.exists()
  partial = out_path.parent / "scores.jsonl.partial"
  assert len(partial.read_text().splitlines()) == 1 + 2  # the key, the first batch
  calls.clear()
  assert _score(task_path, pred_path, out_path, "--batch-size", "2") == 0
  assert calls == [2, 1]  # only the three predictions left
  assert "precisecoder score: resuming: 2 rows kept from an interrupted run" in (
    capsys.readouterr().err
  )
  assert out_path.read_text() == whole and not partial.exists()


def test_a_changed_input_starts_over_and_says_which(files, capsys, monkeypatch):
  task_path, pred_path, out_path = files
  calls = _interrupt_on_call(monkeypatch, 2)
  assert _score(task_path, pred_path, out_path, "--batch-size", "2") == 130
  calls.clear()
  assert _score(task_path, pred_path, out_path, "--batch-size", "2", "--lam", "0.5") == 0
  assert calls == [2, 2, 1]  # every prediction scored again
  assert "holds rows of another command (changed: lam); starting over" in (capsys.readouterr().err)
  assert len(out_path.read_text().splitlines()) == 5


def test_a_second_command_writing_the_same_output_is_refused(files, capsys):
  from precisecoder.commands import outputs

  task_path, pred_path, out_path = files
  with outputs.OutputLock(out_path):
    assert _score(task_path, pred_path, out_path) == 2
  err = capsys.readouterr().err
  assert (
    err.startswith(
      f"precisecoder score: error: --output {out_path}: another command is writing it ("
    )
    and f"pid {os.getpid()}" in err
  )
  assert _score(task_path, pred_path, out_path) == 0
