"""The run report: the paper's columns at each evaluation, with 95% bootstrap intervals over
tasks, the change from the base model paired by task, and the curves.

Reads `<workdir>/eval/step_N.json` and `<workdir>/metrics.jsonl`; writes `report.md` and
PNG plots beside it. Evaluation files without per-task records (older runs) get means only.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from precisecoder.analysis import plots, statistics
from precisecoder.train.metrics import read_metrics

INTERVAL_NOTE = ("Cells are means with 95% bootstrap intervals over tasks (a task's samples "
                 "averaged first); percent except edited lines.")
DIFFERENCE_NOTE = ("Changes are paired by task (the same tasks before and after), with 95% "
                   "bootstrap intervals; `*` marks a change whose interval excludes 0, i.e. one "
                   "that task-to-task noise does not explain.")


def load_evals(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """Evaluations by step: `{"step", **summary, "records": [per-task records]}`."""
  out = []
  for path in pathlib.Path(workdir, "eval").glob("step_*.json"):
    data = json.loads(path.read_text())
    out.append({"step": data["step"], **data["summary"], "records": data.get("records") or [],
                **({"multi": data["multi"]} if data.get("multi") else {})})
  return sorted(out, key=lambda e: e["step"])


def intervals(evaluation: Mapping[str, Any]) -> dict[str, statistics.Interval]:
  """The paper's columns of one evaluation; from its summary alone (no interval) if it has no
  per-task records."""
  if evaluation.get("records"):
    return statistics.paper_table(evaluation["records"])
  # Task counts where the summary has them; a mean exists, so at least one task.
  n = {kind: max(1, int(evaluation.get(f"num_{kind}") or 0)) for kind in ("buggy", "clean")}
  out = {}
  for column, (_, kind) in statistics.PAPER_COLUMNS.items():
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
  """Every evaluation of a run in the paper's columns."""
  return statistics.markdown_table(
      {step_label(evals, i): intervals(e) for i, e in enumerate(evals)}, label="step")


def change_from_base(evals: Sequence[Mapping[str, Any]]) -> dict[str, statistics.Interval] | None:
  """Final − base, paired by task; None without a base and a later evaluation with records."""
  if len(evals) < 2 or evals[0]["step"] != 0 or not (evals[0]["records"] and
                                                     evals[-1]["records"]):
    return None
  return statistics.paired_differences(evals[0]["records"], evals[-1]["records"])


def report_json(evals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
  """What `report.json` holds: the paper's table at every evaluation and the change from the
  base (`changes`), each column as {mean, low, high, n}; the multi-line split's, when
  evaluated."""

  def jsonable(tables):
    return {name: {c: iv.to_json() for c, iv in t.items()} for name, t in tables.items()}

  out: dict[str, Any] = {"paper_table": jsonable(
      {step_label(evals, i): intervals(e) for i, e in enumerate(evals)}), "changes": {}}
  change = change_from_base(evals)
  if change is not None:
    out["changes"] = jsonable({f"step {evals[-1]['step']} − base": change})
  multi = [e for e in evals if e.get("multi")]
  if multi:
    out["multi"] = {"paper_table": jsonable(
        {f"step {e['step']}": statistics.paper_table(e["multi"]["records"]) for e in multi})}
    if multi[0]["step"] == 0 and len(multi) > 1:
      out["multi"]["changes"] = jsonable({f"step {multi[-1]['step']} − base":
                                          statistics.paired_differences(
                                              multi[0]["multi"]["records"],
                                              multi[-1]["multi"]["records"])})
  return out


def write_report(workdir: str | os.PathLike) -> pathlib.Path:
  workdir = pathlib.Path(workdir)
  records = read_metrics(workdir / "metrics.jsonl")
  evals = load_evals(workdir)
  config = json.loads((workdir / "config.json").read_text()) if (
      workdir / "config.json").exists() else {}
  train_rows = [r for r in records if "reward" in r]
  eval_png = plots.plot_panels(records, plots.EVAL_PANELS, "evaluation", workdir / "eval.png")
  train_png = plots.plot_panels(records, plots.TRAIN_PANELS, "training", workdir / "train.png")
  lines = [f"# Run report: {workdir.name}", ""]
  rl = config.get("rl", {})
  model = config.get("model", {})
  lines += [f"Model `{model.get('preset')}` from `{model.get('checkpoint') or 'random init'}`; "
            f"trainer `{config.get('trainer')}`, reward `{rl.get('reward')}` with "
            f"`{rl.get('advantage')}` advantages, G = {rl.get('group_size')}, "
            f"{rl.get('prompts_per_step')} tasks per step, {len(train_rows)} steps.", ""]
  if evals:
    e = evals[-1]
    lines += ["## Evaluation (greedy)", "",
              f"{e.get('num_buggy', '?')} held-in validation tasks (pass, precision, recall, "
              f"F1, edited lines) and {e.get('num_clean', '?')} clean programs (no-op, "
              f"damage). {INTERVAL_NOTE}", "", results_table(evals), ""]
    change = change_from_base(evals)
    if change is not None:
      lines += [f"Change from the base model at step {e['step']}. {DIFFERENCE_NOTE}", "",
                statistics.markdown_table({f"step {e['step']} − base": change},
                                          difference=True), ""]
  if train_rows:
    steps = [r["time/step"] for r in train_rows if r.get("time/step")]
    exposed = [r["time/reward_exposed"] for r in train_rows if r.get("time/reward_exposed")
               is not None]
    lines += ["## Training", "",
              f"Mean step time {sum(steps) / max(len(steps), 1):.1f} s; exposed reward time "
              f"{sum(exposed) / max(sum(steps), 1e-9):.1%} of step time.", ""]
  for png in (eval_png, train_png):
    if png is not None:
      lines += [f"![{png.stem}]({png.name})", ""]
  path = workdir / "report.md"
  path.write_text("\n".join(lines))
  (workdir / "report.json").write_text(json.dumps(report_json(evals), indent=1,
                                                  default=float) + "\n")
  return path
