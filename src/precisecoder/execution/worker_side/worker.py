"""A pool worker: a warm interpreter that forks one sandboxed child per run.

Started by `ExecutionPool` as `python -s -m precisecoder.execution.worker_side.worker SLOT MODE`.
It reads framed chunks of jobs on fd 0 and answers one framed message per job on fd 1, in
order, a chunk's answers written together (`HOLD_S`): the pool, woken once a chunk rather than
once a job, takes less of the CPUs the runs need. It never imports JAX and never sees expected
values: the pool strips them before sending (verdicts.py compares in the pool).

A run of an assert or unittest job that is still going at a tick of `_READ_EVERY_S` reports the
channel lines it wrote since the last tick; the pool reads them after the run's earlier
lines and answers with a stop where they already fail the run (`verdicts.RunningChecks`), and the
worker kills the run then.

Messages in:  {"jobs": [{"id": ID, "code": B64, "tests": {...}, "limits": {...}}]}, where B64
              is the program as the pool compiled it (marshal, base64), or "program": SRC
              for a program that does not compile; {"stop": ID, "nonce": NONCE}
Messages out: {"hello": MODE, "note": TEXT, "run_uid": UID|None, "magic": HEX} once (HEX: the
              bytecode this interpreter loads), then {"id": ID, "runs": [RUN, ...]}, and
              before a job's answer any number of {"partial": ID, "nonce": NONCE, "lines": TEXT}
where RUN (one per process: one per case for io, else one) is
  {"ready": bool, "exit": int|None, "signal": int|None, "timeout": bool,
   "overflow": str|None, "stopped": bool, "stdout": str, "stderr": str, "channel": str,
   "nonce": str, "duration_s": float}
"""

from __future__ import annotations

import fcntl
import gc
import os
import select
import signal
import sys
import time

# Warm imports: children inherit them, so programs importing them pay nothing. Not `random` (nor
# `statistics`, which imports it): it reseeds itself in Python after every fork, a cost every run
# would pay, while only the few runs that import it pay for importing it (few tests and no
# HumanEval reference solution do), so runs pay less in all this way.
import bisect  # noqa: F401 pylint: disable=unused-import
import collections
import copy  # noqa: F401 pylint: disable=unused-import
import datetime  # noqa: F401 pylint: disable=unused-import
import decimal  # noqa: F401 pylint: disable=unused-import
import fractions  # noqa: F401 pylint: disable=unused-import
import functools  # noqa: F401 pylint: disable=unused-import
import hashlib  # noqa: F401 pylint: disable=unused-import
import heapq  # noqa: F401 pylint: disable=unused-import
import itertools  # noqa: F401 pylint: disable=unused-import
import math  # noqa: F401 pylint: disable=unused-import
import operator  # noqa: F401 pylint: disable=unused-import
import re  # noqa: F401 pylint: disable=unused-import
import shutil  # noqa: F401 pylint: disable=unused-import
import string  # noqa: F401 pylint: disable=unused-import
import typing  # noqa: F401 pylint: disable=unused-import

from precisecoder.execution.worker_side import harness
from precisecoder.execution.shared import protocol
from precisecoder.execution.worker_side import sandbox as sandbox_lib

CHANNEL_FD = 3
_READ_SIZE = 1 << 16
_READ_EVERY_S = 0.02  # how often a running child's quiet pipes are read (`_Watch`)
EXIT_SETUP_FAILED = 121  # the child could not sandbox itself (then no "ready" record)
EXIT_CLEANUP_FAILED = 122  # the worker could not undo what a run left (CleanupFailed)
# Answers are written once HOLD_S has passed since the first of them, when the job running then
# ends, or at the end of the chunk, whichever comes first.
HOLD_S = 0.1
_REPORTED_KINDS = ("assert", "unittest")  # runs whose check reports the pool judges as they come
# Room in a run's channel pipe, read only at the ticks: ~3000 check records. Not more: a user's
# pipes share 64 MB (/proc/sys/fs/pipe-user-pages-soft) before new ones are made small.
_CHANNEL_PIPE_BYTES = 1 << 18


class _Stream:
  """One capped output pipe of a run."""

  def __init__(self, name: str, fd: int, cap: int):
    self.name = name
    self.fd = fd
    self.cap = cap
    self.chunks: list[bytes] = []
    self.size = 0
    self.open = True

  def read(self) -> bool:
    """Reads what is there; False once the cap is exceeded."""
    try:
      data = os.read(self.fd, _READ_SIZE)
    except BlockingIOError:
      return True
    if not data:
      self.open = False
      return True
    self.size += len(data)
    if self.size > self.cap:
      self.chunks.append(data[: max(0, self.cap - (self.size - len(data)))])
      return False
    self.chunks.append(data)
    return True

  def drain(self) -> bool:
    """Reads all there is now; False once the cap is exceeded."""
    while self.open:
      before = self.size
      if not self.read():
        return False
      if self.size == before:
        break
    return True

  def text(self) -> str:
    return b"".join(self.chunks).decode("utf-8", errors="replace")


class _Mail:
  """The worker's ends of the pool's pipes: chunks of jobs and stops in, answers and partial
  reports out.

  Answers are held and written together (`HOLD_S`). A partial report is written at once, after
  the answers held, and the stop it may bring can arrive behind chunks the pool sent ahead:
  those wait here.
  """

  def __init__(self, inbox: int, outbox: int):
    self.inbox = inbox
    self.outbox = outbox
    self.closed = False  # the pool closed our inbox: no more jobs
    self._reader = protocol.MessageReader()
    self._chunks: collections.deque[dict] = collections.deque()
    self._held: list[bytes] = []
    self._first_held = 0.0

  def next_chunk(self) -> dict | None:
    """The next chunk of jobs (waits for it), or None once the pool is gone."""
    while not self._chunks and not self.closed:
      self.read()
    return self._chunks.popleft() if self._chunks else None

  def read(self) -> set[str]:
    """Reads what the pool sent (waits for something); returns the nonces of the runs it asks to
    stop. A stop for a run already over is dropped."""
    data = os.read(self.inbox, _READ_SIZE)
    if not data:
      self.closed = True
    stops = set()
    for message in self._reader.feed(data):
      if "stop" in message:
        stops.add(message.get("nonce"))
      else:
        self._chunks.append(message)
    return stops

  def hold(self, answer: dict) -> None:
    if not self._held:
      self._first_held = time.monotonic()
    self._held.append(protocol.encode(answer))
    if time.monotonic() - self._first_held >= HOLD_S:
      self.flush()

  def flush(self) -> None:
    if self._held:
      protocol.write_all(self.outbox, b"".join(self._held))
      self._held.clear()

  def report(self, job_id, nonce: str, lines: str) -> None:
    """Sends the pool the channel lines a run wrote since its last report."""
    self.flush()  # the pool reads answers in order: the jobs before this one's come first
    protocol.write_all(
      self.outbox, protocol.encode({"partial": job_id, "nonce": nonce, "lines": lines})
    )


class Worker:
  """Runs jobs one at a time, each in forked sandboxed children."""

  def __init__(self, strongest: str = "auto", mail: _Mail | None = None):
    self.mail = mail  # the pool's pipes; None (a worker driven in-process): runs report nothing
    self.sandbox = sandbox_lib.Sandbox.create(strongest)
    # Text streams on fds 0-2, made once: a child's dup2 points them at its own
    # pipes, so it inherits working streams instead of building three. Their
    # buffers stay empty because the worker itself never uses them.
    sys.stdin = open(0, "r", closefd=False)  # pylint: disable=consider-using-with
    sys.stdout = open(1, "w", closefd=False)  # pylint: disable=consider-using-with
    sys.stderr = open(2, "w", closefd=False)  # pylint: disable=consider-using-with
    # How this worker is scheduled, which runs that keep our uid could change (`_check_schedule`).
    self._schedule = _schedule()

  def run_job(self, job: dict) -> dict:
    tests, limits = job["tests"], job["limits"]
    harness.warm(job)
    if tests["kind"] == "io":
      runs = []
      for case in tests["cases"]:
        run = self.run_once(job, case.get("stdin", "").encode(), limits)
        runs.append(run)
        if not (run["ready"] and run["exit"] == 0 and not run["timeout"] and not run["overflow"]):
          break  # a failed case decides the verdict; skip the rest
      return {"id": job["id"], "runs": runs}
    return {"id": job["id"], "runs": [self.run_once(job, b"", limits)]}

  def run_once(self, job: dict, stdin_data: bytes, limits: dict) -> dict:
    """Forks one sandboxed child for `job` and collects what it wrote.

    What the worker needs while the child runs is made before the fork: until the child exits
    the two share every page, and each page the worker writes then is copied (dozens of pages for
    a few lines of Python), so after the fork the worker waits.
    """
    nonce = os.urandom(16).hex()
    run_dir = self.sandbox.make_run_dir()
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    chan_r, chan_w = os.pipe()
    _grow(chan_w, min(limits["max_output_bytes"], _CHANNEL_PIPE_BYTES))
    child_fds = (stdin_r, out_w, err_w, chan_w)
    cap = limits["max_output_bytes"]
    streams = {
      name: _Stream(name, fd, cap)
      for name, fd in (("stdout", out_r), ("stderr", err_r), ("channel", chan_r))
    }
    watch = _Watch(streams, stdin_w, stdin_data)
    reporting = self.mail is not None and job["tests"]["kind"] in _REPORTED_KINDS
    status = None
    enter_child = self.sandbox.enter_child  # found here: a lookup in the child is never cached
    start = time.perf_counter()
    pid = self.sandbox.fork()
    if pid == 0:  # the child: never returns
      _child(enter_child, job, nonce, limits, child_fds)
    try:
      for fd in child_fds:
        os.close(fd)
      timeout, overflow, status = self._watch(
        pid, watch, start + limits["timeout_s"], (job["id"], nonce) if reporting else None
      )
    finally:
      if status is None:  # still running: stop it (an exited run's orphans `_watch` killed)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        self.sandbox.kill_run(pid)
      watch.close()
      try:
        self.sandbox.remove_run_dir(run_dir)
        self.sandbox.clean_writable()
      except OSError as e:  # the next run would start from a state nobody checked
        raise sandbox_lib.CleanupFailed(f"the clean-up after a run failed: {e}") from e
      if self.sandbox.run_uid is None:
        self._check_schedule()
    duration = time.perf_counter() - start
    channel = streams["channel"].text()
    return {
      "ready": channel.startswith(f'{{"ready":"{nonce}"}}\n'),
      "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
      "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
      "timeout": timeout,
      "overflow": overflow,
      "stopped": watch.stopped,
      "nonce": nonce,
      "stdout": streams["stdout"].text(),
      "stderr": streams["stderr"].text()[-4000:],
      "channel": channel,
      "duration_s": duration,
    }

  def _check_schedule(self) -> None:
    """Where runs keep our uid ("userns", "plain"), a run may move this worker to other CPUs,
    lower its priority or make it an idle-time process, and every later run would inherit that
    (honest programs timing out on a busy host). The CPUs are put back; a lower priority cannot
    be raised again without privileges, so then the worker stops and the pool starts a fresh
    one."""
    now = _schedule()
    if now == self._schedule:
      return
    if now[0] != self._schedule[0]:
      try:
        os.sched_setaffinity(0, self._schedule[0])
      except OSError:  # those CPUs are no longer ours (the host's cpuset shrank): keep these
        self._schedule = (now[0], *self._schedule[1:])
    if now[1:] != self._schedule[1:]:
      raise sandbox_lib.CleanupFailed("a run lowered the worker's scheduling priority")

  def _watch(self, pid: int, watch: "_Watch", deadline: float, reported: tuple | None):
    """Pumps the pipes until the child exits, the deadline passes or the pool stops the run
    (`watch.stopped`). `reported`: (job id, nonce) of a run whose channel lines go to the pool at
    each tick, or None.

    Returns (timed out, name of an overflowing stream or None, wait status or None).
    """
    watch.follow(pid)
    next_read = time.perf_counter() + _READ_EVERY_S
    while True:
      now = time.perf_counter()
      if now >= deadline:
        return True, None, None
      exited = False
      for fd, _ in watch.poller.poll(max(1, int(1e3 * (min(deadline, next_read) - now)))):
        if fd == watch.pidfd:
          exited = True
        elif fd == watch.stdin_w:
          watch.feed_stdin()
        elif fd == watch.inbox:
          if reported[1] in self.mail.read() or self.mail.closed:
            watch.stopped = True
            return False, None, None
        else:
          stream = watch.by_fd[fd]
          if not stream.read():
            return False, stream.name, None
          if not stream.open:
            watch.poller.unregister(fd)
      if exited:
        _, status = os.waitpid(pid, 0)
        self.sandbox.kill_run(pid)  # orphans may still hold the pipes
        for stream in watch.by_fd.values():  # drain what is buffered
          if not stream.drain():
            return False, stream.name, status
        return False, None, status
      if time.perf_counter() >= next_read:
        if not watch.read_quiet():
          return False, watch.overflow, None
        if reported is not None:
          lines = watch.new_lines()
          if lines:
            self.mail.report(*reported, lines)
            watch.listen(self.mail.inbox)
        next_read = time.perf_counter() + _READ_EVERY_S


def _child(enter_child, job: dict, nonce: str, limits: dict, fds: tuple[int, ...]) -> None:
  """The forked child: its pipes on fds 0-3, its sandbox, then the harness; never returns.

  It runs once per child, so nothing here is ever specialised or cached by CPython for the next
  run: it reads no module or object attributes (what it calls comes bound, `_dup2`, ...).
  """
  try:
    stdin_r, out_w, err_w, chan_w = fds
    _dup2(stdin_r, 0)
    _dup2(out_w, 1)
    _dup2(err_w, 2)
    _dup2(chan_w, CHANNEL_FD)
    enter_child(limits, keep_fds=[CHANNEL_FD])
  except BaseException as e:  # pylint: disable=broad-except
    try:
      _write(2, f"sandbox setup failed: {e!r}\n".encode())
    finally:
      _exit(EXIT_SETUP_FAILED)
  _run_harness(CHANNEL_FD, nonce, job)


_dup2, _write, _exit, _run_harness = os.dup2, os.write, os._exit, harness.execute


class _Watch:
  """A run's pipes as the worker pumps them: made before the fork (`Worker.run_once`).

  The poll wakes the worker when the child exits, not when it writes: until then the two share
  their pages, and each page the worker writes is copied. So a pipe is read when the child is
  gone, or every _READ_EVERY_S while it runs; one that had something to read by then is read
  as it fills from that moment on (a run that prints a lot is not held back by the tick). A
  short run's "ready" line and records, a few kB in 64 kB pipes, never wake the worker early.
  """

  def __init__(self, streams: dict[str, _Stream], stdin_w: int, stdin_data: bytes):
    self.poller = select.poll()
    self.by_fd = {stream.fd: stream for stream in streams.values()}
    self.quiet = list(self.by_fd.values())  # not yet polled: read on the tick
    self.overflow: str | None = None
    for fd in self.by_fd:
      os.set_blocking(fd, False)
    self.pending = memoryview(stdin_data)
    self.stdin_w = stdin_w
    if self.pending:
      os.set_blocking(stdin_w, False)
      self.poller.register(stdin_w, select.POLLOUT)
    else:  # before the fork: the child never holds this end, and reads end of file at once
      self._close_stdin(registered=False)
    self.pidfd = -1
    self.stopped = False  # the pool stopped the run
    self._channel = streams["channel"]
    self._reported = 0  # chunks of the channel reported (`new_lines`)
    self._rest = b""  # ... and the start of a line they end with
    self.inbox = -1  # the pool's pipe, once polled (`listen`)

  def new_lines(self) -> str:
    """The channel's whole lines since the last call."""
    fresh = b"".join([self._rest, *self._channel.chunks[self._reported :]])
    self._reported = len(self._channel.chunks)
    end = fresh.rfind(b"\n") + 1
    self._rest = fresh[end:]
    return fresh[:end].decode("utf-8", errors="replace")

  def listen(self, inbox: int) -> None:
    """Wakes the poll when the pool writes (its answer to a report)."""
    if self.inbox < 0:
      self.inbox = inbox
      self.poller.register(inbox, select.POLLIN)

  def read_quiet(self) -> bool:
    """Reads the pipes not yet polled; polls from now on those that held something, but the
    channel, which is read whole on every tick: a run writes a record to it per check, and
    each write would wake the worker (`_grow` makes it room). False (and `overflow` named)
    once a stream passes its cap."""
    for stream in list(self.quiet):
      before = stream.size
      if not (stream.drain() if stream is self._channel else stream.read()):
        self.overflow = stream.name
        return False
      if stream is not self._channel and (stream.size > before or not stream.open):
        self.quiet.remove(stream)
        if stream.open:
          self.poller.register(stream.fd, select.POLLIN)
    return True

  def follow(self, pid: int) -> None:
    """After the fork: wakes the poll when the child exits."""
    self.pidfd = os.pidfd_open(pid)
    self.poller.register(self.pidfd, select.POLLIN)

  def feed_stdin(self) -> None:
    try:
      self.pending = self.pending[os.write(self.stdin_w, self.pending[:_READ_SIZE]) :]
    except BlockingIOError:
      return
    except BrokenPipeError:  # the program stopped reading: drop the rest
      self.pending = self.pending[:0]
    if not self.pending:
      self._close_stdin(registered=True)

  def _close_stdin(self, registered: bool) -> None:
    if registered:
      self.poller.unregister(self.stdin_w)
    os.close(self.stdin_w)
    self.stdin_w = -1

  def close(self) -> None:
    for fd in [*self.by_fd, self.stdin_w, self.pidfd]:
      if fd >= 0:
        os.close(fd)


def _grow(fd: int, size: int) -> None:
  """Makes pipe `fd` hold up to `size` bytes (as far as the system allows), so that a run
  writing that much between two ticks goes on without waiting for the worker."""
  try:
    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
  except OSError:  # above /proc/sys/fs/pipe-max-size, or the user's pipes hold too much
    pass


def _schedule() -> tuple[set[int], int, int]:
  """This process's CPUs, nice value and scheduling policy."""
  return os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0)


def _pin(cpu: int) -> None:
  """Keeps this worker and every run it forks on one CPU (they inherit the mask).

  A process that migrates leaves its address space marked live on the CPUs it
  left, so every copy-on-write fault after a fork flushes their TLBs too, by
  interrupt: pinned workers scale with their number, floating ones do not
  (`benchmarks/bench_execution.py` measures 1 -> 2 workers).
  """
  try:
    os.sched_setaffinity(0, {cpu})
  except OSError:
    pass  # a CPU we may not use: stay unpinned


def main(argv: list[str]) -> int:
  # The protocol owns fds 0/1; stray prints from imports must not corrupt it.
  inbox, outbox = os.dup(0), os.dup(1)
  devnull = os.open(os.devnull, os.O_RDWR)
  os.dup2(devnull, 0)
  os.dup2(devnull, 1)
  # No PR_SET_PDEATHSIG here: it follows the pool *thread* that started us, and
  # pools are driven from threads. We exit when the pool's pipe closes instead.
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pool decides when we stop
  # argv: [module, slot (for `ps` readers), strongest sandbox mode, CPU to pin to or -1]
  if len(argv) > 3 and int(argv[3]) >= 0:
    _pin(int(argv[3]))
  mail = _Mail(inbox, outbox)
  worker = Worker(argv[2] if len(argv) > 2 else "auto", mail)
  harness.prepare()
  gc.freeze()  # the warm heap is shared copy-on-write: keep collections from touching it
  protocol.write_all(
    outbox,
    protocol.encode(
      {
        "hello": worker.sandbox.mode,
        "note": worker.sandbox.note,
        "run_uid": worker.sandbox.run_uid,
        "scratch": worker.sandbox.scratch,
        # importlib's MAGIC_NUMBER, from the module the interpreter loaded at start-up
        "magic": sys.modules["_frozen_importlib_external"].MAGIC_NUMBER.hex(),
      }
    ),
  )
  while True:
    message = mail.next_chunk()
    if message is None:
      return 0
    for job in message["jobs"]:
      try:
        reply = worker.run_job(job)
      except sandbox_lib.CleanupFailed as e:
        # The next run would find what this one left. Stop without answering it: the pool
        # starts a fresh worker (empty file systems, its own priority) and reruns it there, once.
        mail.flush()
        os.write(2, f"execution worker: {e}\n".encode())
        return EXIT_CLEANUP_FAILED
      except Exception as e:  # pylint: disable=broad-except
        reply = {"id": job["id"], "infra_error": f"{type(e).__name__}: {e}"}
      mail.hold(reply)
    mail.flush()


if __name__ == "__main__":
  sys.exit(main(sys.argv))
