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
    for value, counter in ((t.extra.get("bug_type"), categories),
                           (t.extra.get("bug_subtype"), operators)):
      for item in value if isinstance(value, list) else [value or "unknown"]:
        counter[str(item)] += 1
  lengths = [_lines(t.gt_solution) for t in tasks]
  editable = [_editable(t) for t in tasks]
  return {
      "name": name,
      "tasks": len(tasks),
      "buggy": len(buggy),
      "clean": len(tasks) - len(buggy),
      "by_bug_count": {str(k): v for k, v in sorted(collections.Counter(
          t.bug_count for t in buggy).items())},
      "multi_line_tasks": sum(bool(t.extra.get("multi_line")) for t in buggy),
      "by_category": dict(sorted(categories.items())),
      "by_operator": dict(sorted(operators.items())),
      "by_source": dict(sorted(collections.Counter(t.source_dataset for t in tasks).items())),
      "by_test_kind": dict(sorted(collections.Counter(
          t.tests.get("kind", "none") for t in tasks).items())),
      "program_lines_mean": round(statistics.fmean(lengths), 2) if lengths else 0.0,
      "program_lines_min_max": [min(lengths), max(lengths)] if lengths else [0, 0],
      "editable_lines_mean": round(statistics.fmean(editable), 2) if editable else 0.0,
      "changed_lines_mean": round(statistics.fmean(len(t.gt_diff) for t in buggy), 2)
                            if buggy else 0.0,
  }


def card_markdown(card: dict[str, Any]) -> str:
  """The card as a short Markdown section."""
  out = [f"### {card['name']}", "",
         f"{card['tasks']} tasks ({card['buggy']} buggy, {card['clean']} clean); "
         f"programs {card['program_lines_mean']} non-blank lines on average "
         f"(range {card['program_lines_min_max'][0]}-{card['program_lines_min_max'][1]}), "
         f"{card['editable_lines_mean']} editable; {card['changed_lines_mean']} changed lines per "
         f"buggy task; {card['multi_line_tasks']} tasks with a multi-line bug.", ""]
  for title, key in (("bugs per task", "by_bug_count"), ("category", "by_category"),
                     ("operator", "by_operator"), ("source", "by_source"),
                     ("test kind", "by_test_kind")):
    if card[key]:
      out += [f"| {title} | count |", "|---|---|"]
      out += [f"| {k} | {v} |" for k, v in card[key].items()]
      out.append("")
  return "\n".join(out)
