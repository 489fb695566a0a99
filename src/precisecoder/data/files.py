"""Task files: contract JSON Lines, plain or gzip-compressed."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
from typing import Iterable

from precisecoder import tasks as tasks_lib
from precisecoder.tasks import Task, TaskError


def read_tasks(path: str | os.PathLike[str]) -> list[Task]:
  """Tasks of a .jsonl or .jsonl.gz file; a bad record raises `TaskError` naming file:line."""
  path = pathlib.Path(path)
  if not path.name.endswith(".gz"):
    return tasks_lib.load_tasks(path)
  out, seen = [], {}
  with gzip.open(path, "rt", encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise TaskError(f"{path}:{n}: invalid JSON ({e.msg}, column {e.colno})") from None
      task = tasks_lib.parse_task(record, f"{path}:{n}")
      if task.task_id in seen:
        raise TaskError(f"{path}:{n}: duplicate task_id {task.task_id!r} (first at line "
                        f"{seen[task.task_id]})")
      seen[task.task_id] = n
      out.append(task)
  return out


def write_tasks(path: str | os.PathLike[str], tasks: Iterable[Task]) -> int:
  """Writes tasks as contract JSON Lines (.gz compresses, reproducibly: no timestamp)."""
  path = pathlib.Path(path)
  if not path.name.endswith(".gz"):
    return tasks_lib.write_tasks(path, tasks)
  path.parent.mkdir(parents=True, exist_ok=True)
  lines = [json.dumps(tasks_lib.task_to_record(t), ensure_ascii=False) + "\n" for t in tasks]
  tmp = path.with_name(path.name + ".tmp")
  with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
    f.write("".join(lines).encode("utf-8"))
  os.replace(tmp, path)
  return len(lines)
