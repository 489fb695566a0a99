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

from precisecoder.data import sources
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
    return {"records": self.records, "loaded": len(self.tasks),
            "missing_tests": len(self.missing_tests), "duplicates": len(self.duplicates),
            "malformed": len(self.malformed), "source_errors": len(self.source_errors)}


def load_pdb(path: str | os.PathLike[str], *, bigcodebench: str | os.PathLike[str] | None = None,
             livecodebench: str | os.PathLike[str] | None = None) -> LoadReport:
  """PDB records from `path` (parquet, JSON or JSON Lines; file or folder) with tests joined."""
  index: dict[str, dict[str, Any]] = {}
  source_errors: list[str] = []
  for folder, read in ((bigcodebench, sources.bigcodebench_tests),
                       (livecodebench, sources.livecodebench_tests)):
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


def failing_gold(tasks: Sequence[Task], checker: Checker) -> list[str]:
  """Ids of tasks whose gold program fails its own tests."""
  verdicts = checker.passes([(t.gt_solution, t.tests) for t in tasks])
  return [t.task_id for t, ok in zip(tasks, verdicts) if not ok]
