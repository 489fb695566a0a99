"""Orbax checkpoints (round trip, keep last N, RNG, per-process data state), SIGTERM flag."""

import json
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder.train import checkpoint_writer


def _state():
  graphdef, params = nnx.split(Decoder(architectures.get("tiny", num_layers=1), rngs=nnx.Rngs(0)))
  tx = optax.adam(1e-3)
  opt_state = tx.init(params)
  grads = jax.tree.map(jnp.ones_like, params)
  _, opt_state = tx.update(grads, opt_state, params)  # non-trivial moments
  return graphdef, params, opt_state


def test_round_trip_keeps_last_n(tmp_path):
  _, params, opt_state = _state()
  ckpt = checkpoint_writer.Checkpointer(tmp_path, max_to_keep=2)
  for step in (1, 2, 3):
    ckpt.save(step, params, opt_state, {"step": step, "data_state": {"index": step}})
  ckpt.wait()
  assert sorted(int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()) == [2, 3]
  p2, o2, meta = ckpt.restore(None, params, opt_state)
  ckpt.close()
  assert meta["step"] == 3 and meta["data_state"] == {"index": 3}
  for a, b in zip(jax.tree.leaves((params, opt_state)), jax.tree.leaves((p2, o2))):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_data_state_is_a_file_per_process(tmp_path):
  _, params, opt_state = _state()
  ckpt = checkpoint_writer.Checkpointer(tmp_path, async_save=False)
  ckpt.save(1, params, opt_state, {"step": 1}, {"next_index": 7})
  ckpt.save(2, params, opt_state, {"step": 2})  # no iterator state (e.g. a seeded start)
  assert json.loads((tmp_path / "1" / "data" / "process_0-of-1.json").read_text()) == {
    "next_index": 7
  }
  assert ckpt.restore(1, params, opt_state)[2]["data_state"] == {"next_index": 7}
  assert "data_state" not in ckpt.restore(2, params, opt_state)[2]
  (tmp_path / "1" / "data" / "process_0-of-1.json").rename(
    tmp_path / "1" / "data" / "process_0-of-2.json"
  )  # written by two hosts
  with pytest.raises(FileNotFoundError, match=r"process_0-of-1.json: no data-iterator state"):
    ckpt.restore(1, params, opt_state)
  ckpt.close()


def test_sigterm_sets_the_flag():
  watcher = checkpoint_writer.PreemptionWatcher()
  try:
    assert not watcher.preempted()
    os.kill(os.getpid(), signal.SIGTERM)
    assert watcher.preempted()
  finally:
    watcher.restore_handler()


def test_ctrl_c_sets_the_flag_and_a_second_stops_at_once():
  """The first SIGINT asks for a checkpoint after the step, as SIGTERM does; the second
  raises KeyboardInterrupt at once. (SIGINT's handler before is pytest's own, or SIG_IGN where
  the suite was started in the background.)"""
  before = signal.getsignal(signal.SIGINT)
  watcher = checkpoint_writer.PreemptionWatcher()
  try:
    assert not watcher.preempted() and not checkpoint_writer.interrupted()
    os.kill(os.getpid(), signal.SIGINT)
    assert watcher.preempted() and checkpoint_writer.interrupted()
    with pytest.raises(KeyboardInterrupt):
      os.kill(os.getpid(), signal.SIGINT)
  finally:
    watcher.restore_handler()
  assert signal.getsignal(signal.SIGINT) is before
