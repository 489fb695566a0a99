"""A run's workdir: a local folder, or a bucket (`gs://...`) that outlives a preempted TPU VM.

The shared outputs (config, metrics, TensorBoard events, evaluations, report) are written by
plain file code into a local folder. For a bucket that folder is a mirror: filled from the
bucket when the run starts (a relaunch on a fresh VM resumes its metrics) and copied up, file
by changed file, after every step. Checkpoints go to the bucket directly (Orbax writes epath
locations), under `<workdir>/checkpoints` unless `train.checkpoint_dir` says otherwise.
A run holds the workdir's lock (train/lock.py) from its start to its end.
"""

from __future__ import annotations

import pathlib
import re
import tempfile

from absl import logging
from etils import epath

from precisecoder.train import lock as lock_lib

_CHECKPOINTS = "checkpoints"


class Finished(lock_lib.WorkdirError):
  """The workdir's run has trained every step of its budget: nothing to do (not an error)."""


def check_budget(location: str, trained: int | None, steps: int) -> None:
  """A workdir whose checkpoint is at step `trained` against a budget of `steps`: a larger
  budget continues the run; the same one raises Finished; a smaller one, WorkdirError (the
  checkpoint, report and config.json would disagree about what was trained)."""
  if trained is None or trained < steps:
    return
  if trained > steps:
    raise lock_lib.WorkdirError(
      f"--config.train.steps={steps}: --workdir={location} has trained {trained} steps "
      "already; a run cannot be shortened (give at least that many, or another --workdir)"
    )
  raise Finished(
    f"--workdir={location}: finished at step {trained}; nothing to train (a "
    "larger --config.train.steps continues it)"
  )


class Workdir:
  """`local` is where files are written; `sync()` copies what changed to the bucket."""

  def __init__(self, location: str, *, mirrored: bool | None = None, local_root: str | None = None):
    self.location = str(location)
    self.mirrored = "://" in self.location if mirrored is None else mirrored
    if not self.mirrored:
      self.remote = None
      self.local = pathlib.Path(self.location)
    else:
      self.remote = epath.Path(self.location)
      name = re.sub(r"[^\w.-]+", "_", self.location).strip("_")
      self.local = pathlib.Path(local_root or tempfile.gettempdir()) / "precisecoder-runs" / name
    self._sent: dict[pathlib.Path, tuple[int, int]] = {}

  @property
  def checkpoints(self) -> str:
    return str((self.remote or self.local) / _CHECKPOINTS)

  def lock(self) -> lock_lib.FileLock | lock_lib.BucketLock:
    """The workdir's lock, not yet acquired: flock(2) on a local folder, a heartbeat object in
    a bucket."""
    if self.remote is None:
      return lock_lib.FileLock(self.local, self.location)
    return lock_lib.BucketLock(self.remote / lock_lib.LOCK_NAME, self.location)

  def fetch(self) -> None:
    """Fills the local mirror with the bucket's files (all but checkpoints)."""
    self.local.mkdir(parents=True, exist_ok=True)
    if self.remote is None or not self.remote.exists():
      return
    count = 0
    for path in _files(self.remote, skip=(_CHECKPOINTS, lock_lib.LOCK_NAME)):
      relative = pathlib.Path(str(path.relative_to(self.remote)))
      target = self.local / relative
      target.parent.mkdir(parents=True, exist_ok=True)
      target.write_bytes(path.read_bytes())
      self._sent[relative] = _signature(target)
      count += 1
    logging.info("workdir %s: %d files fetched into %s", self.location, count, self.local)

  def sync(self) -> None:
    """Copies the files that are new or changed since the last sync up to the bucket."""
    if self.remote is None:
      return
    for path in sorted(p for p in self.local.rglob("*") if p.is_file()):
      relative = path.relative_to(self.local)
      signature = _signature(path)
      if self._sent.get(relative) == signature:
        continue
      target = self.remote / str(relative)
      target.parent.mkdir(parents=True, exist_ok=True)
      target.write_bytes(path.read_bytes())
      self._sent[relative] = signature


def _signature(path: pathlib.Path) -> tuple[int, int]:
  stat = path.stat()
  return stat.st_size, stat.st_mtime_ns


def _files(folder: epath.Path, skip: tuple[str, ...] = ()):
  """Every file under `folder` but the top-level names in `skip` (a folder listing per level:
  buckets refuse `**` globs)."""
  for path in folder.iterdir():
    if path.name in skip:
      continue
    if path.is_dir():
      yield from _files(path)
    else:
      yield path
