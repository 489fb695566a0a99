"""Rewrites that keep a program's behaviour: the edits a model makes to lines that needed none.

PAPER.md's diagnosis is that unit-test rewards let a model touch lines that were already right
(GRPO grows edits from 3.9 to 8.3 lines). The small policy's SFT mixture (data/sft_mixture.py)
writes answers like that on purpose, so that RL has an over-editing base to correct. Kinds:
- `rename`: a local variable gets another name on every line that uses it;
- `reformat`: a line written another way: `x += e` -> `x = x + e`, a condition in parentheses,
  no spaces around an operator, `range(n)` -> `range(0, n)`;
- `equivalent`: an expression replaced by an equivalent one (`a < b` -> `b > a`, `a + b` ->
  `b + a`, `len(xs) == 0` -> `not xs`, `xs[-1]` -> `xs[len(xs) - 1]`, `x * 2` -> `x + x`);
- `redundant`: a statement that changes nothing (a returned expression through a temporary, an
  initialisation repeated, `continue` closing a loop body).

Candidates are proposals, not proofs: `rewrite` keeps one only if the program still passes its
tests (`a + b` -> `b + a` is wrong for strings, and the tests say so). Line edits other than
renames go to lines the program's own edits (relative to `avoid_like`, the buggy program) have
not touched, so the reference fix itself stays as it is. Each line gets one rewrite at most,
in one style (STYLE_ORDER), with a set probability: over-editing as a habit.
"""

from __future__ import annotations

import ast
import difflib
import random
import re
from collections.abc import Iterator, Sequence
from typing import Any, Mapping

from precisecoder.data import families, mutation
from precisecoder.data.checking import TrustedCallChecker

KINDS = ("rename", "reformat", "equivalent", "redundant")
_NEW_NAMES = (
  "value",
  "item",
  "acc",
  "res",
  "tmp",
  "current",
  "output",
  "temp",
  "val",
  "cur",
  "entry",
  "elem",
  "result_value",
  "running",
  "counter",
  "k",
  "j",
)
_MIRROR = {
  ast.Lt: ast.Gt,
  ast.Gt: ast.Lt,
  ast.LtE: ast.GtE,
  ast.GtE: ast.LtE,
  ast.Eq: ast.Eq,
  ast.NotEq: ast.NotEq,
}
_SPACED_OPERATOR = re.compile(r" (\+|-|\*|//|/|%|==|!=|<=|>=|<|>) ")
_MAX_TRIES = 8  # renames tried before giving up


def _stored_locals(tree: ast.AST) -> list[str]:
  params = {
    a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args + n.kwonlyargs
  }
  stored = {
    n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
  }
  return sorted(stored - params)


def _renames(code: str, tree: ast.AST, rng: random.Random) -> Iterator[tuple[str, int | None, str]]:
  used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  used |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
  used |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
  free = [name for name in _NEW_NAMES if name not in used]
  for name in _stored_locals(tree):
    if free:
      yield "rename", None, families.apply_renames(code, {name: rng.choice(free)})


def _equivalents(node: ast.AST, names: Sequence[str]) -> Iterator[tuple[str, str, ast.AST]]:
  """`mutation.expression_edits` proposals: expressions replaced by equivalent ones."""
  del names
  if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _MIRROR:
    left, right = node.left, node.comparators[0]
    if (
      isinstance(left, ast.Call)
      and isinstance(left.func, ast.Name)
      and left.func.id == "len"
      and len(left.args) == 1
      and isinstance(right, ast.Constant)
      and right.value == 0
      and type(node.ops[0]) in (ast.Eq, ast.NotEq, ast.Gt)
    ):
      seq = left.args[0]
      yield (
        "equivalent",
        "",
        (
          ast.UnaryOp(ast.Not(), seq)
          if isinstance(node.ops[0], ast.Eq)
          else ast.Call(ast.Name("bool", ast.Load()), [seq], [])
        ),
      )
    yield "equivalent", "", ast.Compare(right, [_MIRROR[type(node.ops[0])]()], [left])
  elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
    if ast.dump(node.left) != ast.dump(node.right):
      yield "equivalent", "", ast.BinOp(node.right, node.op, node.left)
    if (
      isinstance(node.op, ast.Mult)
      and isinstance(node.left, ast.Name)
      and isinstance(node.right, ast.Constant)
      and node.right.value == 2
    ):
      yield "equivalent", "", ast.BinOp(node.left, ast.Add(), node.left)
  elif (
    isinstance(node, ast.Subscript)
    and isinstance(node.ctx, ast.Load)
    and isinstance(node.value, ast.Name)
    and isinstance(node.slice, ast.UnaryOp)
    and isinstance(node.slice.op, ast.USub)
    and isinstance(node.slice.operand, ast.Constant)
    and node.slice.operand.value == 1
  ):
    length = ast.Call(ast.Name("len", ast.Load()), [node.value], [])
    yield (
      "equivalent",
      "",
      ast.Subscript(node.value, ast.BinOp(length, ast.Sub(), ast.Constant(1)), ast.Load()),
    )
  elif (
    isinstance(node, ast.Call)
    and isinstance(node.func, ast.Name)
    and node.func.id == "range"
    and len(node.args) == 1
    and not node.keywords
  ):
    yield "reformat", "", ast.Call(node.func, [ast.Constant(0), node.args[0]], [])


def _line_edits(
  code: str, tree: ast.AST, lines: list[str], editable: set[int]
) -> Iterator[tuple[str, int, str]]:
  """Statement-level reformats and redundant statements, as (kind, line, new program)."""
  reference = ast.dump(tree)

  def replaced(start: int, end: int, new: Sequence[str]) -> str:
    return "\n".join(lines[: start - 1] + list(new) + lines[end:]) + "\n"

  used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  temp = next((n for n in ("result", "answer", "out", "res", "ret") if n not in used), None)
  for node in ast.walk(tree):
    line_no = getattr(node, "lineno", None)
    if not isinstance(node, ast.stmt) or line_no not in editable:
      continue
    line = lines[line_no - 1]
    indent = line[: len(line) - len(line.lstrip())]
    one_line = node.end_lineno == line_no
    if isinstance(node, ast.AugAssign) and one_line and isinstance(node.target, ast.Name):
      value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
      yield (
        "reformat",
        line_no,
        replaced(line_no, line_no, [f"{indent}{node.target.id} = {ast.unparse(value)}"]),
      )
    if (
      isinstance(node, (ast.If, ast.While))
      and line.rstrip().endswith(":")
      and not (line.lstrip().split(None, 1)[1].startswith("("))
    ):
      keyword, condition = line.lstrip().split(None, 1)
      yield (
        "reformat",
        line_no,
        replaced(line_no, line_no, [f"{indent}{keyword} ({condition.rstrip()[:-1].rstrip()}):"]),
      )
    if one_line and _SPACED_OPERATOR.search(line):
      tight = _SPACED_OPERATOR.sub(r"\1", line, count=1)
      try:
        same = ast.dump(ast.parse(replaced(line_no, line_no, [tight]))) == reference
      except SyntaxError:
        same = False
      if same:
        yield "reformat", line_no, replaced(line_no, line_no, [tight])
    if (
      isinstance(node, ast.Return)
      and one_line
      and temp
      and node.value is not None
      and not isinstance(node.value, (ast.Name, ast.Constant))
    ):
      yield (
        "redundant",
        line_no,
        replaced(
          line_no,
          line_no,
          [f"{indent}{temp} = {ast.unparse(node.value)}", f"{indent}return {temp}"],
        ),
      )
    if (
      isinstance(node, ast.Assign)
      and one_line
      and len(node.targets) == 1
      and isinstance(node.targets[0], ast.Name)
      and isinstance(node.value, (ast.Constant, ast.List, ast.Dict, ast.Set))
      and not getattr(node.value, "elts", getattr(node.value, "keys", None))
    ):
      yield "redundant", line_no, replaced(line_no, line_no, [line, line])
    if (
      isinstance(node, (ast.For, ast.While))
      and not node.orelse
      and not isinstance(node.body[-1], (ast.Return, ast.Break, ast.Continue, ast.Raise))
    ):
      body_line = lines[node.body[0].lineno - 1]
      body_indent = body_line[: len(body_line) - len(body_line.lstrip())]
      end = node.body[-1].end_lineno
      yield "redundant", line_no, replaced(end + 1, end, [f"{body_indent}continue"])


def _untouched_lines(code: str, avoid_like: str) -> set[int]:
  """Lines of `code` (1-based) equal to a line of `avoid_like` in difflib's matching: the
  lines no edit has touched yet."""
  a, b = code.splitlines(), avoid_like.splitlines()
  out: set[int] = set()
  for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
    out.update(range(block.a + 1, block.a + block.size + 1))
  return out


def candidates(
  code: str, rng: random.Random, avoid_like: str | None = None
) -> list[tuple[str, int | None, str]]:
  """(kind, line, rewritten program) proposals for `code`, unverified; `line` is the line a
  line edit rewrites (None for renames). Line edits only on editable lines that match
  `avoid_like` (when given); renames anywhere."""
  tree = ast.parse(code)
  lines = code.splitlines()
  editable = set(mutation.editable_lines(code))
  if avoid_like is not None:
    editable &= _untouched_lines(code, avoid_like)
  out = list(_renames(code, tree, rng))
  for m in mutation.expression_edits(code, sorted(editable), _equivalents):
    out.append((m.operator, m.start, mutation.apply_mutations(code, [m])))
  out += list(_line_edits(code, tree, lines, editable))
  return [(kind, line, new) for kind, line, new in out if new != code]


# A line's rewrite is its first candidate of the first kind here that keeps the tests passing:
# the same choice every time, a style a model can learn.
STYLE_ORDER = ("reformat", "redundant", "equivalent")


def rewrite(
  code: str,
  tests: Mapping[str, Any],
  rng: random.Random,
  *,
  rate: float,
  rename_rate: float = 0.0,
  avoid_like: str | None = None,
  checker: TrustedCallChecker | None = None,
) -> tuple[str, list[str]]:
  """`code` with a local variable renamed (with probability `rename_rate`) and each line that
  has a rewrite rewritten, top to bottom, with probability `rate`, in STYLE_ORDER's style;
  every rewrite is kept only if the tests still pass. A habit rather than noise: a model
  trained on such answers over-edits even when it decodes greedily. Returns the program and
  the kinds applied."""
  checker = checker or TrustedCallChecker()
  applied: list[str] = []
  if rename_rate and rng.random() < rename_rate:
    renames = [new for kind, _, new in candidates(code, rng, avoid_like) if kind == "rename"]
    rng.shuffle(renames)
    for new in renames[:_MAX_TRIES]:
      if checker.passes_one(new, tests):
        code, applied = new, ["rename"]
        break
  decided: set[str] = set()  # lines (by text) already kept or rewritten
  while True:
    lines = code.splitlines()
    sites: dict[int, list[tuple[str, str]]] = {}
    for kind, line, new in candidates(code, rng, avoid_like):
      if line is not None and lines[line - 1] not in decided:
        sites.setdefault(line, []).append((kind, new))
    if not sites:
      return code, applied
    line = min(sites)
    decided.add(lines[line - 1])
    if rng.random() >= rate:
      continue
    found = next(
      (
        (kind, new)
        for kind in STYLE_ORDER
        for k, new in sites[line]
        if k == kind and checker.passes_one(new, tests)
      ),
      None,
    )
    if found is not None:
      code = found[1]
      applied.append(found[0])
