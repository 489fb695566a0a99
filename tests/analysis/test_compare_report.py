"""The comparison report (compare_report) on hand-built evaluation files of two arms: tables,
paired changes, correlations, PNGs, seeds and splits, and what it says when files are missing."""

import json

import pytest

from precisecoder.analysis import compare_report
from tests.analysis.test_report import _records, _write_eval


def test_comparison_report_tables_correlations_and_pngs(tmp_path, monkeypatch):
  n = 24
  base = _records([0, 1] * (n // 2), [3] * n, [0, 0, 1, 1] * 3)
  # GRPO: more passes, larger edits, fewer no-ops; PreciseCoder: same passes, small edits.
  evaluations = {
    ("grpo", 0): base,
    ("precisecoder", 0): base,
    ("grpo", 2): _records([1] * n, [6] * n, [0, 0, 0, 1] * 3),
    ("precisecoder", 2): _records([1] * n, [1] * n, [1, 1, 1, 0] * 3),
  }
  for (arm, step), records in evaluations.items():
    _write_eval(tmp_path / arm, step, records)
    # The held-in split holds the same records: its correlations are the validation ones, read
    # from records where the validation ones read the summaries.
    path = tmp_path / arm / "eval" / f"step_{step}.json"
    path.write_text(
      json.dumps(dict(json.loads(path.read_text()), heldin={"summary": {}, "records": records}))
    )
  for arm, lines in (("grpo", (3.0, 5.0)), ("precisecoder", (3.0, 1.5))):
    (tmp_path / arm / "metrics.jsonl").write_text(
      "".join(
        json.dumps(
          {
            "step": s,
            "reward": 0.1 * s,
            "reward/unit": 0.2,
            "reward/edit_lines": v,
            "reward/noop": 0.0,
            "zero_variance_groups": 0.5,
          }
        )
        + "\n"
        for s, v in zip((1, 2), lines)
      )
    )
  run = {
    "preset": "tiny",
    "overrides": [],
    # The workdir's record also holds an arm this report leaves out: not reported.
    "wall_s": {"grpo": 3.0, "ea_grpo": 9.0, "grpo/seed_1": 5.0},
    "invocations": [
      {"parallel": 2, "trained": ["grpo"]},
      {"parallel": 3, "trained": ["ea_grpo", "grpo/seed_1"]},
    ],
  }
  path = compare_report.write(tmp_path, ["grpo", "precisecoder"], run)
  text = path.read_text()
  assert "arms trained 2 at a time; wall time per arm (all its runs) `grpo` 3 s." in text
  assert "| grpo (step 2) | 100.0 [100.0, 100.0] |" in text
  change = next(line for line in text.splitlines() if line.startswith("| precisecoder − grpo |"))
  assert "-5.00 [-5.00, -5.00] *" in change  # edited lines, paired by task
  assert "| precisecoder | 2 |" in text and "3.00 → 1.50" in text
  data = json.loads((tmp_path / "report.json").read_text())
  assert data["changes"]["grpo − base"]["pass"]["mean"] == pytest.approx(0.5)
  points = data["correlations"]["precision_noop_points"]
  assert [(p["arm"], p["step"]) for p in points] == [("base", 0), ("grpo", 2), ("precisecoder", 2)]
  # Precision 0.5, 1, 1 against no-op 0.5, 0.25, 0.75: r = 0 by symmetry.
  assert data["correlations"]["precision_noop"]["r"] == pytest.approx(0.0, abs=1e-9)
  # Edit size vs unit pools the base once and each arm's later evaluations (buggy samples).
  pooled = data["correlations"]["edit_size_unit"]["all arms"]
  assert pooled["n"] == 3 * n and -1 < pooled["r"] < 0
  heldin = data["heldin"]["correlations"]
  assert heldin["edit_size_unit"] == data["correlations"]["edit_size_unit"]
  assert heldin["precision_noop"]["r"] == pytest.approx(0.0, abs=1e-9)
  assert heldin["precision_noop_points"] == points
  assert "- On held-in tasks: edit size vs unit grpo" in text
  assert (tmp_path / "compare_eval.png").stat().st_size > 0
  assert (tmp_path / "compare_train.png").stat().st_size > 0
  # Every split's curves are kept at every step, so the plots can be redrawn from report.json.
  assert set(data["heldin"]["evaluations"]["grpo"]) == {"0", "2"}
  drawn = []
  monkeypatch.setattr(
    compare_report.plots,
    "plot_sections",
    lambda sections, *a: drawn.append([name for name, _ in sections]),
  )
  assert compare_report.plots_from_json(tmp_path)  # compare_train.png, from report.json alone
  assert drawn == [["validation tasks", "Held-in tasks"]]  # tied: validation first


def test_the_split_that_moved_leads_the_evaluation_plot():
  """The held-in tasks moved beyond noise and the validation tasks did not: held-in first."""
  from precisecoder.analysis import statistics  # pylint: disable=import-outside-toplevel

  flat = {"pass": statistics.Interval(0.0, 0.0, 0.0, 64)}
  up = {
    "pass": statistics.Interval(0.2, 0.1, 0.3, 64),
    "precision": statistics.Interval(0.3, 0.2, 0.4, 64),
  }
  changes = {
    "": {"grpo − base": flat},
    "heldin": {"grpo − base": up, "grpo − x": flat},
    "multi": {"grpo − base": {"pass": statistics.Interval(0.1, 0.05, 0.2, 64)}},
  }
  assert compare_report.section_order(changes) == ["heldin", "multi", ""]


def test_comparison_report_names_what_is_missing(tmp_path):
  _write_eval(tmp_path / "grpo", 0, _records([0, 1], [2, 2], [1, 0]))
  _write_eval(tmp_path / "precisecoder", 0, _records([1, 1], [2, 2], [1, 0]))
  text = compare_report.write(tmp_path, ["grpo", "precisecoder"]).read_text()
  assert "`precisecoder`'s base evaluation differs from `grpo`'s in pass" in text
  assert "No evaluation after training yet for: grpo, precisecoder." in text


def test_comparison_over_seeds_and_the_multi_line_split(tmp_path):
  """Arms at two seeds: the paper's table pools the seeds (a task at its mean over seeds),
  the over-seeds table gives a t-interval of the seeds' means and the per-seed differences;
  the multi-line split gets its own table and change from the base."""
  n = 8
  base = _records([0] * n, [3] * n, [0, 1] * 4)
  multi_base = [r for r in _records([0] * n, [6] * n, []) if r["is_buggy"]]
  # Held-in correct programs: the base leaves 1 of 4 alone, grpo 2, precisecoder all 4.
  heldin_clean = {
    (arm, step): [r for r in _records([], [], noops) if not r["is_buggy"]]
    for arm, step, noops in (
      ("grpo", 0, [1, 0, 0, 0]),
      ("precisecoder", 0, [1, 0, 0, 0]),
      ("grpo", 5, [1, 1, 0, 0]),
      ("precisecoder", 5, [1, 1, 1, 1]),
    )
  }
  for arm in ("grpo", "precisecoder"):
    for seed in (0, 1):
      workdir = tmp_path / arm / f"seed_{seed}"
      _write_eval(workdir, 0, base)
      passes = [1] * (n // 2 + seed) + [0] * (n // 2 - seed)  # seed 1 passes one more task
      lines = [4 if arm == "grpo" else 1] * n
      _write_eval(workdir, 5, _records(passes, lines, [0, 1] * 4))
      for step in (0, 5):
        path = workdir / "eval" / f"step_{step}.json"
        data = json.loads(path.read_text())
        data["multi"] = {
          "summary": {},
          "records": [
            dict(r, unit=float(step > 0), edit_lines=6.0 - step // 5 * 2) for r in multi_base
          ],
        }
        data["heldin"] = {
          "summary": {},
          "records": [
            dict(r, edit_lines=5.0 - step // 5 * (3 if arm == "grpo" else 4)) for r in multi_base
          ]
          + heldin_clean[(arm, step)],
        }
        path.write_text(json.dumps(data))
      (workdir / "metrics.jsonl").write_text(
        json.dumps(
          {"step": 5, "reward": 0.5 + seed, "reward/unit": 0.5, "zero_variance_groups": 0.0}
        )
        + "\n"
      )
  text = compare_report.write(tmp_path, ["grpo", "precisecoder"], seeds=[0, 1]).read_text()
  data = json.loads((tmp_path / "report.json").read_text())
  # Pooled over seeds: 4 tasks pass at both seeds, 1 at seed 1 only (0.5), 3 never.
  assert data["paper_table"]["grpo (step 5)"]["pass"]["mean"] == pytest.approx(4.5 / 8)
  assert data["paper_table"]["grpo (step 5)"]["pass"]["n"] == n
  seeds = data["seeds"]
  assert {k: v["pass"] for k, v in seeds["per_seed"]["grpo"].items()} == {"0": 0.5, "1": 0.625}
  assert seeds["tables"]["grpo"]["pass"]["mean"] == pytest.approx(4.5 / 8)
  assert seeds["tables"]["grpo"]["pass"]["n"] == 2
  # Seed means 0.5 and 0.625: t(0.975, 1) = 12.706, sd/sqrt(2) = 0.0625.
  assert seeds["tables"]["grpo"]["pass"]["high"] == pytest.approx(
    4.5 / 8 + 12.706 * 0.0625, abs=1e-3
  )
  edit = seeds["changes"]["precisecoder − grpo"]["edit_lines"]
  assert edit["mean"] == pytest.approx(-3.0) and edit["low"] == pytest.approx(-3.0)
  multi = data["multi"]
  assert multi["paper_table"]["base (step 0)"]["pass"]["mean"] == 0.0
  assert multi["changes"]["precisecoder − base"]["pass"]["mean"] == pytest.approx(1.0)
  assert multi["changes"]["precisecoder − base"]["edit_lines"]["mean"] == pytest.approx(-2.0)
  assert multi["changes"]["precisecoder − grpo"]["pass"]["mean"] == 0.0
  heldin = data["heldin"]["changes"]
  assert heldin["grpo − base"]["edit_lines"]["mean"] == pytest.approx(-3.0)
  assert heldin["precisecoder − grpo"]["edit_lines"]["mean"] == pytest.approx(-1.0)
  assert heldin["precisecoder − grpo"]["noop"]["mean"] == pytest.approx(0.5)
  # Over seeds on the held-in split too: every seed's no-op is 0.5 (grpo) and 1.0.
  heldin_seeds = data["heldin"]["seeds"]
  assert heldin_seeds["tables"]["grpo"]["noop"]["mean"] == pytest.approx(0.5)
  assert heldin_seeds["changes"]["precisecoder − grpo"]["noop"]["mean"] == pytest.approx(0.5)
  assert heldin_seeds["changes"]["precisecoder − grpo"]["edit_lines"]["low"] == pytest.approx(-1.0)
  assert data["heldin"]["paper_table"]["base (step 0)"]["noop"]["mean"] == pytest.approx(0.25)
  assert "## Over seeds" in text and "## Multi-line split (generalisation)" in text
  section = text[text.index("## Held-in tasks") : text.index("## Multi-line split")]
  assert "| model | pass | precision | recall | f1 | edit_lines | noop | damage |" in section
  multi_section = text[text.index("## Multi-line split") :]
  assert "| model | pass | precision | recall | f1 | edit_lines |\n" in multi_section


def test_asynchronous_arms_beside_their_synchronous_twins(tmp_path):
  """Each k = 1 arm minus its k = 0 twin, by task (seeds pooled) and by seed, with a verdict in
  words: grpo_async learns exactly as grpo does (the same within the intervals);
  precisecoder_async learns nothing on held-in tasks (beyond noise)."""
  n = 8
  base = _records([0] * n, [3] * n, [0, 1] * 4)
  arms = {"grpo": 0, "precisecoder": 0, "grpo_async": 1, "precisecoder_async": 1}
  for arm, k in arms.items():
    for seed in (0, 1):
      workdir = tmp_path / arm / f"seed_{seed}"
      learned = arm != "precisecoder_async"
      passes = [1] * (n // 2 + seed) + [0] * (n // 2 - seed) if learned else [0] * n
      for step, records in ((0, base), (5, _records(passes, [2] * n, [0, 1] * 4))):
        _write_eval(workdir, step, records)
        path = workdir / "eval" / f"step_{step}.json"
        data = json.loads(path.read_text())
        path.write_text(json.dumps(dict(data, heldin={"summary": {}, "records": records})))
      (workdir / "config.json").write_text(json.dumps({"rl": {"max_staleness": k}}))
  twins = {"grpo_async": "grpo", "precisecoder_async": "precisecoder"}
  text = compare_report.write(tmp_path, list(arms), {"twins": twins}, seeds=[0, 1]).read_text()
  data = json.loads((tmp_path / "report.json").read_text())["twins"]
  same = data["grpo_async − grpo"]["sections"]["heldin"]
  assert data["grpo_async − grpo"]["staleness"] == [1, 0]
  assert same["same"] and same["by_task"]["pass"]["mean"] == 0.0
  assert same["by_seed"]["pass"]["n"] == 2 and same["seeds"] == [0, 1]
  assert same["from_base"]["grpo_async"]["pass"]["mean"] == pytest.approx(4.5 / 8)
  assert len(same["inside_twin_interval"]) == 7  # every paper column
  worse = data["precisecoder_async − precisecoder"]["sections"]["heldin"]
  assert not worse["same"] and ["pass", "by task"] in worse["beyond_noise"]
  assert worse["by_task"]["pass"]["mean"] == pytest.approx(-4.5 / 8)
  assert "pass" not in worse["inside_twin_interval"]
  section = text[text.index("## Asynchronous arms beside their synchronous twins") :]
  assert section.index("### On held-in tasks") < section.index("### On validation tasks")
  assert (
    "On held-in tasks `grpo_async` (k = 1) has the same result as `grpo` (k = 0) within the "
    "intervals: no column's difference excludes 0, paired by task or by seed (2 seeds); pass "
    "+0.0 [+0.0, +0.0]"
  ) in section
  assert "On held-in tasks `precisecoder_async` (k = 1) differs from `precisecoder` (k = 0) " in (
    section
  )
  assert "| grpo_async − grpo (by seed) | +0.0 [+0.0, +0.0] |" in section
  # One seed: no interval over seeds, so nothing to exclude 0 by seed.
  one = compare_report.build(tmp_path, list(arms), seeds=[1], twins=twins)["twins"]
  assert one["grpo_async − grpo"]["sections"]["heldin"]["same"]
  assert one["grpo_async − grpo"]["sections"]["heldin"]["by_seed"] == {}
  # Without twins (a comparison of recipes at one schedule) the section is left out.
  text = compare_report.write(tmp_path, ["grpo", "precisecoder"], seeds=[0, 1]).read_text()
  assert "synchronous twins" not in text
