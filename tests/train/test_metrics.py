"""Run metrics: metrics.jsonl and TensorBoard events across a resume, progress, quiet logs."""

import json
import struct
import types

import numpy as np
from tensorboardX import event_file_writer
from tensorboardX.proto import event_pb2
from tensorboardX.proto.event_pb2 import SessionLog
from tensorboardX.record_writer import masked_crc32c

from precisecoder.train import metrics


def test_metrics_resume_drops_records_after_the_checkpoint(tmp_path):
  w = metrics.MetricsWriter(tmp_path, tensorboard=False)
  for step in (1, 2, 3):
    w.write(step, {"loss": float(step), "x": np.float32(0.5)})
  w.close()
  w = metrics.MetricsWriter(tmp_path, resume_step=2, tensorboard=False)
  w.write(3, {"loss": 30.0})
  w.close()
  rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2, 3] and rows[-1]["loss"] == 30.0
  assert rows[0]["x"] == 0.5


def _events(folder):
  """Every scalar event of `folder`'s event files, read back with tensorboardX's protos as
  TensorBoard reads them: files in name order, frames checked, and a SessionLog START at step
  s drops what earlier files logged at steps >= s. [(tag, step, value)]"""
  seen = []
  for path in sorted(folder.glob("events.out.tfevents.*")):
    data, i = path.read_bytes(), 0
    while i < len(data):
      (length,) = struct.unpack("<Q", data[i : i + 8])
      assert struct.unpack("<I", data[i + 8 : i + 12])[0] == masked_crc32c(data[i : i + 8])
      payload = data[i + 12 : i + 12 + length]
      assert struct.unpack("<I", data[i + 12 + length : i + 16 + length])[0] == (
        masked_crc32c(payload)
      )
      i += 16 + length
      event = event_pb2.Event.FromString(payload)
      if event.HasField("session_log") and event.session_log.status == SessionLog.START:
        seen = [e for e in seen if e[1] < event.step]
      seen += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
  return seen


def test_resumed_event_file_purges_the_steps_after_the_checkpoint(tmp_path, monkeypatch):
  """Steps 1-3 logged, checkpoint at 2, resumed: TensorBoard shows step 3 once, the new value."""
  # The file name holds the second it was made in: the resumed run's is a later one.
  now = [1_700_000_000.0]
  monkeypatch.setattr(event_file_writer, "time", types.SimpleNamespace(time=lambda: now[0]))
  first = metrics.MetricsWriter(tmp_path)
  for step in (1, 2, 3):
    first.write(step, {"loss": float(step), "done": True})
  first.close()
  assert [e[1] for e in _events(tmp_path / "tensorboard")] == [1, 2, 3]  # a fresh run: no purge
  now[0] += 10
  resumed = metrics.MetricsWriter(tmp_path, resume_step=2)
  for step in (3, 4):
    resumed.write(step, {"loss": 10.0 * step}, prefix="eval/")
  resumed.close()
  assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 2
  assert _events(tmp_path / "tensorboard") == [
    ("loss", 1, 1.0),
    ("loss", 2, 2.0),
    ("eval/loss", 3, 30.0),
    ("eval/loss", 4, 40.0),
  ]
  rows = metrics.read_metrics(tmp_path / "metrics.jsonl")
  assert [r["step"] for r in rows] == [1, 2, 3, 4] and metrics.last_step(tmp_path) == 4


def test_eta_does_not_wrap_after_a_day():
  assert metrics.format_duration(59) == "00:00:59"
  assert metrics.format_duration(3 * 86400 + 3723) == "3d 01:02:03"
  assert metrics.format_duration(float("inf")) == "?"


def test_tensorboard_itself_reads_the_event_files(tmp_path):
  """The documented way to look at a run: TensorBoard (pinned in requirements.txt) loads the
  scalars tensorboardX wrote."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=import-outside-toplevel

  writer = metrics.MetricsWriter(tmp_path)
  for step in (1, 2):
    writer.write(step, {"reward": step / 4})
  writer.close()
  events = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"))
  events.Reload()
  assert [(e.step, e.value) for e in events.Scalars("reward")] == [(1, 0.25), (2, 0.5)]


def _wandb_history(workdir):
  """The history rows of the offline W&B run under `workdir`, read from its transaction log
  (LevelDB log framing: 32 KiB blocks of records [crc32 u32, length u16, type u8]; types
  1 full, 2 first, 3 middle, 4 last) with wandb's own Record proto."""
  from wandb.proto import wandb_internal_pb2  # pylint: disable=import-outside-toplevel

  (path,) = (workdir / "wandb").glob("offline-run-*/run-*.wandb")
  data = path.read_bytes()
  assert data[:4] == b":W&B"
  rows, pos, pending = [], 7, b""
  while pos + 7 <= len(data):
    if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
      pos += 32768 - pos % 32768
      continue
    _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
    pending += data[pos + 7 : pos + 7 + length]
    pos += 7 + length
    if kind in (1, 4):
      record = wandb_internal_pb2.Record()
      record.ParseFromString(pending)
      pending = b""
      if record.WhichOneof("record_type") == "history":
        rows.append(
          {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
        )
  return rows


def test_wandb_logs_the_metrics_beside_tensorboard_only_when_asked(tmp_path, monkeypatch):
  from precisecoder.train import config as config_lib  # pylint: disable=import-outside-toplevel

  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_SILENT", "true")
  cfg = config_lib.default("tiny")
  assert metrics.wandb_settings(cfg, tmp_path) is None  # unset: nothing else changes
  cfg.train.update(wandb_project="precisecoder-test", wandb_mode="offline")
  settings = metrics.wandb_settings(cfg, tmp_path / "run")
  assert settings["name"] == "run" and settings["config"]["rl"]["group_size"] == 4
  w = metrics.MetricsWriter(tmp_path / "run", tensorboard=False, wandb=settings)
  for step in (1, 2):
    w.write(step, {"reward": 0.25 * step, "train/loss": np.float32(1.0 / step), "flag": True})
  w.write(2, {"pass": 0.5}, prefix="eval/")
  w.close()
  # finish() can return before W&B's service process has written the run's file (seen on a
  # loaded host); teardown waits for the service to end.
  import wandb  # pylint: disable=import-outside-toplevel

  wandb.teardown()
  rows = {r["_step"]: r for r in _wandb_history(tmp_path / "run")}
  assert rows[1]["reward"] == 0.25 and rows[1]["train/loss"] == 1.0
  assert rows[2]["reward"] == 0.5 and rows[2]["eval/pass"] == 0.5
  assert (tmp_path / "run" / "wandb_run_id").exists()
