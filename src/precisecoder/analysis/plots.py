"""PNG plots of curves over training steps (matplotlib, no display needed): one run's curves
from `metrics.jsonl`, or several runs (arms of a comparison) overlaid, with interval bands."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from precisecoder.intmath import cdiv

# (metric key, panel title); evaluation curves then training curves.
EVAL_PANELS = (("eval/pass", "pass"), ("eval/precision", "precision"), ("eval/recall", "recall"),
               ("eval/edit_lines", "edited lines"), ("eval/noop", "no-op rate (clean)"),
               ("eval/damage", "damage rate (clean)"))
# What explains a run: what its samples did, how many groups carried a signal, and how hard
# and how far each update pushed the policy.
TRAIN_PANELS = (("reward", "reward"), ("reward/unit", "train pass"),
                ("reward/precision", "train precision"),
                ("reward/edit_lines", "train edited lines"),
                ("reward/noop", "train no-op (buggy tasks)"),
                ("zero_variance_groups", "groups without reward variance"),
                ("train/grad_norm", "gradient norm"),
                ("train/kl_sampler", "KL to the sampling policy"),
                ("train/kl", "KL to the reference"), ("train/entropy", "entropy"),
                ("train/clip_fraction", "clip fraction"), ("time/step", "step time (s)"))
# Training curves of a comparison: what each arm's samples did, whatever its reward.
COMPARE_TRAIN_PANELS = (("reward/unit", "train pass"), ("reward/edit_lines", "train edited lines"),
                        ("reward/noop", "train no-op (buggy tasks)"),
                        ("reward/precision", "train precision"), ("reward", "arm's own reward"),
                        ("zero_variance_groups", "groups without reward variance"))

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


def _grid(panels: Sequence[tuple[str, str]], title: str, path: str | os.PathLike,
          draw: Callable[[Any, str], None]) -> pathlib.Path:
  cols = 3
  rows = cdiv(len(panels), cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
  for ax, (key, name) in zip(axes.flat, panels):
    draw(ax, key)
    ax.set_title(name)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
  for ax in list(axes.flat)[len(panels):]:
    ax.axis("off")
  fig.suptitle(title)
  fig.tight_layout()
  path = pathlib.Path(path)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def plot_panels(records: Sequence[dict[str, Any]], panels, title: str,
                path: str | os.PathLike) -> pathlib.Path | None:
  """A grid of line plots, one per metric that the run recorded; None if it recorded none."""
  return plot_arms({"": {key: series(records, key) for key, _ in panels}}, panels, title, path)


def plot_arms(curves: Mapping[str, Mapping[str, Curve]], panels, title: str,
              path: str | os.PathLike) -> pathlib.Path | None:
  """One panel per metric, one line per arm (`curves[arm][key]`), a shaded band where a curve
  has intervals; panels no arm recorded are left out; None if none is left."""
  panels = [(k, t) for k, t in panels if any(c.get(k, ([],))[0] for c in curves.values())]
  if not panels:
    return None

  def draw(ax, key):
    for arm, arm_curves in curves.items():
      steps, values, lows, highs = arm_curves.get(key, ([], [], None, None))
      if not steps:
        continue
      line, = ax.plot(steps, values, marker="o", markersize=3, label=arm or None)
      if lows is not None and highs is not None:
        ax.fill_between(steps, lows, highs, color=line.get_color(), alpha=0.15)
    if any(curves):
      ax.legend(fontsize=7)

  return _grid(panels, title, path, draw)
