"""Task records (DESIGN.md "Contract: task files").

OWNER NOTE (temporary, removed when parsing lands): the dataclass fields below are the
interface other modules code against; parsing/loading/gt_diff helpers are being added.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Task:
  task_id: str
  buggy_code: str
  gt_solution: str
  gt_diff: dict[str, dict[str, str]]  # PDB format, buggy->correct, buggy-line coordinates
  tests: dict[str, Any]  # one of the contract's test kinds
  prompt: str = ""
  timeout_s: float = 6.0
  is_buggy: bool = True
  bug_count: int = 1
  source_dataset: str = ""
  extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # passed-through fields
