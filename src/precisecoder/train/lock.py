"""One run per workdir: the lock a trainer holds from its start to its end.

A local workdir (any POSIX filesystem, NFS included) has `WORKDIR/lock`, held with flock(2).
The kernel drops the lock when its holder exits, however it exits (SIGKILL, out of memory), so
a dead run never blocks its workdir and no staleness has to be guessed. The file names the
holder (host, pid, start time) for the message another run gets, and is removed on release.

A bucket (`gs://...`) has no locks. There the lock is a JSON object, `WORKDIR/lock`, naming the
holder and a heartbeat the holder rewrites every `heartbeat_s` seconds. A lock is taken over
when its heartbeat is older than `stale_after_s` (its holder died without releasing it), or at
once when its holder ran on this host and is no longer running. Object writes are not atomic
test-and-set: two runs started in the same second can both write the lock. Each reads the lock
back after writing it, and the heartbeat reads it again every `heartbeat_s` seconds, so the run
whose record was overwritten learns it within that time and stops at its next step (`check`).
Hosts' clocks must agree to well within `stale_after_s`.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import pathlib
import socket
import threading
import time
import uuid
from typing import Any

from absl import logging
from etils import epath

LOCK_NAME = "lock"
HEARTBEAT_S = 30.0
STALE_AFTER_S = 300.0


class WorkdirError(Exception):
  """A workdir that this run cannot use (held by another run, written with another config);
  the message names it and what to do."""


def holder_record() -> dict[str, Any]:
  now = time.time()
  return {
    "host": socket.gethostname(),
    "pid": os.getpid(),
    "started": datetime.datetime.fromtimestamp(now).astimezone().isoformat("T", "seconds"),
    "heartbeat": now,
    "token": uuid.uuid4().hex,
  }


def describe(holder: dict[str, Any] | None) -> str:
  if not holder:
    return "a run that is just starting (its lock names no holder yet)"
  return (
    f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, started "
    f"{holder.get('started', '?')}"
  )


def _running_here(holder: dict[str, Any]) -> bool:
  """False when `holder` ran on this host and its process is gone (True when unknown)."""
  if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
    return True
  try:
    os.kill(holder["pid"], 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # alive, another user's
    return True
  return True


class FileLock:
  """flock(2) on `folder/lock`."""

  def __init__(self, folder: pathlib.Path, location: str):
    self.path = folder / LOCK_NAME
    self.location = location
    self._fd: int | None = None

  def acquire(self) -> None:
    while True:
      try:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
      except OSError as e:  # a read-only folder, one that is a file
        raise WorkdirError(
          f"--workdir={self.location}: cannot write its lock file {self.path} ({e.strerror or e})"
        ) from None
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        os.close(fd)
        holder = _read_json(self.path)
        message = _held_message(self.location, holder, self.path)
        if holder and not _running_here(holder):
          message += f"; pid {holder['pid']} has exited, but a process it started holds the lock"
        raise WorkdirError(message) from None
      except OSError as e:
        os.close(fd)
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
          raise
        logging.warning(
          "%s: this filesystem has no flock(2) (%s): nothing stops a second run in this workdir",
          self.path,
          e.strerror,
        )
        return
      # The holder may have removed the file between our open and flock: lock the new one.
      try:
        if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
          break
      except FileNotFoundError:
        pass
      os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps(holder_record()) + "\n").encode())
    os.fsync(fd)
    self._fd = fd

  def check(self) -> None:
    """A kernel lock cannot be lost while its holder runs."""

  def release(self) -> None:
    if self._fd is None:
      return
    self.path.unlink(missing_ok=True)  # still held: no one can lock the file being removed
    os.close(self._fd)
    self._fd = None


class BucketLock:
  """A JSON object with a heartbeat (see the module docstring)."""

  def __init__(
    self,
    path: epath.Path,
    location: str,
    *,
    heartbeat_s: float = HEARTBEAT_S,
    stale_after_s: float = STALE_AFTER_S,
  ):
    self.path = path
    self.location = location
    self.heartbeat_s = heartbeat_s
    self.stale_after_s = stale_after_s
    self.record: dict[str, Any] | None = None
    self.lost: dict[str, Any] | None = None
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def _read(self) -> dict[str, Any] | None:
    return _read_json(self.path) if self.path.exists() else None

  def _write(self) -> None:
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self.path.write_text(json.dumps(self.record) + "\n")

  def acquire(self) -> None:
    holder = self._read()
    if holder is not None:
      age = time.time() - float(holder.get("heartbeat") or 0)
      if age <= self.stale_after_s and _running_here(holder):
        raise WorkdirError(
          _held_message(self.location, holder, self.path) + f"; its last heartbeat was "
          f"{age:.0f} s ago (a lock is taken over once it has none for "
          f"{self.stale_after_s:.0f} s)"
        )
      logging.warning(
        "%s: taking over the lock of %s (no heartbeat for %.0f s, or its process is gone)",
        self.location,
        describe(holder),
        age,
      )
    self.record = holder_record()
    self._write()
    back = self._read()
    if not back or back.get("token") != self.record["token"]:
      raise WorkdirError(_held_message(self.location, back, self.path))
    self._thread = threading.Thread(
      target=self._beat_until_stopped, name="workdir-lock", daemon=True
    )
    self._thread.start()

  def beat(self) -> None:
    """One heartbeat: rewrites the record, or notes that another run has taken the lock."""
    if self.record is None or self.lost is not None:
      return
    now = self._read()
    if not now or now.get("token") != self.record["token"]:
      self.lost = now or {}
      logging.error("%s: the workdir lock is now %s's", self.location, describe(now))
      return
    self.record["heartbeat"] = time.time()
    self._write()

  def _beat_until_stopped(self) -> None:
    while not self._stop.wait(self.heartbeat_s):
      try:
        self.beat()
      except OSError as e:  # a bucket hiccup: the next beat tries again
        logging.warning("%s: lock heartbeat failed (%s)", self.location, e)

  def check(self) -> None:
    """Raises WorkdirError once another run has taken the lock."""
    if self.lost is not None:
      raise WorkdirError(
        f"{self.location}: another run took over this workdir "
        f"({describe(self.lost)}); this run stops"
      )

  def release(self) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
      self._thread = None
    if self.record is not None and self.lost is None:
      now = self._read()
      if now and now.get("token") == self.record["token"]:
        self.path.unlink()
    self.record = None


def _read_json(path) -> dict[str, Any] | None:
  try:
    data = json.loads(path.read_text())
  except (OSError, ValueError):
    return None  # being written, or gone
  return data if isinstance(data, dict) else None


def _held_message(location: str, holder: dict[str, Any] | None, path) -> str:
  return (
    f"--workdir={location} is in use by another run: {describe(holder)} (lock {path}); "
    "wait for it to end or pick another --workdir"
  )
