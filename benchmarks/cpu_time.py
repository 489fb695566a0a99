"""CPU seconds of processes, from /proc: what a benchmark compares on a shared machine, where
wall time follows the load."""

from __future__ import annotations

import os
import pathlib

_TICK = os.sysconf("SC_CLK_TCK")


def _times(pid: int) -> list[int]:
  """utime, stime, cutime, cstime of `pid`, in clock ticks."""
  with open(f"/proc/{pid}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
  return [int(x) for x in fields[11:15]]


def tree_cpu(pid: int) -> float:
  """CPU seconds of `pid` and its live descendants, each with the children it has reaped."""
  try:
    total = sum(_times(pid)) / _TICK
    children = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
      children += (task / "children").read_text().split()
  except (FileNotFoundError, ProcessLookupError):
    return 0.0
  return total + sum(tree_cpu(int(child)) for child in children)


def own_cpu(pid: int) -> float:
  """CPU seconds of `pid` itself (all its threads), without its children."""
  utime, stime, _, _ = _times(pid)
  return (utime + stime) / _TICK
