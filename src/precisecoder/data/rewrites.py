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
not touched, so the reference fix itself stays as it is.
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
_NEW_NAMES = ("value", "item", "acc", "res", "tmp", "current", "output", "temp", "val", "cur",
              "entry", "elem", "result_value", "running", "counter", "k", "j")
_MIRROR = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq,
           ast.NotEq: ast.NotEq}
_SPACED_OPERATOR = re.compile(r" (\+|-|\*|//|/|%|==|!=|<=|>=|<|>) ")
_MAX_TRIES = 8  # candidates tried per rewrite before giving up on the program


def _stored_locals(tree: ast.AST) -> list[str]:
  params = {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments)
            for a in n.args + n.kwonlyargs}
  stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}
  return sorted(stored - params)


def _renames(code: str, tree: ast.AST, rng: random.Random) -> Iterator[tuple[str, str]]:
  used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  used |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
  used |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
  free = [name for name in _NEW_NAMES if name not in used]
  for name in _stored_locals(tree):
    if free:
      yield "rename", families.apply_renames(code, {name: rng.choice(free)})


def _equivalents(node: ast.AST, names: Sequence[str]) -> Iterator[tuple[str, str, ast.AST]]:
  """`mutation.expression_edits` proposals: expressions replaced by equivalent ones."""
  del names
  if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _MIRROR:
    left, right = node.left, node.comparators[0]
    if (isinstance(left, ast.Call) and isinstance(left.func, ast.Name)
        and left.func.id == "len" and len(left.args) == 1 and isinstance(right, ast.Constant)
        and right.value == 0 and type(node.ops[0]) in (ast.Eq, ast.NotEq, ast.Gt)):
      seq = left.args[0]
      yield "equivalent", "", (ast.UnaryOp(ast.Not(), seq) if isinstance(node.ops[0], ast.Eq)
                               else ast.Call(ast.Name("bool", ast.Load()), [seq], []))
    yield "equivalent", "", ast.Compare(right, [_MIRROR[type(node.ops[0])]()], [left])
  elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
    if ast.dump(node.left) != ast.dump(node.right):
      yield "equivalent", "", ast.BinOp(node.right, node.op, node.left)
    if (isinstance(node.op, ast.Mult) and isinstance(node.left, ast.Name)
        and isinstance(node.right, ast.Constant) and node.right.value == 2):
      yield "equivalent", "", ast.BinOp(node.left, ast.Add(), node.left)
  elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.UnaryOp)
        and isinstance(node.slice.op, ast.USub) and isinstance(node.slice.operand, ast.Constant)
        and node.slice.operand.value == 1):
    length = ast.Call(ast.Name("len", ast.Load()), [node.value], [])
    yield "equivalent", "", ast.Subscript(
        node.value, ast.BinOp(length, ast.Sub(), ast.Constant(1)), ast.Load())
  elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "range" and len(node.args) == 1 and not node.keywords):
    yield "reformat", "", ast.Call(node.func, [ast.Constant(0), node.args[0]], [])


def _line_edits(code: str, tree: ast.AST, lines: list[str], editable: set[int]
                ) -> Iterator[tuple[str, str]]:
  """Statement-level reformats and redundant statements, as (kind, new program)."""
  reference = ast.dump(tree)

  def replaced(start: int, end: int, new: Sequence[str]) -> str:
    return "\n".join(lines[:start - 1] + list(new) + lines[end:]) + "\n"

  used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  temp = next((n for n in ("result", "answer", "out", "res", "ret") if n not in used), None)
  for node in ast.walk(tree):
    line_no = getattr(node, "lineno", None)
    if not isinstance(node, ast.stmt) or line_no not in editable:
      continue
    line = lines[line_no - 1]
    indent = line[:len(line) - len(line.lstrip())]
    one_line = node.end_lineno == line_no
    if isinstance(node, ast.AugAssign) and one_line and isinstance(node.target, ast.Name):
      value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
      yield "reformat", replaced(line_no, line_no, [
          f"{indent}{node.target.id} = {ast.unparse(value)}"])
    if isinstance(node, (ast.If, ast.While)) and line.rstrip().endswith(":") and not (
        line.lstrip().split(None, 1)[1].startswith("(")):
      keyword, condition = line.lstrip().split(None, 1)
      yield "reformat", replaced(line_no, line_no, [
          f"{indent}{keyword} ({condition.rstrip()[:-1].rstrip()}):"])
    if one_line and _SPACED_OPERATOR.search(line):
      tight = _SPACED_OPERATOR.sub(r"\1", line, count=1)
      try:
        same = ast.dump(ast.parse(replaced(line_no, line_no, [tight]))) == reference
      except SyntaxError:
        same = False
      if same:
        yield "reformat", replaced(line_no, line_no, [tight])
    if (isinstance(node, ast.Return) and one_line and temp and node.value is not None
        and not isinstance(node.value, (ast.Name, ast.Constant))):
      yield "redundant", replaced(line_no, line_no, [
          f"{indent}{temp} = {ast.unparse(node.value)}", f"{indent}return {temp}"])
    if (isinstance(node, ast.Assign) and one_line and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, (ast.Constant, ast.List, ast.Dict, ast.Set))
        and not getattr(node.value, "elts", getattr(node.value, "keys", None))):
      yield "redundant", replaced(line_no, line_no, [line, line])
    if isinstance(node, (ast.For, ast.While)) and not node.orelse and not isinstance(
        node.body[-1], (ast.Return, ast.Break, ast.Continue, ast.Raise)):
      body_line = lines[node.body[0].lineno - 1]
      body_indent = body_line[:len(body_line) - len(body_line.lstrip())]
      end = node.body[-1].end_lineno
      yield "redundant", replaced(end + 1, end, [f"{body_indent}continue"])


def _untouched_lines(code: str, avoid_like: str) -> set[int]:
  """Lines of `code` (1-based) equal to a line of `avoid_like` in difflib's matching: the
  lines no edit has touched yet."""
  a, b = code.splitlines(), avoid_like.splitlines()
  out: set[int] = set()
  for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
    out.update(range(block.a + 1, block.a + block.size + 1))
  return out


def candidates(code: str, rng: random.Random, avoid_like: str | None = None
               ) -> list[tuple[str, str]]:
  """(kind, rewritten program) proposals for `code`, unverified. Line edits only on editable
  lines that match `avoid_like` (when given); renames anywhere."""
  tree = ast.parse(code)
  lines = code.splitlines()
  editable = set(mutation.editable_lines(code))
  if avoid_like is not None:
    editable &= _untouched_lines(code, avoid_like)
  out = list(_renames(code, tree, rng))
  for m in mutation.expression_edits(code, sorted(editable), _equivalents):
    out.append((m.operator, mutation.apply_mutations(code, [m])))
  out += list(_line_edits(code, tree, lines, editable))
  return [(kind, new) for kind, new in out if new != code]


def rewrite(code: str, tests: Mapping[str, Any], count: int, rng: random.Random, *,
            avoid_like: str | None = None, checker: TrustedCallChecker | None = None
            ) -> tuple[str, list[str]]:
  """`code` with up to `count` rewrites applied one after another, each of a kind drawn
  uniformly among those with candidates and kept only if the tests still pass; returns the
  program and the kinds applied (fewer than `count` when candidates run out)."""
  checker = checker or TrustedCallChecker()
  applied: list[str] = []
  for _ in range(count):
    by_kind: dict[str, list[str]] = {}
    for kind, new in candidates(code, rng, avoid_like):
      by_kind.setdefault(kind, []).append(new)
    tries = 0
    while by_kind and tries < _MAX_TRIES:
      kind = rng.choice(sorted(by_kind))
      new = by_kind[kind].pop(rng.randrange(len(by_kind[kind])))
      if not by_kind[kind]:
        del by_kind[kind]
      tries += 1
      if checker.passes_one(new, tests):
        code = new
        applied.append(kind)
        break
    else:
      break
  return code, applied
