"""The report of a comparison: several arms trained from the same base on the same tasks.

Reads each arm's workdir (`<workdir>/<arm>/eval/step_N.json`, `metrics.jsonl`,
`config.json`) and writes `<workdir>/report.md`, `report.json`, `compare_eval.png` and
`compare_train.png`:
- the paper's table for the base model and each arm's last evaluation, with 95% bootstrap
  intervals over tasks;
- changes paired by task (each arm − base, each arm − the first arm), starred when the interval
  excludes 0;
- the same tables for each split evaluated apart (held-in tasks, the multi-line split), and,
  with seeds, the tables over seeds;
- each asynchronous arm beside its synchronous twin (analysis/compare_twins.py), when the
  comparison has such pairs;
- the paper's correlations, on the validation tasks and on each split: edit size (−ℓ) vs unit
  over evaluated buggy samples, and precision vs no-op rate across evaluation points (arm, step);
- curves over steps: evaluation (with interval bands) and training.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from precisecoder.analysis import compare_twins, plots, report, statistics
from precisecoder.train.metrics import read_metrics

# Evaluation curves of the report, by paper column (plotted as eval/<column>).
CURVE_COLUMNS = ("pass", "precision", "recall", "edit_lines", "noop", "damage")
# Training metrics summarised in the report's text (first vs last steps).
TRAIN_SUMMARY = ("reward/unit", "reward/edit_lines", "reward/noop", "zero_variance_groups")


def _jsonable(tables: Mapping[str, Mapping[str, statistics.Interval]]) -> dict[str, Any]:
  return {name: {c: iv.to_json() for c, iv in t.items()} for name, t in tables.items()}


def _seeds_json(seeds: Mapping[str, Any]) -> dict[str, Any]:
  return {
    "tables": _jsonable(seeds["tables"]),
    "changes": _jsonable(seeds["changes"]),
    "per_seed": seeds["per_seed"],
  }


def _mean(values: Sequence[float]) -> float:
  return sum(values) / len(values) if values else float("nan")


class Arm:
  """One arm's workdir, read once."""

  def __init__(self, name: str, workdir: pathlib.Path):
    self.name = name
    self.workdir = workdir
    self.evals = report.load_evals(workdir) if workdir.exists() else []
    self.metrics = read_metrics(workdir / "metrics.jsonl")
    self.train_rows = [r for r in self.metrics if "reward" in r]
    path = workdir / "config.json"
    self.config = json.loads(path.read_text()) if path.exists() else {}
    self.tables = {e["step"]: report.intervals(e) for e in self.evals}

  @property
  def final(self) -> dict[str, Any] | None:
    return self.evals[-1] if self.evals and self.evals[-1]["step"] > 0 else None

  def curves(self) -> dict[str, plots.Curve]:
    out: dict[str, plots.Curve] = report.eval_curves(self.tables)
    for key, _ in plots.COMPARE_TRAIN_PANELS:
      out[key] = plots.series(self.train_rows, key)
    return out

  def split_curves(self, name: str) -> dict[str, plots.Curve]:
    """The evaluation curves of split `name` (report.SPLITS) at every step it was evaluated."""
    return report.eval_curves(
      {e["step"]: report.intervals(e) for e in report.split_evals(self.evals, name)}
    )

  def train_summary(self, key: str, window: int = 3) -> tuple[float, float]:
    """Mean of `key` over the first and over the last `window` training steps (fewer when the
    run is short, so that the two windows never overlap)."""
    values = [r[key] for r in self.train_rows if r.get(key) is not None]
    window = max(1, min(window, len(values) // 2))
    return _mean(values[:window]), _mean(values[-window:])


class SeededArm(Arm):
  """An arm trained at several seeds (`<workdir>/seed_<k>`), read as one: at each step every
  seed evaluated, the seeds' records pooled, so that a task's value in the paper's table, the
  curves and the paired changes is its mean over seeds (intervals stay over tasks); the
  training series are means over seeds. `runs` keeps each seed's own workdir for the
  intervals over seeds."""

  def __init__(self, name: str, workdir: pathlib.Path, seeds: Sequence[int]):
    self.name = name
    self.workdir = workdir
    self.seeds = list(seeds)
    self.runs = [Arm(f"{name}/seed_{seed}", workdir / f"seed_{seed}") for seed in seeds]
    self.config = next((r.config for r in self.runs if r.config), {})
    steps = set.intersection(*[{e["step"] for e in r.evals} for r in self.runs])
    self.evals = [
      pool_evaluations([next(e for e in r.evals if e["step"] == step) for r in self.runs])
      for step in sorted(steps)
    ]
    self.metrics = [r for run in self.runs for r in run.metrics]
    self.train_rows = _mean_rows([run.train_rows for run in self.runs])
    self.tables = {e["step"]: report.intervals(e) for e in self.evals}


def pool_evaluations(evals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
  """Several seeds' evaluations at one step as one: records concatenated (a task's samples
  are averaged first by the statistics, so a task counts once, at its mean over seeds), the
  summary's numbers averaged; the splits evaluated apart (report.SPLITS) likewise."""
  out: dict[str, Any] = {
    "step": evals[0]["step"],
    "records": [r for e in evals for r in e["records"]],
  }
  for key in evals[0]:
    values = [e.get(key) for e in evals]
    if key not in ("step", "records", *report.SPLITS) and all(
      isinstance(v, (int, float)) for v in values
    ):
      out[key] = _mean(values)
  for name in report.SPLITS:
    if all(e.get(name) for e in evals):
      out[name] = {"records": [r for e in evals for r in e[name]["records"]]}
  return out


def _mean_rows(runs: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
  """Training rows averaged over runs, step by step (steps every run has)."""
  by_step = [{r["step"]: r for r in rows} for rows in runs]
  steps = sorted(set.intersection(*[set(b) for b in by_step])) if by_step else []
  out = []
  for step in steps:
    rows = [b[step] for b in by_step]
    keys = [k for k, v in rows[0].items() if isinstance(v, (int, float))]
    out.append(
      {k: _mean([r[k] for r in rows if isinstance(r.get(k), (int, float))]) for k in keys}
      | {"step": step}
    )
  return out


def seed_tables(arms: Sequence[Arm], split: str | None = None) -> dict[str, Any]:
  """Intervals over seeds (Student's t over the seeds' means of each column at their last
  evaluation, of the validation tasks or of `split`) per arm, and each arm − the first arm
  paired by seed."""
  seeded = [a for a in arms if isinstance(a, SeededArm)]
  per_seed: dict[str, dict[int, dict[str, float]]] = {}
  for arm in seeded:
    per_seed[arm.name] = {}
    for seed, run in zip(arm.seeds, arm.runs):
      final = run.final if split is None else (run.final or {}).get(split)
      if final:
        per_seed[arm.name][seed] = {c: iv.mean for c, iv in report.intervals(final).items()}
  columns = list(statistics.PAPER_COLUMNS)
  tables = {
    name: {c: statistics.seed_interval([m[c] for m in means.values()]) for c in columns}
    for name, means in per_seed.items()
    if means
  }
  changes = {}
  reference = seeded[0].name if seeded else None
  for arm in seeded[1:]:
    shared = [s for s in per_seed[arm.name] if s in per_seed[reference]]
    if shared:
      changes[f"{arm.name} − {reference}"] = {
        c: statistics.seed_interval(
          [per_seed[arm.name][s][c] - per_seed[reference][s][c] for s in shared]
        )
        for c in columns
      }
  return {"tables": tables, "changes": changes, "per_seed": per_seed}


def split_tables(arms: Sequence[Arm], base: Mapping[str, Any] | None, split: str) -> dict[str, Any]:
  """A split evaluated apart (report.SPLITS): the paper's table for the base and each arm's
  last evaluation; each arm − base and − the first arm, paired by task; the tables over seeds."""

  def records(evaluation):
    return ((evaluation or {}).get(split) or {}).get("records")

  paper, changes = {}, {}
  base_records = records(base)
  if base_records:
    paper["base (step 0)"] = statistics.paper_table(base_records)
  finals = {
    f"{arm.name} (step {arm.final['step']})": (arm.name, records(arm.final))
    for arm in arms
    if records(arm.final)
  }
  for label, (name, rows) in finals.items():
    paper[label] = statistics.paper_table(rows)
    if base_records:
      changes[f"{name} − base"] = statistics.paired_differences(base_records, rows)
  reference = next(iter(finals.values()), None)
  for name, rows in list(finals.values())[1:]:
    changes[f"{name} − {reference[0]}"] = statistics.paired_differences(reference[1], rows)
  return {
    "paper_table": paper,
    "changes": changes,
    "seeds": seed_tables(arms, split),
    "correlations": _correlations(arms, base, split),
  }


def _base(arms: Sequence[Arm]) -> tuple[dict[str, Any] | None, list[str]]:
  """The base model's evaluation (step 0, from the first arm that has one) and notes on arms
  whose step-0 evaluation differs from it (greedy decoding of one model should not)."""
  with_base = [a for a in arms if a.evals and a.evals[0]["step"] == 0]
  if not with_base:
    return None, ["No arm has a step-0 (base model) evaluation."]
  base = with_base[0].evals[0]
  notes = []
  for arm in with_base[1:]:
    other = arm.evals[0]
    differ = [
      c
      for c in CURVE_COLUMNS
      if other.get(c) is not None and base.get(c) is not None and abs(other[c] - base[c]) > 1e-9
    ]
    if differ:
      notes.append(
        f"`{arm.name}`'s base evaluation differs from `{with_base[0].name}`'s in "
        f"{', '.join(differ)}: the arms did not start from the same model or tasks."
      )
  return base, notes


def _correlations(
  arms: Sequence[Arm], base: dict[str, Any] | None, split: str | None = None
) -> dict[str, Any]:
  """The paper's two correlations on the validation tasks, or on `split` (report.SPLITS):
  edit size vs unit over every evaluated buggy sample, and precision vs no-op across the
  evaluation points (each arm's, the base once)."""

  def part(evaluation):
    return evaluation if split is None else (evaluation or {}).get(split) or {}

  def point(evaluation):  # (precision, no-op) of one evaluation point
    if split is None:
      values = [evaluation.get("precision"), evaluation.get("noop")]
    else:
      table = statistics.paper_table(part(evaluation).get("records") or [], resamples=1)
      values = [table["precision"].mean, table["noop"].mean]
    return [math.nan if v is None else v for v in values]

  edit_unit = {}
  pooled = list(part(base).get("records") or []) if base else []
  for arm in arms:
    rows = [r for e in arm.evals for r in part(e).get("records") or []]
    edit_unit[arm.name] = statistics.edit_size_unit_correlation(rows)
    pooled += [r for e in arm.evals if e["step"] > 0 for r in part(e).get("records") or []]
  edit_unit["all arms"] = statistics.edit_size_unit_correlation(pooled)
  points = ([("base", 0, point(base))] if base else []) + [
    (arm.name, e["step"], point(e)) for arm in arms for e in arm.evals if e["step"] > 0
  ]
  precision_noop = statistics.pearson([p[0] for *_, p in points], [p[1] for *_, p in points])
  return {
    "edit_size_unit": edit_unit,
    "precision_noop": precision_noop,
    "precision_noop_points": [
      {"arm": a, "step": s, "precision": _finite(p[0]), "noop": _finite(p[1])} for a, s, p in points
    ],
  }


def _correlations_json(correlations: Mapping[str, Any]) -> dict[str, Any]:
  return {
    "edit_size_unit": {k: c.to_json() for k, c in correlations["edit_size_unit"].items()},
    "precision_noop": correlations["precision_noop"].to_json(),
    "precision_noop_points": correlations["precision_noop_points"],
  }


def _finite(value: float) -> float | None:
  return None if math.isnan(value) else value


def build(
  workdir: str | os.PathLike,
  arm_names: Sequence[str],
  seeds: Sequence[int] = (),
  twins: Mapping[str, str] | None = None,
) -> dict[str, Any]:
  """Everything the report says, as Interval/Correlation objects and plain values; `twins`
  ({arm: twin}, experiments/compare_arms.check_same_budget's) adds the pairs' section."""
  workdir = pathlib.Path(workdir)
  arms = [
    SeededArm(name, workdir / name, seeds) if seeds else Arm(name, workdir / name)
    for name in arm_names
  ]
  base, notes = _base(arms)
  final = {a.name: a.final for a in arms if a.final is not None}
  missing = [a.name for a in arms if a.final is None]
  if missing:
    notes.append(f"No evaluation after training yet for: {', '.join(missing)}.")
  paper = {}
  if base is not None:
    paper["base (step 0)"] = report.intervals(base)
  for name, e in final.items():
    paper[f"{name} (step {e['step']})"] = report.intervals(e)
  changes = {}
  if base is not None and base["records"]:
    for name, e in final.items():
      if e["records"]:
        changes[f"{name} − base"] = statistics.paired_differences(base["records"], e["records"])
  reference = next(iter(final), None)
  for name, e in final.items():
    if name != reference and e["records"] and final[reference]["records"]:
      changes[f"{name} − {reference}"] = statistics.paired_differences(
        final[reference]["records"], e["records"]
      )
  seeds_result = seed_tables(arms)
  splits = {name: split_tables(arms, base, name) for name in report.SPLITS}
  per_seed = {"": seeds_result["per_seed"]} | {
    name: split["seeds"]["per_seed"] for name, split in splits.items()
  }
  return {
    "workdir": workdir,
    "arms": arms,
    "base": base,
    "paper": paper,
    "changes": changes,
    "correlations": _correlations(arms, base),
    "notes": notes,
    "seeds": seeds_result,
    "splits": splits,
    "twins": compare_twins.build(arms, base, per_seed, twins or {}),
  }


def _setup(arms: Sequence[Arm], run: Mapping[str, Any]) -> list[str]:
  cfg = next((a.config for a in arms if a.config), {})
  model, rl, data, train = (cfg.get(k, {}) for k in ("model", "rl", "data", "train"))
  seeds = (
    f"seeds {', '.join(map(str, run['seeds']))}"
    if run and run.get("seeds")
    else f"seed {cfg.get('seed')}"
  )
  recipes = ", ".join(
    f"`{a.name}` ({a.config.get('rl', {}).get('reward')}, "
    f"{a.config.get('rl', {}).get('advantage')}"
    + (f", k = {compare_twins.staleness(a)}" if compare_twins.staleness(a) else "")
    + ")"
    for a in arms
  )
  lines = [
    f"Arms: {recipes}. Shared: model `{model.get('arch')}` from "
    f"`{model.get('checkpoint') or 'random init'}`, {rl.get('prompts_per_step')} tasks x "
    f"G = {rl.get('group_size')} samples per step, "
    f"{train.get('steps')} steps, {rl.get('max_new_tokens')} new tokens, learning rate "
    f"{cfg.get('optim', {}).get('learning_rate')}, {seeds}, "
    f"`{data.get('tier')}` tier; greedy evaluation every {train.get('eval_every')} steps on "
    f"{data.get('num_validation')} validation tasks (families held out of training), "
    f"{data.get('num_clean')} clean programs"
    + "".join(
      f", {data[key]} {what}"
      for key, what in (
        ("num_heldin", "held-in tasks"),
        ("num_heldin_clean", "held-in clean programs"),
        ("num_multi", "multi-line tasks"),
      )
      if data.get(key)
    )
    + "."
  ]
  if run:
    # The workdir's record covers every run trained there; the report's runs only.
    ours = {a.name for a in arms}
    ours |= {f"{a}/seed_{k}" for a in ours for k in run.get("seeds") or ()}
    walls = ", ".join(f"`{a}` {s:.0f} s" for a, s in run.get("wall_s", {}).items() if a in ours)
    parallel = sorted(
      {i["parallel"] for i in run.get("invocations", []) if ours.intersection(i["trained"])}
    )
    lines.append(
      f"Preset `{run.get('preset')}`, overrides `{' '.join(run.get('overrides', []))}`"
      f"; arms trained {' or '.join(map(str, parallel)) or '?'} at a time; wall time "
      f"per arm (all its runs) {walls or '?'}."
    )
  return lines


def _curve_table(arms: Sequence[Arm]) -> str:
  head = "| arm | step | pass | edited lines | no-op | precision |"
  rows = [head, "|---|---|---|---|---|---|"]
  for arm in arms:
    for step, t in arm.tables.items():
      rows.append(
        f"| {arm.name} | {step} | "
        + " | ".join(statistics.cell(t[c], c) for c in ("pass", "edit_lines", "noop", "precision"))
        + " |"
      )
  return "\n".join(rows)


def _train_table(arms: Sequence[Arm]) -> str:
  head = "| arm | " + " | ".join(f"{k} (first → last steps)" for k in TRAIN_SUMMARY) + " |"
  rows = [head, "|---|" + "---|" * len(TRAIN_SUMMARY)]
  for arm in arms:
    cells = []
    for key in TRAIN_SUMMARY:
      first, last = arm.train_summary(key)
      cells.append(f"{first:.2f} → {last:.2f}")
    rows.append(f"| {arm.name} | " + " | ".join(cells) + " |")
  return "\n".join(rows)


def _significant(changes: Mapping[str, Mapping[str, statistics.Interval]]) -> str:
  found = [
    f"{name}: {c} {iv.format(percent=c in statistics.PERCENT_COLUMNS, sign=True)}"
    for name, table in changes.items()
    for c, iv in table.items()
    if iv.excludes(0.0)
  ]
  if not found:
    return (
      "No change's interval excludes 0: at this size every difference in the tables is "
      "within task-to-task noise."
    )
  return "Changes whose interval excludes 0: " + "; ".join(found) + "."


def _seed_lines(
  seeds: Mapping[str, Any], columns: Sequence[str] | None = None, heading: bool = True
) -> list[str]:
  """The over-seeds tables: under their own heading (the validation tasks), or as the last
  part of a split's section."""
  if not seeds["tables"]:
    return []
  n = max(len(m) for m in seeds["per_seed"].values())
  columns = tuple(columns or statistics.PAPER_COLUMNS)
  lines = ["## Over seeds", ""] if heading else []
  lines += [
    f"Each seed's mean over tasks at its last evaluation, then the mean over {n} seeds "
    "with a 95% Student-t interval over seeds (the spread from RL's own randomness: "
    "sampling, task order):",
    "",
    statistics.markdown_table(seeds["tables"], columns, label="arm"),
    "",
  ]
  if seeds["changes"]:
    lines += [
      "Differences paired by seed (same seed, same tasks), t-interval over seeds:",
      "",
      statistics.markdown_table(seeds["changes"], columns, difference=True),
      "",
    ]
  return lines


def _split_lines(name: str, split: Mapping[str, Any]) -> list[str]:
  if not split["paper_table"]:
    return []
  title, _, description = report.SPLITS[name]
  has_clean = any(t["noop"].n for t in split["paper_table"].values())  # the split's programs
  columns = [c for c, (_, kind) in statistics.PAPER_COLUMNS.items() if kind == "buggy" or has_clean]
  lines = [
    f"## {title}",
    "",
    f"{description[0].upper()}{description[1:]} Greedy, 95% intervals over tasks.",
    "",
    statistics.markdown_table(split["paper_table"], columns, label="model"),
    "",
  ]
  if split["changes"]:
    lines += [
      "Paired by task:",
      "",
      statistics.markdown_table(split["changes"], columns, difference=True),
      "",
    ]
  return lines + _seed_lines(split["seeds"], columns, heading=False)


EVAL_PANELS = [(f"eval/{c}", t) for (_, t), c in zip(plots.EVAL_PANELS, CURVE_COLUMNS)]


def section_order(
  changes: Mapping[str, Mapping[str, Mapping[str, statistics.Interval]]],
) -> list[str]:
  """Sections (validation "", then the splits) ordered by how many of the paper's columns
  moved beyond noise from the base in some arm, most first (ties keep their order): the split
  where the result is leads the plot."""

  def moved(name):
    return max(
      (report.moved(change) for label, change in changes[name].items() if label.endswith("− base")),
      default=0,
    )

  return sorted(changes, key=lambda name: -moved(name))


def plot_evaluations(
  result: Mapping[str, Any],
  split_curves: Mapping[str, Mapping[str, Mapping[str, plots.Curve]]],
  curves: Mapping[str, Mapping[str, plots.Curve]],
  path: pathlib.Path,
) -> pathlib.Path | None:
  """compare_eval.png: a row per evaluated split (validation tasks and each split evaluated
  apart), the one that moved first."""
  changes = {
    "": result["changes"],
    **{name: split["changes"] for name, split in result["splits"].items() if split["paper_table"]},
  }
  titles = {
    "": "validation tasks" if len(changes) > 1 else "",
    **{name: report.SPLITS[name][0] for name in report.SPLITS},
  }
  sections = [
    (titles[name], curves if name == "" else split_curves[name]) for name in section_order(changes)
  ]
  return plots.plot_sections(
    sections, EVAL_PANELS, "greedy evaluation (bands: 95% intervals)", path
  )


def _curves_of(tables: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, plots.Curve]:
  """report.json's evaluations of one arm ({step: {column: interval}}) as eval curves."""
  return report.eval_curves(
    {
      int(step): {c: statistics.Interval(**iv) for c, iv in t.items()}
      for step, t in sorted(tables.items(), key=lambda x: int(x[0]))
    }
  )


def _split_tables_of(data: Mapping[str, Any], arm: str) -> Mapping[str, Any]:
  """One arm's per-step evaluations of a split in report.json; reports written before they were
  kept have the base and the last evaluation only (the split's paper table)."""
  if "evaluations" in data:
    return data["evaluations"].get(arm, {})
  out = {}
  for label, table in data["paper_table"].items():
    name, _, step = label.rpartition(" (step ")
    if name in ("base", arm):
      out[step.rstrip(")")] = table
  return out


def plots_from_json(folder: str | os.PathLike) -> list[pathlib.Path]:
  """Redraws compare_eval.png and compare_train.png in `folder` from its report.json alone
  (a committed report whose arms' workdirs are gone)."""
  folder = pathlib.Path(folder)
  data = json.loads((folder / "report.json").read_text())

  def intervals(tables):
    return {
      label: {c: statistics.Interval(**iv) for c, iv in t.items()} for label, t in tables.items()
    }

  arms = data["arms"]
  curves = {
    arm: {
      **_curves_of(data["evaluations"][arm]),
      **{k: (v["steps"], v["values"], None, None) for k, v in data["train"].get(arm, {}).items()},
    }
    for arm in arms
  }
  splits = [name for name in report.SPLITS if data.get(name, {}).get("paper_table")]
  result = {
    "changes": intervals(data["changes"]),
    "splits": {
      name: {"paper_table": data[name]["paper_table"], "changes": intervals(data[name]["changes"])}
      for name in splits
    },
  }
  split_curves = {
    name: {arm: _curves_of(_split_tables_of(data[name], arm)) for arm in arms} for name in splits
  }
  written = [
    plot_evaluations(result, split_curves, curves, folder / "compare_eval.png"),
    plots.plot_arms(
      curves, plots.COMPARE_TRAIN_PANELS, "training samples", folder / "compare_train.png"
    ),
  ]
  return [path for path in written if path is not None]


def write(
  workdir: str | os.PathLike,
  arm_names: Sequence[str],
  run: Mapping[str, Any] | None = None,
  seeds: Sequence[int] = (),
) -> pathlib.Path:
  """Writes report.md, report.json and the PNGs into `workdir`; returns report.md's path."""
  run = dict(run or {})
  result = build(workdir, arm_names, seeds, run.get("twins"))
  workdir, arms = result["workdir"], result["arms"]
  curves = {a.name: a.curves() for a in arms}
  eval_png = plot_evaluations(
    result,
    {name: {a.name: a.split_curves(name) for a in arms} for name in result["splits"]},
    curves,
    workdir / "compare_eval.png",
  )
  train_png = plots.plot_arms(
    curves, plots.COMPARE_TRAIN_PANELS, "training samples", workdir / "compare_train.png"
  )
  corr = result["correlations"]
  lines = [f"# Comparison: {' vs '.join(a.name for a in arms)}", "", *_setup(arms, run), ""]
  lines += [f"> {note}" for note in result["notes"]] + ([""] if result["notes"] else [])
  lines += [
    "## The paper's table (greedy, last evaluation)",
    "",
    report.INTERVAL_NOTE,
    "",
    statistics.markdown_table(result["paper"], label="model"),
    "",
  ]
  if result["changes"]:
    lines += [
      "## Changes, paired by task",
      "",
      report.DIFFERENCE_NOTE,
      "",
      statistics.markdown_table(result["changes"], difference=True),
      "",
      _significant(result["changes"]),
      "",
    ]
  lines += _seed_lines(result["seeds"])
  for name, split in result["splits"].items():
    lines += _split_lines(name, split)
  lines += compare_twins.lines(result["twins"], arms)
  lines += [
    "## Correlations (Pearson r, 95% Fisher-z interval)",
    "",
    "The paper's: 0.13 at 4B and 0.14 at 9B for edit size (−ℓ) vs unit over greedy "
    "samples of buggy tasks; 0.87 across sizes for precision vs no-op on clean programs "
    "across evaluation points (here each arm's evaluations, the base once). A dash: "
    "one side never varies (no task passes, say).",
    "",
  ]
  for where, correlations in [
    ("validation tasks", corr),
    *(
      (report.SPLITS[name][1], tables["correlations"])
      for name, tables in result["splits"].items()
      if tables["paper_table"]
    ),
  ]:
    lines += [
      f"- On {where}: edit size vs unit "
      + "; ".join(f"{name} {c.format()}" for name, c in correlations["edit_size_unit"].items())
      + f"; precision vs no-op {correlations['precision_noop'].format()}."
    ]
  lines += [""]
  lines += [
    "## Curves",
    "",
    "Greedy evaluation at each step (95% intervals; bands in compare_eval.png):",
    "",
    _curve_table(arms),
    "",
    "Training samples (means over up to three steps at each end of the run; "
    "`reward/noop` is the share of samples on buggy tasks that changed nothing):",
    "",
    _train_table(arms),
    "",
  ]
  for png in (eval_png, train_png):
    if png is not None:
      lines += [f"![{png.stem}]({png.name})", ""]
  path = workdir / "report.md"
  path.write_text("\n".join(lines))
  (workdir / "report.json").write_text(
    json.dumps(
      {
        "arms": [a.name for a in arms],
        "run": run,
        "notes": result["notes"],
        "paper_table": _jsonable(result["paper"]),
        "changes": _jsonable(result["changes"]),
        "evaluations": {a.name: _jsonable({str(s): t for s, t in a.tables.items()}) for a in arms},
        "train": {
          a.name: {
            k: {"steps": v[0], "values": v[1]}
            for k, v in curves[a.name].items()
            if not k.startswith("eval/")
          }
          for a in arms
        },
        "seeds": _seeds_json(result["seeds"]),
        **{
          name: {
            "paper_table": _jsonable(split["paper_table"]),
            "changes": _jsonable(split["changes"]),
            "seeds": _seeds_json(split["seeds"]),
            "evaluations": {
              a.name: _jsonable(
                {str(e["step"]): report.intervals(e) for e in report.split_evals(a.evals, name)}
              )
              for a in arms
            },
            "correlations": _correlations_json(split["correlations"]),
          }
          for name, split in result["splits"].items()
          if split["paper_table"]
        },
        "correlations": _correlations_json(corr),
        "twins": compare_twins.to_json(result["twins"]),
      },
      indent=1,
      default=float,
    )
    + "\n"
  )
  return path
