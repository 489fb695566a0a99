"""Writing a training run's Orbax checkpoints (and restoring them when the run resumes):
parameters, optimiser state, step, data iterator, and the rollouts in flight of an asynchronous
run (train/inflight.py). Reading the policy out of them for inference is
model/run_checkpoints.py's; loading any checkpoint, model/loading.py's.

Saves are asynchronous (the next step runs while the arrays are written) and only the last
`max_to_keep` are kept. A run whose workdir already holds a checkpoint restores the latest.
Each host's data-iterator state is its own file in the `data` item (hosts read different
records), and so are its rows of the rollouts in flight (`rollouts`, one .npz per host). A LoRA
run (`adapters_only`) saves and restores the adapters of its parameters only: the frozen base is
its base checkpoint's, loaded again when the run resumes. On SIGTERM (TPU preemption) or Ctrl-C
the loop asks `preempted(step)` after each step, saves and stops (the train command exits 0
after SIGTERM, 130 after Ctrl-C); with several hosts they agree on the step, whichever of them
got the signal.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pathlib
import signal
import threading
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils
from etils import epath
from absl import logging

from precisecoder.model import lora

_ITEMS = ("params", "opt_state", "meta", "data", "rollouts")


def _process_file(directory: epath.Path, suffix: str = "json") -> epath.Path:
  return directory / f"process_{jax.process_index()}-of-{jax.process_count()}.{suffix}"


class _PerProcessFiles(ocp.CheckpointHandler):
  """A handler whose item is one file per process, written whole by `save`: nothing to
  finalize, describe or close."""

  def metadata(self, directory: epath.Path) -> None:
    del directory

  def structure(self, directory: epath.Path) -> None:
    del directory

  def finalize(self, directory: epath.Path) -> None:
    del directory

  def close(self) -> None:
    pass


class DataStateHandler(_PerProcessFiles):
  """One JSON file per process: that host's data-iterator state."""

  def save(self, directory: epath.Path, args: "DataStateSave") -> None:
    _process_file(directory).write_text(json.dumps(args.state))

  def restore(self, directory: epath.Path, args: "DataStateRestore | None" = None) -> Any:
    del args
    path = _process_file(directory)
    if not path.exists():
      found = sorted(p.name for p in directory.iterdir())
      raise FileNotFoundError(
        f"{path}: no data-iterator state for this process (the "
        f"checkpoint holds {found}; was it written by another number "
        "of hosts?)"
      )
    return json.loads(path.read_text())


@ocp.args.register_with_handler(DataStateHandler, for_save=True)
@dataclasses.dataclass
class DataStateSave(ocp.args.CheckpointArgs):
  state: Any


@ocp.args.register_with_handler(DataStateHandler, for_restore=True)
@dataclasses.dataclass
class DataStateRestore(ocp.args.CheckpointArgs):
  pass


class RolloutsHandler(_PerProcessFiles):
  """One .npz file per process: that host's rows of the rollouts in flight (flat arrays)."""

  def save(self, directory: epath.Path, args: "RolloutsSave") -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **args.arrays)
    _process_file(directory, "npz").write_bytes(buffer.getvalue())

  def restore(self, directory: epath.Path, args: "RolloutsRestore | None" = None) -> Any:
    del args
    path = _process_file(directory, "npz")
    if not path.exists():
      raise FileNotFoundError(f"{path}: no rollouts in flight for this process")
    with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as data:
      return {k: data[k] for k in data.files}


@ocp.args.register_with_handler(RolloutsHandler, for_save=True)
@dataclasses.dataclass
class RolloutsSave(ocp.args.CheckpointArgs):
  arrays: dict[str, np.ndarray]


@ocp.args.register_with_handler(RolloutsHandler, for_restore=True)
@dataclasses.dataclass
class RolloutsRestore(ocp.args.CheckpointArgs):
  pass


class Checkpointer:
  """`<workdir>/checkpoints/<step>/{params,opt_state,meta}`."""

  def __init__(
    self,
    directory: str | os.PathLike,
    *,
    max_to_keep: int = 3,
    async_save: bool = True,
    adapters_only: bool = False,
  ):
    self.adapters_only = adapters_only
    # epath: a local folder or a bucket (gs://...), which outlives preempted TPU VMs.
    self.directory = epath.Path(directory)
    if "://" not in str(directory):
      self.directory = epath.Path(pathlib.Path(directory).absolute())
    options = ocp.CheckpointManagerOptions(
      max_to_keep=max_to_keep, enable_async_checkpointing=async_save, create=True
    )
    self._manager = ocp.CheckpointManager(self.directory, item_names=_ITEMS, options=options)

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def save(
    self,
    step: int,
    params: Any,
    opt_state: Any,
    meta: dict[str, Any],
    data_state: Any = None,
    rollouts: dict[str, np.ndarray] | None = None,
  ) -> bool:
    """Starts an asynchronous save of `step` (every host calls it); `meta` (written by the
    primary host) and `data_state` (this host's, one file per host) must be JSON-ready;
    `rollouts`: this host's rollouts in flight as flat arrays (inflight.to_arrays)."""
    # force: the trainer decides when to save; Orbax's own policy would ask for the
    # preemption sync point a second time in the step.
    if self.adapters_only:
      params = lora.adapters_of(params)
    items = dict(
      params=ocp.args.StandardSave(params),
      opt_state=ocp.args.StandardSave(opt_state),
      meta=ocp.args.JsonSave(meta),
    )
    if data_state is not None:
      items["data"] = DataStateSave(data_state)
    if rollouts is not None:
      items["rollouts"] = RolloutsSave(rollouts)
    return self._manager.save(step, args=ocp.args.Composite(**items), force=True)

  def restore(
    self, step: int | None, params_like: Any, opt_state_like: Any
  ) -> tuple[Any, Any, dict[str, Any]]:
    """(params, opt_state, meta) at `step` (latest if None), shaped and sharded like the
    given trees (concrete arrays or `jax.ShapeDtypeStruct`s); meta["data_state"] is this
    host's data-iterator state."""
    step = self.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(f"{self.directory}: no checkpoint to restore")
    abstract = lambda tree: jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
    saved_like = lora.adapters_of(params_like) if self.adapters_only else params_like
    items = dict(
      params=ocp.args.StandardRestore(abstract(saved_like)),
      opt_state=ocp.args.StandardRestore(abstract(opt_state_like)),
      meta=ocp.args.JsonRestore(),
    )
    per_host = (self.directory / str(step) / "data").exists()  # else saved without one
    if per_host:
      items["data"] = DataStateRestore()
    out = self._manager.restore(step, args=ocp.args.Composite(**items))
    meta = dict(out.meta)
    if per_host:
      meta["data_state"] = out.data
    params = lora.with_adapters(params_like, out.params) if self.adapters_only else out.params
    return params, out.opt_state, meta

  def restore_rollouts(self, step: int) -> dict[str, np.ndarray] | None:
    """This host's rollouts in flight saved with `step` (None: the checkpoint has none)."""
    if not (self.directory / str(step) / "rollouts").exists():
      return None
    return self._manager.restore(step, args=ocp.args.Composite(rollouts=RolloutsRestore())).rollouts

  def reached_preemption(self, step: int) -> bool:
    """Whether every host has agreed to stop at `step` after a preemption notice (False
    without a multi-host coordination service)."""
    return self._manager.reached_preemption(step)

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


class PreemptionWatcher:
  """Whether to save and stop after this step. SIGTERM, or a first Ctrl-C (SIGINT), sets this
  process's flag; a second Ctrl-C stops at once (KeyboardInterrupt). With several processes
  the flags are all-gathered every step, so all stop after the same step whichever got the
  signal; Orbax's preemption sync point (`reached_preemption`) is asked too, for notices JAX's
  coordination service receives by other routes. (Python's handler displaces the one JAX
  installs for SIGTERM; the reward pool needs a Python handler in place anyway.)"""

  def __init__(self, checkpointer: Checkpointer | None = None):
    self._checkpointer = checkpointer
    self._event = threading.Event()
    self._previous: dict[int, Any] = {}
    global _interrupted
    _interrupted = False  # this run's Ctrl-C, not an earlier run's in the same process
    if threading.current_thread() is threading.main_thread():
      for signum in (signal.SIGTERM, signal.SIGINT):
        self._previous[signum] = signal.signal(signum, self._handle)

  def _handle(self, signum, frame) -> None:
    del frame
    global _interrupted
    if signum == signal.SIGINT:
      if _interrupted:  # the second Ctrl-C: no waiting for the step to end
        raise KeyboardInterrupt
      _interrupted = True
      logging.warning(
        "Ctrl-C: saving a checkpoint and exiting after this step (Ctrl-C again "
        "stops at once, losing the steps since the last checkpoint)"
      )
    else:
      logging.warning("signal %d: saving a checkpoint and exiting after this step", signum)
    self._event.set()

  def preempted(self, step: int = 0) -> bool:
    """Asked once per step by every process (with several, it is a collective)."""
    if jax.process_count() == 1:
      return self._event.is_set()
    flags = multihost_utils.process_allgather(np.int32(self._event.is_set()))
    synced = self._checkpointer is not None and self._checkpointer.reached_preemption(step)
    return bool(np.any(flags)) or synced

  def restore_handler(self) -> None:
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    self._previous = {}


_interrupted = False  # a Ctrl-C reached this process's watcher


def interrupted() -> bool:
  """Whether a Ctrl-C (rather than SIGTERM) stopped training in this process: the train
  command then exits 130, as a program stopped by Ctrl-C does."""
  return _interrupted
