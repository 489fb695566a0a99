"""A training run's workdir, held by one run at a time: its lock, the config that made it, its
checkpoints (the latest restored, new ones saved asynchronously, one at a preemption).

What a trainer does with them is in the trainer's own loop (rl.py, sft.py, dpo.py): it owns the
step, the parameters and the optimiser state, and decides when to save."""

from __future__ import annotations

import contextlib
import time
from typing import Any, NamedTuple

import ml_collections
from absl import logging

from precisecoder import multihost
from precisecoder.model import lora as lora_lib
from precisecoder.train import checkpoint_writer, config as config_lib, metrics
from precisecoder.train import workdir as workdir_lib
from precisecoder.train.lock import WorkdirError


def sample_seed(seed: int, step: int, part: int = 0) -> int:
  """A sampling seed per (run seed, step, chunk): resuming at step k replays nothing."""
  return (seed * 1_000_003 + step * 1009 + part) % (2**31 - 1)


def due(step: int, every: int, total_steps: int) -> bool:
  """Whether something done `every` steps (0: never) falls on `step`: on its multiples and on
  the last step."""
  return every > 0 and (step % every == 0 or step == total_steps)


def eval_due(train: ml_collections.ConfigDict, step: int) -> bool:
  """Whether a greedy evaluation falls on `step`: at step 0 with train.eval_at_start, then every
  train.eval_every steps and at the last."""
  return train.eval_at_start if step == 0 else due(step, train.eval_every, train.steps)


def steps_left(cfg: ml_collections.ConfigDict, step: int) -> bool:
  """Whether a step after `step` is due: before train.steps and train.stop_after (if set)."""
  return step < cfg.train.steps and not 0 <= cfg.train.stop_after <= step


def _encode_data_state(state: Any) -> Any:
  if isinstance(state, bytes):
    return {"bytes": state.decode("latin-1")}
  return state


def _decode_data_state(state: Any) -> Any:
  if isinstance(state, dict) and set(state) == {"bytes"}:
    return state["bytes"].encode("latin-1")
  return state


class TrainState(NamedTuple):
  """Where a loop starts: the step last completed, the parameters and the optimiser state."""

  step: int
  params: Any
  opt_state: Any


class Run(contextlib.AbstractContextManager):
  """One training run's hold on `workdir` (raises WorkdirError when another run holds it, or
  when its progress was made with another config). `cfg` is validated (config.validate).

  Shared outputs (config, metrics, events, evaluations, report) come from the primary host,
  written to `workdir` (the local mirror when the workdir is a bucket; `sync` uploads it)."""

  def __init__(self, cfg: ml_collections.ConfigDict, workdir: str):
    self.cfg = cfg
    self.dir = workdir_lib.Workdir(workdir)
    self.workdir = self.dir.local
    self.primary = multihost.is_primary()
    self.lock = self.dir.lock()
    self._agree(self._claim)  # raises WorkdirError: held by another run
    self.checkpointer: checkpoint_writer.Checkpointer | None = None
    try:
      # A LoRA run trains, holds and checkpoints its adapters only (model/lora.py).
      self.lora = lora_lib.from_config(cfg.model)
      self.checkpointer = checkpoint_writer.Checkpointer(
        cfg.train.checkpoint_dir or self.dir.checkpoints,
        max_to_keep=cfg.train.keep_checkpoints,
        adapters_only=self.lora is not None,
      )
      latest = self.checkpointer.latest_step()
      self._agree(lambda: self._check_resumable(latest, cfg.train.steps))
      self.preemption = checkpoint_writer.PreemptionWatcher(self.checkpointer)
    except BaseException:  # a run that cannot start leaves the workdir free
      if self.checkpointer is not None:
        self.checkpointer.close()
      self.lock.release()
      raise

  def _agree(self, check) -> None:
    """Runs `check` on the primary host; every host raises the WorkdirError it raised."""
    problem = None
    if self.primary:
      try:
        check()
      except WorkdirError as e:
        problem = [isinstance(e, workdir_lib.Finished), str(e)]
    problem = next(filter(None, multihost.allgather_json(problem)), None)
    if problem:
      raise (workdir_lib.Finished if problem[0] else WorkdirError)(problem[1])

  def _claim(self) -> None:
    self.lock.acquire()
    self.dir.fetch()

  def _check_resumable(self, latest: int | None, total_steps: int) -> None:
    """A workdir that holds training progress continues only the run that made it, and only
    forward (workdir.check_budget); one whose run trained nothing (it failed early) takes the
    new config."""
    if latest is not None or metrics.last_step(self.workdir) > 0:
      try:
        config_lib.check_resumable(self.workdir, self.cfg)
      except config_lib.ConfigError as e:
        raise WorkdirError(str(e)) from None
    workdir_lib.check_budget(self.dir.location, latest, total_steps)
    (self.workdir / "config.json").write_text(self.cfg.to_json_best_effort(indent=2) + "\n")

  def restore(self, params: Any, opt_state: Any, iterator: Any) -> TrainState:
    """The state the loop starts from: the latest checkpoint's (restored into the shapes of
    `params` and `opt_state`, and the data `iterator` set where it left), else step 0."""
    latest = self.checkpointer.latest_step()
    if latest is None:
      return TrainState(0, params, opt_state)
    t0 = time.perf_counter()
    params, opt_state, meta = self.checkpointer.restore(latest, params, opt_state)
    data_state = _decode_data_state(meta.get("data_state"))
    if data_state is not None:
      iterator.set_state(data_state)
    logging.info(
      "resumed %s at step %d (%.1f s)", self.workdir, int(meta["step"]), time.perf_counter() - t0
    )
    return TrainState(int(meta["step"]), params, opt_state)

  def saved_rollouts(self, step: int) -> Any:
    """This host's rollouts in flight saved with `step`'s checkpoint (None: none; step 0)."""
    return self.checkpointer.restore_rollouts(step) if step else None

  def save(
    self,
    step: int,
    params: Any,
    opt_state: Any,
    data_state: Any,
    model: dict,
    rollouts: Any = None,
  ) -> float:
    """Starts an asynchronous checkpoint of `step` (`model`: run_checkpoints.model_meta;
    `rollouts`: those in flight, inflight.save_state); returns the seconds it blocked."""
    t0 = time.perf_counter()
    meta = {"step": step, "model": model, "time": time.time()}
    self.checkpointer.save(
      step, params, opt_state, meta, _encode_data_state(data_state), rollouts=rollouts
    )
    return time.perf_counter() - t0

  def preempted(self, step: int) -> bool:
    """Whether the run must save `step` and stop (every host agrees). Raises first when a
    bucket's lock was taken over by another run: stop before writing more."""
    self.lock.check()
    return self.preemption.preempted(step)

  def end(
    self,
    step: int,
    params: Any,
    opt_state: Any,
    data_state: Any,
    model: dict,
    rollouts: Any = None,
  ) -> None:
    """After the loop: when all train.steps are done, the last checkpoint awaited and this
    host's parameter fingerprint logged; else (stopped by train.stop_after) a checkpoint of the
    last step (with `rollouts`, a callable giving those in flight) if it has none yet."""
    if step >= self.cfg.train.steps:
      self.checkpointer.wait()
      logging.info(
        "step %d: parameters on this host: sha256 %s", step, multihost.local_fingerprint(params)
      )
    elif self.checkpointer.latest_step() != step:
      self.save(step, params, opt_state, data_state, model, rollouts() if rollouts else None)

  def close(self) -> None:
    self.checkpointer.close()
    if self.primary:
      self.dir.sync()
    self.preemption.restore_handler()
    self.lock.release()

  def __exit__(self, *exc) -> None:
    self.close()
