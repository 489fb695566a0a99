"""An evaluation's results from its score lines: per-task rows, the paper's table with bootstrap
intervals, and the two correlations the paper reads its diagnosis from.

- Edit size vs unit: Pearson r between −edited lines and pass over buggy samples (the paper: 0.13
  / 0.14, "the unit reward barely sees edit size").
- Precision vs no-op: the paper reports r = 0.87 across model sizes. Within one evaluation we pair
  by source program: a buggy task and a clean task share a source when they come from the same
  function (HumanEval's `source_task_id`, the generator's `family`); r is taken over sources that
  have both, between mean precision on the buggy variants and the no-op rate on the clean ones.
  Across checkpoints, feed each evaluation's `table.json` means to `statistics.pearson`.

Numpy only (no JAX), like `statistics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from precisecoder.analysis import statistics
from precisecoder.tasks import Task

# Terms averaged per task in per-task rows (score-line fields).
TASK_TERMS = ("unit", "precision", "recall", "f1", "reward", "edit_lines", "noop", "damage")


def source_key(task: Task) -> str | None:
  """The program a task was made from, when its set records it."""
  for field in ("source_task_id", "family"):
    value = task.extra.get(field)
    if isinstance(value, str) and value:
      return value
  return None


def with_task_fields(
  rows: Sequence[Mapping[str, Any]], tasks: Mapping[str, Task]
) -> list[dict[str, Any]]:
  """Score lines with `is_buggy` and `source` from their tasks (the statistics need both)."""
  return [
    {**row, "is_buggy": tasks[row["task_id"]].is_buggy, "source": source_key(tasks[row["task_id"]])}
    for row in rows
  ]


def _mean(values: Sequence[Any]) -> float | None:
  x = [float(v) for v in values if v is not None]
  return float(np.mean(x)) if x else None


def per_task(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """One row per task (first-seen order): its samples' means of TASK_TERMS."""
  groups: dict[str, list[Mapping[str, Any]]] = {}
  for row in rows:
    groups.setdefault(row["task_id"], []).append(row)
  out = []
  for task_id, samples in groups.items():
    first = samples[0]
    out.append(
      {
        "task_id": task_id,
        "is_buggy": first["is_buggy"],
        "source": first.get("source"),
        "samples": len(samples),
        "errors": sum(s.get("error") is not None for s in samples),
        **{term: _mean([s.get(term) for s in samples]) for term in TASK_TERMS},
      }
    )
  return out


def precision_noop_correlation(rows: Sequence[Mapping[str, Any]]) -> statistics.Correlation:
  """Pearson r over sources between mean precision (buggy) and no-op rate (clean)."""
  precision: dict[str, list[float]] = {}
  noop: dict[str, list[float]] = {}
  for row in rows:
    source = row.get("source")
    if source is None:
      continue
    if row["is_buggy"]:
      if row.get("precision") is not None:
        precision.setdefault(source, []).append(float(row["precision"]))
    elif row.get("noop") is not None:
      noop.setdefault(source, []).append(float(row["noop"]))
  both = sorted(set(precision) & set(noop))
  return statistics.pearson([np.mean(precision[s]) for s in both], [np.mean(noop[s]) for s in both])


def results(
  rows: Sequence[Mapping[str, Any]], *, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
  """The JSON summary: the paper's columns with intervals, correlations and counts."""
  table = statistics.paper_table(rows, resamples=resamples, seed=seed)
  tasks = per_task(rows)
  return {
    "columns": {name: interval.to_json() for name, interval in table.items()},
    "correlations": {
      "edit_size_vs_unit": statistics.edit_size_unit_correlation(rows).to_json(),
      "precision_vs_noop": precision_noop_correlation(rows).to_json(),
    },
    "buggy_tasks": sum(t["is_buggy"] for t in tasks),
    "clean_tasks": sum(not t["is_buggy"] for t in tasks),
    "predictions": len(rows),
    "unscorable": sum(r.get("error") is not None for r in rows),
  }


def by_turn(
  rows_by_turn: Sequence[Sequence[Mapping[str, Any]]], *, resamples: int = 2000, seed: int = 0
) -> dict[str, list[dict[str, Any]]]:
  """Episodes: pass and edited lines over buggy tasks of the program after each turn (the
  score lines of turn k in `rows_by_turn[k - 1]`), means over tasks with bootstrap intervals."""
  out: dict[str, list[dict[str, Any]]] = {"pass": [], "edit_lines": []}
  for rows in rows_by_turn:
    buggy = [r for r in rows if r["is_buggy"]]
    ids = [r["task_id"] for r in buggy]
    for column, term in (("pass", "unit"), ("edit_lines", "edit_lines")):
      out[column].append(
        statistics.bootstrap_interval(
          statistics.task_means(ids, [r.get(term) for r in buggy]), resamples=resamples, seed=seed
        ).to_json()
      )
  return out


def markdown(summary: Mapping[str, Any], name: str) -> str:
  """`results(...)` as a Markdown section: the table, then the correlations."""
  table = {column: statistics.Interval(**value) for column, value in summary["columns"].items()}
  correlations = {k: statistics.Correlation(**v) for k, v in summary["correlations"].items()}
  lines = [
    statistics.markdown_table({name: table}, label="checkpoint"),
    "",
    f"{summary['buggy_tasks']} buggy and {summary['clean_tasks']} clean tasks, "
    f"{summary['predictions']} predictions ({summary['unscorable']} unscorable). "
    "Means over tasks with 95% bootstrap intervals (tasks resampled); percent except "
    "edited lines.",
    "",
    f"- edit size (−lines) vs pass, buggy samples: r = "
    f"{correlations['edit_size_vs_unit'].format()}",
    f"- precision (buggy) vs no-op (clean), per source program: r = "
    f"{correlations['precision_vs_noop'].format()}",
  ]
  if "by_turn" in summary:
    lines += [
      "",
      "By turn (episodes: the program after each turn, buggy tasks):",
      "",
      "| turn | pass | edit_lines |",
      "|---|---|---|",
    ]
    for turn, (passed, edited) in enumerate(
      zip(summary["by_turn"]["pass"], summary["by_turn"]["edit_lines"]), 1
    ):
      lines.append(
        f"| {turn} | {statistics.Interval(**passed).format(percent=True)} | "
        f"{statistics.Interval(**edited).format()} |"
      )
  return "\n".join(lines) + "\n"
