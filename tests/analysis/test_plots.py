"""The PNG plots (analysis/plots.py), called directly: curves skip steps without the metric,
constant curves are found, and a plot keeps only the panels some run recorded (its grid, read
back from the PNG's size) or writes nothing when none did."""

import struct

import pytest

from precisecoder.analysis import plots

RECORDS = [
  {"step": 1, "reward": 0.5, "time/step": 2.0},
  {"step": 2, "reward": 0.75, "time/step": 2.0, "eval/pass": 0.25},
  {"step": 3, "reward": None, "time/step": 2.0},
]


def _png_size(path):
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", data[16:24])  # IHDR: width, height


def test_series_and_constant_series_read_only_recorded_steps():
  assert plots.series(RECORDS, "reward") == ([1, 2], [0.5, 0.75], None, None)
  assert plots.series(RECORDS, "eval/pass") == ([2], [0.25], None, None)
  # One point is not a constant curve; a metric at the same value at every step is.
  assert plots.constant_series(RECORDS, plots.TRAIN_PANELS + plots.EVAL_PANELS) == {
    "time/step": 2.0
  }


def test_plots_keep_the_recorded_panels_or_write_nothing(tmp_path):
  assert plots.plot_panels(RECORDS, plots.TRAIN_PANELS[2:6], "none", tmp_path / "a.png") is None
  assert not (tmp_path / "a.png").exists()
  # reward and time/step recorded of the 12 training panels: one row of 3 at 100 dpi.
  path = plots.plot_panels(RECORDS, plots.TRAIN_PANELS, "run", tmp_path / "train.png")
  assert _png_size(path) == (1200, 300)
  band = ([1, 2], [0.5, 0.6], [0.4, 0.5], [0.6, 0.7])
  curves = {
    "grpo": {key: band for key, _ in plots.EVAL_PANELS[:2]},
    "precisecoder": {"eval/noop": band, "eval/damage": ([], [], None, None)},
  }
  path = plots.plot_arms(curves, plots.EVAL_PANELS, "arms", tmp_path / "arms.png")
  assert _png_size(path) == (1200, 300)  # 3 of the 6 panels recorded by either arm: one row


def test_arms_that_overlap_stay_apart_in_percent_on_whole_steps_with_bands():
  """Two identical arms: each its own marker and line style, a small step offset; shares on a
  0-100 percent axis as the tables print them; edited lines from 0; integer step ticks; the
  intervals drawn as bands."""
  same = ([0, 10, 20], [0.0, 0.001, 0.002], [0.0, 0.0, 0.0], [0.0, 0.002, 0.003])
  lines = ([0, 10, 20], [5.5, 6.0, 5.5], [5.0, 5.5, 5.0], [6.0, 6.5, 6.0])
  fig = plots.figure(
    [
      ("precision", "eval/precision", {"grpo": same, "precisecoder": same}),
      ("edited lines", "eval/edit_lines", {"grpo": lines, "precisecoder": lines}),
      ("train pass", "reward/unit", {"grpo": ([1, 2, 3], [0.2, 0.3, 0.4], None, None)}),
    ],
    "t",
  )
  precision, edited, train = fig.axes[:3]
  grpo, pc = precision.get_lines()
  assert (grpo.get_marker(), grpo.get_linestyle()) != (pc.get_marker(), pc.get_linestyle())
  assert list(grpo.get_xdata()) != list(pc.get_xdata())  # drawn slightly apart
  assert max(abs(a - b) for a, b in zip(grpo.get_xdata(), pc.get_xdata())) < 1  # < a step
  assert list(grpo.get_ydata()) == pytest.approx([0.0, 0.1, 0.2])  # percent
  assert precision.get_ylim()[0] < 0 < 100 < precision.get_ylim()[1] < 110
  assert train.get_ylim()[1] > 100 and edited.get_ylim()[0] == 0 < 6.5 < edited.get_ylim()[1]
  assert len(precision.collections) == 2  # a band per arm
  assert all(float(t).is_integer() for t in train.get_xticks())
  plots.plt.close(fig)


def test_sections_make_rows_and_a_panel_nobody_evaluated_says_so(tmp_path):
  band = ([0, 40], [0.5, 0.9], [0.4, 0.8], [0.6, 1.0])
  sections = [
    ("Held-in tasks", {"a": {"eval/pass": band, "eval/noop": band}}),
    ("Multi-line split", {"a": {"eval/pass": band}}),
  ]
  panels = [("eval/pass", "pass"), ("eval/noop", "no-op"), ("eval/damage", "damage")]
  path = plots.plot_sections(sections, panels, "t", tmp_path / "s.png")
  assert _png_size(path) == (2 * 330, 2 * 300)  # damage: no section has it, so no column
  fig = plots.figure([("no-op", "eval/noop", {"a": ([], [], None, None)})], "t")
  assert [t.get_text() for t in fig.axes[0].texts] == ["not evaluated"]
  plots.plt.close(fig)
