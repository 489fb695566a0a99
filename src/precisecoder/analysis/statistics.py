"""Noise and association for the paper's table: bootstrap intervals over tasks, Pearson r.

The unit of resampling is the task, not the sample: a task's G samples share its difficulty, so
treating them as independent draws would make intervals too narrow. Each task's samples are averaged
first (as the paper's dataset scores are), then tasks are resampled with replacement. Intervals are
percentile intervals; correlations carry a Fisher-z interval. Numpy only: the score command and the
report use this without importing JAX.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from precisecoder.rewards import PAPER_COLUMNS  # the columns are means of reward terms

PERCENT_COLUMNS = frozenset({"pass", "precision", "recall", "f1", "noop", "damage", "noop_buggy"})
# Beside the paper's columns: how many buggy programs come back unchanged. Fewer edited lines
# are a gain only if they do not come from returning the bug untouched.
NOOP_BUGGY = {"noop_buggy": ("noop", "buggy")}


@dataclasses.dataclass(frozen=True)
class Interval:
  """A mean over `n` tasks with its bootstrap interval [low, high]."""

  mean: float
  low: float
  high: float
  n: int

  def format(self, percent: bool = False, digits: int | None = None, sign: bool = False) -> str:
    scale = 100.0 if percent else 1.0
    digits = (1 if percent else 2) if digits is None else digits
    if self.n == 0 or math.isnan(self.mean):
      return "–"
    plus = "+" if sign else ""
    if math.isnan(self.low):  # a mean known without its samples: no interval to give
      return f"{scale * self.mean:{plus}.{digits}f}"
    return (
      f"{scale * self.mean:{plus}.{digits}f} "
      f"[{scale * self.low:{plus}.{digits}f}, {scale * self.high:{plus}.{digits}f}]"
    )

  def excludes(self, value: float = 0.0) -> bool:
    """Whether `value` lies outside the interval (for a difference: not explained by noise).
    A mean without an interval (one seed's) excludes nothing."""
    if self.n == 0 or math.isnan(self.low) or math.isnan(self.high):
      return False
    return not self.low <= value <= self.high

  def to_json(self) -> dict[str, float | int]:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Correlation:
  """Pearson r over `n` pairs with a Fisher-z interval (nan where undefined)."""

  r: float
  low: float
  high: float
  n: int

  def format(self) -> str:
    if math.isnan(self.r):
      return f"– (n = {self.n})"
    if math.isnan(self.low):  # r = ±1, or too few pairs for Fisher's z
      return f"{self.r:+.2f} (n = {self.n}, no interval)"
    return f"{self.r:+.2f} [{self.low:+.2f}, {self.high:+.2f}] (n = {self.n})"

  def to_json(self) -> dict[str, float | int]:
    return dataclasses.asdict(self)


def _as_float(value: Any) -> float:
  if value is None:
    return math.nan
  return float(value)


def task_means(task_ids: Sequence[str], values: Iterable[Any]) -> np.ndarray:
  """One mean per task (first-seen order), over its samples whose value is not None/nan."""
  return np.array(list(task_mean_map(task_ids, values).values()), np.float64)


def task_mean_map(task_ids: Sequence[str], values: Iterable[Any]) -> dict[str, float]:
  """task id -> mean over its samples whose value is not None/nan (tasks without one left out)."""
  sums: dict[str, float] = {}
  counts: dict[str, int] = {}
  for task_id, value in zip(task_ids, values, strict=True):
    x = _as_float(value)
    sums.setdefault(task_id, 0.0)
    counts.setdefault(task_id, 0)
    if not math.isnan(x):
      sums[task_id] += x
      counts[task_id] += 1
  return {t: sums[t] / counts[t] for t in sums if counts[t]}


def bootstrap_interval(
  values: Sequence[float] | np.ndarray,
  *,
  confidence: float = 0.95,
  resamples: int = 2000,
  seed: int = 0,
) -> Interval:
  """Mean of `values` (one per task) with a percentile bootstrap interval."""
  x = np.asarray(values, np.float64)
  x = x[~np.isnan(x)]
  if x.size == 0:
    return Interval(math.nan, math.nan, math.nan, 0)
  rng = np.random.default_rng(seed)
  means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
  tail = 100 * (1 - confidence) / 2
  low, high = np.percentile(means, [tail, 100 - tail])
  return Interval(float(x.mean()), float(low), float(high), int(x.size))


def pearson(
  x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, confidence: float = 0.95
) -> Correlation:
  """Pearson r of the pairs where both values are finite; nan when either side is constant."""
  a, b = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if a.shape != b.shape:
    raise ValueError(f"pearson: x has shape {a.shape}, y has {b.shape}")
  keep = np.isfinite(a) & np.isfinite(b)
  a, b = a[keep], b[keep]
  n = int(a.size)
  if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
    return Correlation(math.nan, math.nan, math.nan, n)
  r = float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))
  if n <= 3 or abs(r) == 1.0:
    return Correlation(r, math.nan, math.nan, n)
  z, se = math.atanh(r), 1.0 / math.sqrt(n - 3)
  q = _normal_quantile(0.5 + confidence / 2)
  return Correlation(r, math.tanh(z - q * se), math.tanh(z + q * se), n)


def seed_interval(values: Sequence[float], *, confidence: float = 0.95) -> Interval:
  """Mean of one value per seed with a Student-t interval (n − 1 degrees of freedom): with a
  handful of seeds a bootstrap's percentiles would only repeat the seeds' own values."""
  x = np.asarray(values, np.float64)
  x = x[np.isfinite(x)]
  n = int(x.size)
  if n == 0:
    return Interval(math.nan, math.nan, math.nan, 0)
  mean = float(x.mean())
  if n == 1:
    return Interval(mean, math.nan, math.nan, 1)
  half = _t_quantile(0.5 + confidence / 2, n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
  return Interval(mean, mean - half, mean + half, n)


def _t_quantile(p: float, df: int) -> float:
  """Student's t quantile by bisection on its CDF (Simpson's rule on the density)."""
  scale = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

  def cdf(t: float) -> float:  # for t >= 0: 1/2 + the density's integral over [0, t]
    steps = 2000
    h = t / steps
    xs = np.linspace(0.0, t, steps + 1)
    ys = scale * (1 + xs * xs / df) ** (-(df + 1) / 2)
    return 0.5 + h / 3 * (ys[0] + ys[-1] + 4 * ys[1:-1:2].sum() + 2 * ys[2:-1:2].sum())

  lo, hi = 0.0, 1000.0
  for _ in range(60):
    mid = (lo + hi) / 2
    if cdf(mid) < p:
      lo = mid
    else:
      hi = mid
  return (lo + hi) / 2


def _normal_quantile(p: float) -> float:
  """Standard normal quantile by bisection on erf (no scipy needed; exact to 1e-12)."""
  lo, hi = -10.0, 10.0
  for _ in range(100):
    mid = (lo + hi) / 2
    if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
      lo = mid
    else:
      hi = mid
  return (lo + hi) / 2


def paper_table(
  rows: Sequence[Mapping[str, Any]],
  *,
  confidence: float = 0.95,
  resamples: int = 2000,
  seed: int = 0,
  columns: Mapping[str, tuple[str, str]] = PAPER_COLUMNS,
) -> dict[str, Interval]:
  """The paper's columns (or `columns`: name -> (term, buggy|clean)) with bootstrap intervals
  over tasks.

  `rows` are per-sample records holding `task_id`, `is_buggy` and the terms named in
  PAPER_COLUMNS (score lines, evaluation records). Samples of a task are averaged first.
  """
  out = {}
  for column, (term, kind) in columns.items():
    selected = [r for r in rows if bool(r["is_buggy"]) == (kind == "buggy")]
    means = task_means([r["task_id"] for r in selected], [r.get(term) for r in selected])
    out[column] = bootstrap_interval(means, confidence=confidence, resamples=resamples, seed=seed)
  return out


def paired_differences(
  before: Sequence[Mapping[str, Any]],
  after: Sequence[Mapping[str, Any]],
  *,
  confidence: float = 0.95,
  resamples: int = 2000,
  seed: int = 0,
  columns: Mapping[str, tuple[str, str]] = PAPER_COLUMNS,
) -> dict[str, Interval]:
  """`after` − `before` in the paper's columns (or `columns`), paired by task: each task's mean
  difference, resampled by task. Pairing removes the spread of task difficulty that two separate
  intervals carry, so a change can be real while the two intervals still overlap."""
  out = {}
  for column, (term, kind) in columns.items():
    means = []
    for rows in (before, after):
      selected = [r for r in rows if bool(r["is_buggy"]) == (kind == "buggy")]
      means.append(task_mean_map([r["task_id"] for r in selected], [r.get(term) for r in selected]))
    shared = [t for t in means[0] if t in means[1]]
    out[column] = bootstrap_interval(
      [means[1][t] - means[0][t] for t in shared],
      confidence=confidence,
      resamples=resamples,
      seed=seed,
    )
  return out


def edit_size_unit_correlation(rows: Sequence[Mapping[str, Any]]) -> Correlation:
  """The paper's diagnosis: Pearson r between edit size (−ℓ) and unit over buggy samples."""
  buggy = [r for r in rows if r["is_buggy"]]
  return pearson(
    [-_as_float(r.get("edit_lines")) for r in buggy], [_as_float(r.get("unit")) for r in buggy]
  )


def cell(interval: Interval, column: str, *, difference: bool = False) -> str:
  """`mean [low, high]` of a paper column (percent except edited lines); for a difference,
  signed and starred where the interval excludes 0."""
  text = interval.format(percent=column in PERCENT_COLUMNS, sign=difference)
  return text + (" *" if difference and interval.excludes(0.0) else "")


def markdown_table(
  tables: Mapping[str, Mapping[str, Interval]],
  columns: Sequence[str] = tuple(PAPER_COLUMNS),
  label: str = "",
  *,
  difference: bool = False,
) -> str:
  """Rows of `tables` (name -> paper_table, or paired_differences with `difference`) as
  Markdown; percent except edited lines."""
  head = f"| {label} | " + " | ".join(columns) + " |"
  rule = "|---|" + "---|" * len(columns)
  body = [
    f"| {name} | "
    + " | ".join(cell(table[c], c, difference=difference) if c in table else "–" for c in columns)
    + " |"
    for name, table in tables.items()
  ]
  return "\n".join([head, rule, *body])
