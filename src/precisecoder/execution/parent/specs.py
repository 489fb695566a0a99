"""The one check of a test spec against the contract's test kinds (DESIGN.md "Test kinds").

Task loading (`tasks.parse_task`) and the pool (`expectations.split`) both call
`validate`, so a spec a task file may hold is exactly a spec the pool runs.
It lives in the execution package, the lowest layer, so the pool needs
nothing above it; it imports only the standard library.
"""

from __future__ import annotations

import ast
import json
from typing import Any, Mapping

KINDS = ("unittest", "assert", "call", "io")


class InvalidTests(ValueError):
  """A test spec that breaks the contract; `field` is the path inside the spec ('' for itself)."""

  def __init__(self, field: str, reason: str):
    super().__init__(f"field 'tests'{field}: {reason}")
    self.field = field
    self.reason = reason


def _non_empty_string(tests: Mapping[str, Any], name: str, kind: str) -> str:
  value = tests.get(name)
  if not isinstance(value, str) or not value.strip():
    raise InvalidTests(f".{name}", f"a non-empty string is required for kind {kind!r}")
  return value


def _json_data(value: Any, field: str) -> None:
  try:
    json.dumps(value)
  except (TypeError, ValueError) as e:
    raise InvalidTests(field, f"not JSON data ({e})") from e


def _check_case(kind: str, case: Any, field: str) -> None:
  if not isinstance(case, Mapping):
    raise InvalidTests(field, f"must be an object, got {type(case).__name__}")
  needed = ("expected",) if kind == "call" else ("stdin", "stdout")
  for name in needed:
    if name not in case:
      raise InvalidTests(field, f"missing {name!r}")
  if kind == "io":
    for name in needed:
      if not isinstance(case[name], str):
        raise InvalidTests(f"{field}.{name}", f"must be a string, got {type(case[name]).__name__}")
    return
  args, kwargs = case.get("args", []), case.get("kwargs", {})
  if not isinstance(args, list):
    raise InvalidTests(f"{field}.args", f"must be a list, got {type(args).__name__}")
  if not isinstance(kwargs, Mapping):
    raise InvalidTests(f"{field}.kwargs", f"must be an object, got {type(kwargs).__name__}")
  for name, value in (("args", args), ("kwargs", dict(kwargs)), ("expected", case["expected"])):
    _json_data(value, f"{field}.{name}")


def validate(tests: Any) -> None:
  """Raises InvalidTests naming the first field of `tests` that breaks the contract.

  Unittest code must parse and define a test method (the verdict needs their
  names); assert code is not parsed here: a syntax error there is the
  child's failure to report.
  """
  if not isinstance(tests, Mapping):
    raise InvalidTests("", f"must be an object, got {type(tests).__name__}")
  kind = tests.get("kind")
  if kind not in KINDS:
    raise InvalidTests(".kind", f"{kind!r} is not one of {KINDS}")
  if kind in ("unittest", "assert"):
    code = _non_empty_string(tests, "code", kind)
    if kind == "unittest" and not test_names(code)[1]:
      raise InvalidTests(".code", "the unittest code defines no test methods")
    return
  if kind == "call":
    _non_empty_string(tests, "entry_point", kind)
  cases = tests.get("cases")
  if not isinstance(cases, list) or not cases:
    raise InvalidTests(".cases", f"a non-empty list is required for kind {kind!r}")
  for i, case in enumerate(cases):
    _check_case(kind, case, f".cases[{i}]")


def test_names(code: str) -> tuple[list[str], list[str]]:
  """The TestCase classes of `code` and every 'Class.test_x' unittest would run, from its AST."""
  try:
    tree = ast.parse(code)
  except SyntaxError as e:
    raise InvalidTests(".code", f"unittest code line {e.lineno}: {e.msg}") from e
  own: dict[str, tuple[list[str], set[str]]] = {}  # class -> (base names, test methods)
  for node in tree.body:
    if isinstance(node, ast.ClassDef):
      bases = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]
      methods = {
        item.name
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
        and item.name.startswith("test")
      }
      own[node.name] = (bases, methods)

  def is_test_case(name: str, seen: frozenset = frozenset()) -> bool:
    if name.endswith("TestCase") and name not in own:
      return True
    if name not in own or name in seen:
      return False
    return any(is_test_case(base, seen | {name}) for base in own[name][0])

  def methods(name: str, seen: frozenset = frozenset()) -> set[str]:
    if name not in own or name in seen:
      return set()
    found = set(own[name][1])
    for base in own[name][0]:
      found |= methods(base, seen | {name})
    return found

  classes = [name for name in own if is_test_case(name)]
  return classes, sorted(f"{c}.{m}" for c in classes for m in methods(c))
