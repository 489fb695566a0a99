"""The run report (report) on hand-built evaluation files (no training)."""

import json
import pathlib

import pytest

from precisecoder.analysis import report


def _records(passes, edit_lines, noops):
  """Evaluation records: buggy tasks b0.. (pass, edited lines), clean tasks c0.. (no-op)."""
  buggy = [
    {
      "task_id": f"b{i}",
      "is_buggy": True,
      "unit": float(p),
      "precision": float(p),
      "recall": float(p),
      "f1": float(p),
      "edit_lines": float(n),
      "noop": 0.0,
      "damage": 0.0,
    }
    for i, (p, n) in enumerate(zip(passes, edit_lines))
  ]
  clean = [
    {
      "task_id": f"c{i}",
      "is_buggy": False,
      "unit": 1.0 - n,
      "precision": 0.0,
      "recall": 0.0,
      "f1": 0.0,
      "edit_lines": 0.0 if n else 2.0,
      "noop": float(n),
      "damage": float(1 - n),
    }
    for i, n in enumerate(noops)
  ]
  return buggy + clean


def _write_eval(workdir: pathlib.Path, step: int, records) -> None:
  (workdir / "eval").mkdir(parents=True, exist_ok=True)
  buggy = [r for r in records if r["is_buggy"]]
  clean = [r for r in records if not r["is_buggy"]]
  summary = {
    "pass": sum(r["unit"] for r in buggy) / len(buggy),
    "precision": sum(r["precision"] for r in buggy) / len(buggy),
    "edit_lines": sum(r["edit_lines"] for r in buggy) / len(buggy),
    "noop": sum(r["noop"] for r in clean) / len(clean),
    "num_buggy": len(buggy),
    "num_clean": len(clean),
  }
  (workdir / "eval" / f"step_{step}.json").write_text(
    json.dumps({"step": step, "summary": summary, "records": records})
  )


def test_run_report_gives_intervals_and_a_paired_change(tmp_path):
  n = 20
  _write_eval(tmp_path, 0, _records([0] * n, [4] * n, [0, 1] * 5))
  _write_eval(tmp_path, 4, _records([1] * n, [1] * n, [0, 1] * 5))
  (tmp_path / "metrics.jsonl").write_text(
    json.dumps({"step": 4, "reward": 0.5, "time/step": 2.0}) + "\n"
  )
  text = report.write_report(tmp_path).read_text()
  assert "| base (step 0) | 0.0 [0.0, 0.0] |" in text
  assert "| step 4 (final) | 100.0 [100.0, 100.0] |" in text
  # Every task passes after, none before: the paired change excludes 0; no-op did not move.
  row = next(line for line in text.splitlines() if line.startswith("| step 4 − base |"))
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert cells[1] == "+100.0 [+100.0, +100.0] *"
  assert cells[5] == "-3.00 [-3.00, -3.00] *"
  assert cells[6:] == ["+0.0 [+0.0, +0.0]"] * 3  # no-op (buggy, clean), damage
  assert (
    "**The policy learned**: between the base model and step 4, pass +100.0 [+100.0, "
    "+100.0]; precision +100.0 [+100.0, +100.0]; F1 +100.0 [+100.0, +100.0] rose beyond "
    "task-to-task noise. Other changes beyond noise: recall +100.0 [+100.0, +100.0]; "
    "edited lines -3.00 [-3.00, -3.00]."
  ) in text


def test_a_run_that_did_not_learn_says_so_and_what_moved_instead(tmp_path):
  """The main job's story: edited lines fell because buggy programs came back unchanged."""
  n = 16
  before = _records([0] * n, [3] * n, [1, 0] * 4)
  after = _records([0] * n, [3] * 6 + [0] * 10, [1, 0] * 4)
  for r in after[6:n]:
    r["noop"] = 1.0  # returned unchanged: 0 edited lines, still failing
  _write_eval(tmp_path, 0, before)
  _write_eval(tmp_path, 8, after)
  rows = [
    {
      "step": s,
      "reward": 0.0,
      "reward/unit": 0.0,
      "reward/edit_lines": 4.0 - 0.5 * s,
      "reward/noop": 0.1 * s,
      "zero_variance_groups": 1.0 if s > 3 else 0.5,
      "skipped_update": float(s > 3),
      "train/clip_fraction": 0.0,
      "train/grad_norm": 0.0 if s > 3 else 1.0 / s,
      "time/step": 10.0,
    }
    for s in range(1, 9)
  ]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  text = report.write_report(tmp_path).read_text()
  verdict = next(line for line in text.splitlines() if line.startswith("**"))
  assert verdict.startswith(
    "**This run did not learn**: between the base model and step 8 no "
    "paired change in pass, precision or F1 has a 95% interval above 0."
  )
  assert "Other changes beyond noise: edited lines -1.88 [" in verdict
  assert "no-op on buggy tasks +62.5 [" in verdict
  assert verdict.endswith(
    "the policy edits less by leaving bugs in place, not by fixing them more precisely."
  )
  assert (
    "| step | pass | precision | recall | f1 | edit_lines | noop_buggy | noop | damage |" in text
  )
  assert (
    "| step 8 (final) | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | "
    "1.12 [" in text
  )
  assert "- 8 steps; **5 of 8 had no reward variance in any group**: every advantage was 0" in text
  assert (
    "- Groups without reward variance: 81% of all groups (50% in the first steps, 100% in "
    "the last)." in text
  )
  assert (
    "- Training samples, first steps → last: pass 0% → 0%, edited lines 3.00 → 0.50, "
    "no-op on buggy tasks 20% → 70%." in text
  )
  assert (
    "- Not plotted, constant over the run: reward 0 at every step; train pass 0 at every "
    "step; clip fraction 0 at every step; step time (s) 10 at every step." in text
  )
  assert (tmp_path / "train.png").stat().st_size > 0 and (tmp_path / "eval.png").stat().st_size > 0


def test_a_report_without_a_base_cannot_tell(tmp_path):
  _write_eval(tmp_path, 4, _records([1, 0], [1, 1], [1, 0]))
  text = report.write_report(tmp_path).read_text()
  assert (
    "**Did the policy learn?** Cannot tell: that needs per-task records of the base model "
    "(step 0) and of a later evaluation." in text
  )


def test_report_from_summaries_without_per_task_records(tmp_path):
  (tmp_path / "eval").mkdir()
  for step, p in ((0, 0.25), (4, 0.5)):
    (tmp_path / "eval" / f"step_{step}.json").write_text(
      json.dumps(
        {
          "step": step,
          "summary": {
            "pass": p,
            "precision": 0.4,
            "recall": 0.5,
            "edit_lines": 3.25,
            "noop": 0.0,
            "damage": 0.5,
          },
        }
      )
    )
  (tmp_path / "metrics.jsonl").write_text(
    json.dumps({"step": 0, "eval/pass": 0.25})
    + "\n"
    + json.dumps(
      {"step": 4, "eval/pass": 0.5, "reward": 0.3, "time/step": 10.0, "time/reward_exposed": 0.5}
    )
    + "\n"
  )
  path = report.write_report(tmp_path)
  text = path.read_text()
  # Files without per-task records (older runs): means only, no interval; no F1 recorded.
  assert "| base (step 0) | 25.0 | 40.0 | 50.0 | – | 3.25 | – | 0.0 | 50.0 |" in text
  assert "| step 4 (final) | 50.0 |" in text
  assert "5.0% of step time" in text
  assert (tmp_path / "eval.png").exists()


def test_run_report_json_holds_the_table_and_the_change(tmp_path):
  n = 10
  _write_eval(tmp_path, 0, _records([0] * n, [4] * n, [0, 1] * 5))
  _write_eval(tmp_path, 4, _records([1] * n, [1] * n, [0, 1] * 5))
  report.write_report(tmp_path)
  data = json.loads((tmp_path / "report.json").read_text())
  assert list(data["paper_table"]) == ["base (step 0)", "step 4 (final)"]
  change = data["changes"]["step 4 − base"]
  assert change["pass"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": n}
  assert change["edit_lines"]["mean"] == pytest.approx(-3.0)


def test_run_report_judges_the_held_in_tasks_apart(tmp_path):
  """A run that learned on held-in tasks but not on held-out validation tasks says both, and
  report.json carries the held-in table and change, no-op and damage on its correct programs
  included."""
  n = 10
  for step, passes, noops in ((0, [0] * n, [0, 0, 0, 1]), (4, [1] * n, [1, 1, 0, 1])):
    _write_eval(tmp_path, step, _records([0] * n, [4] * n, [0, 1] * 5))
    path = tmp_path / "eval" / f"step_{step}.json"
    data = json.loads(path.read_text())
    data["heldin"] = {
      "summary": {"num_buggy": n, "num_clean": 4},
      "records": _records(passes, [2] * n, noops),
    }
    path.write_text(json.dumps(data))
  text = report.write_report(tmp_path).read_text()
  assert "**This run did not learn on validation tasks**" in text
  assert "**The policy learned on held-in tasks**" in text and "### Held-in tasks" in text
  assert "10 tasks and 4 correct programs: new instances" in text
  data = json.loads((tmp_path / "report.json").read_text())
  assert data["heldin"]["changes"]["step 4 − base"]["pass"]["mean"] == 1.0
  assert data["heldin"]["changes"]["step 4 − base"]["noop"]["mean"] == pytest.approx(0.5)
  assert data["heldin"]["changes"]["step 4 − base"]["damage"]["mean"] == pytest.approx(-0.5)
  assert data["changes"]["step 4 − base"]["pass"]["mean"] == 0.0
  # eval.png: a row per evaluated split, the held-in tasks (which moved) first.
  assert [name for name, _ in report.eval_sections(report.load_evals(tmp_path))] == [
    "Held-in tasks",
    "validation tasks",
  ]


def test_training_summary_says_when_every_step_updated():
  rows = [
    {"step": s, "reward": 0.5, "zero_variance_groups": 0.25, "skipped_update": 0.0}
    for s in (1, 2, 3)
  ]
  assert report.training_summary(rows)[0] == (
    "- 3 steps, each with reward variance in some group: every step updated the policy."
  )


def test_broken_tasks_the_run_met_are_named_in_the_report(tmp_path):
  """The trainer only warned on the console about broken tasks (rows of reward 0): the run
  records them, a resumed run adds to them, and report.md names each."""
  from precisecoder.train import metrics  # pylint: disable=import-outside-toplevel

  _write_eval(tmp_path, 0, _records([0, 1], [1, 1], [1]))
  metrics.record_broken_tasks(tmp_path, {"gen_7": "reference fix fails: AssertionError"})
  metrics.record_broken_tasks(tmp_path, {"gen_9": "buggy program passes its tests"})
  text = report.write_report(tmp_path).read_text()
  assert "## Broken tasks" in text and "**2 task(s) are broken**" in text
  assert "- `gen_7`: reference fix fails: AssertionError" in text
  assert "- `gen_9`: buggy program passes its tests" in text
  # A run that met none says nothing about them.
  (tmp_path / metrics.BROKEN_TASKS_FILE).unlink()
  assert "Broken tasks" not in report.write_report(tmp_path).read_text()
