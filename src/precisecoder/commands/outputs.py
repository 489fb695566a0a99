"""Output files that two commands never corrupt, and rows that an interrupted command keeps.

`OutputLock`: a command writing OUT holds flock(2) on `OUT.lock` while it writes. A second
command naming the same OUT is refused with one line naming the file and the holder (host,
pid, start time). The kernel drops the lock when its holder exits, however it exits, so a
killed command never blocks the file; the lock file is removed on release.

`resumable_rows`: `score` and `generate` append each finished batch's rows to `OUT.partial`
(its first line is the run's key: the inputs and flags the rows depend on) and flush it, so
Ctrl-C or a kill keeps every finished batch. The same command resumes after them; a command
whose key differs starts over, and says which of its inputs changed. When every row is
written OUT is made from the partial file (a unique temporary name, then a rename) and the
partial file is removed.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import pathlib
import socket
import sys
import tempfile
from typing import IO, Any, Callable, Iterator

PARTIAL_SUFFIX = ".partial"
LOCK_SUFFIX = ".lock"


class OutputBusy(Exception):
  """Another command is writing this output; the message names the file and the holder.
  (The commands pass their own error class, `busy=`, to report it as bad input.)"""


def _sidecar(path: pathlib.Path, suffix: str) -> pathlib.Path:
  return path.with_name(path.name + suffix)


class OutputLock:
  """flock(2) on `OUT.lock`; see the module docstring."""

  def __init__(
    self, path: pathlib.Path, flag: str = "--output", busy: type[Exception] = OutputBusy
  ):
    self.output = path
    self.path = _sidecar(path, LOCK_SUFFIX)
    self.flag = flag
    self.busy = busy
    self._fd: int | None = None

  def acquire(self) -> None:
    self.path.parent.mkdir(parents=True, exist_ok=True)
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        os.close(fd)
        raise self.busy(
          f"{self.flag} {self.output}: another command is writing it "
          f"({_holder(self.path)}; lock {self.path}); wait for it to end or "
          "pick another file"
        ) from None
      except OSError:  # a filesystem without flock(2): nothing to hold
        os.close(fd)
        return
      # The holder may have removed the file between our open and flock: lock the new one.
      try:
        if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
          break
      except FileNotFoundError:
        pass
      os.close(fd)
    now = datetime.datetime.now().astimezone().isoformat("T", "seconds")
    record = {
      "host": socket.gethostname(),
      "pid": os.getpid(),
      "started": now,
      "command": " ".join(["precisecoder", *sys.argv[1:2]]),
    }
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps(record) + "\n").encode())
    self._fd = fd

  def release(self) -> None:
    if self._fd is None:
      return
    self.path.unlink(missing_ok=True)  # still held: no one can lock the file being removed
    os.close(self._fd)
    self._fd = None

  def __enter__(self) -> "OutputLock":
    self.acquire()
    return self

  def __exit__(self, *exc) -> None:
    self.release()


def _holder(path: pathlib.Path) -> str:
  try:
    holder = json.loads(path.read_text())
  except (OSError, ValueError):
    return "a command that is just starting"
  return (
    f"{holder.get('command', 'a command')}, host {holder.get('host', '?')}, "
    f"pid {holder.get('pid', '?')}, started {holder.get('started', '?')}"
  )


@contextlib.contextmanager
def replacing(path: pathlib.Path) -> Iterator[IO[str]]:
  """A text file written under a unique temporary name in `path`'s folder and renamed over
  `path` only when the block ends normally (else removed): readers see the old file or the
  new one, whole, and two writers never share a temporary file."""
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would outlive the rename
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      yield f
    os.replace(tmp, path)
  except BaseException:  # KeyboardInterrupt and SystemExit too: never leave the .tmp behind
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise


def write_replacing(path: pathlib.Path, write: Callable[[IO[str]], None]) -> None:
  with replacing(path) as f:
    write(f)


def file_digest(path: str | os.PathLike) -> str:
  """sha256 of a file's bytes (an input a partial file's rows depend on)."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


class Rows:
  """The rows of a resumable output: `kept` from an interrupted run, `write` appends more."""

  def __init__(self, kept: list[dict[str, Any]], out: IO[str]):
    self.kept = kept
    self.written = 0  # rows this run added
    self._out = out

  def write(self, rows: list[dict[str, Any]]) -> None:
    """Appends `rows` (a finished batch) and flushes them: a kill after this keeps them."""
    self._out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    self._out.flush()
    self.written += len(rows)


def _read_partial(path: pathlib.Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
  """(key, rows) of a partial file; a torn last line (a kill mid-write) is dropped."""
  key, rows = None, []
  with path.open(encoding="utf-8", errors="replace") as f:
    for n, line in enumerate(f):
      if not line.endswith("\n"):
        break
      try:
        record = json.loads(line)
      except ValueError:
        break
      if n == 0:
        key = record.get("resume_key") if isinstance(record, dict) else None
        if not isinstance(key, dict):
          return None, []
      else:
        rows.append(record)
  return key, rows


@contextlib.contextmanager
def resumable_rows(
  path: pathlib.Path,
  key: dict[str, Any],
  command: str,
  keep: Callable[[list[dict[str, Any]]], int] = len,
  flag: str = "--output",
  busy: type[Exception] = OutputBusy,
) -> Iterator[Rows]:
  """Holds `path`'s lock and yields its Rows; see the module docstring. `keep(rows)` says how
  many of an interrupted run's rows (a prefix) stand; `key` is JSON-ready; `busy` is raised
  when another command holds the lock."""
  partial = _sidecar(path, PARTIAL_SUFFIX)
  key = json.loads(json.dumps(key))  # as it reads back (tuples become lists)
  with OutputLock(path, flag, busy):
    kept: list[dict[str, Any]] = []
    if partial.exists():
      old_key, rows = _read_partial(partial)
      if old_key == key:
        kept = rows[: keep(rows)]
        if kept:
          print(
            f"precisecoder {command}: resuming: {len(kept)} rows kept from an interrupted "
            f"run ({partial})",
            file=sys.stderr,
            flush=True,
          )
      else:
        changed = (
          "its format"
          if old_key is None
          else ", ".join(sorted(k for k in {*key, *old_key} if old_key.get(k) != key.get(k)))
        )
        print(
          f"precisecoder {command}: {partial} holds rows of another command (changed: "
          f"{changed}); starting over",
          file=sys.stderr,
          flush=True,
        )
    # The kept rows are rewritten whole (a torn line or a part batch after them is dropped).
    write_replacing(
      partial,
      lambda f: f.writelines(
        [json.dumps({"resume_key": key}) + "\n"]
        + [json.dumps(r, ensure_ascii=False) + "\n" for r in kept]
      ),
    )
    with partial.open("a", encoding="utf-8") as out:
      rows = Rows(kept, out)
      try:
        yield rows
      except BaseException:
        if not rows.kept and not rows.written:  # nothing to keep: no partial file either
          partial.unlink(missing_ok=True)
        raise

    def copy_rows(f: IO[str]) -> None:
      with partial.open(encoding="utf-8") as source:
        next(source)  # the key
        for line in source:
          f.write(line)

    write_replacing(path, copy_rows)
    partial.unlink()
