"""Orbax checkpoints of a training run: parameters, optimiser state, step, RNG, data iterator.

Saves are asynchronous (the next step runs while the arrays are written) and only the last
`max_to_keep` are kept. A run whose workdir already holds a checkpoint restores the latest.
On SIGTERM (TPU preemption) the loop asks `preempted()` after each step, saves and exits 0.
"""

from __future__ import annotations

import os
import pathlib
import signal
import threading
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from absl import logging

_ITEMS = ("params", "opt_state", "meta")


class Checkpointer:
  """`<workdir>/checkpoints/<step>/{params,opt_state,meta}`."""

  def __init__(self, directory: str | os.PathLike, *, max_to_keep: int = 3,
               async_save: bool = True):
    # epath: a local folder or a bucket (gs://...), which outlives preempted TPU VMs.
    self.directory = epath.Path(directory)
    if "://" not in str(directory):
      self.directory = epath.Path(pathlib.Path(directory).absolute())
    options = ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, enable_async_checkpointing=async_save, create=True)
    self._manager = ocp.CheckpointManager(self.directory, item_names=_ITEMS, options=options)

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(self, step: int, params: Any, opt_state: Any, meta: dict[str, Any],
           *, force: bool = False) -> bool:
    """Starts an asynchronous save; `meta` must be JSON-serialisable."""
    return self._manager.save(step, args=ocp.args.Composite(
        params=ocp.args.StandardSave(params), opt_state=ocp.args.StandardSave(opt_state),
        meta=ocp.args.JsonSave(meta)), force=force)

  def restore(self, step: int | None, params_like: Any, opt_state_like: Any
              ) -> tuple[Any, Any, dict[str, Any]]:
    """(params, opt_state, meta) at `step` (latest if None), shaped and sharded like the
    given trees (concrete arrays or `jax.ShapeDtypeStruct`s)."""
    step = self.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f"{self.directory}: no checkpoint to restore")
    abstract = lambda tree: jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
    out = self._manager.restore(step, args=ocp.args.Composite(
        params=ocp.args.StandardRestore(abstract(params_like)),
        opt_state=ocp.args.StandardRestore(abstract(opt_state_like)),
        meta=ocp.args.JsonRestore()))
    return out.params, out.opt_state, dict(out.meta)

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def rng_to_json(key: jax.Array) -> list[int]:
  return np.asarray(jax.random.key_data(key)).astype(np.uint32).ravel().tolist()


def rng_from_json(data: list[int]) -> jax.Array:
  return jax.random.wrap_key_data(np.asarray(data, np.uint32))


class PreemptionWatcher:
  """Turns SIGTERM into a flag the training loop polls between steps."""

  def __init__(self):
    self._event = threading.Event()
    self._previous = None
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)

  def _handle(self, signum, frame) -> None:
    del frame
    logging.warning("signal %d: saving a checkpoint and exiting after this step", signum)
    self._event.set()

  def preempted(self) -> bool:
    return self._event.is_set()

  def restore_handler(self) -> None:
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
      self._previous = None
