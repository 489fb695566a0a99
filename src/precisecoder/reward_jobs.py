"""The test jobs behind the reward: each distinct program executed once, references verified.

A scoring round asks for the verdicts of many programs: full programs, counterfactuals, ess
candidates (`rewards.RewardScorer`). `JobBatch` collects them and executes each distinct one once,
keyed by a hash of (compiled program, tests, limits) -- sources that compile to the same code are
one program (`execution.programs.identity`) -- and fails a program that does not compile without
a run. `Verdicts` remembers pass/fail across batches (bounded, LRU).

`ReferenceChecks` verifies references rather than assuming them: the first time a task's content
is seen, its reference fix must pass and its buggy program must fail, run in the same pool round
as the batch's own programs and remembered by a hash of the task's content. A broken task is
logged and counted, never credited; only a verified task's shortcuts apply (the reference fix
passes and the unchanged buggy program fails without a run).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import json
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

from absl import logging

from precisecoder import edits
from precisecoder.execution.shared.programs import identity as compiled_identity
from precisecoder.execution import ExecutionPool, Job, Limits, Result, Status
from precisecoder.tasks import Task

_T = TypeVar("_T")


class Pool(Protocol):
  def execute(self, jobs: Sequence[Job], deadline_s: float | None = None) -> list[Result]: ...


class Verdicts:
  """Pass/fail per job key, shared by every batch a scorer sees (bounded, LRU)."""

  def __init__(self, capacity: int):
    self._capacity = capacity
    self._passed: collections.OrderedDict[str, bool] = collections.OrderedDict()
    self.requested = 0  # program verdicts asked for
    self.executed = 0  # programs actually sent to the pool
    self.skipped = 0  # verdicts known without running (exact, vouched, no compile)
    # Why a failed run was cut short by one of our limits rather than judged (the output cap):
    # the score line's `error` says so. Only such runs are noted, so this stays small.
    self.notes: dict[str, str] = {}

  def get(self, key: str) -> bool | None:
    if key in self._passed:
      self._passed.move_to_end(key)
      return self._passed[key]
    return None

  def put(self, key: str, passed: bool) -> None:
    self._passed[key] = passed
    self._passed.move_to_end(key)
    while len(self._passed) > self._capacity:
      self._passed.popitem(last=False)


class Scheduler(Protocol):
  """What a `JobBatch` asks of the scorer it runs for."""

  pool: Pool
  deadline_s: float | None
  verdicts: Verdicts
  references: ReferenceChecks

  def limits_for(self, task: Task) -> Limits: ...

  def run_identity(self, program: str) -> str: ...


class JobBatch:
  """Collects the programs a round needs, runs each unique one once, answers verdicts."""

  def __init__(self, scorer: Scheduler):
    self._scorer = scorer
    self._jobs: dict[str, Job] = {}
    self._infra: dict[str, str] = {}
    self._failures: dict[str, str] = {}  # why a program run this batch did not pass
    self._compile_errors: dict[str, str] = {}
    self._specs: dict[int, str] = {}  # id(task) -> its (tests, limits) as JSON; tasks outlive us

  def job(self, program: str, task: Task) -> str:
    """Registers `program` under `task`'s tests; returns its verdict key.

    Programs run right-stripped, as PDB runs them, so a counterfactual that
    rebuilds the prediction itself shares its run.
    """
    program = edits.rstrip_lines(program)
    key = self._key(program, task)
    verdicts = self._scorer.verdicts
    verdicts.requested += 1
    if verdicts.get(key) is None and key not in self._jobs and not self._settle(key, program, task):
      self._jobs[key] = Job(program=program, tests=task.tests, limits=self._scorer.limits_for(task))
    return key

  def passing_key(self, program: str, task: Task) -> str | None:
    """`program`'s verdict key if it is already known to pass (nothing is registered)."""
    program = edits.rstrip_lines(program)
    key = self._key(program, task)
    if self._scorer.verdicts.get(key) is None and key not in self._jobs:
      self._settle(key, program, task)
    if self._scorer.verdicts.get(key):
      self._scorer.verdicts.requested += 1
      return key
    return None

  def _key(self, program: str, task: Task) -> str:
    spec = self._specs.get(id(task))
    if spec is None:
      spec = self._specs[id(task)] = _spec_json(task.tests, self._scorer.limits_for(task))
    return _verdict_key(self._scorer.run_identity(program), spec)

  def _settle(self, key: str, program: str, task: Task) -> bool:
    """Records a verdict known without a run (no compile, or vouched for by a verified
    task); False if `program` must run."""
    problem = compiled_identity(program)[1]
    known = None if problem else self._scorer.references.known_verdict(program, task)
    if known is None and problem is None:
      return False
    self._scorer.verdicts.put(key, bool(known))
    self._scorer.verdicts.skipped += 1
    if problem is not None:
      self._compile_errors[key] = problem
    return True

  def compile_error(self, key: str) -> str | None:
    """Why the program under `key` was failed without a run, if it was this batch."""
    return self._compile_errors.get(key)

  def execute(self, while_running: Callable[[], _T] | None = None) -> _T | None:
    """Runs every program registered; returns what `while_running` returned.

    `while_running` may register more programs. An `ExecutionPool` starts the ones registered
    before it first and calls it while they run; with another pool it is called before the run.
    """
    first = list(self._jobs.values())
    outcome = None

    def register_more() -> list[Job]:
      nonlocal outcome
      outcome = while_running()
      return list(self._jobs.values())[len(first) :]

    pool, deadline_s = self._scorer.pool, self._scorer.deadline_s
    if while_running is not None and first and isinstance(pool, ExecutionPool):
      results = pool.execute(first, deadline_s=deadline_s, more=register_more)
    else:
      if while_running is not None:
        register_more()
      results = pool.execute(list(self._jobs.values()), deadline_s=deadline_s) if self._jobs else []
    keys, jobs = list(self._jobs), list(self._jobs.values())
    if len(results) != len(jobs):
      raise RuntimeError(f"pool returned {len(results)} results for {len(jobs)} jobs")
    self._scorer.verdicts.executed += len(jobs)
    for key, job, result in zip(keys, jobs, results):
      if result.status is Status.INFRA_ERROR:
        self._infra[key] = result.detail or "execution pool failed"
      else:
        self._scorer.verdicts.put(key, result.passed)
        if not result.passed:
          self._failures[key] = f"{result.status.value}: {result.detail}".rstrip(": ")
        if _output_cap_hit(result, job.limits):
          self._scorer.verdicts.notes[key] = result.detail
    self._jobs = {}
    return outcome

  def passed(self, key: str) -> bool:
    verdict = self._scorer.verdicts.get(key)
    return bool(verdict)  # infra errors (never cached) count as failures

  def infra_error(self, key: str) -> str | None:
    return self._infra.get(key)

  def failure(self, key: str) -> str:
    """Why the program under `key` failed, as far as this batch knows."""
    return self._compile_errors.get(key) or self._failures.get(key) or "fails its tests"


def _output_cap_hit(result: Result, limits: Limits) -> bool:
  """Whether the pool stopped the run because it printed more than the output cap."""
  return result.status is Status.FAIL and result.detail.endswith(
    f"exceeded {limits.max_output_bytes} bytes"
  )


def _spec_json(tests: Mapping[str, Any], limits: Limits) -> str:
  return json.dumps(
    [tests, _limits_dict(limits)], sort_keys=True, separators=(",", ":"), default=repr
  )


@functools.lru_cache(maxsize=64)
def _limits_dict(limits: Limits) -> dict[str, Any]:
  """`dataclasses.asdict(limits)`, once per distinct Limits (a batch shares a handful): asdict
  deep-copies every field, most of a spec key's cost. Callers must not mutate it."""
  return dataclasses.asdict(limits)


def _verdict_key(program: str, spec_json: str) -> str:
  """Hash of (program's run identity, tests and limits): equal keys, equal verdicts."""
  payload = json.dumps(program) + spec_json
  return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


class ReferenceChecks:
  """Whether each task content is sound: its reference fix passes, its buggy program fails.

  `problems`: task content hash -> None once verified, else why the task is broken;
  `broken_tasks`: task_id -> why, for every broken task seen.
  """

  def __init__(self, limits_for: Callable[[Task], Limits], run_identity: Callable[[str], str]):
    self._limits_for = limits_for
    self._run_identity = run_identity
    self.problems: dict[str, str | None] = {}
    self.broken_tasks: dict[str, str] = {}
    self._task_keys: dict[int, tuple[Task, str]] = {}  # id -> (task, content hash); holds the task

  def task_key(self, task: Task) -> str:
    """Hash of everything that decides whether `task` is sound (cached per task object)."""
    cached = self._task_keys.get(id(task))
    if cached is not None and cached[0] is task:
      return cached[1]
    payload = json.dumps([task.gt_solution, task.buggy_code, task.is_buggy]) + _spec_json(
      task.tests, self._limits_for(task)
    )
    key = hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
    if len(self._task_keys) >= 65_536:  # RL makes new task objects every step
      self._task_keys.clear()
    self._task_keys[id(task)] = (task, key)
    return key

  def task_problem(self, task: Task) -> str | None:
    """Why a checked task is broken; None if it is verified (or not checked yet)."""
    return self.problems.get(self.task_key(task))

  def _verified(self, task: Task) -> bool:
    key = self.task_key(task)
    return key in self.problems and self.problems[key] is None

  def known_verdict(self, program: str, task: Task) -> bool | None:
    """The verdict a verified task vouches for: its reference fix passes, its buggy
    program fails. `program` is right-stripped."""
    if not self._verified(task):
      return None
    identity = self._run_identity(program)
    if identity == self._run_identity(edits.rstrip_lines(task.gt_solution)):
      return True
    if task.is_buggy and identity == self._run_identity(edits.rstrip_lines(task.buggy_code)):
      return False
    return None

  def register(
    self, tasks: Sequence[Task], task_keys: dict[int, str], batch: JobBatch
  ) -> dict[str, tuple[Task, str, str | None]]:
    """Registers the reference and buggy runs of every task content not yet checked."""
    checks: dict[str, tuple[Task, str, str | None]] = {}
    for task in tasks:
      key = task_keys.get(id(task))
      if key is None or key in self.problems or key in checks:
        continue
      gold = batch.job(task.gt_solution, task)
      buggy = batch.job(task.buggy_code, task) if task.is_buggy else None
      checks[key] = (task, gold, buggy)
    return checks

  def settle(self, checks: dict[str, tuple[Task, str, str | None]], batch: JobBatch) -> None:
    """Records what the batch's runs of `register`ed references showed."""
    for key, (task, gold, buggy) in checks.items():
      infra = batch.infra_error(gold) or (buggy and batch.infra_error(buggy))
      if infra:
        continue  # not remembered: checked again with the next batch
      problem = None
      if not batch.passed(gold):
        problem = f"its reference fix (gt_solution) fails: {batch.failure(gold)}"[:500]
      elif buggy is not None and batch.passed(buggy):
        problem = "its buggy program passes the tests: the tests cannot see the bug"
      self.problems[key] = problem
      if problem is not None:
        self.broken_tasks.setdefault(task.task_id, problem)
        logging.warning(
          "broken task %s: %s (its rows score 0 with this reason as their error)",
          task.task_id,
          problem,
        )
