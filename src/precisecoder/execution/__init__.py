"""Sandboxed execution pool: run untrusted programs against tests, judge them here.

  from precisecoder.execution import ExecutionPool, Job, Limits, Result, Status
  with ExecutionPool(workers=2) as pool:
    results = pool.run([Job(program, {"kind": "call", ...}, Limits(timeout_s=2))])

Layout: `pool` (batches, chunked dispatch, worker replacement, statistics),
`worker` (a warm interpreter per worker that forks one child per run),
`sandbox` (namespaces, rlimits, uid drop), `harness` (runs inside the child),
`judge` (expected values and verdicts, never leave this process), `protocol`
(framed JSON between pool and workers).

Threat model (see the end of this docstring).
"""

from precisecoder.execution.pool import ExecutionPool
from precisecoder.execution.types import Job, Limits, Result, Status

__all__ = ["ExecutionPool", "Job", "Limits", "Result", "Status"]
