"""The worker: a warm interpreter that forks one sandboxed child per run (through a pool, and
spoken to directly over its pipes)."""

import fcntl
import os
import subprocess
import sys

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status
from precisecoder.execution.parent import expectations
from precisecoder.execution.shared import protocol
from precisecoder.execution.worker_side import worker
from precisecoder.execution.parent import pool as pool_module

ADD = "def add(a, b):\n  return a + b\n"
CALL = {
  "kind": "call",
  "entry_point": "add",
  "cases": [{"args": [2, 3], "expected": 5}, {"args": [-1, 1], "expected": 0}],
}
# Jobs meant to end on their own get a wall-clock limit no loaded host reaches.
FAST = Limits(timeout_s=60.0)


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


def _cpus_of(pid):
  return os.sched_getaffinity(pid)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_workers_are_pinned_to_cpus_of_their_own_unless_told_not_to():
  with ExecutionPool(workers=2) as pool:
    assert pool.execute([Job(ADD, CALL, FAST)])[0].passed
    masks = [_cpus_of(w.process.pid) for w in pool._workers]  # pylint: disable=protected-access
    assert all(len(m) == 1 for m in masks) and masks[0] != masks[1]
  with ExecutionPool(workers=2, pin_workers=False) as pool:
    assert pool.execute([Job(ADD, CALL, FAST)])[0].passed
    assert all(_cpus_of(w.process.pid) == os.sched_getaffinity(0) for w in pool._workers)  # pylint: disable=protected-access


def test_workers_never_import_jax(pool):
  program = (
    "import sys\ndef loaded():\n"
    "  return sorted(m for m in ('jax', 'flax', 'torch') if m in sys.modules)\n"
  )
  tests = {"kind": "call", "entry_point": "loaded", "cases": [{"args": [], "expected": []}]}
  assert pool.execute([Job(program, tests, FAST)])[0].passed


def test_runs_draw_fresh_random_numbers_from_workers_without_fork_hooks(pool):
  # random and threading act after every fork, in Python: a worker that loaded them would slow
  # every run).
  program = (
    "import sys\nloaded = sorted({'random', 'tempfile', 'threading'} & set(sys.modules))\n"
    "import random\n"
    "print(loaded, random.getrandbits(64))\n# run "
  )
  tests = {"kind": "io", "cases": [{"stdin": "", "stdout": "?"}]}
  results = pool.execute([Job(program + str(i), tests, FAST) for i in range(2)])
  lines = [result.stdout.split() for result in results]
  assert [line[0] for line in lines] == ["[]", "[]"], results
  assert lines[0][1] != lines[1][1]


def test_large_outputs_are_read_whole_and_floods_stopped_at_the_cap():
  # The worker reads a running child's pipes on a tick, and as they fill once they have had
  # something to read: a talkative run is neither held back nor let past its cap (a flood not
  # read would block the child until its deadline, a timeout instead of the cap's failure).
  big = Limits(timeout_s=5.0, max_output_bytes=3 << 20)
  echo = "import sys\nfor _ in range(2500):\n  sys.stdout.write('x' * 999 + '\\n')\n"
  expected = ("x" * 999 + "\n") * 2500
  flood = "import sys\nwhile True:\n  sys.stdout.write('y' * 1000)\n"
  copy = "import sys\nsys.stdout.write(sys.stdin.read())\n"
  with ExecutionPool(workers=1) as pool:
    whole, flooded, copied = pool.execute(
      [
        Job(echo, {"kind": "io", "cases": [{"stdin": "", "stdout": expected}]}, big),
        Job(flood, {"kind": "io", "cases": [{"stdin": "", "stdout": ""}]}, big),
        Job(copy, {"kind": "io", "cases": [{"stdin": expected, "stdout": expected}]}, big),
      ]
    )
  assert whole.passed and copied.passed, (whole, copied)
  assert flooded.status is Status.FAIL, flooded
  assert flooded.detail.endswith("stdout exceeded 3145728 bytes"), flooded


def _plain_worker() -> subprocess.Popen:
  """A worker started as the pool starts one (sandbox "plain", no run uid), its protocol on
  our pipes."""
  src_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(worker.__file__))))
  return subprocess.Popen(
    [sys.executable, "-E", "-s", "-m", worker.__name__, "0", "plain", "-1"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    cwd=src_root,
  )


def test_a_worker_answers_its_protocol_directly():
  """Hello, then one reply per job in order, over framed messages on fds 0 and 1."""
  process = _plain_worker()
  try:
    inbox, outbox = process.stdin.fileno(), process.stdout.fileno()
    hello = protocol.read_message(outbox)
    assert hello["hello"] == "plain" and hello["run_uid"] is None and hello["magic"]
    child_tests, _ = expectations.split(CALL)
    limits = pool_module._limits_payload(FAST)  # pylint: disable=protected-access
    jobs = [
      {"id": 7, "program": ADD, "tests": child_tests, "limits": limits},
      {"id": 8, "program": "import os\nos._exit(3)\n", "tests": child_tests, "limits": limits},
    ]
    protocol.write_all(inbox, protocol.encode({"jobs": jobs}))
    first, second = protocol.read_message(outbox), protocol.read_message(outbox)
  finally:
    process.stdin.close()
    assert process.wait(timeout=60) == 0  # the pool's pipe closed: the worker exits
    process.stdout.close()
  assert [first["id"], second["id"]] == [7, 8]
  run = first["runs"][0]
  assert run["ready"] and run["exit"] == 0 and not run["timeout"] and run["nonce"]
  assert run["channel"].startswith(f'{{"ready":"{run["nonce"]}"}}\n')
  assert second["runs"][0]["exit"] == 3 and second["runs"][0]["ready"]


def test_a_running_check_run_reports_its_lines_and_stops_when_the_pool_says_so():
  """A run of assert tests still going at a tick sends the lines it wrote; a stop naming its
  nonce ends it, and the worker goes on to the next job."""
  process = _plain_worker()
  hangs = "def add(a, b):\n  if a < 0:\n    while True:\n      pass\n  return a - b\n"
  tests = {"kind": "assert", "code": "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"}
  try:
    inbox, outbox = process.stdin.fileno(), process.stdout.fileno()
    assert protocol.read_message(outbox)["hello"] == "plain"
    child_tests, _ = expectations.split(tests)
    limits = pool_module._limits_payload(FAST)  # pylint: disable=protected-access
    jobs = [
      {"id": 3, "program": hangs, "tests": child_tests, "limits": limits, "split": True},
      {"id": 4, "program": ADD, "tests": expectations.split(CALL)[0], "limits": limits},
    ]
    protocol.write_all(inbox, protocol.encode({"jobs": jobs}))
    reported = ""
    while '"expect":0' not in reported:  # a slow host may tick before the child wrote it
      partial = protocol.read_message(outbox)
      assert partial["partial"] == 3 and partial["lines"].endswith("\n"), partial
      reported += partial["lines"]
    protocol.write_all(inbox, protocol.encode({"stop": 3, "nonce": partial["nonce"]}))
    while "partial" in (answer := protocol.read_message(outbox)):
      pass  # the run ticked again before it read the stop
    following = protocol.read_message(outbox)
  finally:
    process.stdin.close()
    assert process.wait(timeout=60) == 0
    process.stdout.close()
  run = answer["runs"][0]
  assert answer["id"] == 3 and run["stopped"] and run["signal"] == 9 and not run["timeout"]
  assert run["nonce"] == partial["nonce"] and run["channel"].startswith(reported)
  assert following["id"] == 4 and not following["runs"][0]["stopped"]


def test_a_stream_keeps_what_fits_under_its_cap():
  read_end, write_end = os.pipe()
  try:
    os.set_blocking(read_end, False)
    stream = worker._Stream("stdout", read_end, cap=5)  # pylint: disable=protected-access
    assert stream.read()  # nothing written yet: still within the cap
    os.write(write_end, b"abc")
    assert stream.read() and stream.text() == "abc"
    os.write(write_end, b"defg")
    assert not stream.read() and stream.text() == "abcde"  # past the cap: cut there
    os.close(write_end)
    write_end = -1
  finally:
    for fd in (read_end, write_end):
      if fd >= 0:
        os.close(fd)


def test_the_channel_is_read_whole_at_each_tick_and_never_polled():
  """Output that showed up at a tick is polled from then on; the channel, written once per
  check, is not (each write would wake the worker), and a tick reads all it holds, in lines."""
  pipes = {name: os.pipe() for name in ("stdout", "stderr", "channel")}
  streams = {
    name: worker._Stream(name, r, cap=1 << 20)  # pylint: disable=protected-access
    for name, (r, _) in pipes.items()
  }
  worker._grow(pipes["channel"][1], worker._CHANNEL_PIPE_BYTES)  # pylint: disable=protected-access
  if fcntl.fcntl(pipes["channel"][1], fcntl.F_GETPIPE_SZ) < 1 << 17:
    for fd in [fd for pair in pipes.values() for fd in pair]:
      os.close(fd)
    pytest.skip("this system keeps pipes small")  # the write below would wait for a reader
  stdin_r, stdin_w = os.pipe()
  watch = worker._Watch(streams, stdin_w, b"")  # pylint: disable=protected-access
  try:
    os.write(pipes["stdout"][1], b"printed\n")
    record = b'{"expect":0,"value":1}\n'
    os.write(pipes["channel"][1], record * 3000 + b'{"exp')  # more than one read takes
    assert watch.read_quiet()
    assert watch.quiet == [streams["stderr"], streams["channel"]]  # stdout is polled now
    assert streams["channel"].size == len(record) * 3000 + 5
    assert watch.new_lines() == (record * 3000).decode() and watch.new_lines() == ""
    os.write(pipes["channel"][1], b'ect":1}\n')
    assert watch.read_quiet() and watch.new_lines() == '{"expect":1}\n'
  finally:
    watch.close()
    for fd in [stdin_r, *(w for _, w in pipes.values())]:
      os.close(fd)


def test_cpus_that_are_no_longer_ours_become_the_workers_new_cpus(monkeypatch):
  """A host may shrink the cpuset under a worker: CPUs it cannot go back to are not a run's
  doing, and must not fail every later run."""
  w = worker.Worker.__new__(worker.Worker)  # no sandbox: only the schedule check
  w._schedule = ({0, 1}, 0, os.SCHED_OTHER)  # pylint: disable=protected-access
  monkeypatch.setattr(worker, "_schedule", lambda: ({1}, 0, os.SCHED_OTHER))

  def refuse(pid, cpus):
    raise OSError(22, "Invalid argument")

  monkeypatch.setattr(worker.os, "sched_setaffinity", refuse)
  w._check_schedule()  # pylint: disable=protected-access
  assert w._schedule == ({1}, 0, os.SCHED_OTHER)  # pylint: disable=protected-access
  monkeypatch.setattr(worker, "_schedule", lambda: ({1}, 19, os.SCHED_OTHER))
  with pytest.raises(worker.sandbox_lib.CleanupFailed, match="priority"):
    w._check_schedule()  # pylint: disable=protected-access
