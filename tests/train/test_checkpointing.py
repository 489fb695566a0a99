"""Orbax checkpoints (round trip, keep last N, RNG, per-process data state), SIGTERM flag,
TensorBoard event files."""

import json
import os
import signal
import struct

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from precisecoder.model import Decoder, presets
from precisecoder.train import checkpointing, metrics, tensorboard


def _state():
  graphdef, params = nnx.split(Decoder(presets.get("tiny", num_layers=1), rngs=nnx.Rngs(0)))
  tx = optax.adam(1e-3)
  opt_state = tx.init(params)
  grads = jax.tree.map(jnp.ones_like, params)
  _, opt_state = tx.update(grads, opt_state, params)  # non-trivial moments
  return graphdef, params, opt_state


def test_round_trip_keeps_last_n(tmp_path):
  _, params, opt_state = _state()
  ckpt = checkpointing.Checkpointer(tmp_path, max_to_keep=2)
  key = jax.random.fold_in(jax.random.key(3), 7)
  for step in (1, 2, 3):
    ckpt.save(step, params, opt_state, {"step": step, "rng": checkpointing.rng_to_json(key),
                                        "data_state": {"index": step}})
  ckpt.wait()
  assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [2, 3]
  p2, o2, meta = ckpt.restore(None, params, opt_state)
  ckpt.close()
  assert meta["step"] == 3 and meta["data_state"] == {"index": 3}
  for a, b in zip(jax.tree.leaves((params, opt_state)), jax.tree.leaves((p2, o2))):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  restored_key = checkpointing.rng_from_json(meta["rng"])
  np.testing.assert_array_equal(jax.random.key_data(restored_key), jax.random.key_data(key))


def test_data_state_is_a_file_per_process(tmp_path):
  _, params, opt_state = _state()
  ckpt = checkpointing.Checkpointer(tmp_path, async_save=False)
  ckpt.save(1, params, opt_state, {"step": 1}, {"next_index": 7})
  ckpt.save(2, params, opt_state, {"step": 2})  # no iterator state (e.g. a seeded start)
  assert json.loads((tmp_path / "1" / "data" / "process_0-of-1.json").read_text()) == \
      {"next_index": 7}
  assert ckpt.restore(1, params, opt_state)[2]["data_state"] == {"next_index": 7}
  assert "data_state" not in ckpt.restore(2, params, opt_state)[2]
  (tmp_path / "1" / "data" / "process_0-of-1.json").rename(
      tmp_path / "1" / "data" / "process_0-of-2.json")  # written by two hosts
  with pytest.raises(FileNotFoundError, match=r"process_0-of-1.json: no data-iterator state"):
    ckpt.restore(1, params, opt_state)
  ckpt.close()


def test_sigterm_sets_the_flag():
  watcher = checkpointing.PreemptionWatcher()
  try:
    assert not watcher.preempted()
    os.kill(os.getpid(), signal.SIGTERM)
    assert watcher.preempted()
  finally:
    watcher.restore_handler()


def test_crc32c_known_value():
  assert tensorboard.crc32c(b"123456789") == 0xE3069283


def _read_records(path):
  data = path.read_bytes()
  out, i = [], 0
  while i < len(data):
    (length,) = struct.unpack("<Q", data[i:i + 8])
    assert struct.unpack("<I", data[i + 8:i + 12])[0] == tensorboard._masked_crc(data[i:i + 8])
    payload = data[i + 12:i + 12 + length]
    crc = struct.unpack("<I", data[i + 12 + length:i + 16 + length])[0]
    assert crc == tensorboard._masked_crc(payload)
    out.append(payload)
    i += 16 + length
  return out


def test_event_file_frames_and_fields(tmp_path):
  writer = tensorboard.EventWriter(tmp_path)
  writer.scalars(5, {"reward": 0.25})
  writer.close()
  records = _read_records(writer.path)
  assert len(records) == 2 and b"brain.Event:2" in records[0]
  event = records[1]
  assert event[0] == 0x09  # field 1 (wall_time), 64-bit
  assert event[9:11] == bytes([0x10, 5])  # field 2 (step) = 5
  assert b"reward" in event and struct.pack("<f", 0.25) in event


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


def test_resumed_event_file_purges_the_steps_after_the_checkpoint(tmp_path):
  """A resumed run's event file starts with SessionLog START at the restored step + 1: the
  marker on which TensorBoard drops the older files' events from that step on."""
  fresh = tensorboard.EventWriter(tmp_path / "fresh")
  fresh.close()
  assert len(_read_records(fresh.path)) == 1  # no marker for a fresh run
  writer = metrics.MetricsWriter(tmp_path, resume_step=2)
  writer.write(3, {"loss": 1.0})
  writer.close()
  (path,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
  marker = _read_records(path)[1]
  assert marker[9:11] == bytes([0x10, 3])  # step 3
  assert marker.endswith(bytes([0x3A, 0x02, 0x08, 0x01]))  # session_log=7 {status: START}


def test_eta_does_not_wrap_after_a_day():
  assert metrics.format_duration(59) == "00:00:59"
  assert metrics.format_duration(3 * 86400 + 3723) == "3d 01:02:03"
  assert metrics.format_duration(float("inf")) == "?"


def test_library_info_logs_are_dropped_and_warnings_kept():
  import logging
  quiet = metrics._QuietLibraries()  # pylint: disable=protected-access
  record = lambda path, level: logging.LogRecord("absl", level, path, 1, "m", (), None)
  assert not quiet.filter(record("/x/site-packages/orbax/checkpoint/a.py", logging.INFO))
  assert quiet.filter(record("/x/site-packages/orbax/checkpoint/a.py", logging.WARNING))
  assert quiet.filter(record("/work/src/precisecoder/train/metrics.py", logging.INFO))
