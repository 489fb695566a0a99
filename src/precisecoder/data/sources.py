"""Tests from local copies of PDB's source benchmarks: BigCodeBench and LiveCodeBench.

* BigCodeBench records (JSON, JSON Lines or parquet; or, as PDB's
  `dataset/bigcodebench/data/*.json` hold them, one JSON object keyed by task id)
  carry a `unittest` `test` field -> `{"kind": "unittest", "code": test}`, and
  their gold program is `code_prompt + "\n" + canonical_solution` (as PDB builds it).
* LiveCodeBench `code_generation_lite` records carry `public_test_cases` (JSON
  text) and `private_test_cases` (JSON text, or base64 of zlib of a pickled JSON
  string); `testtype` "stdin" -> `io` cases, "functional" -> `call` cases on
  `Solution().<metadata.func_name>` with one JSON argument per input line.

The pickled payload is decoded by an unpickler that refuses every global, so
it can only ever produce plain strings, numbers and containers.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import pickle
import zlib
from typing import Any, Iterator, Mapping

from precisecoder import tasks


class SourceError(ValueError):
  """A source-benchmark record that cannot be turned into tests (names file and record)."""


def read_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, Any]]]:
  """(where, record) from a .json (array), .jsonl or .parquet file, or a folder of them."""
  path = pathlib.Path(path)
  if path.is_dir():
    found = sorted(
      p for p in path.rglob("*") if p.suffix in (".json", ".jsonl", ".parquet") and p.is_file()
    )
    if not found:
      raise SourceError(f"{path}: no .json, .jsonl or .parquet files")
    for p in found:
      yield from read_records(p)
    return
  if path.suffix == ".parquet":
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel

    try:
      rows = pq.read_table(path).to_pylist()
    except Exception as e:  # pylint: disable=broad-except  # pyarrow raises many kinds
      raise SourceError(f"{path}: cannot read parquet ({e})") from None
    for i, row in enumerate(rows):
      yield f"{path}[row {i}]", row
    return
  keyed = _keyed_records(path)
  if keyed is not None:
    yield from keyed
    return
  try:
    yield from tasks.iter_records(path)  # JSON array or JSON Lines, with file:line errors
  except tasks.TaskError as e:
    raise SourceError(str(e)) from None


def _keyed_records(path: pathlib.Path) -> list[tuple[str, dict[str, Any]]] | None:
  """The records of a .json file that is one object of records keyed by id (PDB's BigCodeBench
  data files), or None for any other file (left to `tasks.iter_records`)."""
  if path.suffix != ".json":
    return None
  try:
    with path.open(encoding="utf-8") as f:
      if f.read(64).lstrip()[:1] != "{":
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
  except (OSError, UnicodeDecodeError, json.JSONDecodeError):
    return None  # iter_records says what is wrong with it
  if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
    return None
  return [(f"{path}[{key!r}]", record) for key, record in data.items()]


# ---------------------------------------------------------------------------
# BigCodeBench
# ---------------------------------------------------------------------------


TestIndex = tuple[dict[str, dict[str, Any]], list[str]]  # (id -> tests, unusable records)


def bigcodebench_tests(path: str | os.PathLike[str]) -> TestIndex:
  """task_id ("BigCodeBench/13") -> unittest tests, from a local BigCodeBench copy."""
  out, errors = {}, []
  for where, record in read_records(path):
    task_id, test = record.get("task_id"), record.get("test")
    if not isinstance(task_id, str) or not isinstance(test, str) or not test.strip():
      errors.append(f"{where}: a BigCodeBench record needs string fields 'task_id' and 'test'")
      continue
    out[task_id] = {"kind": "unittest", "code": test}
  return out, errors


def bigcodebench_gold(record: Mapping[str, Any]) -> str | None:
  """A BigCodeBench record's gold program, as PDB builds it; None without its two fields."""
  prompt, solution = record.get("code_prompt"), record.get("canonical_solution")
  if not isinstance(prompt, str) or not isinstance(solution, str) or not solution.strip():
    return None
  return prompt + "\n" + solution


# ---------------------------------------------------------------------------
# LiveCodeBench
# ---------------------------------------------------------------------------


class _NoGlobalsUnpickler(pickle.Unpickler):
  """Unpickles plain data only: any class or function reference is refused."""

  def find_class(self, module: str, name: str) -> Any:
    raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a test-case payload")


def decode_test_cases(text: str, where: str) -> list[dict[str, Any]]:
  """LiveCodeBench test cases: JSON text, or base64(zlib(pickle(JSON text)))."""
  if not text:
    return []
  try:
    cases = json.loads(text)
  except json.JSONDecodeError:
    try:
      raw = zlib.decompress(base64.b64decode(text.encode("utf-8"), validate=True))
      payload = _NoGlobalsUnpickler(io.BytesIO(raw)).load()
      cases = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
    except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as e:
      raise SourceError(
        f"{where}: test cases are neither JSON nor base64+zlib+pickle ({type(e).__name__}: {e})"
      ) from None
  if not isinstance(cases, list) or not all(isinstance(c, Mapping) for c in cases):
    raise SourceError(f"{where}: test cases must be a list of objects")
  return cases


def _json_field(record: Mapping[str, Any], field: str, where: str) -> Any:
  value = record.get(field)
  if isinstance(value, str):
    try:
      return json.loads(value) if value.strip() else {}
    except json.JSONDecodeError as e:
      raise SourceError(f"{where}: field {field!r} is not JSON ({e.msg})") from None
  return value if value is not None else {}


def livecodebench_record_tests(record: Mapping[str, Any], where: str) -> dict[str, Any]:
  """Contract tests (io or call) of one code_generation_lite record."""
  cases = decode_test_cases(
    record.get("public_test_cases") or "", f"{where}.public_test_cases"
  ) + decode_test_cases(record.get("private_test_cases") or "", f"{where}.private_test_cases")
  if not cases:
    raise SourceError(f"{where}: no test cases")
  kinds = {c.get("testtype") for c in cases}
  if kinds == {"stdin"}:
    return {
      "kind": "io",
      "cases": [
        {"stdin": str(c.get("input", "")), "stdout": str(c.get("output", ""))} for c in cases
      ],
    }
  if kinds == {"functional"}:
    metadata = _json_field(record, "metadata", where)
    func_name = metadata.get("func_name") if isinstance(metadata, Mapping) else None
    if not func_name:
      raise SourceError(f"{where}: functional tests need metadata.func_name")
    call_cases = []
    for i, c in enumerate(cases):
      try:
        args = [json.loads(line) for line in str(c.get("input", "")).split("\n") if line.strip()]
        expected = json.loads(c.get("output", ""))
      except json.JSONDecodeError as e:
        raise SourceError(f"{where}: functional case {i} is not JSON ({e.msg})") from None
      call_cases.append({"args": args, "expected": expected})
    return {"kind": "call", "entry_point": f"Solution().{func_name}", "cases": call_cases}
  raise SourceError(f"{where}: unsupported or mixed testtype {sorted(map(str, kinds))}")


def livecodebench_tests(path: str | os.PathLike[str]) -> TestIndex:
  """question_id -> contract tests, from a local code_generation_lite copy."""
  out, errors = {}, []
  for where, record in read_records(path):
    qid = record.get("question_id")
    if not isinstance(qid, str) or not qid:
      errors.append(f"{where}: a LiveCodeBench record needs a string 'question_id'")
      continue
    try:
      out[qid] = livecodebench_record_tests(record, where)
    except SourceError as e:
      errors.append(str(e))
  return out, errors
