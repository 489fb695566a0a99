"""Full verification of a task set: every property PDB's construction promises, re-run.

For every task: the gold program passes; its `gt_diff` turns the buggy
program into the gold one. For a buggy task in addition: the buggy program
fails; each bug is necessary (with every other block fixed, the program still
fails); each multi-line block is atomic (no proper subset of its lines, with
the other blocks fixed, passes).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from precisecoder import edits
from precisecoder.data import environments, injection
from precisecoder.data.checking import Checker
from precisecoder.tasks import Task, apply_gt_diff


@dataclasses.dataclass
class VerificationReport:
  tasks: int = 0
  checks: int = 0
  failures: list[str] = dataclasses.field(default_factory=list)  # "task_id: what failed"

  @property
  def ok(self) -> bool:
    return not self.failures

  def summary(self) -> dict[str, int]:
    return {"tasks": self.tasks, "checks": self.checks, "failures": len(self.failures)}


def _normalized(code: str) -> str:
  return edits.rstrip_lines(code).strip("\n")


def runs_for(task: Task) -> list[tuple[str, str, bool]]:
  """(what, program, should pass) for one task."""
  runs = [("gold passes", task.gt_solution, True)]
  if not task.is_buggy:
    return runs
  runs.append(("buggy fails", task.buggy_code, False))
  blocks = edits.parse_blocks(task.gt_diff)
  for i, block in enumerate(blocks):
    others = {k: v for k, v in task.gt_diff.items() if k not in block.edits}
    if len(blocks) > 1:
      runs.append((f"bug {i + 1} alone fails", edits.apply_diff(task.buggy_code, others), False))
    if len(block.edits) > 1:
      # Partial reverts in the coordinates of the program where only this block is buggy.
      only_this = edits.apply_diff(task.buggy_code, others)
      block_diff = edits.line_diff(only_this, task.gt_solution)
      for j, program in enumerate(injection.partial_reverts(only_this, block_diff)):
        runs.append((f"bug {i + 1} partial revert {j + 1} fails", program, False))
  return runs


def verify_tasks(
  tasks: Sequence[Task],
  checker: Checker,
  *,
  batch_size: int = 512,
  progress: Callable[[int], None] | None = None,
) -> VerificationReport:
  report = VerificationReport(tasks=len(tasks))
  plan = []
  for task in tasks:
    if task.is_buggy and _normalized(apply_gt_diff(task.buggy_code, task.gt_diff)) != _normalized(
      task.gt_solution
    ):
      report.failures.append(f"{task.task_id}: gt_diff does not turn buggy_code into gt_solution")
    if task.is_buggy and len(edits.parse_blocks(task.gt_diff)) != task.bug_count:
      report.failures.append(
        f"{task.task_id}: bug_count {task.bug_count} but "
        f"{len(edits.parse_blocks(task.gt_diff))} diff blocks"
      )
    plan += [(task, what, program, should) for what, program, should in runs_for(task)]
  for start in range(0, len(plan), batch_size):
    chunk = plan[start : start + batch_size]
    verdicts = checker.passes(
      [(program, task.tests) for task, _, program, _ in chunk],
      [environments.dataset_of(task.task_id, task.source_dataset) for task, _, _, _ in chunk],
    )
    for (task, what, _, should), passed in zip(chunk, verdicts):
      report.checks += 1
      if passed != should:
        report.failures.append(f"{task.task_id}: expected '{what}'")
    if progress is not None:
      progress(len(chunk))
  return report
