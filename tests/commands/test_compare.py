"""`precisecoder compare`: bad arguments, and a tiny two-arm run end to end (train, evaluate,
report, resume)."""

import json

import pytest
from conftest import read_only_folder

from precisecoder.commands import compare
from tests.analysis.test_report import _records, _write_eval

TINY = ["--preset", "tiny", "--config.train.steps=1", "--config.train.eval_every=1"]
# The same with a held-in split, which the wider measurement then measures too.
HELDIN = [*TINY, "--config.data.num_heldin=2", "--config.data.num_heldin_clean=2"]


def _one_line(capsys) -> str:
  err = capsys.readouterr().err
  assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
  return err.strip()


def test_bad_arguments_exit_2(tmp_path, capsys):
  assert compare.main(["--arms", "grpo,nosuch", "--workdir", str(tmp_path)]) == 2
  assert "nosuch.py" in _one_line(capsys)
  with pytest.raises(SystemExit):
    compare.main(["--workdir", str(tmp_path), "--stray"])
  assert compare.main([*TINY, "--workdir", str(tmp_path), "--config.rl.bogus=1"]) == 2
  with pytest.raises(SystemExit):
    compare.main([*TINY, "--workdir", str(tmp_path), "--report-only", "--remeasure", "4"])
  assert "--report-only only rewrites the report" in capsys.readouterr().err


def test_an_asynchronous_arm_needs_its_synchronous_twin(tmp_path, capsys):
  """grpo beside precisecoder_async would confound the recipe with the schedule: refused, one
  line naming the arm without its twin; with twins, --report-only pairs each with its twin."""
  assert compare.main([*TINY, "--arms", "grpo,precisecoder_async", "--workdir", str(tmp_path)]) == 2
  assert "without one: precisecoder_async (" in _one_line(capsys)
  for arm, k, passes in (("grpo", 0, [1, 1, 0, 0]), ("grpo_async", 1, [1, 0, 1, 0])):
    _write_eval(tmp_path / arm, 0, _records([0] * 4, [3] * 4, [0, 1]))
    _write_eval(tmp_path / arm, 1, _records(passes, [2] * 4, [0, 1]))
    (tmp_path / arm / "config.json").write_text(json.dumps({"rl": {"max_staleness": k}}))
  argv = [*TINY, "--arms", "grpo,grpo_async", "--report-only", "--workdir", str(tmp_path)]
  assert compare.main(argv) == 0
  twins = json.loads((tmp_path / "report.json").read_text())["twins"]
  assert twins["grpo_async − grpo"]["staleness"] == [1, 0]
  assert twins["grpo_async − grpo"]["sections"]["validation"]["same"]
  assert "`grpo_async` (k = 1) has the same result as `grpo` (k = 0)" in (
    (tmp_path / "report.md").read_text()
  )


def test_help_points_at_pages_that_say_what_it_promises():
  """--parallel's help sent readers to README for measured times, which moved out of it."""
  import pathlib  # pylint: disable=import-outside-toplevel
  import re  # pylint: disable=import-outside-toplevel
  from precisecoder.commands import checks  # pylint: disable=import-outside-toplevel

  text = " ".join(
    checks.command_parser("precisecoder compare", compare.add_arguments).format_help().split()
  )
  assert "README" not in text
  root = pathlib.Path(__file__).parents[2]
  pages = re.findall(r"docs/[a-z_-]+\.md", text)
  assert pages and all((root / page).is_file() for page in pages)
  assert "--parallel" in (root / "docs" / "compare.md").read_text()


def test_an_unknown_preset_is_one_line(tmp_path, capsys):
  assert compare.main(["--preset", "nope", "--workdir", str(tmp_path)]) == 2
  assert _one_line(capsys).startswith(
    "precisecoder compare: error: unknown run preset 'nope'; known: "
  )


def test_report_only_on_a_workdir_without_arms_is_refused(tmp_path, capsys):
  """A mistyped --workdir: no report of "None"s."""
  assert compare.main([*TINY, "--report-only", "--workdir", str(tmp_path / "typo")]) == 2
  assert _one_line(capsys) == (
    f"precisecoder compare: error: --workdir {tmp_path / 'typo'}: no arm has run there (no "
    f"{tmp_path / 'typo'}/<arm>/config.json for any of grpo, precisecoder); nothing to report"
  )
  assert not (tmp_path / "typo").exists()


def test_a_read_only_workdir_is_refused_before_any_arm_starts(tmp_path, capsys):
  workdir = read_only_folder(tmp_path) / "compare"
  assert compare.main([*TINY, "--workdir", str(workdir)]) == 2
  assert _one_line(capsys).startswith(f"precisecoder compare: error: --workdir {workdir}: ")


def test_two_tiny_arms_train_evaluate_report_and_resume(tmp_path, monkeypatch):
  """CI's comparison: grpo and precisecoder on the tiny random model, one step each, evaluated
  before and after on the same tasks; the rerun trains nothing and rebuilds the report."""
  assert compare.main([*HELDIN, "--workdir", str(tmp_path), "--parallel", "2"]) == 0
  for arm in ("grpo", "precisecoder"):
    final = json.loads((tmp_path / arm / "eval" / "step_1.json").read_text())
    # Per-task records are kept (the intervals need them): 2 validation + 2 clean tasks.
    assert [r["is_buggy"] for r in final["records"]] == [True, True, False, False]
    assert {"unit", "precision", "edit_lines", "noop", "completion"} <= set(final["records"][0])
  base = [
    json.loads((tmp_path / arm / "eval" / "step_0.json").read_text())["records"]
    for arm in ("grpo", "precisecoder")
  ]
  assert [r["task_id"] for r in base[0]] == [r["task_id"] for r in base[1]]
  data = json.loads((tmp_path / "report.json").read_text())
  assert list(data["paper_table"]) == ["base (step 0)", "grpo (step 1)", "precisecoder (step 1)"]
  assert set(data["paper_table"]["grpo (step 1)"]["pass"]) == {"mean", "low", "high", "n"}
  assert set(data["changes"]) == {"grpo − base", "precisecoder − base", "precisecoder − grpo"}
  assert data["notes"] == []  # both arms evaluated the same base identically
  assert data["train"]["grpo"]["reward/unit"]["steps"] == [1]
  text = (tmp_path / "report.md").read_text()
  assert "## Correlations" in text and "![compare_eval](compare_eval.png)" in text
  run = json.loads((tmp_path / "compare.json").read_text())
  logs = {arm: (tmp_path / arm / "train.log").read_text() for arm in ("grpo", "precisecoder")}

  (tmp_path / "report.md").unlink()
  assert compare.main([*HELDIN, "--workdir", str(tmp_path)]) == 0
  assert (tmp_path / "report.md").exists()
  (tmp_path / "report.md").unlink()
  assert compare.main([*HELDIN, "--workdir", str(tmp_path), "--report-only"]) == 0
  assert (tmp_path / "report.md").read_text() == text
  assert json.loads((tmp_path / "compare.json").read_text())["wall_s"] == run["wall_s"]
  for arm, log in logs.items():
    assert (tmp_path / arm / "train.log").read_text() == log  # finished: not started again
  _check_remeasure(tmp_path, monkeypatch)


def _check_remeasure(workdir, monkeypatch):
  """`--remeasure N` on the finished comparison: the base and each arm's last checkpoint on N
  + N fresh held-out tasks and N + N fresh held-in ones, each reported as a split; measured
  once. On the evaluation's own tasks it gives what the trainer's evaluation gave at step 0 and
  at the last step: the same checkpoints, decoded the same way."""
  from precisecoder.data import families
  from precisecoder.experiments import compare_arms, remeasure
  from precisecoder.train import tasksets

  assert compare.main([*HELDIN, "--workdir", str(workdir), "--remeasure", "3"]) == 0
  arms = ("grpo", "precisecoder")
  wide = {
    arm: [json.loads((workdir / arm / "eval" / f"wide_step_{s}.json").read_text()) for s in (0, 1)]
    for arm in arms
  }
  assert wide["grpo"][0] == wide["precisecoder"][0]  # the same base result in both folders
  for arm in arms:  # each arm's own last checkpoint
    assert wide[arm][1]["checkpoint"] == str(workdir / arm / "checkpoints" / "1")
  records = wide["grpo"][1]["records"]
  assert [r["is_buggy"] for r in records] == [True] * 3 + [False] * 3
  evaluated = json.loads((workdir / "grpo" / "eval" / "step_1.json").read_text())["records"]
  assert not {r["task_id"] for r in records} & {r["task_id"] for r in evaluated}  # fresh
  split = json.loads((workdir / "report.json").read_text())["wide"]
  assert list(split["paper_table"]) == ["base (step 0)", "grpo (step 1)", "precisecoder (step 1)"]
  assert split["paper_table"]["grpo (step 1)"]["noop"]["n"] == 3
  assert "Wider held-out measurement" in (workdir / "report.md").read_text()
  # The held-in split: new instances of the training families, none trained on nor held in.
  heldin = json.loads((workdir / "grpo" / "eval" / "wide_heldin_step_1.json").read_text())
  assert [r["is_buggy"] for r in heldin["records"]] == [True] * 3 + [False] * 3
  configs = compare._arms(arms, compare_arms.default_configs_dir(), "tiny", HELDIN[2:])
  specs = compare_arms.run_specs(configs, "tiny", HELDIN[2:], workdir)
  cfg = specs[0].cfg
  known = {t.buggy_code for t in tasksets.train_tasks(cfg) + tasksets.heldin_tasks(cfg)}
  drawn = tasksets.wide_heldin_tasks(cfg, 3)
  assert [t.task_id for t in drawn] == [r["task_id"] for r in heldin["records"]]
  assert not {t.buggy_code for t in drawn} & known
  trained_families = {f.key for f in families.families(cfg.data.tier, "train")}
  assert {t.extra["family"] for t in drawn} <= trained_families
  assert "Wider held-in measurement" in (workdir / "report.md").read_text()
  files = "*/eval/wide*_step_*.json"
  stamps = sorted((p, p.stat().st_mtime_ns) for p in workdir.glob(files))
  assert len(stamps) == 8  # two splits, the base and the last step, in each arm's folder
  assert compare.main([*HELDIN, "--workdir", str(workdir), "--remeasure", "3"]) == 0
  assert sorted((p, p.stat().st_mtime_ns) for p in workdir.glob(files)) == stamps
  # A run without the base's file gets another run's copy, measured on the same tasks.
  (workdir / "precisecoder" / "eval" / "wide_step_0.json").unlink()
  measured = []
  with monkeypatch.context() as patch:
    patch.setattr(remeasure, "_measure", lambda *a, **k: measured.append(a) or {})
    assert compare.main([*HELDIN, "--workdir", str(workdir), "--remeasure", "3"]) == 0
  assert measured == []
  base = json.loads((workdir / "precisecoder" / "eval" / "wide_step_0.json").read_text())
  assert base == wide["grpo"][0]

  monkeypatch.setattr(tasksets, "wide_tasks", lambda cfg, n: tasksets.eval_tasks(cfg))
  monkeypatch.setattr(
    tasksets, "wide_heldin_tasks", lambda cfg, n, seen: tasksets.heldin_tasks(cfg)
  )
  remeasure.remeasure(specs, 3)
  for arm in arms:
    for step in (0, 1):
      trained = json.loads((workdir / arm / "eval" / f"step_{step}.json").read_text())
      for split, records in (
        ("wide", trained["records"]),
        ("wide_heldin", trained["heldin"]["records"]),
      ):
        again = json.loads((workdir / arm / "eval" / f"{split}_step_{step}.json").read_text())
        assert [r["completion"] for r in again["records"]] == [r["completion"] for r in records]


def test_a_failing_arm_exits_1_and_still_reports(tmp_path, capsys):
  """Both arms' trainers refuse the config (exit 2 before loading a model): compare says which
  arms failed, shows their logs' tails, exits 1 and writes a report naming what is missing."""
  code = compare.main(
    [
      *TINY,
      "--workdir",
      str(tmp_path),
      "--parallel",
      "2",
      "--config.data.task_file=/nonexistent/tasks.jsonl",
    ]
  )
  assert code == 1
  assert "arms failed: grpo, precisecoder" in capsys.readouterr().err
  assert "no such file" in (tmp_path / "grpo" / "train.log").read_text()
  assert (
    "No evaluation after training yet for: grpo, precisecoder."
    in (tmp_path / "report.md").read_text()
  )


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
  """Ctrl-C while the arms train: run_arms stops them with SIGTERM (each checkpoints its
  finished step, tests/train/test_rl.py) and re-raises; the command says so in one line."""
  from precisecoder.experiments import compare_arms

  def interrupted(runs, preset, parallel):
    raise KeyboardInterrupt

  monkeypatch.setattr(compare_arms, "run_arms", interrupted)
  monkeypatch.setattr(compare_arms, "prepare_base", lambda cfg: None)
  assert compare.main([*TINY, "--workdir", str(tmp_path)]) == 130
  assert _one_line(capsys) == (
    f"precisecoder compare: interrupted; each running arm saved a checkpoint of its last step "
    f"in {tmp_path}: rerun the same command to resume"
  )
