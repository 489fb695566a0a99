"""Test feedback for a debugging agent: a task's visible tests, the program run on them in the
sandboxed pool, and a short deterministic message about what failed.

    outcome, message = feedback(pool, task, program)       # pool: ExecutionPool or RewardScorer

A task's tests are split into *visible* tests, which the agent hears about, and *hidden* ones,
which it never does (RLEF's public / private tests; the episode's reward runs all of them):
  call, io    the first cases;
  assert      `assert` statements, spread evenly over the test code (a repository task's
              asserts cover every function in turn);
  unittest    test methods (in source order), spread evenly.
`Visibility(count, fraction)` picks min(count, fraction of the tests), at least one.

Each visible test runs as its own job whose spec holds that test alone: the other cases are
left out, the other asserts become `pass`, the other test methods are removed. So nothing of
a hidden test, not even its failure message, can reach the message. The jobs go through the
pool like any run (a pass is the harness's verdict; call and io expected values never enter
the sandbox).

The message says how many visible tests failed and, for up to three, the test (the call, the
input, the assert or the test's name), expected vs got, or the error's last line, or "timed
out"; every value is cut in the middle past `max_value_chars` and the whole message stays
under `max_chars` (~1k tokens at the defaults). It is a pure function of the task, the program
and the verdicts, so an episode replays exactly.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from precisecoder.execution.shared.programs import identity
from precisecoder.execution.parent.specs import test_names
from precisecoder.execution import Job, Limits, Result, Status
from precisecoder.tasks import Task

MAX_FAILURES_SHOWN = 3


@dataclasses.dataclass(frozen=True)
class Visibility:
  """How many of a task's tests are visible: min(count, floor(fraction x tests)), at least 1."""

  count: int = 3
  fraction: float = 0.5

  def __post_init__(self):
    if self.count < 1 or not 0 < self.fraction <= 1:
      raise ValueError(
        f"Visibility: count {self.count} must be >= 1 and fraction {self.fraction} in (0, 1]"
      )

  def visible(self, total: int) -> int:
    return min(total, max(1, min(self.count, math.floor(self.fraction * total))))


@dataclasses.dataclass(frozen=True)
class VisibleTest:
  """One visible test: what the message calls it, the spec that runs it alone, and what it
  expects where the spec says (call and io)."""

  name: str  # "f(1, 2)", "input #1", "assert f(1) == 2", "TestCases.test_empty"
  tests: dict[str, Any]  # a test spec of the task's kind holding this test only
  expected: str | None = None  # call: the expected value as JSON; io: the expected output
  stdin: str | None = None  # io


@dataclasses.dataclass(frozen=True)
class Failure:
  name: str
  stdin: str | None = None  # io: the input
  expected: str | None = None
  got: str | None = None
  error: str | None = None  # the error's last line, "timed out", or the check that failed


@dataclasses.dataclass(frozen=True)
class Outcome:
  """A program's run on a task's visible tests."""

  visible: int  # visible tests run
  hidden: int  # tests the agent does not see
  failures: tuple[Failure, ...] = ()  # every failing visible test, in order
  no_program: bool = False  # nothing to run: no feedback, the episode ends
  compile_error: str | None = None  # the program does not compile (every test fails on it)

  @property
  def failed(self) -> int:
    return len(self.failures)

  @property
  def passed(self) -> bool:
    """Every visible test passed (a program was given)."""
    return not self.no_program and not self.failures

  def to_json(self) -> dict[str, Any]:
    return {
      "visible": self.visible,
      "hidden": self.hidden,
      "failed": self.failed,
      "passed": self.passed,
      "no_program": self.no_program,
      "compile_error": self.compile_error,
      "failures": [dataclasses.asdict(f) for f in self.failures],
    }


# ---------------------------------------------------------------------------
# Which tests are visible
# ---------------------------------------------------------------------------


def _spread(total: int, n: int) -> list[int]:
  """n indices of range(total), evenly spread, the first one included."""
  return sorted({i * total // n for i in range(n)})


def visible_tests(
  task: Task, visibility: Visibility = Visibility()
) -> tuple[list[VisibleTest], int]:
  """(the task's visible tests, how many of its tests are hidden)."""
  tests = task.tests
  kind = tests["kind"]
  if kind in ("call", "io"):
    cases = list(tests["cases"])
    shown = cases[: visibility.visible(len(cases))]
    if kind == "call":
      out = [
        VisibleTest(
          _call_text(tests["entry_point"], case),
          {**tests, "cases": [case]},
          expected=_json(case["expected"]),
        )
        for case in shown
      ]
    else:
      out = [
        VisibleTest(
          f"input #{i + 1}",
          {**tests, "cases": [case]},
          expected=case["stdout"],
          stdin=case["stdin"],
        )
        for i, case in enumerate(shown)
      ]
    return out, len(cases) - len(shown)
  units = _assert_units(tests["code"]) if kind == "assert" else _test_methods(tests["code"])
  chosen = _spread(len(units), visibility.visible(len(units))) if units else []
  out = []
  for i in chosen:
    code = _keep_only(tests["code"], [u for j, u in enumerate(units) if j != i])
    out.append(VisibleTest(units[i].name, {**tests, "code": code}))
  return out, len(units) - len(out)


def compile_problem(program: str) -> str | None:
  """Why `program` does not compile (the pool's own wording), or None."""
  return identity(program)[1]


def _json(value: Any) -> str:
  return json.dumps(value, ensure_ascii=False)


def _call_text(entry_point: str, case: dict[str, Any]) -> str:
  args = [_json(a) for a in case.get("args", [])]
  args += [f"{k}={_json(v)}" for k, v in case.get("kwargs", {}).items()]
  return f"{entry_point}({', '.join(args)})"


@dataclasses.dataclass(frozen=True)
class _Unit:
  name: str
  span: tuple[int, int]  # character offsets of its source in the test code
  node: tuple[int, int]  # (line, column) of its statement
  replacement: str  # what stands in its place when it is hidden


def _offsets(code: str) -> list[int]:
  """Character offset of the start of each line (1-based line numbers index it)."""
  starts, total = [0, 0], 0
  for line in code.splitlines(keepends=True):
    total += len(line)
    starts.append(total)
  return starts


def _span(
  node: ast.AST, starts: list[int], code: str, first_line: int | None = None
) -> tuple[int, int]:
  lines = code.splitlines(keepends=True)

  def at(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
    return starts[line] + len(lines[line - 1].encode()[:col].decode(errors="replace"))

  start = starts[first_line] if first_line is not None else at(node.lineno, node.col_offset)
  return start, at(node.end_lineno, node.end_col_offset)


def _assert_units(code: str) -> list[_Unit]:
  try:
    tree = ast.parse(code)
  except SyntaxError:
    return []
  starts = _offsets(code)
  nodes = sorted(
    (n for n in ast.walk(tree) if isinstance(n, ast.Assert)), key=lambda n: (n.lineno, n.col_offset)
  )
  return [
    _Unit(ast.unparse(n), _span(n, starts, code), (n.lineno, n.col_offset), "pass") for n in nodes
  ]


def _test_methods(code: str) -> list[_Unit]:
  """Each TestCase class's own test methods, in source order."""
  try:
    tree = ast.parse(code)
    classes = set(test_names(code)[0])
  except (SyntaxError, ValueError):
    return []
  starts = _offsets(code)
  units = []
  for node in tree.body:
    if isinstance(node, ast.ClassDef) and node.name in classes:
      for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith(
          "test"
        ):
          first = min([d.lineno for d in item.decorator_list] + [item.lineno])
          # A whole line range: decorators and the def, from the start of their first line.
          units.append(
            _Unit(
              f"{node.name}.{item.name}",
              _span(item, starts, code, first),
              (item.lineno, item.col_offset),
              " " * item.col_offset + "pass",
            )
          )
  return units


def _keep_only(code: str, hidden: Sequence[_Unit]) -> str:
  """`code` with each hidden unit replaced by its `replacement` on as many lines (backslash
  continuations), so line numbers in error messages stay those of the original test code."""
  out, last = [], 0
  for unit in sorted(hidden, key=lambda u: u.span):
    start, end = unit.span
    out += [code[last:start], unit.replacement + " \\\n" * code[start:end].count("\n")]
    last = end
  text = "".join(out + [code[last:]])
  try:
    ast.parse(text)
    return text
  except SyntaxError:  # a layout the text edit breaks: the same edit on the tree
    keys = {u.node for u in hidden}

    class Hide(ast.NodeTransformer):
      def visit(self, node):
        if isinstance(node, ast.stmt) and (node.lineno, node.col_offset) in keys:
          return ast.copy_location(ast.Pass(), node)
        return super().visit(node)

    return ast.unparse(Hide().visit(ast.parse(code)))


# ---------------------------------------------------------------------------
# Running them and the message
# ---------------------------------------------------------------------------


def _pool_and_limits(pool_or_scorer):
  """(pool, task -> Limits, deadline) from an execution pool or a RewardScorer."""
  if hasattr(pool_or_scorer, "limits_for") and hasattr(pool_or_scorer, "pool"):
    return (
      pool_or_scorer.pool,
      pool_or_scorer.limits_for,
      getattr(pool_or_scorer, "deadline_s", None),
    )
  return pool_or_scorer, lambda task: Limits(timeout_s=float(task.timeout_s)), None


def feedback(
  pool_or_scorer,
  task: Task,
  program: str | None,
  *,
  visibility: Visibility = Visibility(),
  max_chars: int = 3000,
  max_value_chars: int = 240,
) -> tuple[Outcome, str]:
  """`program` run on `task`'s visible tests: (outcome, message). The message is "" when every
  visible test passed or there is no program (both end an episode)."""
  return feedback_many(
    pool_or_scorer,
    [task],
    [program],
    visibility=visibility,
    max_chars=max_chars,
    max_value_chars=max_value_chars,
  )[0]


def as_json(
  pool_or_scorer, task: Task, program: str | None, *, visibility: Visibility = Visibility()
) -> dict[str, Any]:
  """`feedback` as JSON data (the reward server's POST /feedback): the outcome and message."""
  outcome, text = feedback(pool_or_scorer, task, program, visibility=visibility)
  return {**outcome.to_json(), "message": text}


def feedback_many(
  pool_or_scorer,
  tasks: Sequence[Task],
  programs: Sequence[str | None],
  *,
  visibility: Visibility = Visibility(),
  max_chars: int = 3000,
  max_value_chars: int = 240,
) -> list[tuple[Outcome, str]]:
  """`feedback` for many (task, program) pairs in one pool round."""
  if len(tasks) != len(programs):
    raise ValueError(f"{len(tasks)} tasks but {len(programs)} programs")
  pool, limits_for, deadline_s = _pool_and_limits(pool_or_scorer)
  # Every value short enough that three failures (name, input, expected, got) fit the message.
  limit = max(40, min(max_value_chars, (max_chars - 400) // (4 * MAX_FAILURES_SHOWN)))
  split_cache: dict[int, tuple[list[VisibleTest], int]] = {}
  plans, jobs = [], []
  for task, program in zip(tasks, programs):
    if id(task) not in split_cache:
      split_cache[id(task)] = visible_tests(task, visibility)
    shown, hidden = split_cache[id(task)]
    has_program = isinstance(program, str) and bool(program.strip())
    problem = compile_problem(program) if has_program else None
    plans.append((shown, hidden, has_program, problem, len(jobs)))
    if has_program and problem is None:
      limits = limits_for(task)
      jobs += [Job(program, test.tests, limits) for test in shown]
  results = pool.execute(jobs, deadline_s=deadline_s) if jobs else []
  out = []
  for shown, hidden, has_program, problem, first in plans:
    if not has_program:
      out.append((Outcome(len(shown), hidden, no_program=True), ""))
      continue
    if problem is not None:  # every test fails the same way: said once, nothing runs
      outcome = Outcome(
        len(shown),
        hidden,
        tuple(Failure(cut_middle(t.name, limit), error=problem) for t in shown),
        compile_error=cut_middle(problem, limit),
      )
      out.append((outcome, message(outcome, max_chars) if shown else ""))
      continue
    failures = tuple(
      _failure(test, result, limit)
      for test, result in zip(shown, results[first : first + len(shown)])
      if not result.passed
    )
    outcome = Outcome(len(shown), hidden, failures)
    out.append((outcome, message(outcome, max_chars) if failures else ""))
  return out


_CASE_PREFIX = re.compile(r"^case \d+: ")
_CHECK_PREFIX = re.compile(r"^assert #\d+ failed: ")
_TEST_PREFIX = re.compile(r"^[\w.]+: (?:fail|error) ")
_TESTS_LINE = re.compile(r" \(<tests>:\d+\)$")  # a line of test code the agent never saw


def cut_middle(text: str, limit: int) -> str:
  """`text` within `limit` characters: its head and tail around a note of what was cut."""
  if len(text) <= limit:
    return text
  keep = max(limit - 30, 2)
  head, tail = text[: keep - keep // 2], text[len(text) - keep // 2 :]
  return f"{head}...[{len(text) - len(head) - len(tail)} characters cut]...{tail}"


def _failure(test: VisibleTest, result: Result, limit: int) -> Failure:
  cut = lambda text: cut_middle(text, limit)
  failure = Failure(cut(test.name), stdin=None if test.stdin is None else cut(test.stdin))
  if result.status is Status.TIMEOUT:
    return dataclasses.replace(failure, error="timed out")
  if result.status is Status.MEMORY:
    return dataclasses.replace(failure, error="ran out of memory")
  if result.status is Status.INFRA_ERROR:
    return dataclasses.replace(failure, error="could not be run (the sandbox failed)")
  detail = _TESTS_LINE.sub("", _CASE_PREFIX.sub("", result.detail.strip()))
  kind = test.tests["kind"]
  if kind == "call" and detail == "wrong return value":
    got = "a value that is not JSON data" if result.got is None else _json(result.got)
    return dataclasses.replace(failure, expected=cut(test.expected), got=cut(got))
  if kind == "io" and detail == "wrong output":
    return dataclasses.replace(
      failure, expected=cut(test.expected.rstrip("\n")), got=cut(result.stdout.rstrip("\n"))
    )
  detail = _CHECK_PREFIX.sub("", _TEST_PREFIX.sub("", detail))
  lines = [line for line in detail.splitlines() if line.strip()]
  return dataclasses.replace(failure, error=cut(lines[-1] if lines else result.status.value))


def message(outcome: Outcome, max_chars: int = 3000) -> str:
  """The feedback text for a program that failed some visible tests."""
  tail = (
    "Fix the program. Answer with the whole corrected program in a ```python block, "
    "making minimal edits to the original buggy code."
  )
  if outcome.compile_error is not None:
    return cut_middle(
      f"Your program does not compile: {outcome.compile_error}.\n\n{tail}", max_chars
    )
  head = (
    f"Your program failed {outcome.failed} of {outcome.visible} visible "
    f"test{'s' if outcome.visible != 1 else ''}."
  )
  blocks = []
  for i, f in enumerate(outcome.failures[:MAX_FAILURES_SHOWN], 1):
    lines = [f"Test {i}: {f.name}"]
    if f.stdin is not None:
      lines.append(f"  stdin: {_indent(f.stdin.rstrip(chr(10)))}")
    if f.error is not None:
      lines.append(f"  error: {f.error}")
    else:
      lines += [f"  expected: {_indent(f.expected)}", f"  got: {_indent(f.got)}"]
    blocks.append("\n".join(lines))
  if outcome.failed > MAX_FAILURES_SHOWN:
    blocks.append(f"({outcome.failed - MAX_FAILURES_SHOWN} more failing visible tests not shown)")
  text = "\n\n".join([head, *blocks, tail])
  return cut_middle(text, max_chars)


def _indent(text: str | None) -> str:
  return (text or "").replace("\n", "\n    ")
