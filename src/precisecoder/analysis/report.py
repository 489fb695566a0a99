"""The run report: whether the policy learned, the paper's columns at each evaluation (and
the no-op share on buggy tasks beside edited lines), with 95% bootstrap intervals over tasks,
the change from the base model paired by task, what training did (steps without reward
variance, which updated nothing), and the curves.

Reads `<workdir>/eval/step_N.json`, `<workdir>/metrics.jsonl` and the broken tasks the run
met (`broken_tasks.json`, named in the report); writes `report.md` and
PNG plots beside it. Evaluation files without per-task records (older runs) get means only.

"Did not learn", precisely: no paired change (last evaluation − base, by task) in pass,
precision or F1 whose 95% interval lies above 0.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from precisecoder.analysis import plots, statistics
from precisecoder.train.metrics import read_broken_tasks, read_metrics

INTERVAL_NOTE = (
  "Cells are means with 95% bootstrap intervals over tasks (a task's samples "
  "averaged first); percent except edited lines."
)
DIFFERENCE_NOTE = (
  "Changes are paired by task (the same tasks before and after), with 95% "
  "bootstrap intervals; `*` marks a change whose interval excludes 0, i.e. one "
  "that task-to-task noise does not explain."
)


def load_evals(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """Evaluations by step: `{"step", **summary, "records": [per-task records]}`, with the
  splits evaluated apart, the wider measurements (`wide_step_N.json`, `wide_heldin_step_N.json`)
  among them."""
  out = []
  folder = pathlib.Path(workdir, "eval")
  for path in folder.glob("step_*.json"):
    data = json.loads(path.read_text())
    for split in ("wide", "wide_heldin"):  # experiments/remeasure.py's files
      wide = folder / f"{split}_{path.name}"
      if wide.exists():
        data[split] = json.loads(wide.read_text())
    out.append(
      {
        "step": data["step"],
        **data["summary"],
        "records": data.get("records") or [],
        **{name: data[name] for name in SPLITS if data.get(name)},
      }
    )
  return sorted(out, key=lambda e: e["step"])


# Task sets evaluated apart from the validation tasks (train/run.py), as the reports name them:
# (section title, name in a sentence, description).
SPLITS = {
  "heldin": (
    "Held-in tasks",
    "held-in tasks",
    "new instances of the training families, "
    "programs no run trained on: does the policy get better at what it practised? "
    "And correct programs of those families, which no run saw as input: does it "
    "leave them alone (no-op, damage)?",
  ),
  "multi": (
    "Multi-line split (generalisation)",
    "the multi-line split",
    "held-out families, one atomic 2-4-line bug each; training had single-line bugs only.",
  ),
  "wide": (
    "Wider held-out measurement",
    "the wider held-out sets",
    "fresh held-out buggy tasks and correct programs, more than the evaluation during "
    "training has, measured on the base and the last checkpoint only (`compare --remeasure`).",
  ),
  "wide_heldin": (
    "Wider held-in measurement",
    "the wider held-in sets",
    "more new instances of the training families and correct programs of them, none in the "
    "held-in split or seen in training, measured on the base and the last checkpoint only "
    "(`compare --remeasure`).",
  ),
}

# The report's columns: the paper's, with the no-op share on buggy tasks beside edited lines.
COLUMNS = {
  **{k: v for k, v in statistics.PAPER_COLUMNS.items() if k not in ("noop", "damage")},
  **statistics.NOOP_BUGGY,
  **{k: v for k, v in statistics.PAPER_COLUMNS.items() if k in ("noop", "damage")},
}
# A run learned if one of these rose beyond task-to-task noise.
LEARNING_COLUMNS = ("pass", "precision", "f1")
LABELS = {
  "pass": "pass",
  "precision": "precision",
  "recall": "recall",
  "f1": "F1",
  "edit_lines": "edited lines",
  "noop_buggy": "no-op on buggy tasks",
  "noop": "no-op on clean programs",
  "damage": "damage on clean programs",
}
EVAL_PANELS = tuple(
  (f"eval/{c}", t)
  for c, t in (
    ("pass", "pass"),
    ("precision", "precision"),
    ("recall", "recall"),
    ("edit_lines", "edited lines"),
    ("noop_buggy", "no-op rate (buggy)"),
    ("noop", "no-op rate (clean)"),
    ("damage", "damage rate (clean)"),
  )
)


def intervals(evaluation: Mapping[str, Any]) -> dict[str, statistics.Interval]:
  """The report's columns of one evaluation; from its summary alone (no interval) if it has no
  per-task records."""
  if evaluation.get("records"):
    return statistics.paper_table(evaluation["records"], columns=COLUMNS)
  # Task counts where the summary has them; a mean exists, so at least one task.
  n = {kind: max(1, int(evaluation.get(f"num_{kind}") or 0)) for kind in ("buggy", "clean")}
  out = {}
  for column, (_, kind) in COLUMNS.items():
    value = evaluation.get(column)
    if value is None:
      out[column] = statistics.Interval(float("nan"), float("nan"), float("nan"), 0)
    else:
      out[column] = statistics.Interval(float(value), float("nan"), float("nan"), int(n[kind]))
  return out


def step_label(evals: Sequence[Mapping[str, Any]], i: int) -> str:
  step = evals[i]["step"]
  label = "base (step 0)" if step == 0 else f"step {step}"
  return label + (" (final)" if i == len(evals) - 1 and step > 0 else "")


def results_table(evals: Sequence[Mapping[str, Any]]) -> str:
  """Every evaluation of a run in the report's columns."""
  return statistics.markdown_table(
    {step_label(evals, i): intervals(e) for i, e in enumerate(evals)},
    columns=tuple(COLUMNS),
    label="step",
  )


def change_from_base(evals: Sequence[Mapping[str, Any]]) -> dict[str, statistics.Interval] | None:
  """Final − base, paired by task; None without a base and a later evaluation with records."""
  if len(evals) < 2 or evals[0]["step"] != 0 or not (evals[0]["records"] and evals[-1]["records"]):
    return None
  return statistics.paired_differences(evals[0]["records"], evals[-1]["records"], columns=COLUMNS)


def learning_verdict(
  change: Mapping[str, statistics.Interval] | None, step: int, where: str = ""
) -> str:
  """One paragraph: did the run learn (module docstring), and what else moved beyond noise;
  `where` names the tasks (" on held-in tasks") when a report has several sets."""
  if change is None:
    return (
      "**Did the policy learn?** Cannot tell: that needs per-task records of the base "
      "model (step 0) and of a later evaluation."
    )

  def fmt(column: str) -> str:
    percent = column in statistics.PERCENT_COLUMNS
    return f"{LABELS[column]} {change[column].format(percent=percent, sign=True)}"

  rose = [c for c in LEARNING_COLUMNS if change[c].n and change[c].low > 0]
  if rose:
    text = (
      f"**The policy learned{where}**: between the base model and step {step}, "
      f"{'; '.join(map(fmt, rose))} rose beyond task-to-task noise."
    )
  else:
    text = (
      f"**This run did not learn{where}**: between the base model and step {step} no paired "
      "change in pass, precision or F1 has a 95% interval above 0."
    )
  others = [c for c in COLUMNS if c not in rose and change[c].excludes(0.0)]
  if others:
    text += f" Other changes beyond noise: {'; '.join(map(fmt, others))}."
  elif not rose:
    text += " Nothing else moved beyond noise either."
  if change["edit_lines"].high < 0 and change["noop_buggy"].low > 0:
    text += (
      " Fewer edited lines here come with more buggy programs returned unchanged: the "
      "policy edits less by leaving bugs in place, not by fixing them more precisely."
    )
  return text


def eval_curves(tables: Mapping[int, Mapping[str, statistics.Interval]]) -> dict[str, Any]:
  """`eval/<column>` -> (steps, means, lows, highs) over evaluations (plots.Curve)."""
  out = {}
  for column in COLUMNS:
    points = [(step, t[column]) for step, t in tables.items() if column in t and t[column].n]
    out[f"eval/{column}"] = (
      [s for s, _ in points],
      [iv.mean for _, iv in points],
      [iv.low for _, iv in points],
      [iv.high for _, iv in points],
    )
  return out


def _window_means(values: Sequence[float], window: int = 3) -> tuple[float, float]:
  """Means over the first and the last `window` values (fewer, so the two never overlap)."""
  window = max(1, min(window, len(values) // 2))
  return (sum(values[:window]) / window, sum(values[-window:]) / window)


def training_summary(train_rows: Sequence[Mapping[str, Any]]) -> list[str]:
  """What the steps did: how many updated nothing (no reward variance in any group), the
  share of groups without variance, and what the samples did, first steps -> last."""
  if not train_rows:
    return []
  n = len(train_rows)
  # Runs from before `skipped_update` existed: a step whose every group lacked variance.
  idle = sum(
    1
    for r in train_rows
    if r.get("skipped_update", float(r.get("zero_variance_groups") == 1.0)) == 1.0
  )
  if idle:
    lines = [
      f"- {n} steps; **{idle} of {n} had no reward variance in any group**: every "
      "advantage was 0, so the step computed no gradient and did not update the policy "
      "(its backward pass and optimiser update were skipped)."
    ]
  else:
    lines = [
      f"- {n} steps, each with reward variance in some group: every step updated the policy."
    ]
  shares = [
    r["zero_variance_groups"] for r in train_rows if r.get("zero_variance_groups") is not None
  ]
  if shares:
    first, last = _window_means(shares)
    lines.append(
      f"- Groups without reward variance: {sum(shares) / len(shares):.0%} of all "
      f"groups ({first:.0%} in the first steps, {last:.0%} in the last)."
    )
  samples = [
    (k, name, pct)
    for k, name, pct in (
      ("reward/unit", "pass", True),
      ("reward/edit_lines", "edited lines", False),
      ("reward/noop", "no-op on buggy tasks", True),
    )
    if any(k in r for r in train_rows)
  ]
  if samples:
    cells = []
    for key, name, percent in samples:
      first, last = _window_means([r[key] for r in train_rows if r.get(key) is not None])
      cells.append(
        f"{name} {first:.0%} → {last:.0%}" if percent else f"{name} {first:.2f} → {last:.2f}"
      )
    lines.append(f"- Training samples, first steps → last: {', '.join(cells)}.")
  steps = [r["time/step"] for r in train_rows if r.get("time/step")]
  exposed = [
    r["time/reward_exposed"] for r in train_rows if r.get("time/reward_exposed") is not None
  ]
  if steps:
    lines.append(
      f"- Mean step time {sum(steps) / len(steps):.1f} s; exposed reward time "
      f"{sum(exposed) / max(sum(steps), 1e-9):.1%} of step time."
    )
  return lines


def train_plot(
  records: Sequence[Mapping[str, Any]], path: pathlib.Path
) -> tuple[pathlib.Path | None, list[str]]:
  """train.png of the series that change; a series that never does is named in the text
  instead (a clip fraction of 0 at every step says one thing, and says it in one line)."""
  constant = plots.constant_series(records, plots.TRAIN_PANELS)
  panels = [(k, t) for k, t in plots.TRAIN_PANELS if k not in constant]
  notes = [
    f"{title} {constant[key]:.3g} at every step"
    for key, title in plots.TRAIN_PANELS
    if key in constant
  ]
  return plots.plot_panels(records, panels, "training", path), notes


def report_json(evals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
  """What `report.json` holds: the paper's table at every evaluation and the change from the
  base (`changes`), each column as {mean, low, high, n}; the multi-line split's, when
  evaluated."""

  def jsonable(tables):
    return {name: {c: iv.to_json() for c, iv in t.items()} for name, t in tables.items()}

  out: dict[str, Any] = {
    "paper_table": jsonable({step_label(evals, i): intervals(e) for i, e in enumerate(evals)}),
    "changes": {},
  }
  change = change_from_base(evals)
  if change is not None:
    out["changes"] = jsonable({f"step {evals[-1]['step']} − base": change})
  for name in SPLITS:
    split = split_evals(evals, name)
    if split:
      out[name] = {
        "paper_table": jsonable({step_label(split, i): intervals(e) for i, e in enumerate(split)}),
        "changes": {},
      }
      change = change_from_base(split)
      if change is not None:
        out[name]["changes"] = jsonable({f"step {split[-1]['step']} − base": change})
  return out


def split_evals(evals: Sequence[Mapping[str, Any]], name: str) -> list[dict[str, Any]]:
  """The evaluations of split `name` (SPLITS), shaped like the validation ones."""
  return [
    {"step": e["step"], **e[name].get("summary", {}), "records": e[name]["records"]}
    for e in evals
    if e.get(name)
  ]


def eval_sections(evals: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
  """Every evaluated split, (plot row name, its evaluations), the one that moved most first:
  the held-in tasks lead when they changed beyond noise and the validation tasks did not."""
  sections = [
    ("validation tasks" if any(e.get(n) for e in evals for n in SPLITS) else "", list(evals))
  ]
  sections += [(SPLITS[name][0], split) for name in SPLITS if (split := split_evals(evals, name))]
  return sorted(sections, key=lambda section: -moved(change_from_base(section[1])))


def moved(change: Mapping[str, statistics.Interval] | None) -> int:
  """How many of the paper's columns changed beyond task noise (interval excluding 0)."""
  return sum(
    1
    for column, iv in (change or {}).items()
    if column in statistics.PAPER_COLUMNS and iv.n and (iv.low > 0 or iv.high < 0)
  )


def split_section(evals: Sequence[Mapping[str, Any]], title: str, description: str) -> list[str]:
  """A report section for a split evaluated apart: every evaluation, the change from the
  base."""
  last = evals[-1]
  columns = [c for c, (_, kind) in COLUMNS.items() if kind == "buggy" or last.get("num_clean")]
  change = change_from_base(evals)
  counts = f"{last.get('num_buggy', '?')} tasks" + (
    f" and {last['num_clean']} correct programs" if last.get("num_clean") else ""
  )
  lines = [f"### {title}", "", f"{counts}: {description}", ""]
  lines += [
    statistics.markdown_table(
      {step_label(evals, i): intervals(e) for i, e in enumerate(evals)},
      columns=columns,
      label="step",
    ),
    "",
  ]
  if change is not None:
    lines += [
      statistics.markdown_table(
        {f"step {last['step']} − base": change}, columns=columns, difference=True
      ),
      "",
    ]
  return lines


def broken_tasks_section(broken: Mapping[str, str], shown: int = 20) -> list[str]:
  """The tasks the reward found broken, by id: the console's warnings do not outlive the run."""
  if not broken:
    return []
  lines = [
    "## Broken tasks",
    "",
    f"**{len(broken)} task(s) are broken**: the reference fix fails the task's tests, or "
    "the buggy program passes them. Their rows scored 0 (reward and every metric) in "
    "training and evaluation; fix or drop them from the task files.",
    "",
  ]
  lines += [f"- `{task_id}`: {why}" for task_id, why in sorted(broken.items())[:shown]]
  if len(broken) > shown:
    lines.append(f"- ... and {len(broken) - shown} more (`broken_tasks.json`)")
  return lines + [""]


def write_report(workdir: str | os.PathLike) -> pathlib.Path:
  workdir = pathlib.Path(workdir)
  records = read_metrics(workdir / "metrics.jsonl")
  evals = load_evals(workdir)
  config = (
    json.loads((workdir / "config.json").read_text()) if (workdir / "config.json").exists() else {}
  )
  train_rows = [r for r in records if "reward" in r]
  eval_png = plots.plot_sections(
    [
      (name, {"": eval_curves({e["step"]: intervals(e) for e in split})})
      for name, split in eval_sections(evals)
    ],
    EVAL_PANELS,
    "greedy evaluation (bands: 95% intervals)",
    workdir / "eval.png",
  )
  train_png, constant = train_plot(records, workdir / "train.png")
  lines = [f"# Run report: {workdir.name}", ""]
  rl = config.get("rl", {})
  model = config.get("model", {})
  lines += [
    f"Model `{model.get('arch')}` from `{model.get('checkpoint') or 'random init'}`; "
    f"trainer `{config.get('trainer')}`, reward `{rl.get('reward')}` with "
    f"`{rl.get('advantage')}` advantages, G = {rl.get('group_size')}, "
    f"{rl.get('prompts_per_step')} tasks per step, {len(train_rows)} steps.",
    "",
  ]
  if evals:
    e = evals[-1]
    change = change_from_base(evals)
    splits = {name: split_evals(evals, name) for name in SPLITS}
    splits = {name: split for name, split in splits.items() if split}
    lines += [learning_verdict(change, e["step"], " on validation tasks" if splits else ""), ""]
    for name, split in splits.items():
      lines += [
        learning_verdict(change_from_base(split), split[-1]["step"], f" on {SPLITS[name][1]}"),
        "",
      ]
    lines += [
      "## Evaluation (greedy)",
      "",
      f"{e.get('num_buggy', '?')} validation tasks, of families held out of training "
      "(pass, precision, recall, "
      f"F1, edited lines, and no-op: the share returned unchanged) and "
      f"{e.get('num_clean', '?')} clean programs (no-op, damage). {INTERVAL_NOTE}",
      "",
      results_table(evals),
      "",
    ]
    if change is not None:
      lines += [
        f"Change from the base model at step {e['step']}. {DIFFERENCE_NOTE}",
        "",
        statistics.markdown_table(
          {f"step {e['step']} − base": change}, columns=tuple(COLUMNS), difference=True
        ),
        "",
      ]
    for name, split in splits.items():
      title, _, description = SPLITS[name]
      lines += split_section(split, title, description)
  lines += broken_tasks_section(read_broken_tasks(workdir))
  if train_rows:
    lines += ["## Training", "", *training_summary(train_rows)]
    if constant:
      lines.append(f"- Not plotted, constant over the run: {'; '.join(constant)}.")
    lines.append("")
  for png in (eval_png, train_png):
    if png is not None:
      lines += [f"![{png.stem}]({png.name})", ""]
  path = workdir / "report.md"
  path.write_text("\n".join(lines))
  (workdir / "report.json").write_text(
    json.dumps(report_json(evals), indent=1, default=float) + "\n"
  )
  return path
