"""The PNG plots (analysis/plots.py), called directly: curves skip steps without the metric,
constant curves are found, and a plot keeps only the panels some run recorded (its grid, read
back from the PNG's size) or writes nothing when none did."""

import struct

from precisecoder.analysis import plots

RECORDS = [{"step": 1, "reward": 0.5, "time/step": 2.0},
           {"step": 2, "reward": 0.75, "time/step": 2.0, "eval/pass": 0.25},
           {"step": 3, "reward": None, "time/step": 2.0}]


def _png_size(path):
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", data[16:24])  # IHDR: width, height


def test_series_and_constant_series_read_only_recorded_steps():
  assert plots.series(RECORDS, "reward") == ([1, 2], [0.5, 0.75], None, None)
  assert plots.series(RECORDS, "eval/pass") == ([2], [0.25], None, None)
  # One point is not a constant curve; a metric at the same value at every step is.
  assert plots.constant_series(RECORDS, plots.TRAIN_PANELS + plots.EVAL_PANELS) == {
      "time/step": 2.0}


def test_plots_keep_the_recorded_panels_or_write_nothing(tmp_path):
  assert plots.plot_panels(RECORDS, plots.TRAIN_PANELS[2:6], "none", tmp_path / "a.png") is None
  assert not (tmp_path / "a.png").exists()
  # reward and time/step recorded of the 12 training panels: one row of 3 at 100 dpi.
  path = plots.plot_panels(RECORDS, plots.TRAIN_PANELS, "run", tmp_path / "train.png")
  assert _png_size(path) == (1200, 300)
  band = ([1, 2], [0.5, 0.6], [0.4, 0.5], [0.6, 0.7])
  curves = {"grpo": {key: band for key, _ in plots.EVAL_PANELS[:2]},
            "precisecoder": {"eval/noop": band, "eval/damage": ([], [], None, None)}}
  path = plots.plot_arms(curves, plots.EVAL_PANELS, "arms", tmp_path / "arms.png")
  assert _png_size(path) == (1200, 300)  # 3 of the 6 panels recorded by either arm: one row
