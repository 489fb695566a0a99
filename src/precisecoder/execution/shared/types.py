"""Job and result types of the sandboxed execution pool.

These are the pool's public contract: rewards, data building and evaluation
submit `Job`s and read `Result`s; nothing else about the pool leaks out.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
from typing import Any, Mapping


@dataclasses.dataclass(frozen=True)
class Limits:
  """Resource limits for one program run (all enforced outside the program)."""

  timeout_s: float = 6.0  # wall clock, enforced by the parent with SIGKILL
  cpu_s: float | None = None  # RLIMIT_CPU; defaults to ceil(timeout_s) + 1
  memory_mb: int = 1024  # RLIMIT_AS
  max_output_bytes: int = 1 << 20  # stdout/stderr capture cap (each)
  max_file_bytes: int = 16 << 20  # RLIMIT_FSIZE
  max_processes: int = 64  # RLIMIT_NPROC (inside the run's own namespace)
  max_open_files: int = 256  # RLIMIT_NOFILE


class Status(str, enum.Enum):
  PASS = "pass"  # every test ran and the parent judged every output correct
  FAIL = "fail"  # ran to completion (or crashed in the program) with a wrong answer
  TIMEOUT = "timeout"  # wall-clock or CPU limit hit
  MEMORY = "memory"  # address-space limit hit (MemoryError / killed)
  CRASH = "crash"  # the program's process died abnormally (signal, bad exit, no verdict)
  INFRA_ERROR = "infra_error"  # the pool failed twice on this job: not the program's fault


@dataclasses.dataclass(frozen=True)
class Job:
  """One program to run against one test spec (DESIGN.md "Test kinds")."""

  program: str
  tests: Mapping[str, Any]
  limits: Limits = Limits()

  def key(self) -> str:
    """Content hash of (program, tests, limits): equal keys give equal verdicts."""
    payload = json.dumps(
      [self.program, self.tests, _as_dict(self.limits)],
      sort_keys=True,
      separators=(",", ":"),
      default=repr,
    )
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


@dataclasses.dataclass(frozen=True)
class Result:
  status: Status
  duration_s: float = 0.0
  detail: str = ""  # short human-readable reason (first failing case, signal, ...)
  stdout: str = ""  # captured, truncated at Limits.max_output_bytes
  stderr: str = ""
  # call: what the program returned for the failing case (JSON data), when it returned something
  # and it was wrong; None otherwise. For test feedback (feedback.py); verdicts never read it.
  got: Any = None

  @property
  def passed(self) -> bool:
    return self.status is Status.PASS


@functools.lru_cache(maxsize=64)
def _as_dict(limits: Limits) -> dict[str, Any]:
  """dataclasses.asdict, once per distinct Limits: a batch shares a handful (callers must not
  mutate)."""
  return dataclasses.asdict(limits)
