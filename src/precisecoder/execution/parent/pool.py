"""`ExecutionPool`: persistent sandboxing workers, fed jobs in chunks, judged here.

Each worker holds at most two chunks: the one it runs and the next, so it never waits for the
pool. A worker answers a chunk's jobs together when the chunk ends (or every `worker.HOLD_S`),
so the pool wakes once a chunk rather than once a job, and a chunk holds about _CHUNK_S of
expected work (each spec's longest run so far): the longest jobs go out first, one to a chunk,
and so end up spread over the workers instead of queued behind each other on one. A run still
going at a worker's tick reports its check records so far, and one that already fails is
stopped there (`_stop_if_failed`).
"""

from __future__ import annotations

import atexit
import base64
import collections
import dataclasses
import functools
import importlib.util
import itertools
import json
import logging
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Sequence

import precisecoder
from precisecoder.execution.parent import expectations
from precisecoder.execution.shared import programs
from precisecoder.execution.shared import protocol
from precisecoder.execution.worker_side import sandbox as sandbox_lib
from precisecoder.execution.parent import verdicts
from precisecoder.execution.parent.specs import InvalidTests
from precisecoder.execution.shared.types import Job, Limits, Result, Status

_log = logging.getLogger(__name__)
# LD_BIND_NOW: the worker's libraries resolve every symbol as they load, once, rather than on a
# function's first call, which for functions only runs call (setrlimit, setresuid, ...) was in
# every run: a forked child's first call ran the dynamic linker and copied the pages it wrote.
_WORKER_ENV = {
  "PATH": "/usr/local/bin:/usr/bin:/bin",
  "LANG": "C.UTF-8",
  "LD_BIND_NOW": "1",
  "CUDA_VISIBLE_DEVICES": "",
  "TPU_VISIBLE_CHIPS": "",
  "JAX_PLATFORMS": "cpu",
  "OMP_NUM_THREADS": "1",
  "OPENBLAS_NUM_THREADS": "1",
  "MKL_NUM_THREADS": "1",
}
_STARTUP_TIMEOUT_S = 60.0
_MAX_CHUNK = 16
# A read asks for a pipe's capacity: asking for more costs a large allocation on every read.
_READ_SIZE = 1 << 16
_CHUNK_S = 0.05  # expected seconds of work in one chunk: a chunk's replies wait for its end
_CHUNKS_AHEAD = 2  # chunks a worker holds: the one it runs and the next
_WATCHDOG_SLACK_S = 30.0  # a worker silent this long past its jobs' limits is presumed stuck
_MAX_ATTEMPTS = 2
# The pool waits on its workers' pipes with select(), which handles descriptors below 1024;
# 1000 workers ran out of them. 256 is far above what a machine's cores can keep busy.
MAX_WORKERS = 256
_LATENCY_WINDOW = 100_000
_SPLIT_CACHE_SIZE = 4096  # test specs; RL scores many samples per task against one spec
_live_pools: "weakref.WeakSet[ExecutionPool]" = weakref.WeakSet()
_MAGIC = importlib.util.MAGIC_NUMBER.hex()  # our bytecode: workers that load it get it marshalled
_logged_modes: set[str] = set()


@dataclasses.dataclass
class _Prepared:
  """One unique job of a batch, split into the child's part and ours."""

  message: dict  # what the worker receives (no expected values)
  expected: expectations.Expected
  limits: Limits
  budget_s: float  # the longest the worker may legitimately need for it
  spec: str  # key of its test spec: jobs under one spec take about as long
  attempts: int = 0


@functools.lru_cache(maxsize=64)
def _limits_payload(limits: Limits) -> dict:
  """The limits as the worker applies them (CPU defaults to ceil(timeout) + 1).

  Cached per distinct Limits (a batch shares a handful); callers must not mutate it.
  """
  cpu = limits.cpu_s if limits.cpu_s is not None else int(limits.timeout_s + 0.999) + 1
  return dict(dataclasses.asdict(limits), cpu_s=max(1, int(cpu + 0.999)))


def _message(
  job_id: int,
  program: str,
  tests: dict,
  limits: dict,
  send_code: bool,
  split: bool = True,
  held: bool = False,
) -> dict:
  """What a worker receives for one job: the program compiled here, where scorers compiled it
  already to tell programs apart (`programs.marshalled`), or its source: if it does not compile
  (for the run to report why), or if the workers' interpreter reads another bytecode
  (`send_code` False). `split`: assert and unittest jobs run split, but for `held` ones (an
  assert job whose every check the pool holds, in an order it requires: `Expected.order`),
  which run in one process as call jobs do (docs/sandbox.md, "Held jobs")."""
  code = programs.marshalled(program)[0] if send_code else None
  if code is None:
    message = {"id": job_id, "program": program, "tests": tests, "limits": limits}
  else:
    message = {
      "id": job_id,
      "code": base64.b64encode(code).decode("ascii"),
      "tests": tests,
      "limits": limits,
    }
  if split and held and tests["kind"] == "assert":
    message["held"] = True  # nothing in the child decides: the program and tests in one process
  elif split and tests["kind"] in ("assert", "unittest"):
    message["split"] = True  # the tests and the program in two processes (split_tests.py)
  return message


class _Batch:
  """The jobs of one `execute` call: each unique job (equal `Job.key()`) prepared once, and where
  its result goes."""

  def __init__(
    self,
    split: Callable[[Any], tuple[str, dict, expectations.Expected]],
    counts: collections.Counter,
    send_code: bool = True,
    split_tests: bool = True,
  ):
    self._split = split  # the pool's memoised `expectations.split`, with its spec key
    self._counts = counts  # the pool's statistics
    self._send_code = send_code  # the workers load our marshalled code (same bytecode)
    self._split_tests = split_tests  # assert and unittest jobs run split (split_tests.py)
    self.prepared: list[_Prepared] = []
    self._owners: list[list[int]] = []  # unique job -> positions in the batch
    self._slots_of_key: dict[str, list[int]] = {}
    self._invalid: dict[int, Result] = {}  # position -> why its job cannot run
    self._size = 0

  def add(self, jobs: Sequence[Job]) -> list[int]:
    """Appends `jobs` to the batch; returns the indices of the unique jobs they add."""
    counts = self._counts
    counts["jobs"] += len(jobs)
    first = len(self.prepared)
    for position, job in enumerate(jobs, self._size):
      key = job.key()
      if key in self._slots_of_key:
        self._slots_of_key[key].append(position)
        counts["duplicates"] += 1
        continue
      self._slots_of_key[key] = positions = [position]
      try:
        spec, child_tests, expected = self._split(job.tests)
        if not isinstance(job.program, str):
          raise InvalidTests(f"program must be a str, not {type(job.program).__name__}")
      except InvalidTests as e:
        self._invalid[position] = Result(Status.INFRA_ERROR, detail=f"invalid job: {e}")
        counts[Status.INFRA_ERROR.value] += 1
        continue
      cases = len(child_tests["cases"]) if child_tests["kind"] == "io" else 1
      self.prepared.append(
        _Prepared(
          _message(
            len(self.prepared),
            job.program,
            child_tests,
            _limits_payload(job.limits),
            self._send_code,
            self._split_tests,
            expected.order is not None,
          ),
          expected,
          job.limits,
          budget_s=job.limits.timeout_s * max(cases, 1) + 1.0,
          spec=spec,
        )
      )
      self._owners.append(positions)
    self._size += len(jobs)
    return list(range(first, len(self.prepared)))

  def results(self, outcomes: list[Result]) -> list[Result]:
    """One result per job added, in order, from the outcome of each unique job."""
    results: list[Result | None] = [None] * self._size
    for position, result in self._invalid.items():
      results[position] = result
    for unique, result in enumerate(outcomes):
      for position in self._owners[unique]:
        results[position] = result
    return results  # every slot is filled


class _InBackground:
  """`fn()` called in a thread of its own; `fd` turns readable when it has returned."""

  def __init__(self, fn: Callable[[], Any]):
    self._fn = fn
    self._value: Any = None
    self._error: BaseException | None = None
    self._returned = False
    self.fd, self._done_w = os.pipe()
    self._thread = threading.Thread(target=self._call, name="precisecoder-pool-more", daemon=True)
    self._thread.start()

  def _call(self) -> None:
    try:
      self._value = self._fn()
    except BaseException as e:  # pylint: disable=broad-except  (raised again by `result`)
      self._error = e
    finally:
      self._returned = True
      os.write(self._done_w, b"x")

  def done(self) -> bool:
    return self._returned

  def wait(self) -> None:
    self._thread.join()
    for fd in (self.fd, self._done_w):
      try:
        os.close(fd)
      except OSError:  # closed already
        pass

  def result(self) -> Any:
    """What `fn` returned, once it has (waits for it); raises what it raised."""
    self.wait()
    if self._error is not None:
      raise self._error
    return self._value


class _Worker:
  """One worker process and the job ids it holds, in the order it will answer them."""

  def __init__(self, slot: int, sandbox: str, cpu: int | None, python: str):
    self.slot = slot
    self.cpu = cpu
    self.python = python
    src_root = os.path.dirname(os.path.dirname(os.path.abspath(precisecoder.__file__)))
    # The worker's modules are the standard library's and execution's own, which import nothing
    # else: any Python 3.11+ interpreter runs them, with its own libraries (`python`).
    # Its hash seed, which every run's processes share: a split run's program process is a fresh
    # interpreter started with it (`program_boot`), so that a set of strings iterates in the same
    # order there as in the test process, as in one interpreter. The environment is ours alone
    # (`_WORKER_ENV`): `-E` would only have ignored the seed.
    env = dict(_WORKER_ENV, PYTHONHASHSEED=str(1 + secrets.randbelow(2**32 - 1)))
    self.process = subprocess.Popen(
      [
        python,
        "-s",
        "-m",
        "precisecoder.execution.worker_side.worker",
        str(slot),
        sandbox,
        str(-1 if cpu is None else cpu),
      ],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      cwd=src_root,
      env=env,
      close_fds=True,
    )
    self.inbox = self.process.stdin.fileno()  # we write
    self.outbox = self.process.stdout.fileno()  # we read
    os.set_blocking(self.inbox, False)
    os.set_blocking(self.outbox, False)
    self.reader = protocol.MessageReader()
    self.pending_out = bytearray()
    self.inflight: collections.deque[int] = collections.deque()
    self.chunks: collections.deque[int] = collections.deque()  # sizes of the chunks it holds
    self.busy_since = time.monotonic()
    self.mode = ""
    self.note = ""
    self.run_uid: int | None = None
    self.magic = ""  # the bytecode its interpreter loads (importlib's MAGIC_NUMBER, hex)
    self.running: verdicts.RunningChecks | None = None  # the reports of the run it is on
    self.scratch: str | None = None  # a folder it made on the host's file system, removed here

  def await_hello(self, deadline: float) -> None:
    while not self.mode:
      remaining = deadline - time.monotonic()
      if remaining <= 0:
        raise RuntimeError(f"execution worker {self.slot} did not start")
      readable, _, _ = select.select([self.outbox], [], [], remaining)
      if not readable:
        continue
      data = os.read(self.outbox, 1 << 16)
      if not data:
        raise RuntimeError(
          f"execution worker {self.slot} exited at start-up (status {self.process.wait()})"
        )
      for message in self.reader.feed(data):
        self.mode, self.note = message["hello"], message.get("note", "")
        self.run_uid = message.get("run_uid")
        self.magic = message.get("magic", "")
        self.scratch = message.get("scratch")

  def send(self, ids: list[int], jobs: list[dict]) -> None:
    """Hands the worker one chunk: `jobs`, the messages of prepared jobs `ids`."""
    if not self.inflight:
      self.busy_since = time.monotonic()
    self.inflight.extend(ids)
    self.chunks.append(len(ids))
    self.pending_out += protocol.encode({"jobs": jobs})
    self.flush()

  def stop(self, index: int, nonce: str) -> None:
    """Asks the worker to stop the run `nonce` of job `index`, which it is running."""
    self.pending_out += protocol.encode({"stop": index, "nonce": nonce})
    self.flush()

  def answered(self) -> int:
    """Takes the job the worker answered off its chunks; returns its id."""
    self.busy_since = time.monotonic()
    self.chunks[0] -= 1
    if not self.chunks[0]:
      self.chunks.popleft()
    return self.inflight.popleft()

  def forget(self) -> list[int]:
    """Drops every job the worker holds (it is being replaced); returns them, in order."""
    held = list(self.inflight)
    self.inflight.clear()
    self.chunks.clear()
    return held

  def budget_s(self, prepared: list["_Prepared"]) -> float:
    """The longest the worker may legitimately go without answering: it answers at the end of a
    chunk at the latest, so every job left in the chunk it runs."""
    return sum(prepared[i].budget_s for i in itertools.islice(self.inflight, self.chunks[0]))

  def flush(self) -> None:
    """Writes what the pipe takes now; the rest waits for the next writable event."""
    try:
      while self.pending_out:
        del self.pending_out[: os.write(self.inbox, self.pending_out)]
    except BlockingIOError:
      pass

  def kill(self) -> None:
    if self.process.poll() is None:
      self.process.kill()
    self.process.wait()
    for stream in (self.process.stdin, self.process.stdout):
      try:
        stream.close()
      except OSError:
        pass
    if self.scratch:  # the worker's runs folder ("plain"), whether it exited or was killed
      sandbox_lib.remove_tree(self.scratch)
      self.scratch = None

  def close(self, timeout_s: float = 2.0) -> None:
    try:
      self.process.stdin.close()  # end of input: the worker exits after its current job
      self.process.wait(timeout_s)
    except (OSError, subprocess.TimeoutExpired):
      pass
    self.kill()


class ExecutionPool:
  """Runs untrusted programs against their tests in sandboxed worker processes.

  Usage:
    with ExecutionPool(workers=4) as pool:
      results = pool.execute([Job(program, tests, Limits(timeout_s=2))])

  `execute` returns one `Result` per job, in order. Identical jobs in a batch
  (equal `Job.key()`) run once. Workers start on first use.

  Args:
    workers: worker processes (default: the CPUs this process may use).
    sandbox: "auto" (the strongest containment the host allows) or a cap at a
      weaker mode, "userns" or "plain" (see `sandbox.py`; for tests).
    python: the interpreter that runs programs, with its own libraries (a task set's
      environment, e.g. .venv-bigcodebench/bin/python); None: this one.
    pin_workers: give each worker (and its runs) a CPU of its own. None: when
      there are no more workers than CPUs. Pools share the CPUs from an
      offset that depends on the process, so that single-worker pools of
      several processes do not all land on the first CPU.
    unsafe_one_process: run assert and unittest jobs in the program's own interpreter, as a
      plain interpreter would, instead of split (the test code in one process, the program in
      another: docs/sandbox.md, "Split runs"). UNSAFE: nothing then stands between the program
      and the tests, so a hostile program can forge a pass of any check the pool does not hold.
      Only for trusted programs, or to compare verdicts with a plain interpreter's.
  """

  def __init__(
    self,
    workers: int | None = None,
    *,
    sandbox: str = "auto",
    pin_workers: bool | None = None,
    python: str | None = None,
    unsafe_one_process: bool = False,
  ):
    cpus = sorted(os.sched_getaffinity(0))
    self.num_workers = workers if workers is not None else len(cpus)
    if not 1 <= self.num_workers <= MAX_WORKERS:
      raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, not {self.num_workers}")
    if sandbox not in sandbox_lib.MODES:
      raise ValueError(f"sandbox must be one of {sandbox_lib.MODES}, not {sandbox!r}")
    self.python = check_python(python)
    self.split_tests = not unsafe_one_process
    if pin_workers is None:
      pin_workers = self.num_workers <= len(cpus)
    offset = os.getpid() % len(cpus)
    self._cpus = [
      cpus[(offset + slot) % len(cpus)] if pin_workers else None for slot in range(self.num_workers)
    ]
    self._sandbox = sandbox
    self._workers: list[_Worker] = []
    self._lock = threading.Lock()
    self._closed = False
    self._counts: collections.Counter[str] = collections.Counter()
    self._latencies: collections.deque[float] = collections.deque(maxlen=_LATENCY_WINDOW)
    self._mode = ""
    self._send_code = True  # whether the workers' interpreter loads our marshalled code
    self._splits: collections.OrderedDict[str, tuple] = collections.OrderedDict()
    self._spec_seconds: collections.OrderedDict[str, float] = collections.OrderedDict()
    _live_pools.add(self)
    _install_sigterm_handler()

  def __enter__(self) -> "ExecutionPool":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  # -- lifecycle ---------------------------------------------------------------

  def _start(self) -> None:
    if self._closed:
      raise RuntimeError("the execution pool is closed")
    if len(self._workers) == self.num_workers:
      return
    missing = [
      slot for slot in range(self.num_workers) if slot not in {w.slot for w in self._workers}
    ]
    started = [_Worker(slot, self._sandbox, self._cpus[slot], self.python) for slot in missing]
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    for worker in started:
      worker.await_hello(deadline)
      self._note_mode(worker)
    self._workers += started
    self._send_code = all(worker.magic == _MAGIC for worker in self._workers)

  def _note_mode(self, worker: _Worker) -> None:
    self._mode = worker.mode
    if worker.mode not in _logged_modes:
      _logged_modes.add(worker.mode)
      if worker.mode == "root":
        _log.info("execution sandbox: namespaces and a per-run unprivileged uid")
      else:
        _log.warning("execution sandbox degraded to %r: %s", worker.mode, worker.note)

  def _replace(self, worker: _Worker) -> _Worker:
    worker.kill()
    self._counts["worker_restarts"] += 1
    fresh = _Worker(worker.slot, self._sandbox, worker.cpu, self.python)
    fresh.await_hello(time.monotonic() + _STARTUP_TIMEOUT_S)
    self._workers[self._workers.index(worker)] = fresh
    return fresh

  def close(self) -> None:
    """Stops every worker (and so every run); safe to call more than once."""
    if self._closed:
      return
    self._closed = True
    for worker in self._workers:
      worker.close()
    self._workers = []

  # -- batches -----------------------------------------------------------------

  def execute(
    self,
    jobs: Sequence[Job],
    deadline_s: float | None = None,
    *,
    more: Callable[[], Sequence[Job]] | None = None,
  ) -> list[Result]:
    """Runs every job; results in the same order. Jobs still pending at the
    batch deadline get `Status.TIMEOUT` with detail "batch deadline".

    `more`: called once, in a thread of its own, as soon as the first `jobs` are with the
    workers; it returns further jobs of this batch, whose results follow. A caller that must
    work out some of a batch's jobs (diffing programs, say) does it there, while the workers run
    those it knew already and this thread keeps serving them (stopping a run that has already
    failed, say). `execute` waits for the pool's lock, so `more` must not call it.
    """
    with self._lock:
      self._start()
      return self._run(list(jobs), deadline_s, more)

  def _run(
    self, jobs: list[Job], deadline_s: float | None, more: Callable[[], Sequence[Job]] | None
  ) -> list[Result]:
    started = time.monotonic()
    batch_deadline = started + deadline_s if deadline_s is not None else math.inf
    batch = _Batch(self._split, self._counts, self._send_code, self.split_tests)
    batch.add(jobs)
    outcomes = self._execute(batch, batch_deadline, more)
    for result in outcomes:
      self._counts[result.status.value] += 1
    return batch.results(outcomes)

  def _split(self, tests) -> tuple[str, dict, expectations.Expected]:
    """(spec key, expectations.split(tests)), memoised by content: parsing and rewriting test code
    is the pool's main cost."""
    try:
      key = json.dumps(tests, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
      return "", *expectations.split(tests)  # not JSON data: split() says what is wrong
    if key in self._splits:
      self._splits.move_to_end(key)
      return key, *self._splits[key]
    value = self._splits[key] = expectations.split(tests)
    if len(self._splits) > _SPLIT_CACHE_SIZE:
      self._splits.popitem(last=False)
    return key, *value

  def _remember_duration(self, spec: str, seconds: float) -> None:
    # The longest run seen: a spec's passing programs run every test, its failing ones often
    # stop at the first, and it is the passing ones that hold a round up if they start last.
    # Remembered as results arrive, so that the rest of the batch is planned with it.
    self._spec_seconds[spec] = max(seconds, self._spec_seconds.get(spec, 0.0))
    self._spec_seconds.move_to_end(spec)
    if len(self._spec_seconds) > _SPLIT_CACHE_SIZE:
      self._spec_seconds.popitem(last=False)

  def _expected_s(self, item: _Prepared) -> float:
    """How long `item` is expected to run: its spec's longest run, or inf for a spec not seen."""
    return self._spec_seconds.get(item.spec, math.inf)

  def _longest_first(self, prepared: list[_Prepared], indices: Iterable[int]) -> list[int]:
    """`indices`, those expected to run longest first (unseen specs first of all), so that no
    long job starts last and keeps a round waiting."""
    return sorted(indices, key=lambda i: -self._expected_s(prepared[i]))

  def _abandon(self) -> None:
    """Restarts every worker still running jobs of a batch that nobody waits for any more."""
    for worker in list(self._workers):
      if worker.forget():
        self._replace(worker)

  def _execute(
    self, batch: _Batch, batch_deadline: float, more: Callable[[], Sequence[Job]] | None = None
  ) -> list[Result]:
    """Feeds chunks to workers and judges replies as they arrive. `more` (see `execute`) runs in a
    thread once the first chunks are out; the jobs it returns join the batch when it ends."""
    prepared = batch.prepared
    queue = collections.deque(self._longest_first(prepared, range(len(prepared))))
    pending = None
    if more is not None:
      self._dispatch(queue, prepared)
      pending = _InBackground(more)
    outcomes: list[Result | None] = [None] * len(prepared)
    remaining = len(prepared)
    try:
      while remaining or pending is not None:
        if pending is not None and (pending.done() or time.monotonic() >= batch_deadline):
          added = batch.add(pending.result())  # waits for it past the deadline, as a call would
          pending = None
          outcomes += [None] * len(added)
          remaining += len(added)
          queue = collections.deque(self._longest_first(prepared, [*queue, *added]))
          continue
        remaining = self._serve(
          prepared,
          queue,
          outcomes,
          remaining,
          batch_deadline,
          pending.fd if pending is not None else None,
        )
    except BaseException:
      if pending is not None:  # its jobs are this batch's: it ends before another batch starts
        pending.wait()
      self._abandon()
      raise
    return outcomes

  def _serve(
    self,
    prepared: list[_Prepared],
    queue: collections.deque,
    outcomes: list[Result | None],
    remaining: int,
    batch_deadline: float,
    wake_fd: int | None,
  ) -> int:
    """One round of the batch's loop: tops the workers up, waits for their replies (or for
    `wake_fd`) and judges what came back; returns how many jobs still have no outcome."""
    now = time.monotonic()
    if now >= batch_deadline:
      for index in range(len(prepared)):
        if outcomes[index] is None:
          outcomes[index] = Result(Status.TIMEOUT, detail="batch deadline")
      self._abandon()
      return 0
    self._dispatch(queue, prepared)
    poller, by_fd = select.poll(), {}
    for worker in self._workers:
      poller.register(worker.outbox, select.POLLIN)
      by_fd[worker.outbox] = worker
      if worker.pending_out:
        poller.register(worker.inbox, select.POLLOUT)
        by_fd[worker.inbox] = worker
    if wake_fd is not None:
      poller.register(wake_fd, select.POLLIN)
    timeout_ms = max(1, int(1e3 * min(batch_deadline - now, 1.0)))
    for fd, event in poller.poll(timeout_ms):
      if fd == wake_fd:
        continue
      worker = by_fd[fd]
      if worker not in self._workers:
        continue  # replaced earlier in this round
      if fd == worker.inbox:
        worker.flush()
        continue
      try:
        data = os.read(fd, _READ_SIZE)
      except BlockingIOError:
        continue
      if not data:
        remaining -= self._worker_died(worker, queue, prepared, outcomes, "worker exited")
        continue
      for reply in worker.reader.feed(data):
        if "partial" in reply:
          self._stop_if_failed(worker, prepared, reply)
          continue
        index = worker.answered()
        if reply["id"] != index:
          raise RuntimeError(f"worker {worker.slot} answered job {reply['id']}, expected {index}")
        outcome = self._verdict(prepared[index], reply)
        if outcome.status is Status.INFRA_ERROR and prepared[index].attempts + 1 < _MAX_ATTEMPTS:
          prepared[index].attempts += 1  # the sandbox failed, not the program: once more
          self._counts["reruns"] += 1
          queue.appendleft(index)
          continue
        outcomes[index] = outcome
        remaining -= 1
        self._remember_duration(prepared[index].spec, outcome.duration_s)
    for worker in list(self._workers):  # watchdog for a wedged worker
      if worker.inflight:
        budget = worker.budget_s(prepared) + _WATCHDOG_SLACK_S
        if time.monotonic() - worker.busy_since > budget:
          remaining -= self._worker_died(worker, queue, prepared, outcomes, "worker stuck")
    return remaining

  def _dispatch(self, queue: collections.deque, prepared: list[_Prepared]) -> None:
    """Tops every worker up to _CHUNKS_AHEAD chunks, a chunk to each in turn (the least loaded
    first), so that the queue's longest jobs, at its head, go to different workers."""
    while queue:
      ready = sorted(
        (w for w in self._workers if len(w.chunks) < _CHUNKS_AHEAD), key=lambda w: len(w.inflight)
      )
      if not ready:
        return
      # Chunks shrink as the queue drains, so that the workers finish a round close together.
      most = max(1, min(_MAX_CHUNK, len(queue) // (2 * len(self._workers))))
      for worker in ready:
        if not queue:
          return
        ids = [queue.popleft()]
        expected = self._expected_s(prepared[ids[0]])
        while queue and len(ids) < most:
          expected += self._expected_s(prepared[queue[0]])
          if expected > _CHUNK_S:
            break
          ids.append(queue.popleft())
        worker.send(ids, [prepared[i].message for i in ids])

  def _stop_if_failed(self, worker: _Worker, prepared: list[_Prepared], report: dict) -> None:
    """Stops the run a partial report comes from if its lines so far already fail it: its verdict
    is FAIL whatever it does next, and the rest of a failing run (the slow last test, a loop that
    would run to the time limit) is time the batch waits for."""
    index, nonce = report["partial"], report["nonce"]
    if not worker.inflight or worker.inflight[0] != index:
      return
    if worker.running is None or worker.running.nonce != nonce:
      worker.running = verdicts.RunningChecks(prepared[index].expected, nonce)
    if worker.running.fail_now(report["lines"]):
      worker.stop(index, nonce)
      self._counts["stopped"] += 1

  def _worker_died(
    self,
    worker: _Worker,
    queue: collections.deque,
    prepared: list[_Prepared],
    outcomes: list,
    why: str,
  ) -> int:
    """Replaces a dead worker; reruns its current job once, then calls it an infra error."""
    self._counts["worker_deaths"] += 1
    finished = 0
    held = worker.forget()
    if held:
      current = prepared[held[0]]
      current.attempts += 1
      if current.attempts >= _MAX_ATTEMPTS:
        outcomes[held[0]] = Result(Status.INFRA_ERROR, detail=f"{why} twice while running this job")
        finished = 1
        held = held[1:]
    queue.extendleft(reversed(held))
    _log.warning("execution worker %d: %s; restarting it", worker.slot, why)
    self._replace(worker)
    return finished

  def _verdict(self, item: _Prepared, reply: dict) -> Result:
    if "infra_error" in reply:
      return Result(Status.INFRA_ERROR, detail=reply["infra_error"])
    try:
      result = verdicts.judge(item.expected, reply["runs"], item.limits)
    except Exception as e:  # pylint: disable=broad-except
      # Whatever the program wrote (values nested past any recursion limit, say) is its run's
      # failure, never the batch's.
      runs = reply["runs"]
      result = Result(
        Status.FAIL,
        sum(run["duration_s"] for run in runs),
        f"its records could not be judged ({type(e).__name__})",
        runs[-1]["stdout"],
        runs[-1]["stderr"],
      )
    self._counts["runs"] += len(reply["runs"])
    self._latencies.append(result.duration_s)
    return result

  # -- statistics --------------------------------------------------------------

  def stats(self) -> dict[str, Any]:
    """Counts by status, runs, duplicates, worker restarts, runs the pool stopped at a failed
    check (`stopped`; one that ended before the stop reached it counts too), latency percentiles
    (ms)."""
    counts = dict(self._counts)
    out: dict[str, Any] = {
      "workers": self.num_workers,
      "sandbox": self._mode,
      "jobs": counts.pop("jobs", 0),
      "runs": counts.pop("runs", 0),
      "duplicates": counts.pop("duplicates", 0),
      "worker_restarts": counts.pop("worker_restarts", 0),
      "worker_deaths": counts.pop("worker_deaths", 0),
      "reruns": counts.pop("reruns", 0),
      "stopped": counts.pop("stopped", 0),
    }
    for status in Status:
      out[status.value] = counts.get(status.value, 0)
    latencies = sorted(self._latencies)
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)):
      out[f"latency_{name}_ms"] = (
        1e3 * latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0
      )
    return out


def check_python(python: str | None) -> str:
  """The interpreter workers run under: `python` (a path, or a name on PATH), or this one.
  Raises ValueError naming it when it is no executable."""
  if python is None or python == "":
    return sys.executable
  found = shutil.which(python)
  if found is None:
    raise ValueError(f"python {python!r}: no such executable")
  return os.path.abspath(found)


def _close_all() -> None:
  for pool in list(_live_pools):
    pool.close()


_sigterm_installed = False


def _install_sigterm_handler() -> None:
  """On SIGTERM close every pool, then die of SIGTERM as before (only if nobody else handles it)."""
  global _sigterm_installed
  if _sigterm_installed or threading.current_thread() is not threading.main_thread():
    return
  _sigterm_installed = True
  atexit.register(_close_all)
  if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
    return

  def on_sigterm(signum, frame):  # pylint: disable=unused-argument
    _close_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)

  signal.signal(signal.SIGTERM, on_sigterm)
