"""`precisecoder evaluate` end to end on a tiny checkpoint: resumable shards, the paper's table
with intervals, per-task rows and the correlations."""

import json

import pytest
from conftest import make_tiny_chat_checkpoint

from precisecoder import cli, tasks as tasks_lib
from precisecoder.analysis import score_tables

CHATML = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
INC_BUGGY, INC = "def inc(x):\n    return x - 1\n", "def inc(x):\n    return x + 1\n"
NEG_BUGGY, NEG = "def neg(x):\n    return x\n", "def neg(x):\n    return -x\n"


def _task(task_id, buggy, fixed, entry, case, family, is_buggy=True):
  return tasks_lib.Task(
    task_id=task_id,
    buggy_code=buggy,
    gt_solution=fixed,
    gt_diff=tasks_lib.derive_gt_diff(buggy, fixed),
    tests={"kind": "call", "entry_point": entry, "cases": [case]},
    is_buggy=is_buggy,
    bug_count=int(is_buggy),
    extra={"family": family},
  )


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tiny_eval")
  make_tiny_chat_checkpoint(folder, CHATML, [INC_BUGGY + INC, NEG_BUGGY + NEG])
  buggy = [
    _task("inc_0", INC_BUGGY, INC, "inc", {"args": [1], "expected": 2}, "inc"),
    _task("neg_0", NEG_BUGGY, NEG, "neg", {"args": [2], "expected": -2}, "neg"),
  ]
  clean = [_task("inc_clean", INC, INC, "inc", {"args": [1], "expected": 2}, "inc", False)]
  tasks_lib.write_tasks(folder / "tasks.jsonl", buggy)
  tasks_lib.write_tasks(folder / "clean.jsonl", clean)
  return folder


def _argv(folder, out):
  return [
    "evaluate",
    "--checkpoint",
    str(folder),
    "--tasks",
    str(folder / "tasks.jsonl"),
    "--clean",
    str(folder / "clean.jsonl"),
    "--output",
    str(out),
    "--samples",
    "2",
    "--temperature",
    "1.0",
    "--max-new-tokens",
    "4",
    "--shard-size",
    "1",
    "--workers",
    "1",
    "--resamples",
    "200",
  ]


def test_evaluate_writes_table_and_resumes(setup, tmp_path, capsys):
  out = tmp_path / "eval"
  assert cli.main(_argv(setup, out)) == 0
  assert "| checkpoint | pass |" in capsys.readouterr().out
  shards = sorted(p.name for p in (out / "shards").glob("*.scores.jsonl"))
  assert shards == ["buggy-0000.scores.jsonl", "buggy-0001.scores.jsonl", "clean-0000.scores.jsonl"]
  predictions = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
  scores = [json.loads(l) for l in (out / "scores.jsonl").read_text().splitlines()]
  assert len(predictions) == len(scores) == 6
  assert {(s["task_id"], s["is_buggy"], s["source"]) for s in scores} == {
    ("inc_0", True, "inc"),
    ("neg_0", True, "neg"),
    ("inc_clean", False, "inc"),
  }
  per_task = [json.loads(l) for l in (out / "per_task.jsonl").read_text().splitlines()]
  assert [(r["task_id"], r["samples"]) for r in per_task] == [
    ("inc_0", 2),
    ("neg_0", 2),
    ("inc_clean", 2),
  ]
  table = json.loads((out / "table.json").read_text())
  assert table["buggy_tasks"] == 2 and table["clean_tasks"] == 1
  assert table["columns"]["pass"]["n"] == 2 and table["columns"]["noop"]["n"] == 1
  assert table["columns"] == score_tables.results(scores, resamples=200)["columns"]
  assert set(table["correlations"]) == {"edit_size_vs_unit", "precision_vs_noop"}
  assert "edit size" in (out / "table.md").read_text()
  # analyze traces reads the directory (its settings name the task files).
  assert cli.main(["analyze", "traces", "--run", str(out), "--output", str(tmp_path / "tr")]) == 0
  assert json.loads((tmp_path / "tr.json").read_text())["completions"] == 6

  # A rerun skips finished shards: drop one shard's scores and only that is redone.
  (out / "shards" / "buggy-0001.scores.jsonl").unlink()
  before = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
  assert cli.main(_argv(setup, out)) == 0
  after = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
  redone = {name for name in after if before.get(name) != after[name]}
  assert redone == {"buggy-0001.scores.jsonl"}
  assert json.loads((out / "table.json").read_text())["columns"] == table["columns"]

  # Other settings in the same directory are refused.
  assert cli.main(_argv(setup, out)[:-2] + ["--resamples", "200", "--seed", "3"]) == 2
  assert "seed" in capsys.readouterr().err
  # An output path that is a file (here the task file itself) is refused before any work.
  assert cli.main(_argv(setup, setup / "tasks.jsonl")) == 2
  assert "--output" in capsys.readouterr().err


def test_a_failed_evaluation_does_not_block_its_corrected_rerun(
  setup, tmp_path, monkeypatch, capsys
):
  """The first shard's generation fails: its settings bind nothing, the rerun with other
  settings (here a corrected seed) runs; once a shard finished, other settings are refused."""
  from precisecoder.commands import generate

  out = tmp_path / "eval"
  argv = [
    "evaluate",
    "--checkpoint",
    str(setup),
    "--tasks",
    str(setup / "tasks.jsonl"),
    "--limit",
    "1",
    "--output",
    str(out),
    "--max-new-tokens",
    "2",
    "--workers",
    "1",
    "--resamples",
    "10",
  ]
  from precisecoder.commands import checks

  def fails(args):
    raise checks.InputError("cannot sample")

  real = generate.write_predictions
  monkeypatch.setattr(generate, "write_predictions", fails)
  assert cli.main(argv) == 2
  assert "precisecoder generate: error: cannot sample" in capsys.readouterr().err
  assert (out / "settings.json").exists() and list((out / "shards").glob("*.tasks.jsonl"))
  monkeypatch.setattr(generate, "write_predictions", real)
  assert cli.main(argv + ["--seed", "5"]) == 0
  assert json.loads((out / "settings.json").read_text())["seed"] == 5
  assert cli.main(argv) == 2
  assert "holds an evaluation with other settings (seed)" in capsys.readouterr().err


def test_empty_task_files_and_oversized_batches_are_one_line_errors(setup, tmp_path, capsys):
  (tmp_path / "empty.jsonl").write_text("")
  argv = _argv(setup, tmp_path / "eval")
  argv[argv.index("--clean") + 1] = str(tmp_path / "empty.jsonl")
  assert cli.main(argv) == 2
  err = capsys.readouterr().err
  assert err == (
    f"precisecoder evaluate: error: {tmp_path / 'empty.jsonl'}: no tasks (the file is empty)\n"
  )
  assert cli.main(_argv(setup, tmp_path / "eval") + ["--samples", str(10**9)]) == 2
  err = [l for l in capsys.readouterr().err.splitlines() if l.startswith("precisecoder")]
  assert len(err) == 1 and "x --samples 1000000000 x --max-new-tokens 4 needs at least" in err[0]
  assert not (tmp_path / "eval" / "settings.json").exists()


def test_evaluate_turns_adds_pass_and_edits_by_turn(tmp_path, capsys):
  """--turns: episodes (a model that always answers "x" and hears feedback once), each earlier
  turn's program scored too, and pass and edited lines by turn in the tables."""
  folder = tmp_path / "answers_x"
  make_tiny_chat_checkpoint(folder, CHATML, [INC_BUGGY + INC, NEG_BUGGY + NEG], answer="x")
  tasks_lib.write_tasks(
    folder / "tasks.jsonl",
    [
      _task("inc_0", INC_BUGGY, INC, "inc", {"args": [1], "expected": 2}, "inc"),
      _task("neg_0", NEG_BUGGY, NEG, "neg", {"args": [2], "expected": -2}, "neg"),
    ],
  )
  tasks_lib.write_tasks(
    folder / "clean.jsonl",
    [_task("inc_clean", INC, INC, "inc", {"args": [1], "expected": 2}, "inc", False)],
  )
  out = tmp_path / "eval"
  argv = _argv(folder, out) + ["--turns", "2", "--feedback-tokens", "256"]
  assert cli.main(argv) == 0
  assert "| turn | pass | edit_lines |" in capsys.readouterr().out
  predictions = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
  assert [len(p["turns"]) for p in predictions] == [2] * 6
  assert sorted(p.name for p in (out / "shards").glob("*.turn1.scores.jsonl")) == [
    "buggy-0000.turn1.scores.jsonl",
    "buggy-0001.turn1.scores.jsonl",
    "clean-0000.turn1.scores.jsonl",
  ]
  table = json.loads((out / "table.json").read_text())
  by_turn = table["by_turn"]
  assert [x["n"] for x in by_turn["pass"]] == [2, 2] and by_turn["pass"][0]["mean"] == 0.0
  assert by_turn["pass"][1] == table["columns"]["pass"]  # the last turn is the episode's
  assert by_turn["edit_lines"][1]["mean"] == table["columns"]["edit_lines"]["mean"] > 0
  before = {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
  assert cli.main(argv) == 0  # a rerun redoes nothing
  assert before == {p.name: p.stat().st_mtime_ns for p in (out / "shards").iterdir()}
  # Settings an older evaluation lacks count as their old values (one turn, ...).
  settings = json.loads((out / "settings.json").read_text())
  del settings["visible_tests"]  # 3, the default
  (out / "settings.json").write_text(json.dumps(settings))
  assert cli.main(argv) == 0
  del settings["turns"]  # 1 before --turns existed: not this evaluation
  (out / "settings.json").write_text(json.dumps(settings))
  assert cli.main(argv) == 2 and "(turns)" in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_exit_130(setup, tmp_path, monkeypatch, capsys):
  from precisecoder import sampling

  def interrupted(*args, **kwargs):
    raise KeyboardInterrupt

  monkeypatch.setattr(sampling, "sample", interrupted)
  out = tmp_path / "eval"
  argv = [
    "evaluate",
    "--checkpoint",
    str(setup),
    "--tasks",
    str(setup / "tasks.jsonl"),
    "--limit",
    "1",
    "--output",
    str(out),
    "--max-new-tokens",
    "2",
    "--workers",
    "1",
  ]
  assert cli.main(argv) == 130
  err = capsys.readouterr().err
  assert "Traceback" not in err and err.strip().splitlines()[-1] == (
    f"precisecoder evaluate: interrupted; the finished shards, and the batches of the one under "
    f"way, are kept in {out}: rerun the same command to resume"
  )
