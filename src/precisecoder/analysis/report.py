"""The run report: the paper's columns before and after training, and the curves.

Reads `<workdir>/eval/step_N.json` and `<workdir>/metrics.jsonl`; writes `report.md` and
PNG plots beside it.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

from precisecoder.analysis import plots
from precisecoder.train.metrics import read_metrics

# Column header -> (summary key, percent?)
COLUMNS = (("pass", "pass", True), ("prec", "precision", True), ("rec", "recall", True),
           ("lines", "edit_lines", False), ("no-op", "noop", True), ("damage", "damage", True))


def load_evals(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """Evaluation summaries by step."""
  out = []
  for path in pathlib.Path(workdir, "eval").glob("step_*.json"):
    data = json.loads(path.read_text())
    out.append({"step": data["step"], **data["summary"]})
  return sorted(out, key=lambda e: e["step"])


def _cell(summary: dict[str, Any], key: str, percent: bool) -> str:
  value = summary.get(key)
  if value is None:
    return "–"
  return f"{100 * value:.1f}" if percent else f"{value:.2f}"


def results_table(evals: list[dict[str, Any]]) -> str:
  """Markdown table in the paper's columns (percentages; lines = mean edited lines)."""
  head = "| step | " + " | ".join(c[0] for c in COLUMNS) + " |"
  rule = "|---|" + "---|" * len(COLUMNS)
  rows = []
  for i, e in enumerate(evals):
    label = "base (step 0)" if e["step"] == 0 else f"step {e['step']}"
    if i == len(evals) - 1 and e["step"] > 0:
      label += " (final)"
    rows.append(f"| {label} | " + " | ".join(_cell(e, k, p) for _, k, p in COLUMNS) + " |")
  return "\n".join([head, rule, *rows])


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
              f"edited lines) and {e.get('num_clean', '?')} clean programs (no-op, damage); "
              "percent except lines.", "", results_table(evals), ""]
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
  return path
