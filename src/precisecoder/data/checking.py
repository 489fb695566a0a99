"""Run programs against their tests: through the sandboxed pool, or in-process for our own code.

`PoolChecker` is the general path (any test kind, untrusted programs).
`TrustedCallChecker` runs `call`-kind tests in this process, under budgets of
lines and CPU seconds, and is only for programs this package wrote itself (the generator's
templates and their mutants): it computes expected values and screens
mutants in microseconds instead of a process round trip. Its verdict follows
the contract: every call's result must equal the expected value after a JSON
round trip.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from typing import Any, Mapping, Protocol, Sequence

from precisecoder.data import environments

Item = tuple[str, Mapping[str, Any]]  # (program, tests)
# CPU seconds one trusted call may take: our programs take milliseconds; a mutant that takes
# longer fails its tests however long it is given.
MAX_CPU_S = 2.0


class Checker(Protocol):
  def passes(self, items: Sequence[Item], task_sets: Sequence[str] | None = None) -> list[bool]:
    """Whether each program passes its tests (`task_sets`: where each item comes from, for
    advice on a missing environment; `environments.dataset_of`)."""


class PoolChecker:
  """Verdicts from an `ExecutionPool` (every test kind, sandboxed).

  `missing_modules` lists (task set, module) for every run that failed to import a module the
  pool's interpreter lacks (`environments.advice` turns them into advice).
  """

  def __init__(self, pool: Any, timeout_s: float = 6.0, memory_mb: int = 1024):
    from precisecoder.execution import Job, Limits  # imported late: the pool lands separately

    self._pool = pool
    self._job = Job
    self._limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    self.python = getattr(pool, "python", sys.executable)
    self.missing_modules: list[tuple[str, str]] = []

  def passes(self, items: Sequence[Item], task_sets: Sequence[str] | None = None) -> list[bool]:
    """`task_sets`: where each item comes from (`environments.dataset_of`), for the advice."""
    jobs = [
      self._job(program=program, tests=dict(tests), limits=self._limits) for program, tests in items
    ]
    results = self._pool.execute(jobs)
    for i, result in enumerate(results):
      module = None if result.passed else environments.missing_module(result.detail)
      if module is not None:
        self.missing_modules.append((task_sets[i] if task_sets else "", module))
    return [result.passed for result in results]


class _Budget(BaseException):  # not an Exception: `except Exception` in a program cannot swallow it
  """The traced program ran out of its line or CPU budget (an infinite loop, most likely)."""


def _json_round_trip(value: Any) -> Any:
  return json.loads(json.dumps(value))


def load_trusted(program: str, entry_point: str) -> Any:
  """The function `entry_point` (or `Solution().method`) of our own `program`."""
  namespace: dict[str, Any] = {"__name__": "__precisecoder_trusted__"}
  with warnings.catch_warnings():  # mutants like `x is 0` warn at compile time
    warnings.simplefilter("ignore", SyntaxWarning)
    code = compile(program, "<generated>", "exec")
  exec(code, namespace)  # pylint: disable=exec-used
  if entry_point.startswith("Solution()."):
    return getattr(namespace["Solution"](), entry_point.split(".", 1)[1])
  return namespace[entry_point]


def call_trusted(
  target: Any,
  args: Sequence[Any],
  kwargs: Mapping[str, Any] | None = None,
  max_lines: int = 200_000,
  max_cpu_s: float = MAX_CPU_S,
) -> Any:
  """Calls `target` on JSON copies of the arguments, under a budget of traced lines and of
  CPU seconds: a mutant that keeps squaring a number runs few lines, each slower than the last
  (a loop that appends to the list it walks, `xs.append(x * x)`, never ends and its numbers
  double in length each round)."""
  budget = [max_lines]
  deadline = time.process_time() + max_cpu_s

  def tracer(frame, event, arg):  # pylint: disable=unused-argument
    if event == "line":
      budget[0] -= 1
      if budget[0] < 0 or time.process_time() > deadline:
        raise _Budget()
    return tracer

  previous = sys.gettrace()
  sys.settrace(tracer)
  try:
    return target(*_json_round_trip(list(args)), **_json_round_trip(dict(kwargs or {})))
  finally:
    sys.settrace(previous)


class TrustedCallChecker:
  """In-process verdicts for `call` tests of programs this package generated."""

  def __init__(self, max_lines: int = 200_000, max_cpu_s: float = MAX_CPU_S):
    self._max_lines = max_lines
    self._max_cpu_s = max_cpu_s

  def passes_one(self, program: str, tests: Mapping[str, Any]) -> bool:
    if tests.get("kind") != "call":
      raise ValueError(f"TrustedCallChecker runs only 'call' tests, got {tests.get('kind')!r}")
    try:
      target = load_trusted(program, tests["entry_point"])
      for case in tests["cases"]:
        got = call_trusted(
          target, case.get("args", []), case.get("kwargs"), self._max_lines, self._max_cpu_s
        )
        if _json_round_trip(got) != case["expected"]:
          return False
    except (Exception, _Budget):  # pylint: disable=broad-except  # any error fails the tests
      return False
    return True

  def passes(self, items: Sequence[Item], task_sets: Sequence[str] | None = None) -> list[bool]:
    del task_sets  # our own programs import nothing the trainer lacks
    return [self.passes_one(program, tests) for program, tests in items]
