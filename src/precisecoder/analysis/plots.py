"""PNG plots of a run's curves from `metrics.jsonl` (matplotlib, no display needed)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

# (metric key, panel title, figure file); evaluation curves then training curves.
EVAL_PANELS = (("eval/pass", "pass"), ("eval/precision", "precision"), ("eval/recall", "recall"),
               ("eval/edit_lines", "edited lines"), ("eval/noop", "no-op rate (clean)"),
               ("eval/damage", "damage rate (clean)"))
TRAIN_PANELS = (("reward", "reward"), ("reward/unit", "train pass"),
                ("reward/precision", "train precision"), ("reward/edit_lines", "train edited lines"),
                ("train/clip_fraction", "clip fraction"), ("time/step", "step time (s)"))


def _series(records: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
  pairs = [(r["step"], r[key]) for r in records if r.get(key) is not None]
  return [p[0] for p in pairs], [p[1] for p in pairs]


def plot_panels(records: Sequence[dict[str, Any]], panels, title: str,
                path: str | os.PathLike) -> pathlib.Path | None:
  """A grid of line plots, one per metric that the run recorded; None if it recorded none."""
  panels = [(k, t) for k, t in panels if _series(records, k)[0]]
  if not panels:
    return None
  cols = 3
  rows = -(-len(panels) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
  for ax, (key, name) in zip(axes.flat, panels):
    steps, values = _series(records, key)
    ax.plot(steps, values, marker="o", markersize=3)
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
