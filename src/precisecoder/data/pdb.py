"""PDB task sets from local files, with tests joined from the source benchmarks.

PDB releases its splits (PDB-Single, PDB-Single-Full, PDB-Wild) as parquet or
JSON records without tests; a task's tests come from its source benchmark,
found by the task id with PDB's `_<n>` variant suffix stripped
("BigCodeBench/13_2" -> "BigCodeBench/13", "abc301_a_0" -> "abc301_a").

Nothing is dropped silently: records without tests, duplicate ids and
malformed records are counted and named in the `LoadReport`; gold programs
that fail their tests are found by `failing_gold` (it runs them in the pool).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Mapping, Sequence

from precisecoder.data import environments, sources
from precisecoder.data.checking import Checker
from precisecoder.tasks import Task, TaskError, parse_task

_VARIANT = re.compile(r"_\d+$")


def base_id(task_id: str) -> str:
  """The source benchmark's id of a PDB task id (its `_<n>` suffix stripped)."""
  return _VARIANT.sub("", task_id)


@dataclasses.dataclass
class LoadReport:
  tasks: list[Task]
  records: int = 0
  missing_tests: list[str] = dataclasses.field(default_factory=list)
  duplicates: list[str] = dataclasses.field(default_factory=list)
  malformed: list[str] = dataclasses.field(default_factory=list)  # "where: reason"
  source_errors: list[str] = dataclasses.field(default_factory=list)

  def summary(self) -> dict[str, int]:
    return {
      "records": self.records,
      "loaded": len(self.tasks),
      "missing_tests": len(self.missing_tests),
      "duplicates": len(self.duplicates),
      "malformed": len(self.malformed),
      "source_errors": len(self.source_errors),
    }


def load_pdb(
  path: str | os.PathLike[str],
  *,
  bigcodebench: str | os.PathLike[str] | None = None,
  livecodebench: str | os.PathLike[str] | None = None,
) -> LoadReport:
  """PDB records from `path` (parquet, JSON or JSON Lines; file or folder) with tests joined."""
  index: dict[str, dict[str, Any]] = {}
  source_errors: list[str] = []
  for folder, read in (
    (bigcodebench, sources.bigcodebench_tests),
    (livecodebench, sources.livecodebench_tests),
  ):
    if folder is not None:
      tests, errors = read(folder)
      index.update(tests)
      source_errors += errors

  def tests_for(task_id: str, record: Mapping[str, Any]) -> dict[str, Any] | None:
    del record
    return index.get(base_id(task_id)) or index.get(task_id)

  report = LoadReport(tasks=[], source_errors=source_errors)
  seen: dict[str, str] = {}
  for where, record in sources.read_records(path):
    report.records += 1
    try:
      task = parse_task(record, where, tests_for=tests_for, require_tests=False)
    except TaskError as e:
      report.malformed.append(str(e))
      continue
    if task.task_id in seen:
      report.duplicates.append(f"{task.task_id} ({where}; first at {seen[task.task_id]})")
      continue
    seen[task.task_id] = where
    if not task.tests:
      report.missing_tests.append(task.task_id)
      continue
    report.tasks.append(task)
  return report


def bigcodebench_clean_tasks(
  paths: Sequence[str | os.PathLike[str]], *, timeout_s: float = 20.0
) -> LoadReport:
  """Clean tasks from BigCodeBench records (files or folders): each gold program as both
  buggy_code and gt_solution (`is_buggy` false), with its unittest tests. A task id seen twice
  (PDB's files repeat some) is kept once if the records agree, else reported as a duplicate."""
  report = LoadReport(tasks=[])
  index: dict[str, dict[str, Any]] = {}
  for path in paths:
    tests, errors = sources.bigcodebench_tests(path)
    index.update(tests)
    report.source_errors += errors
  seen: dict[str, tuple[str, str]] = {}
  for where, record in (item for path in paths for item in sources.read_records(path)):
    report.records += 1
    task_id, gold = record.get("task_id"), sources.bigcodebench_gold(record)
    if not isinstance(task_id, str) or gold is None:
      report.malformed.append(
        f"{where}: a BigCodeBench record needs 'task_id', 'code_prompt' and 'canonical_solution'"
      )
      continue
    if task_id in seen:
      if seen[task_id][1] != gold:
        report.duplicates.append(f"{task_id} ({where}; first at {seen[task_id][0]})")
      continue
    seen[task_id] = (where, gold)
    if task_id not in index:
      report.missing_tests.append(task_id)
      continue
    try:
      report.tasks.append(
        parse_task(
          {
            "task_id": task_id,
            "buggy_code": gold,
            "gt_solution": gold,
            "is_buggy": False,
            "tests": index[task_id],
            "timeout_s": timeout_s,
            "source_dataset": "bigcodebench",
          },
          where,
        )
      )
    except TaskError as e:
      report.malformed.append(str(e))
  return report


def failing_gold(tasks: Sequence[Task], checker: Checker) -> list[str]:
  """Ids of tasks whose gold program fails its own tests."""
  verdicts = checker.passes(
    [(t.gt_solution, t.tests) for t in tasks],
    [environments.dataset_of(t.task_id, t.source_dataset) for t in tasks],
  )
  return [t.task_id for t, ok in zip(tasks, verdicts) if not ok]
