"""Statistics over thinking traces: how a model reasons about a bug, as PAPER.md reports it.

Input: completions (generate's predictions: `task_id`, `sample`, `completion`), the task file
(for the buggy lines) and, optionally, their score lines (for F1, precision and no-op). Only
completions with a thinking block count (`prompts.thinking_block`: the first `<think>` block; an
unclosed one runs to the end; a completion holding only `</think>` counts the text before it).

Method:
- Quoting. A trace quotes the buggy line when one of the task's buggy lines (the `original` side
  of each `gt_diff` entry that has one, stripped of surrounding white space) occurs in it verbatim.
  Lines with fewer than MIN_QUOTE_CHARS non-space characters (`else:`, `return x`) are too common
  to count as a quote and are skipped; a task with no line left is not counted. A task's quoting
  is the share of its traces that quote; the reported share is its mean over buggy tasks (for
  one sample per task: the share of tasks whose reasoning quotes the buggy line).
- Lexicon rates. Each lexicon (package data, `lexicons/NAME.txt`: one Python regex per line,
  matched case-insensitively as whole words, non-overlapping, longer phrases first) is counted
  per trace; the rate is matches per 1,000 words over all traces pooled (words: white-space
  separated tokens). Lexicons: hedges, restatements of the instruction, "a bug must exist
  because the prompt says so" (prompt_presumption), and bug hypotheses.
- No-op by hypothesis quartile. Over clean tasks' traces with a score line, traces are ordered by
  their number of hypothesis matches (ties by input order) and cut into four near-equal groups;
  each quartile reports its no-op rate and hypothesis range.
- Quoting regression. Over buggy tasks with scores: per-task F1 and precision (samples averaged)
  regressed by least squares on per-task quoting standardised to mean 0, SD 1; the slope is the
  change per +1 SD of quoting (the paper: +4.3 F1, +3.2 precision points), with a 95% bootstrap
  interval over tasks.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from precisecoder import prompts
from precisecoder.analysis import statistics
from precisecoder.tasks import Task

LEXICONS = ("hedges", "restatements", "prompt_presumption", "hypotheses")
MIN_QUOTE_CHARS = 8


class LexiconError(ValueError):
  """A lexicon file that cannot be used; the message names file and line."""


def parse_lexicon(text: str, name: str) -> re.Pattern[str]:
  """One pattern matching any phrase of a lexicon file's text (longest phrases first)."""
  phrases = []
  for line_no, line in enumerate(text.splitlines(), 1):
    phrase = line.strip()
    if not phrase or phrase.startswith("#"):
      continue
    try:
      re.compile(phrase)
    except re.error as e:
      raise LexiconError(f"lexicon {name}, line {line_no}: bad pattern {phrase!r} ({e})") from None
    phrases.append(phrase)
  if not phrases:
    raise LexiconError(f"lexicon {name}: no phrases")
  phrases.sort(key=len, reverse=True)
  return re.compile(r"\b(?:" + "|".join(f"(?:{p})" for p in phrases) + r")\b", re.IGNORECASE)


@functools.cache
def lexicon(name: str) -> re.Pattern[str]:
  """The shipped lexicon `name` (one of LEXICONS)."""
  if name not in LEXICONS:
    raise LexiconError(f"unknown lexicon {name!r}; expected one of {LEXICONS}")
  resource = importlib.resources.files("precisecoder.analysis") / "lexicons" / f"{name}.txt"
  return parse_lexicon(resource.read_text(encoding="utf-8"), name)


def count(name: str, text: str) -> int:
  """Non-overlapping matches of lexicon `name` in `text`."""
  return sum(1 for _ in lexicon(name).finditer(text))


def word_count(text: str) -> int:
  return len(text.split())


def buggy_lines(task: Task) -> list[str]:
  """The task's buggy lines long enough to identify a quote (see the module docstring)."""
  lines = []
  for change in task.gt_diff.values():
    line = str(change.get("original", "")).strip()
    if len(re.sub(r"\s", "", line)) >= MIN_QUOTE_CHARS:
      lines.append(line)
  return lines


def quotes_buggy_line(trace: str, task: Task) -> bool | None:
  """Whether `trace` quotes one of the task's buggy lines verbatim; None when none qualifies."""
  lines = buggy_lines(task)
  if not task.is_buggy or not lines:
    return None
  return any(line in trace for line in lines)


def trace_rows(
  predictions: Sequence[Mapping[str, Any]],
  tasks: Mapping[str, Task],
  scores: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
  """One row per completion with a thinking block: its counts, quoting and scores."""
  by_key = {(s["task_id"], s.get("sample", 0)): s for s in scores}
  rows = []
  for p in predictions:
    trace = prompts.thinking_block(str(p.get("completion") or ""))
    if not trace:
      continue
    task = tasks[p["task_id"]]
    score = by_key.get((p["task_id"], p.get("sample", 0)), {})
    rows.append(
      {
        "task_id": task.task_id,
        "sample": p.get("sample", 0),
        "is_buggy": task.is_buggy,
        "words": word_count(trace),
        "quotes": quotes_buggy_line(trace, task),
        **{name: count(name, trace) for name in LEXICONS},
        **{term: score.get(term) for term in ("f1", "precision", "noop", "unit")},
      }
    )
  return rows


def _buggy_task_means(rows: Sequence[Mapping[str, Any]], field: str) -> dict[str, float]:
  """task id -> mean of `field` over its traces (buggy tasks; None values left out)."""
  buggy = [r for r in rows if r["is_buggy"]]
  return statistics.task_mean_map([r["task_id"] for r in buggy], [r.get(field) for r in buggy])


def quoting_effect(
  rows: Sequence[Mapping[str, Any]], metric: str, *, resamples: int = 2000, seed: int = 0
) -> dict[str, float]:
  """Least-squares slope of per-task `metric` on standardised per-task quoting, with a 95%
  bootstrap interval over tasks; nan where quoting does not vary."""
  quoting = _buggy_task_means(rows, "quotes")
  outcome = _buggy_task_means([r for r in rows if r["quotes"] is not None], metric)
  shared = [t for t in quoting if t in outcome]
  x = np.array([quoting[t] for t in shared])
  y = np.array([outcome[t] for t in shared])
  nan = {
    "slope_per_sd": float("nan"),
    "low": float("nan"),
    "high": float("nan"),
    "tasks": len(shared),
  }
  if len(shared) < 3 or np.std(x) == 0:
    return nan

  def slope(xs: np.ndarray, ys: np.ndarray) -> float:
    sd = np.std(xs)
    if sd == 0:
      return float("nan")
    z = (xs - xs.mean()) / sd
    return float(np.dot(z, ys - ys.mean()) / np.dot(z, z))

  rng = np.random.default_rng(seed)
  picks = rng.integers(0, len(shared), size=(resamples, len(shared)))
  boot = np.array([slope(x[i], y[i]) for i in picks])
  boot = boot[~np.isnan(boot)]
  low, high = np.percentile(boot, [2.5, 97.5]) if boot.size else (float("nan"),) * 2
  return {"slope_per_sd": slope(x, y), "low": float(low), "high": float(high), "tasks": len(shared)}


def noop_by_hypothesis_quartile(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """No-op rate in each quartile of hypothesis counts over scored clean-task traces."""
  clean = [r for r in rows if not r["is_buggy"] and r.get("noop") is not None]
  if len(clean) < 4:
    return []
  order = sorted(range(len(clean)), key=lambda i: (clean[i]["hypotheses"], i))
  out = []
  for q, part in enumerate(np.array_split(np.array(order), 4), 1):
    group = [clean[i] for i in part]
    counts = [r["hypotheses"] for r in group]
    out.append(
      {
        "quartile": q,
        "traces": len(group),
        "hypotheses_min": min(counts),
        "hypotheses_max": max(counts),
        "noop_rate": float(np.mean([float(r["noop"]) for r in group])),
      }
    )
  return out


def summarize(
  rows: Sequence[Mapping[str, Any]], *, completions: int, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
  """The trace statistics (see the module docstring) as one JSON-ready dict."""
  words = sum(r["words"] for r in rows)
  quoting = _buggy_task_means(rows, "quotes")
  return {
    "completions": completions,
    "traces": len(rows),
    "words": words,
    "quote_share": statistics.bootstrap_interval(
      list(quoting.values()), resamples=resamples, seed=seed
    ).to_json(),
    "per_1000_words": {
      name: (1000 * sum(r[name] for r in rows) / words if words else None) for name in LEXICONS
    },
    "noop_by_hypothesis_quartile": noop_by_hypothesis_quartile(rows),
    "quoting_effect": {
      metric: quoting_effect(rows, metric, resamples=resamples, seed=seed)
      for metric in ("f1", "precision")
    },
  }


def markdown(summary: Mapping[str, Any]) -> str:
  """`summarize(...)` as Markdown."""
  share = statistics.Interval(**summary["quote_share"])
  lines = [
    f"{summary['traces']} of {summary['completions']} completions have a thinking block "
    f"({summary['words']} words).",
    "",
    "- share of buggy tasks whose reasoning quotes the buggy line verbatim, %: "
    f"{share.format(percent=True)} ({share.n} tasks)",
    "",
    "| per 1,000 words | rate |",
    "|---|---|",
  ]
  for name, rate in summary["per_1000_words"].items():
    lines.append(f"| {name.replace('_', ' ')} | {'–' if rate is None else f'{rate:.2f}'} |")
  if summary["noop_by_hypothesis_quartile"]:
    lines += [
      "",
      "| hypothesis quartile (clean tasks) | hypotheses | traces | no-op rate |",
      "|---|---|---|---|",
    ]
    for q in summary["noop_by_hypothesis_quartile"]:
      lines.append(
        f"| Q{q['quartile']} | {q['hypotheses_min']}–{q['hypotheses_max']} | "
        f"{q['traces']} | {100 * q['noop_rate']:.1f}% |"
      )
  lines.append("")
  for metric, effect in summary["quoting_effect"].items():
    if np.isnan(effect["slope_per_sd"]):
      lines.append(
        f"- {metric} per +1 SD of quoting: – ({effect['tasks']} tasks; quoting does "
        "not vary or no scores)"
      )
    else:
      lines.append(
        f"- {metric} per +1 SD of quoting: {100 * effect['slope_per_sd']:+.1f} points "
        f"[{100 * effect['low']:+.1f}, {100 * effect['high']:+.1f}] "
        f"({effect['tasks']} tasks)"
      )
  return "\n".join(lines) + "\n"
