"""ExecutionPool: the four test kinds, batching, deadlines, worker loss, statistics (bad specs:
test_specs.py)."""

import collections
import json
import os
import select
import signal
import sys
import threading
import time

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status
from precisecoder.execution.parent import pool as pool_module

ADD = "def add(a, b):\n  return a + b\n"
WRONG_ADD = "def add(a, b):\n  return a - b\n"
CALL = {
  "kind": "call",
  "entry_point": "add",
  "cases": [{"args": [2, 3], "expected": 5}, {"args": [-1], "kwargs": {"b": 1}, "expected": 0}],
}
ASSERT = {
  "kind": "assert",
  "code": "def check(candidate):\n  assert candidate(2, 3) == 5\n"
  "  assert candidate(-1, 1) == 0\n"
  "check(add)\n",
}
UNITTEST = {
  "kind": "unittest",
  "code": (
    "import unittest\n"
    "class Base(unittest.TestCase):\n"
    "  def setUp(self):\n    self.pair = (2, 3)\n"
    "  def test_pair(self):\n    self.assertEqual(add(*self.pair), 5)\n"
    "class More(Base):\n"
    "  def test_negative(self):\n    self.assertEqual(add(-1, 1), 0)\n"
  ),
}
IO = {
  "kind": "io",
  "cases": [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "-1 1", "stdout": "0"}],
}
IO_PROGRAM = "a, b = map(int, input().split())\nprint(a + b, '  ')\n\n"
# Jobs meant to end on their own get a wall-clock limit no loaded host reaches, so that their
# verdict never depends on its speed; those meant to time out get a short one of their own.
FAST = Limits(timeout_s=60.0)


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


@pytest.mark.parametrize(
  "program, tests", [(ADD, CALL), (ADD, ASSERT), (ADD, UNITTEST), (IO_PROGRAM, IO)]
)
def test_every_kind_passes_right_and_fails_wrong(pool, program, tests):
  wrong = program.replace("a + b", "a - b")
  right_result, wrong_result = pool.execute([Job(program, tests, FAST), Job(wrong, tests, FAST)])
  assert right_result.status is Status.PASS, right_result
  assert right_result.passed
  assert wrong_result.status is Status.FAIL, wrong_result
  assert wrong_result.detail


def test_results_keep_order_and_duplicates_run_once(pool):
  before = pool.stats()
  jobs = [Job(ADD if i % 3 else WRONG_ADD, CALL, FAST) for i in range(40)]
  results = pool.execute(jobs)
  assert [r.passed for r in results] == [bool(i % 3) for i in range(40)]
  after = pool.stats()
  assert after["duplicates"] - before["duplicates"] == 38
  assert after["jobs"] - before["jobs"] == 40


def test_solution_method_entry_point(pool):
  program = "class Solution:\n  def twice(self, x):\n    return [x, x]\n"
  tests = {
    "kind": "call",
    "entry_point": "Solution().twice",
    "cases": [{"args": [[1, "a"]], "expected": [[1, "a"], [1, "a"]]}],
  }
  assert pool.execute([Job(program, tests, FAST)])[0].passed


def test_programs_compile_as_written_without_the_harness_future_flags(pool):
  # The harness module uses `from __future__ import annotations`; a program must not inherit
  # it: its annotations are evaluated, so an undefined name in one fails the run.
  program = "def add(a: int, b: Undefined):\n  return a + b\n"
  result = pool.execute([Job(program, CALL, FAST)])[0]
  assert result.status is Status.FAIL and "NameError" in result.detail, result


def test_call_compares_after_a_json_round_trip(pool):
  program = "def pair(x):\n  return (x, {1: x})\n"
  tests = {
    "kind": "call",
    "entry_point": "pair",
    "cases": [{"args": [2], "expected": [2, {"1": 2}]}],
  }
  assert pool.execute([Job(program, tests, FAST)])[0].passed


def test_timeout_memory_and_crash_statuses(pool):
  jobs = [
    Job("while True:\n  pass\n", ASSERT, Limits(timeout_s=0.5)),
    Job("x = bytearray(2 << 30)\n", ASSERT, Limits(timeout_s=60, memory_mb=256)),
    Job("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", CALL, FAST),
    Job("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", ASSERT, FAST),
    Job("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", UNITTEST, FAST),
  ]
  deaths = pool.stats()["worker_deaths"]
  timeout, memory, crash, held_crash, split_crash = pool.execute(jobs)
  # Cut by its own limit, not by the watchdog that replaces a stuck worker.
  assert timeout.status is Status.TIMEOUT and timeout.detail == "wall-clock limit of 0.5s", timeout
  assert pool.stats()["worker_deaths"] == deaths
  assert memory.status is Status.MEMORY, memory
  assert crash.status is Status.CRASH and "SIGSEGV" in crash.detail
  # A held assert job runs in one process, as a call job does.
  assert held_crash.status is Status.CRASH and "SIGSEGV" in held_crash.detail, held_crash
  # Split (unittest, assert not held), the program's process dies, not the run's first: its
  # tests fail.
  assert split_crash.status is Status.FAIL and "gone" in split_crash.detail, split_crash


def test_a_one_process_run_is_as_unsafe_as_its_name_says(pool):
  """assert and unittest jobs run split unless the pool is told `unsafe_one_process`: then a
  program that patches the library the tests' checks call forges a pass (assertGreater is no
  check the pool holds), as in a plain interpreter."""
  tests = {
    "kind": "unittest",
    "code": "import unittest\nclass T(unittest.TestCase):\n"
    "  def test_add(self):\n    self.assertGreater(add(2, 3), 4)\n",
  }
  forgery = (
    "import unittest\nunittest.TestCase.assertGreater = lambda self, a, b, msg=None: None\n"
    + WRONG_ADD
  )
  jobs = [Job(ADD, tests, FAST), Job(forgery, tests, FAST)]
  honest, forged = pool.execute(jobs)
  assert honest.passed and forged.status is Status.FAIL, forged
  with ExecutionPool(workers=1, unsafe_one_process=True) as unsafe:
    assert [r.passed for r in unsafe.execute(jobs)] == [True, True]


def test_more_adds_jobs_to_the_running_batch(pool, monkeypatch):
  """`more` starts once the first jobs are with the workers; its jobs' results follow, and a job
  it repeats runs once."""
  first = [Job(ADD, CALL, FAST), Job(WRONG_ADD, ASSERT, FAST)]
  events = []
  send = pool_module._Worker.send  # pylint: disable=protected-access
  monkeypatch.setattr(
    pool_module._Worker,
    "send",  # pylint: disable=protected-access
    lambda worker, ids, jobs: (events.append(len(ids)), send(worker, ids, jobs)),
  )

  def more():
    events.append("more")
    return [Job(WRONG_ADD, CALL, FAST), Job(ADD, CALL, FAST), Job(ADD, ASSERT, FAST)]

  before = pool.stats()
  results = pool.execute(first, more=more)
  assert sum(events[: events.index("more")]) == len(first), events
  assert [r.passed for r in results] == [True, False, False, True, True]
  after = pool.stats()
  assert (after["jobs"] - before["jobs"], after["duplicates"] - before["duplicates"]) == (5, 1)


def test_the_workers_are_served_while_more_runs(pool):
  """`more` runs in a thread of its own: while it works, the pool still reads its workers'
  reports and stops a run that has failed (this one would otherwise loop until its limit)."""
  hangs = "def add(a, b):\n  if a < 0:\n    while True:\n      pass\n  return a - b\n"
  stopped = pool.stats()["stopped"]
  seen = []

  def more():
    deadline = time.monotonic() + 120  # a handshake with the pool's thread; a bound for a bug
    while pool.stats()["stopped"] == stopped and time.monotonic() < deadline:
      time.sleep(0.01)
    seen.append(pool.stats()["stopped"] - stopped)
    return [Job(ADD, CALL, FAST)]

  results = pool.execute([Job(hangs, ASSERT, Limits(timeout_s=240.0))], more=more)
  assert seen == [1]
  assert [r.status for r in results] == [Status.FAIL, Status.PASS], results
  assert results[0].detail == "assert #0 failed: got -1, expected == 5", results[0]


def test_a_failing_more_leaves_the_pool_working(pool):
  def more():
    raise KeyError("diffing failed")

  with pytest.raises(KeyError, match="diffing failed"):
    pool.execute(
      [Job(f"import time\ntime.sleep(1)\nx = {i}\n", ASSERT, FAST) for i in range(4)], more=more
    )
  assert [r.passed for r in pool.execute([Job(ADD, CALL, FAST), Job(WRONG_ADD, CALL, FAST)])] == [
    True,
    False,
  ]


class _RecordingWorker:
  """Stands in for a worker in `_dispatch`: records the chunks it is handed."""

  def __init__(self):
    self.inflight, self.chunks, self.sent = [], [], []

  def send(self, ids, jobs):
    del jobs
    self.inflight += ids
    self.chunks.append(len(ids))
    self.sent.append(ids)


def test_chunks_spread_the_longest_jobs_and_hold_little_expected_work():
  pool = ExecutionPool(workers=2)  # never started: its workers are stand-ins
  try:
    pool._workers = workers = [_RecordingWorker(), _RecordingWorker()]  # pylint: disable=protected-access
    seconds = {"long": 0.5, "short": 0.004}
    pool._spec_seconds.update(seconds)  # pylint: disable=protected-access
    prepared = [
      pool_module._Prepared({}, None, FAST, 61.0, spec)  # pylint: disable=protected-access
      for spec in ["long"] * 3 + ["short"] * 60 + ["new"]
    ]
    queue = collections.deque(pool._longest_first(prepared, range(len(prepared))))  # pylint: disable=protected-access
    pool._dispatch(queue, prepared)  # pylint: disable=protected-access
    first, second = ([prepared[i].spec for i in ids] for ids in workers[0].sent)
    assert first == ["new"] and second == ["long"]  # never seen: alone, and first of all
    assert [prepared[i].spec for ids in workers[1].sent for i in ids] == ["long", "long"]
    assert all(len(w.chunks) == 2 for w in workers)  # the one it runs and the next
    assert len(queue) == 60  # the short jobs wait for a worker to take its next chunk
    workers[0].inflight, workers[0].chunks = [], []  # it answered both
    pool._dispatch(queue, prepared)  # pylint: disable=protected-access
    short = workers[0].sent[2:]
    assert len(short) == 2 and workers[1].sent[2:] == []
    for ids in short:  # as many as fit in _CHUNK_S of expected work
      assert len(ids) == int(pool_module._CHUNK_S / seconds["short"] + 1e-9)  # pylint: disable=protected-access
  finally:
    pool._workers = []  # pylint: disable=protected-access
    pool.close()


def test_the_watchdog_gives_a_worker_its_whole_chunk(monkeypatch):
  """A worker answers a chunk at its end: a chunk whose jobs took longer together than the
  first job's budget is not a stuck worker."""
  monkeypatch.setattr(pool_module, "_WATCHDOG_SLACK_S", 0.0)
  with ExecutionPool(workers=1) as pool:
    pool.execute([Job("x = 0\n", ASSERT, FAST)])  # the spec's runs are known to be quick now
    sleep = "import time\ntime.sleep({})\ndef add(a, b):\n  return a + b\n"
    # Four jobs: two chunks of two. The first chunk takes ~2.4 s, past its first job's budget
    # (its limit of 0.5 s + 1 s) but well within the two jobs' budgets together.
    jobs = [
      Job(sleep.format(0.4), ASSERT, Limits(timeout_s=0.5)),
      Job(sleep.format(2.0), ASSERT, FAST),
      Job(ADD, ASSERT, FAST),
      Job(ADD.replace("+", "-"), ASSERT, FAST),
    ]
    results = pool.execute(jobs)
    assert pool.stats()["worker_deaths"] == 0
  assert [r.status for r in results[1:]] == [Status.PASS, Status.PASS, Status.FAIL], results
  assert results[0].status in (Status.PASS, Status.TIMEOUT)  # 0.4 s of 0.5 on a slow host


def test_batch_deadline_times_out_what_is_left(pool):
  jobs = [
    Job(f"import time\ntime.sleep(3)\nx = {i}\n", ASSERT, Limits(timeout_s=5)) for i in range(4)
  ]
  restarts = pool.stats()["worker_restarts"]
  results = pool.execute(jobs, deadline_s=0.5)
  assert all(r.status is Status.TIMEOUT and r.detail == "batch deadline" for r in results)
  assert pool.stats()["worker_restarts"] == restarts + 2  # both workers stopped mid-job
  assert pool.execute([Job(ADD, CALL, FAST)])[0].passed  # the pool recovered


def test_a_dead_worker_is_replaced_and_its_job_rerun_once():
  # Each kill waits for its moment (the worker holds the job) instead of guessing it by sleeps.
  with ExecutionPool(workers=1) as pool:
    pool.execute([Job(ADD, CALL, FAST)])

    def kill_the_worker_holding_the_job():  # `more`: called once the job is with the worker
      worker = pool._workers[0]  # pylint: disable=protected-access
      assert worker.inflight and not select.select([worker.outbox], [], [], 0)[0]  # unanswered
      os.kill(worker.process.pid, signal.SIGKILL)
      return []

    job = Job("import time\ntime.sleep(2)\n" + ADD, CALL, FAST)  # running when the kill lands
    assert pool.execute([job], more=kill_the_worker_holding_the_job)[0].passed
    assert pool.stats()["worker_restarts"] == 1

    def kill_each_worker_that_takes_the_job(times=2):
      killed = []
      for _ in range(12000):  # a condition polled, 120 s at most
        worker = pool._workers[0]  # pylint: disable=protected-access
        if worker.inflight and worker not in killed:
          os.kill(worker.process.pid, signal.SIGKILL)
          killed.append(worker)
          if len(killed) == times:
            return
        time.sleep(0.01)

    killer = threading.Thread(target=kill_each_worker_that_takes_the_job)
    killer.start()
    # The job would run a minute: only the kills can end it.
    result = pool.execute([Job("import time\ntime.sleep(60)\n" + ADD, CALL, FAST)])[0]
    killer.join()
    assert result.status is Status.INFRA_ERROR and "twice" in result.detail, result


def test_stats_and_idempotent_close():
  pool = ExecutionPool(workers=1)
  pool.execute([Job(ADD, CALL, FAST), Job(WRONG_ADD, CALL, FAST)])
  stats = pool.stats()
  assert stats["pass"] == 1 and stats["fail"] == 1 and stats["runs"] == 2
  assert 0 < stats["latency_p50_ms"] <= stats["latency_max_ms"]
  pids = [w.process.pid for w in pool._workers]
  pool.close()
  pool.close()
  for pid in pids:
    with pytest.raises(ProcessLookupError):
      os.kill(pid, 0)
  with pytest.raises(RuntimeError, match="closed"):
    pool.execute([Job(ADD, CALL, FAST)])


@pytest.mark.parametrize(
  "program, passes",
  [
    ("def f(x):\n  return x + 1\ndef g(x):\n  return x / 2 + 1e-9\n", True),
    ("def f(x):\n  return x + 2\ndef g(x):\n  return x / 2\n", False),
    ("def f(x):\n  return x + 1\ndef g(x):\n  return x / 2 + 1e-6\n", False),  # 7 places
    (
      "import numpy as np\ndef f(x):\n  return np.int64(x + 1)\n"
      "def g(x):\n  return np.float64(x / 2)\n",
      True,
    ),
  ],
)
def test_unittest_held_checks_keep_unittest_semantics(pool, program, passes):
  code = (
    "import unittest\nclass T(unittest.TestCase):\n  def test_a(self):\n"
    "    self.assertEqual(f(1), 2)\n    self.assertAlmostEqual(g(1), 0.5)\n"
    "    self.assertTrue(f(0))\n    self.assertIsNotNone(f(2))\n"
  )
  result = pool.execute([Job(program, {"kind": "unittest", "code": code}, FAST)])[0]
  assert result.passed == passes, result


@pytest.mark.parametrize(
  "program, passes",
  [
    ("def f():\n  return True\n", True),
    ("import numpy as np\ndef f():\n  return np.True_\n", False),  # equal to True, not True
  ],
)
def test_is_true_needs_the_singleton(pool, program, passes):
  tests = {"kind": "assert", "code": "assert f() is True\nassert f() == True\n"}
  assert pool.execute([Job(program, tests, FAST)])[0].passed == passes


@pytest.mark.parametrize(
  "program, passes",
  [
    ("def f(x):\n  return x / 4\n", True),
    ("def f(x):\n  return x / 4 + 1e-3\n", False),
    ("import fractions\ndef f(x):\n  return fractions.Fraction(x, 4)\n", True),
    # Decimal - float raises
    ("import decimal\ndef f(x):\n  return decimal.Decimal(x) / 4\n", False),
    ("def f(x):\n  return str(x / 4)\n", False),
    ("def abs(x):\n  return 0\ndef f(x):\n  return 99.0\n", False),  # its own abs is not asked
  ],
)
def test_tolerance_asserts_are_computed_in_the_pool(pool, program, passes):
  code = "assert abs(f(2) - 0.5) < 1e-6\nassert math.fabs(0.25 - f(1)) <= 1e-9\n"
  result = pool.execute([Job("import math\n" + program, {"kind": "assert", "code": code}, FAST)])[0]
  assert result.passed == passes, result


@pytest.mark.parametrize(
  "program, passes",
  [
    ("def f(x):\n  return x > 2\n", True),
    ("def f(x):\n  return [0] * (x - 1)\n", True),  # truthiness of a list, as in the child
    ("class Box:\n  pass\ndef f(x):\n  return Box() if x > 2 else None\n", True),  # not plain data
    ("def f(x):\n  return True\n", False),
  ],
)
def test_truth_asserts_are_judged_in_the_pool(pool, program, passes):
  code = "assert f(3)\nassert not f(1)\n"
  result = pool.execute([Job(program, {"kind": "assert", "code": code}, FAST)])[0]
  assert result.passed == passes, result


@pytest.mark.parametrize(
  "body, passes",
  [
    ("return (x, 2) if x == 1 else ([] if x == 2 else (None if x == 3 else 0.5))", True),
    ("return [x, 2] if x == 1 else ([] if x == 2 else (None if x == 3 else 0.5))", False),
    ("return (x, 2) if x == 1 else ([3] if x == 2 else (None if x == 3 else 0.5))", False),
    ("return (x, 2) if x == 1 else ([] if x == 2 else (0 if x == 3 else 0.5))", False),
  ],
)
def test_assert_values_compare_with_python_semantics(pool, body, passes):
  code = (
    "def check(candidate):\n  assert candidate(1) == (1, 2)\n  assert [3] != candidate(2)\n"
    "  assert candidate(3) is None\n  assert abs(candidate(4) - 0.5) < 1e-6\ncheck(f)\n"
  )
  result = pool.execute([Job(f"def f(x):\n  {body}\n", {"kind": "assert", "code": code}, FAST)])[0]
  assert result.passed == passes, result


def test_a_program_that_does_not_compile_fails_with_the_reason(pool):
  result = pool.execute([Job("def add(a, b):\n  return a +\n", ASSERT, FAST)])[0]
  assert result.status is Status.FAIL and "SyntaxError" in result.detail, result


def test_a_pool_driven_from_short_lived_threads_keeps_its_workers():
  with ExecutionPool(workers=1) as pool:
    for _ in range(2):
      thread = threading.Thread(target=lambda: pool.execute([Job(ADD, CALL, FAST)]))
      thread.start()
      thread.join()
      time.sleep(0.2)
    assert pool.execute([Job(ADD, CALL, FAST)])[0].passed
    assert pool.stats()["worker_deaths"] == 0


def test_sigterm_stops_the_pool_and_its_workers(tmp_path):
  script = tmp_path / "serve.py"
  script.write_text(
    "import sys, time\n"
    "from precisecoder.execution import ExecutionPool, Job\n"
    "pool = ExecutionPool(workers=2)\n"
    f"pool.execute([Job({ADD!r}, {CALL!r})])\n"
    "print(*[w.process.pid for w in pool._workers], flush=True)\n"
    "time.sleep(3600)\n"
  )  # until the signal
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel

  server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
  worker_pids = [int(pid) for pid in server.stdout.readline().split()]
  assert len(worker_pids) == 2
  server.send_signal(signal.SIGTERM)
  assert server.wait(120) == -signal.SIGTERM  # bounds that only a hang reaches
  deadline = time.monotonic() + 120
  while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in worker_pids):
    time.sleep(0.05)
  assert not any(os.path.exists(f"/proc/{p}") for p in worker_pids)


@pytest.mark.parametrize("workers", [0, 257])
def test_a_worker_count_outside_1_to_max_is_refused_before_any_worker_starts(workers):
  with pytest.raises(ValueError, match="workers must be between 1 and 256"):
    ExecutionPool(workers=workers)


# What a program may write to its channel (fd 3) and stdout: never a pass, never the batch's end.
_NONCE = (
  "import gc\n"
  "channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
  "nonce = channel._nonce\n"
)
_DEEP = "'{\"l\": [' * 100000 + '1' + ']}' * 100000"
HOSTILE_CHANNEL = [
  ("deep nesting", ASSERT, "import os\nos.write(3, b'\\n' + b'[' * 200000 + b'\\n')\n"),
  (
    "a deeply nested signed value the pool decodes",
    ASSERT,
    _NONCE + f'import os\nos.write(3, (\'\\n{{"expect": 0, "value": \' + {_DEEP} + '
    "', \"nonce\": \"' + nonce + '\"}\\n').encode())\n",
  ),
  (
    "a deeply nested call value",
    CALL,
    "import os\nnested = b'[' * 50000 + b']' * 50000\n"
    "os.write(3, b'\\n{\"case\": 0, \"value\": ' + nested + b'}\\n')\nos._exit(0)\n",
  ),
  (
    "a huge line",
    UNITTEST,
    "import os\nos.write(3, b'\\n{\"error\": \"' + b'x' * 900000 + b'\"}\\n')\n",
  ),
  (
    "invalid UTF-8",
    UNITTEST,
    "import os\nos.write(3, b'\\xff\\xfe{\"error\": \"\\xc3\"}\\n')\nos.write(1, b'\\xff\\xc3(')\n",
  ),
  (
    "lone surrogates, signed",
    UNITTEST,
    _NONCE + "import os\nfor name in ('Base.test_pair', 'More.test_negative', '\\\\ud800'):\n"
    '  os.write(3, (\'\\n{"test": "\' + name + \'", "outcome": "fail", \'\n'
    '               \'"detail": "\\\\udfff", "nonce": "\' + nonce + \'"}\\n\').encode())\n',
  ),
  (
    "forged frames",
    CALL,
    'import os, struct\nframe = b\'{"id": 0, "runs": []}\'\n'
    "for fd in (1, 2, 3):\n  os.write(fd, struct.pack('<I', len(frame)) + frame + b'\\n')\n",
  ),
  (
    "NaN, infinities and huge numbers",
    CALL,
    'import os\nos.write(3, b\'\\n{"case": 0, "value": NaN}\\n\'\n'
    '         b\'{"case": 1, "value": 1e999999}\\n\'\n'
    "         b'{\"end\": \"call\", \"nonce\": 1' + b'0' * 5000 + b'}\\n')\n",
  ),
  ("a real-time signal", IO, "import os, signal\nos.kill(os.getpid(), signal.SIGRTMIN + 3)\n"),
]


def test_hostile_channel_output_fails_its_own_run_and_nothing_else(pool):
  jobs = [
    Job(program + "def add(a, b):\n  return a * b\n", tests, FAST)
    for _, tests, program in HOSTILE_CHANNEL
  ]
  results = pool.execute(jobs + [Job(ADD, ASSERT, FAST)])
  for (name, _, _), result in zip(HOSTILE_CHANNEL, results):
    assert result.status in (Status.FAIL, Status.CRASH), (name, result)
    json.dumps(result.detail, ensure_ascii=False).encode("utf-8")  # a score file can hold it
  assert results[-1].passed  # the batch, and the pool, go on
  assert pool.execute([Job(ADD, CALL, FAST)])[0].passed


def test_a_run_that_fails_a_check_is_stopped_there():
  """As a plain interpreter stops at the first failing assert: the rest of these runs never ends,
  and they are stopped at their first tick once the pool has read the failed check. A run whose
  checks hold runs on, however long it takes."""
  hangs = "def add(a, b):\n  if a < 0:\n    while True:\n      pass\n  return a - b\n"
  slow = "def add(a, b):\n  for _ in range(2_000_000):\n    pass\n  return a + b\n"
  with ExecutionPool(workers=2) as pool:
    results = pool.execute(
      [Job(hangs, ASSERT, FAST), Job(hangs, UNITTEST, FAST), Job(slow, ASSERT, FAST)]
    )
    stopped = pool.stats()["stopped"]
  assert [r.status for r in results] == [Status.FAIL, Status.FAIL, Status.PASS], results
  assert results[0].detail == "assert #0 failed: got -1, expected == 5", results[0]
  assert results[1].detail.startswith("assert #"), results[1]
  assert stopped == 2


def test_a_slow_run_whose_checks_hold_is_never_stopped(pool):
  """Its checks reach the pool a few at each of the worker's ticks: each is judged in its turn in
  the whole run, not in the tick's lines (the second check alone would be out of turn)."""
  checks = "".join(f"  assert candidate({a}, 1) == {a + 1}\n" for a in range(4))
  tests = {"kind": "assert", "code": f"def check(candidate):\n{checks}check(add)\n"}
  slow = "def add(a, b):\n  for _ in range(3_000_000):\n    pass\n  return a + b\n"
  before = pool.stats()["stopped"]
  assert pool.execute([Job(slow, tests, FAST)])[0].status is Status.PASS
  assert pool.stats()["stopped"] == before


def test_hostile_lines_of_a_running_check_run_fail_it_alone(pool):
  """What a run writes to its channel before a tick reaches the pool while it runs."""
  wait = "for _ in range(3_000_000):\n  pass\n"
  jobs = [
    Job(program + wait + "def add(a, b):\n  return a * b\n", tests, FAST)
    for _, tests, program in HOSTILE_CHANNEL
    if tests["kind"] in ("assert", "unittest")
  ]
  results = pool.execute(jobs + [Job(ADD, ASSERT, FAST)])
  assert all(r.status is Status.FAIL for r in results[:-1]), results
  assert results[-1].passed


def test_workers_run_under_the_interpreter_they_are_given(monkeypatch):
  python = os.path.join(os.path.dirname(sys.executable), "python3")  # another name, same venv
  program = "import sys\ndef where():\n  return sys.executable\n"
  tests = {"kind": "call", "entry_point": "where", "cases": [{"args": [], "expected": python}]}
  with ExecutionPool(workers=1, python=python) as pool:
    assert pool.execute([Job(program, tests, FAST)])[0].passed
  # An interpreter that loads another bytecode is sent the programs' source, not our code.
  monkeypatch.setattr(pool_module, "_MAGIC", "another bytecode")
  with ExecutionPool(workers=1) as pool:
    assert pool.execute([Job(ADD, ASSERT, FAST), Job(WRONG_ADD, CALL, FAST)])[0].passed
    assert not pool._send_code  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="no such executable"):
    ExecutionPool(python="/no/such/python")


def test_a_venv_reached_through_a_link_keeps_its_name_and_libraries(tmp_path):
  """`.venv -> elsewhere -> /the/venv`: the sandbox binds real paths, and shows the links too,
  so the interpreter's own path and its import path (numpy here) still resolve inside a run."""
  (tmp_path / "elsewhere").symlink_to(sys.prefix)
  link = tmp_path / "linked-venv"
  link.symlink_to("elsewhere")  # a chain of links, the second one relative
  python = str(link / "bin" / os.path.basename(sys.executable))
  program = (
    "import sys\nimport numpy\ndef where():\n  return [sys.executable, int(numpy.int64(2))]\n"
  )
  tests = {"kind": "call", "entry_point": "where", "cases": [{"args": [], "expected": [python, 2]}]}
  with ExecutionPool(workers=1, python=python) as pool:
    result = pool.execute([Job(program, tests, Limits(timeout_s=60))])[0]
  assert result.passed, result
