"""Task records: parsing, writing, and `gt_diff` <-> programs (DESIGN.md "Contract: task files").

Two inputs load into the same `Task`:
* contract records (JSON Lines, one task per line; extra fields pass through);
* raw PDB records (a JSON array or JSON Lines) whose values are Python-literal
  strings ("'BigCodeBench/13_0'", "5", "True", a `gt_diff` dict as text).
  PDB records carry no tests; pass `tests_for` to join them from their source.
"""

from __future__ import annotations

import ast
import dataclasses
import gzip
import json
import math
import os
import pathlib
import re
import zlib
from typing import Any, Callable, Iterable, Iterator, Mapping

from precisecoder import edits
from precisecoder.execution.parent import specs


# Contract field name -> PDB field names that may carry it.
_ALIASES = {"prompt": ("prompt", "task_prompt")}
_KNOWN = {
  "task_id",
  "buggy_code",
  "gt_solution",
  "gt_diff",
  "tests",
  "prompt",
  "task_prompt",
  "timeout_s",
  "is_buggy",
  "bug_count",
  "source_dataset",
}


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


class TaskError(ValueError):
  """A task record that cannot be used; the message names file, line and field."""


# ---------------------------------------------------------------------------
# gt_diff <-> programs
# ---------------------------------------------------------------------------


def derive_gt_diff(buggy: str, fixed: str) -> dict[str, dict[str, str]]:
  """The PDB-format diff that turns `buggy` into `fixed` (buggy-line coordinates)."""
  return edits.line_diff(buggy, fixed)


def apply_gt_diff(buggy: str, gt_diff: Mapping[str, Mapping[str, str]]) -> str:
  """`buggy` with `gt_diff` applied (lines right-stripped, no trailing newline)."""
  return edits.apply_diff(buggy, edits.validate_diff(gt_diff, "gt_diff"))


def _code_lines(code: str) -> list[str]:
  """Lines as the diff sees them: right-stripped, blank lines ignored."""
  return [line.rstrip() for line in code.splitlines() if line.strip()]


def gt_diff_mismatch(
  buggy: str, fixed: str, gt_diff: Mapping[str, Mapping[str, str]]
) -> str | None:
  """None if applying `gt_diff` to `buggy` gives `fixed`, else the first differing line."""
  got = _code_lines(edits.apply_diff(buggy, gt_diff))
  want = _code_lines(fixed)
  for i, (g, w) in enumerate(zip(got, want)):
    if g != w:
      return f"non-blank line {i + 1}: gt_diff gives {g!r}, gt_solution has {w!r}"
  if len(got) != len(want):
    return f"gt_diff gives {len(got)} non-blank lines, gt_solution has {len(want)}"
  return None


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------


def _is_raw_pdb(record: Mapping[str, Any]) -> bool:
  return (
    isinstance(record.get("is_buggy"), str)
    or isinstance(record.get("bug_count"), str)
    or ("task_prompt" in record and "prompt" not in record)
  )


def _literal(value: Any) -> Any:
  """A raw PDB value decoded from its Python-literal text; other text stays as is."""
  if not isinstance(value, str):
    return value
  try:
    return ast.literal_eval(value)
  except (ValueError, SyntaxError, MemoryError, RecursionError):
    return value


def _text(
  record: Mapping[str, Any], field: str, where: str, raw: bool, required: bool = True
) -> str:
  names = _ALIASES.get(field, (field,))
  present = [n for n in names if n in record]
  if not present:
    if required:
      raise TaskError(f"{where}: missing field {field!r}")
    return ""
  value = record[present[0]]
  if raw:
    decoded = _literal(value)
    value = decoded if isinstance(decoded, str) else value
  if not isinstance(value, str):
    raise TaskError(f"{where}: field {present[0]!r} must be a string, got {type(value).__name__}")
  return value


def _boolean(value: Any, where: str, field: str) -> bool:
  if isinstance(value, str):
    value = {"true": True, "false": False}.get(value.strip().lower(), value)
  if not isinstance(value, bool):
    raise TaskError(f"{where}: field {field!r} must be a boolean, got {value!r}")
  return value


def _number(value: Any, where: str, field: str, kind: type) -> Any:
  if isinstance(value, str):
    value = _literal(value.strip())
  if (
    isinstance(value, bool)
    or not isinstance(value, (int, float))
    or not math.isfinite(value)
    or (kind is int and value != int(value))
  ):
    raise TaskError(f"{where}: field {field!r} must be a {kind.__name__}, got {value!r}")
  if value < 0:
    raise TaskError(f"{where}: field {field!r} must not be negative, got {value!r}")
  return kind(value)


def _parse_gt_diff(value: Any, where: str) -> dict[str, dict[str, str]]:
  if isinstance(value, str):
    text = value
    try:
      value = json.loads(text)
    except json.JSONDecodeError:
      value = _literal(text)
      if isinstance(value, str):
        raise TaskError(f"{where}: field 'gt_diff' is neither JSON nor a Python literal") from None
  try:
    return edits.validate_diff(value, f"{where}: field 'gt_diff'")
  except ValueError as e:
    raise TaskError(str(e)) from None


def validate_tests(tests: Any, where: str) -> dict[str, Any]:
  """A copy of `tests` once it meets the contract's test kinds.

  The check is the pool's own, specs.validate.
  """
  try:
    specs.validate(tests)
  except specs.InvalidTests as e:
    raise TaskError(f"{where}: {e}") from None
  return dict(tests)


TestsFor = Callable[[str, Mapping[str, Any]], "dict[str, Any] | None"]


def parse_task(
  record: Mapping[str, Any],
  where: str,
  *,
  tests_for: TestsFor | None = None,
  require_tests: bool = True,
) -> Task:
  """A `Task` from a contract or raw PDB record; `where` ("file:line") prefixes errors.

  `tests_for(task_id, record)` supplies tests for records that have none (PDB);
  with `require_tests=False` such records load with `tests == {}`.
  """
  if not isinstance(record, Mapping):
    raise TaskError(f"{where}: expected a JSON object, got {type(record).__name__}")
  raw = _is_raw_pdb(record)
  task_id = _text(record, "task_id", where, raw)
  if not task_id:
    raise TaskError(f"{where}: field 'task_id' is empty")
  where = f"{where} ({task_id})"
  buggy = _text(record, "buggy_code", where, raw)
  if not buggy.strip():
    raise TaskError(f"{where}: field 'buggy_code' is empty")
  fixed = _text(record, "gt_solution", where, raw)
  prompt = _text(record, "prompt", where, raw, required=False)

  is_buggy = _boolean(record.get("is_buggy", True), where, "is_buggy")
  if "gt_diff" in record and record["gt_diff"] not in (None, ""):
    gt_diff = _parse_gt_diff(record["gt_diff"], where)
    problem = gt_diff_mismatch(buggy, fixed, gt_diff)
    if problem:
      raise TaskError(
        f"{where}: field 'gt_diff' disagrees with buggy_code -> gt_solution ({problem})"
      )
  else:
    gt_diff = derive_gt_diff(buggy, fixed)
  if is_buggy and not gt_diff:
    raise TaskError(f"{where}: is_buggy is true but buggy_code and gt_solution do not differ")
  if not is_buggy and gt_diff:
    raise TaskError(
      f"{where}: is_buggy is false but gt_diff is not empty (a clean task has "
      "buggy_code == gt_solution)"
    )
  default_count = len(edits.parse_blocks(gt_diff)) if is_buggy else 0
  bug_count = _number(record.get("bug_count", default_count), where, "bug_count", int)
  timeout_s = _number(record.get("timeout_s", 6.0), where, "timeout_s", float)
  if timeout_s <= 0:
    raise TaskError(f"{where}: field 'timeout_s' must be positive, got {timeout_s}")
  source = _text(record, "source_dataset", where, raw, required=False)

  tests = record.get("tests")
  if tests is None and tests_for is not None:
    tests = tests_for(task_id, record)
  if tests is None:
    if require_tests:
      raise TaskError(
        f"{where}: missing field 'tests' (raw PDB records need tests joined from "
        "their source benchmark)"
      )
    tests = {}
  else:
    tests = validate_tests(tests, where)

  extra = {k: (_literal(v) if raw else v) for k, v in record.items() if k not in _KNOWN}
  return Task(
    task_id=task_id,
    buggy_code=buggy,
    gt_solution=fixed,
    gt_diff=gt_diff,
    tests=tests,
    prompt=prompt,
    timeout_s=timeout_s,
    is_buggy=is_buggy,
    bug_count=bug_count,
    source_dataset=source,
    extra=extra,
  )


def task_to_record(task: Task) -> dict[str, Any]:
  """The contract JSON record of a task (extra fields first, contract fields win)."""
  record = dict(task.extra)
  record.update(
    task_id=task.task_id,
    prompt=task.prompt,
    buggy_code=task.buggy_code,
    gt_solution=task.gt_solution,
    gt_diff=task.gt_diff,
    tests=task.tests,
    timeout_s=task.timeout_s,
    is_buggy=task.is_buggy,
    bug_count=task.bug_count,
    source_dataset=task.source_dataset,
  )
  return record


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


def iter_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
  """(where, record) for every record of a JSON Lines or JSON array file, gzipped if .gz."""
  path = pathlib.Path(path)
  try:
    if path.name.endswith(".gz"):
      with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    else:
      text = path.read_text(encoding="utf-8")
  except OSError as e:  # includes gzip.BadGzipFile
    raise TaskError(f"{path}: cannot read ({e.strerror or e})") from None
  except EOFError:
    raise TaskError(
      f"{path}: truncated gzip file (it ends before its end-of-stream marker)"
    ) from None
  except zlib.error as e:
    raise TaskError(f"{path}: corrupt gzip data ({e})") from None
  except UnicodeDecodeError as e:
    raise TaskError(f"{path}: not UTF-8 text ({e})") from None
  if text.lstrip().startswith("["):
    try:
      records = json.loads(text)
    except json.JSONDecodeError as e:
      raise TaskError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(records, list):
      raise TaskError(f"{path}: expected a JSON array of records")
    escapes = _SURROGATE_ESCAPE.search(text) is not None
    for i, record in enumerate(records):
      if escapes:
        _check_unicode(record, f"{path}[{i}]")
      yield f"{path}[{i}]", record
    return
  for line_no, line in enumerate(text.splitlines(), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      raise TaskError(f"{path}:{line_no}: invalid JSON ({e.msg}, column {e.colno})") from None
    if _SURROGATE_ESCAPE.search(line):
      _check_unicode(record, f"{path}:{line_no}")
    yield f"{path}:{line_no}", record


# JSON may escape half of a UTF-16 pair ("\ud800") on its own: json.loads accepts it, but the
# string cannot be encoded again, so writing it (scores, task files) would fail much later.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _check_unicode(record: Any, where: str) -> None:
  field = _lone_surrogate(record, "")
  if field is not None:
    raise TaskError(
      f"{where}: field {field!r} holds a lone UTF-16 surrogate escape (\\ud800-"
      "\\udfff without its pair): not valid Unicode"
    )


def _lone_surrogate(value: Any, path: str) -> str | None:
  """The path of the first string (key or value) in `value` that is not valid Unicode."""
  if isinstance(value, str):
    try:
      value.encode("utf-8")
    except UnicodeEncodeError:
      return path or "(record)"
    return None
  if isinstance(value, dict):  # JSON keys are strings too
    named = [(f"{path}.{key}" if path else key, key, item) for key, item in value.items()]
  elif isinstance(value, list):
    named = [(f"{path}[{i}]", None, item) for i, item in enumerate(value)]
  else:
    return None
  for name, key, item in named:
    found = (_lone_surrogate(key, name) if key is not None else None) or _lone_surrogate(item, name)
    if found is not None:
      return found
  return None


def load_tasks(
  path: str | os.PathLike[str], *, tests_for: TestsFor | None = None, require_tests: bool = True
) -> list[Task]:
  """Every task of a task file; the first bad record raises a `TaskError` naming it, and so
  does a file without tasks (nothing can be meant by one)."""
  tasks, seen = [], {}
  for where, record in iter_records(path):
    task = parse_task(record, where, tests_for=tests_for, require_tests=require_tests)
    if task.task_id in seen:
      raise TaskError(
        f"{where}: duplicate task_id {task.task_id!r} (first at {seen[task.task_id]})"
      )
    seen[task.task_id] = where
    tasks.append(task)
  if not tasks:
    raise TaskError(f"{path}: no tasks (the file is empty)")
  return tasks


def write_tasks(path: str | os.PathLike[str], tasks: Iterable[Task]) -> int:
  """Writes contract JSON Lines atomically (gzipped if .gz); returns the number written."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp")
  lines = [json.dumps(task_to_record(task), ensure_ascii=False) + "\n" for task in tasks]
  data = "".join(lines).encode("utf-8")
  if path.name.endswith(".gz"):  # reproducible bytes: no timestamp or name in the header
    data = gzip.compress(data, mtime=0)
  tmp.write_bytes(data)
  os.replace(tmp, path)
  return len(lines)
