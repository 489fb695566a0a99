"""PNG plots of curves over training steps (matplotlib, no display needed): one run's curves
from `metrics.jsonl`, or several runs (arms of a comparison) overlaid, with interval bands."""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from precisecoder.intmath import cdiv

# (metric key, panel title); evaluation curves then training curves.
EVAL_PANELS = (
  ("eval/pass", "pass"),
  ("eval/precision", "precision"),
  ("eval/recall", "recall"),
  ("eval/edit_lines", "edited lines"),
  ("eval/noop", "no-op rate (clean)"),
  ("eval/damage", "damage rate (clean)"),
)
# What explains a run: what its samples did, how many groups carried a signal, and how hard
# and how far each update pushed the policy.
TRAIN_PANELS = (
  ("reward", "reward"),
  ("reward/unit", "train pass"),
  ("reward/precision", "train precision"),
  ("reward/edit_lines", "train edited lines"),
  ("reward/noop", "train no-op (buggy tasks)"),
  ("zero_variance_groups", "groups without reward variance"),
  ("train/grad_norm", "gradient norm"),
  ("train/kl_sampler", "KL to the sampling policy"),
  ("train/kl", "KL to the reference"),
  ("train/entropy", "entropy"),
  ("train/clip_fraction", "clip fraction"),
  ("time/step", "step time (s)"),
)
# Training curves of a comparison: what each arm's samples did, whatever its reward.
COMPARE_TRAIN_PANELS = (
  ("reward/unit", "train pass"),
  ("reward/edit_lines", "train edited lines"),
  ("reward/noop", "train no-op (buggy tasks)"),
  ("reward/precision", "train precision"),
  ("reward", "arm's own reward"),
  ("zero_variance_groups", "groups without reward variance"),
)

# A curve: (steps, values, lows, highs); lows/highs None when there is no interval.
Curve = tuple[list[int], list[float], list[float] | None, list[float] | None]


def series(records: Sequence[dict[str, Any]], key: str) -> Curve:
  pairs = [(r["step"], r[key]) for r in records if r.get(key) is not None]
  return [p[0] for p in pairs], [p[1] for p in pairs], None, None


def constant_series(records: Sequence[dict[str, Any]], panels) -> dict[str, float]:
  """key -> value of each panel's series that has the same value at every step it has (two
  steps at least: one point is a curve of its own)."""
  out = {}
  for key, _ in panels:
    values = series(records, key)[1]
    if len(values) > 1 and all(v == values[0] for v in values):
      out[key] = values[0]
  return out


# Series that are shares, drawn in percent on a 0-100 axis as the tables print them.
PERCENT = frozenset(
  (
    "pass",
    "precision",
    "recall",
    "f1",
    "noop",
    "noop_buggy",
    "damage",
    "unit",
    "zero_variance_groups",
    "clip_fraction",
  )
)
# Arms drawn over one another stay told apart: a marker and a line style each, and a small
# offset along the step axis.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINESTYLES = ("-", "--", "-.", ":")
_OFFSET = 0.012  # of the step range, per arm from the middle one


def is_percent(key: str) -> bool:
  return key.rsplit("/", 1)[-1] in PERCENT


# A panel: (title, key, {arm: curve}).
Panel = tuple[str, str, Mapping[str, Curve]]


def figure(
  panels: Sequence[Panel],
  title: str,
  cols: int = 3,
  width: float = 4.0,
  row_names: Sequence[str] = (),
):
  """The grid of `panels` (left to right, top to bottom): one line per arm with its own marker,
  line style and a small step offset (identical arms stay visible), a band where the curve has
  an interval, whole-number steps, shares in percent on 0-100; `row_names` head the rows. A
  panel no arm recorded says so. Returns the matplotlib Figure."""
  from matplotlib.ticker import MaxNLocator  # pylint: disable=import-outside-toplevel

  rows = cdiv(len(panels), cols)
  left = 0.025 if any(row_names) else 0.0
  fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 3 * rows), squeeze=False)
  legend: dict[str, Any] = {}  # one legend for the figure: the arms are the same in every panel
  for ax, (name, key, arms) in zip(axes.flat, panels):
    drawn = [(arm, c) for arm, c in arms.items() if c[0]]
    if not drawn:
      ax.set_title(name)
      ax.text(
        0.5, 0.5, "not evaluated", ha="center", va="center", transform=ax.transAxes, color="gray"
      )
      ax.set_xticks([])
      ax.set_yticks([])
      continue
    steps = [s for _, c in drawn for s in c[0]]
    span = (max(steps) - min(steps)) if steps else 0
    scale = 100.0 if is_percent(key) else 1.0
    for i, (arm, (x, values, lows, highs)) in enumerate(drawn):
      shift = (i - (len(drawn) - 1) / 2) * _OFFSET * span
      x = [step + shift for step in x]
      (line,) = ax.plot(
        x,
        [scale * v for v in values],
        marker=_MARKERS[i % len(_MARKERS)],
        linestyle=_LINESTYLES[i % len(_LINESTYLES)],
        markersize=4,
        label=arm or None,
      )
      if lows is not None and highs is not None:
        ax.fill_between(
          x,
          [scale * v for v in lows],
          [scale * v for v in highs],
          color=line.get_color(),
          alpha=max(0.06, 0.3 / len(drawn)),
          linewidth=0,
        )
    if scale == 100.0:
      ax.set_ylim(-3, 103)
      ax.set_ylabel("%")
    else:  # counts (edited lines) from 0, so that a change reads at its true size
      seen = [
        v
        for _, c in drawn
        for part in (c[1], c[2] or (), c[3] or ())
        for v in part
        if math.isfinite(v)
      ]  # an evaluation without per-task records has no interval
      low, high = min(0.0, *seen), max(seen, default=1.0)
      ax.set_ylim(low, high + 0.08 * ((high - low) or 1.0))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(name)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    for handle, label in zip(*ax.get_legend_handles_labels()):
      legend.setdefault(label, handle)
  for ax in list(axes.flat)[len(panels) :]:
    ax.axis("off")
  fig.suptitle(title)
  top = 1.0
  if legend:
    top = 1 - 0.3 / (3 * rows)  # a third of an inch for the legend
    fig.legend(
      list(legend.values()),
      list(legend),
      loc="upper right",
      ncol=len(legend),
      fontsize=9,
      frameon=False,
    )
  fig.tight_layout(rect=(left, 0, 1, top))
  for row, name in enumerate(row_names):
    box = axes[row, 0].get_position()
    fig.text(
      0.004,
      (box.y0 + box.y1) / 2,
      name,
      rotation=90,
      ha="left",
      va="center",
      fontsize=11,
      fontweight="bold",
    )
  return fig


def save(fig, path: str | os.PathLike) -> pathlib.Path:
  path = pathlib.Path(path)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def plot_panels(
  records: Sequence[dict[str, Any]], panels, title: str, path: str | os.PathLike
) -> pathlib.Path | None:
  """A grid of line plots, one per metric that the run recorded; None if it recorded none."""
  return plot_arms({"": {key: series(records, key) for key, _ in panels}}, panels, title, path)


def _recorded(curves: Mapping[str, Mapping[str, Curve]], key: str) -> bool:
  return any(c.get(key, ([],))[0] for c in curves.values())


def plot_arms(
  curves: Mapping[str, Mapping[str, Curve]], panels, title: str, path: str | os.PathLike
) -> pathlib.Path | None:
  """One panel per metric, one line per arm (`curves[arm][key]`), a shaded band where a curve
  has intervals; panels no arm recorded are left out; None if none is left."""
  cells = [
    (t, k, {arm: c.get(k, ([], [], None, None)) for arm, c in curves.items()})
    for k, t in panels
    if _recorded(curves, k)
  ]
  return save(figure(cells, title), path) if cells else None


def plot_sections(
  sections: Sequence[tuple[str, Mapping[str, Mapping[str, Curve]]]],
  panels,
  title: str,
  path: str | os.PathLike,
) -> pathlib.Path | None:
  """One row per section (an evaluated split: `(name, curves[arm][key])`, in the order
  given), one panel per metric of `panels` any section recorded; None if none is left."""
  sections = [
    (name, curves) for name, curves in sections if any(_recorded(curves, k) for k, _ in panels)
  ]
  panels = [(k, t) for k, t in panels if any(_recorded(c, k) for _, c in sections)]
  if not panels:
    return None
  cells = [
    (t, k, {arm: c.get(k, ([], [], None, None)) for arm, c in curves.items()})
    for _, curves in sections
    for k, t in panels
  ]
  if len(sections) == 1:  # one split: a compact grid, not one long row
    name = sections[0][0]
    return save(figure(cells, f"{title}: {name}" if name else title, cols=min(4, len(cells))), path)
  return save(
    figure(cells, title, cols=len(panels), width=3.3, row_names=[name for name, _ in sections]),
    path,
  )
