"""Data cards: what a task set contains, as JSON and as a Markdown table."""

from __future__ import annotations

import collections
import statistics
from typing import Any, Sequence

from precisecoder.data import mutation
from precisecoder.tasks import Task


def _lines(code: str) -> int:
  return sum(1 for line in code.splitlines() if line.strip())


def _editable(task: Task) -> int:
  value = task.extra.get("editable_lines")
  if isinstance(value, int):
    return value
  return len(mutation.editable_lines(task.gt_solution))


def data_card(tasks: Sequence[Task], name: str) -> dict[str, Any]:
  """Counts by bug count, category and operator; editable lines; program length."""
  buggy = [t for t in tasks if t.is_buggy]
  categories: collections.Counter = collections.Counter()
  operators: collections.Counter = collections.Counter()
  for t in buggy:
    for value, counter in (
      (t.extra.get("bug_type"), categories),
      (t.extra.get("bug_subtype"), operators),
    ):
      for item in value if isinstance(value, list) else [value or "unknown"]:
        counter[str(item)] += 1
  lengths = [_lines(t.gt_solution) for t in tasks]
  editable = [_editable(t) for t in tasks]
  return {
    "name": name,
    "tasks": len(tasks),
    "buggy": len(buggy),
    "clean": len(tasks) - len(buggy),
    "by_bug_count": {
      str(k): v for k, v in sorted(collections.Counter(t.bug_count for t in buggy).items())
    },
    "multi_line_tasks": sum(bool(t.extra.get("multi_line")) for t in buggy),
    "by_category": dict(sorted(categories.items())),
    "by_operator": dict(sorted(operators.items())),
    "by_source": dict(sorted(collections.Counter(t.source_dataset for t in tasks).items())),
    "by_test_kind": dict(
      sorted(collections.Counter(t.tests.get("kind", "none") for t in tasks).items())
    ),
    "program_lines_mean": round(statistics.fmean(lengths), 2) if lengths else 0.0,
    "program_lines_min_max": [min(lengths), max(lengths)] if lengths else [0, 0],
    "editable_lines_mean": round(statistics.fmean(editable), 2) if editable else 0.0,
    "changed_lines_mean": round(statistics.fmean(len(t.gt_diff) for t in buggy), 2)
    if buggy
    else 0.0,
    **_structure(tasks),
  }


def _summary(values: Sequence[float]) -> dict[str, float]:
  ordered = sorted(values)
  return {
    "mean": round(statistics.fmean(ordered), 4),
    "min": ordered[0],
    "p10": ordered[len(ordered) // 10],
    "median": ordered[len(ordered) // 2],
    "max": ordered[-1],
  }


def _structure(tasks: Sequence[Task]) -> dict[str, Any]:
  """Distinct program skeletons, and the distance of held-out programs to the nearest training
  program (data/program_tasks.py), where the tasks carry them."""
  out: dict[str, Any] = {}
  shapes = [t.extra["skeleton"] for t in tasks if "skeleton" in t.extra]
  if shapes:
    out["distinct_skeletons"] = len(set(shapes))
  for key in ("train_distance", "train_shape_distance"):
    values = [float(t.extra[key]) for t in tasks if key in t.extra]
    if values:
      out[key] = _summary(values)
  return out


def card_markdown(card: dict[str, Any]) -> str:
  """The card as a short Markdown section."""
  out = [
    f"### {card['name']}",
    "",
    f"{card['tasks']} tasks ({card['buggy']} buggy, {card['clean']} clean); "
    f"programs {card['program_lines_mean']} non-blank lines on average "
    f"(range {card['program_lines_min_max'][0]}-{card['program_lines_min_max'][1]}), "
    f"{card['editable_lines_mean']} editable; {card['changed_lines_mean']} changed lines per "
    f"buggy task; {card['multi_line_tasks']} tasks with a multi-line bug.",
    "",
  ]
  if "distinct_skeletons" in card:
    out += [
      f"{card['distinct_skeletons']} distinct program skeletons (identifiers, constants "
      "and operators abstracted).",
      "",
    ]
  for key, what in (
    ("train_distance", "token edit distance"),
    ("train_shape_distance", "token edit distance, identifiers and constants abstracted"),
  ):
    if key in card:
      d = card[key]
      out += [
        f"Distance to the nearest training program ({what}, normalised): mean "
        f"{d['mean']:.3f}, min {d['min']:.3f}, p10 {d['p10']:.3f}, median "
        f"{d['median']:.3f}, max {d['max']:.3f}.",
        "",
      ]
  for title, key in (
    ("bugs per task", "by_bug_count"),
    ("category", "by_category"),
    ("operator", "by_operator"),
    ("source", "by_source"),
    ("test kind", "by_test_kind"),
  ):
    if card[key]:
      out += [f"| {title} | count |", "|---|---|"]
      out += [f"| {k} | {v} |" for k, v in card[key].items()]
      out.append("")
  return "\n".join(out)
