"""AST mutation operators: candidate bugs for a correct program (no LLM).

Every operator proposes edits of whole lines of the correct program. An
expression-level operator rewrites one AST node that sits on one line and
splices `ast.unparse` of the new node into that line, so the rest of the line
keeps its formatting. The spliced program is re-parsed and compared with the
intended tree, which catches precedence surprises.

Categories follow PDB's taxonomy: Assignment, Checking, Algorithm,
Build/Package, Timing/Serialization. PDB's rules apply: only editable lines
(no def/class/import/try/except/finally/async lines, nothing in the frozen
prefix, no blank, comment or docstring lines) are touched.
"""

from __future__ import annotations

import ast
import collections
import copy
import dataclasses
import re
from typing import Callable, Iterator, Sequence

ASSIGNMENT = "Assignment"
CHECKING = "Checking"
ALGORITHM = "Algorithm"
BUILD = "Build/Package"
TIMING = "Timing/Serialization"
CATEGORIES = (ASSIGNMENT, CHECKING, ALGORITHM, BUILD, TIMING)

_FROZEN_START = re.compile(
  r"^\s*(def|class|import|from|try|except|finally|async|@)\b|^\s*(try|finally)\s*:"
)


@dataclasses.dataclass(frozen=True)
class Mutation:
  """Lines `start..end` (1-based, inclusive) of the correct program become `replacement`.

  `end == start - 1` inserts `replacement` before line `start`.
  """

  operator: str
  category: str
  start: int
  end: int
  replacement: tuple[str, ...]

  @property
  def span(self) -> tuple[int, int]:
    """The correct-program lines the bug occupies (an insertion occupies `start`)."""
    return self.start, max(self.end, self.start)

  @property
  def size(self) -> int:
    """Changed lines as the diff counts them."""
    return max(self.end - self.start + 1, len(self.replacement))


def apply_mutations(code: str, mutations: Sequence[Mutation]) -> str:
  """`code` with non-overlapping mutations applied (bottom-up so line numbers hold)."""
  lines = code.splitlines()
  for m in sorted(mutations, key=lambda m: m.start, reverse=True):
    lines[m.start - 1 : m.end] = list(m.replacement)
  return "\n".join(lines) + ("\n" if code.endswith("\n") else "")


def editable_lines(code: str, first_editable: int = 1) -> list[int]:
  """PDB's editable lines: code lines from `first_editable` on, minus frozen kinds."""
  lines = code.splitlines()
  try:
    tree = ast.parse(code)
  except SyntaxError:
    return []
  docstring_lines: set[int] = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
      body = node.body
      if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
      ):
        docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
  out = []
  for no, text in enumerate(lines, 1):
    stripped = text.strip()
    if no < first_editable or not stripped or stripped.startswith("#") or no in docstring_lines:
      continue
    if _FROZEN_START.match(text):
      continue
    out.append(no)
  return out


# ---------------------------------------------------------------------------
# Expression rewrites: node -> list of (operator, category, new node)
# ---------------------------------------------------------------------------

_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_COMPARE_SWAP = {
  ast.Eq: ast.NotEq,
  ast.NotEq: ast.Eq,
  ast.Lt: ast.Gt,
  ast.Gt: ast.Lt,
  ast.LtE: ast.GtE,
  ast.GtE: ast.LtE,
  ast.In: ast.NotIn,
  ast.NotIn: ast.In,
  ast.Is: ast.IsNot,
  ast.IsNot: ast.Is,
}
_ARITH = {
  ast.Add: (ast.Sub,),
  ast.Sub: (ast.Add,),
  ast.Mult: (ast.Add, ast.FloorDiv),
  ast.Div: (ast.Mult, ast.FloorDiv),
  ast.FloorDiv: (ast.Div, ast.Mod),
  ast.Mod: (ast.FloorDiv,),
  ast.Pow: (ast.Mult,),
  ast.BitAnd: (ast.BitOr,),
  ast.BitOr: (ast.BitAnd,),
}
_AUG = {
  ast.Add: ast.Sub,
  ast.Sub: ast.Add,
  ast.Mult: ast.Add,
  ast.FloorDiv: ast.Mod,
  ast.Div: ast.Mult,
  ast.Mod: ast.FloorDiv,
}
_BUILTIN_SWAP = {
  "min": "max",
  "max": "min",
  "any": "all",
  "all": "any",
  "sum": "len",
  "sorted": "reversed",
  "abs": "int",
}
_METHOD_SWAP = {
  "lower": "upper",
  "upper": "lower",
  "startswith": "endswith",
  "endswith": "startswith",
  "isdigit": "isalpha",
  "isalpha": "isdigit",
  "isupper": "islower",
  "islower": "isupper",
  "append": "extend",
  "pop": "copy",
  "index": "count",
  "find": "rfind",
  "rfind": "find",
  "split": "rsplit",
  "strip": "lstrip",
  "lstrip": "rstrip",
  "rstrip": "lstrip",
  "keys": "values",
  "values": "keys",
  "remove": "discard",
  "insert": "append",
  "get": "setdefault",
}
_LIBRARY_SWAP = {
  ("math", "floor"): "ceil",
  ("math", "ceil"): "floor",
  ("math", "sqrt"): "log",
  ("math", "log"): "log2",
  ("math", "log2"): "log10",
  ("math", "gcd"): "lcm",
  ("math", "lcm"): "gcd",
  ("math", "factorial"): "comb",
  ("math", "prod"): "fsum",
  ("itertools", "permutations"): "combinations",
  ("itertools", "combinations"): "permutations",
  ("itertools", "accumulate"): "chain",
  ("heapq", "nlargest"): "nsmallest",
  ("heapq", "nsmallest"): "nlargest",
  ("heapq", "heappop"): "heappush",
  ("bisect", "bisect_left"): "bisect_right",
  ("bisect", "bisect_right"): "bisect_left",
  ("re", "match"): "search",
  ("re", "search"): "match",
  ("re", "sub"): "subn",
  ("re", "findall"): "split",
  ("statistics", "mean"): "median",
  ("statistics", "median"): "mean",
  ("string", "ascii_lowercase"): "ascii_uppercase",
  ("collections", "Counter"): "defaultdict",
  ("random", "choice"): "sample",
  ("os", "path"): "sep",
  ("np", "mean"): "median",
  ("np", "sum"): "prod",
  ("np", "max"): "min",
  ("np", "min"): "max",
  ("np", "argmax"): "argmin",
  ("np", "argmin"): "argmax",
  ("pd", "concat"): "merge",
}
_CONVERSIONS = {
  "str": "repr",
  "repr": "str",
  "int": "round",
  "float": "int",
  "list": "sorted",
  "set": "list",
  "tuple": "list",
  "round": "int",
}


def _num(value: int) -> ast.expr:
  return ast.UnaryOp(ast.USub(), ast.Constant(-value)) if value < 0 else ast.Constant(value)


def _plus(node: ast.expr, delta: int) -> ast.expr:
  """`node + delta`, folded when `node` is an int literal."""
  if isinstance(node, ast.Constant) and type(node.value) is int:
    return _num(node.value + delta)
  op = ast.Add() if delta > 0 else ast.Sub()
  return ast.BinOp(copy.deepcopy(node), op, ast.Constant(abs(delta)))


def _constant_rewrites(node: ast.Constant) -> Iterator[tuple[str, str, ast.expr]]:
  value = node.value
  if isinstance(value, bool):
    yield "wrong_constant", ASSIGNMENT, ast.Constant(not value)
  elif type(value) is int:
    yield "constant_off_by_one", ASSIGNMENT, ast.Constant(value + 1)
    if value > 0:
      yield "constant_off_by_one", ASSIGNMENT, ast.Constant(value - 1)
    for other in (0, 1, 2, 10):
      if other not in (value, value + 1, value - 1):
        yield "wrong_constant", ASSIGNMENT, ast.Constant(other)
        break
  elif isinstance(value, float):
    yield "wrong_constant", ASSIGNMENT, ast.Constant(value * 2 if value else 1.0)
  elif isinstance(value, str) and len(value) <= 20:
    if value == "":
      yield "wrong_constant", ASSIGNMENT, ast.Constant(" ")
    elif value in (" ", ",", ", ", "-", "_", "\n", ":"):
      yield "wrong_constant", TIMING, ast.Constant("" if value != "" else " ")
    elif value.isalpha() and len(value) > 1:
      yield "wrong_constant", ASSIGNMENT, ast.Constant(value[:-1])
  elif value is None:
    yield "wrong_constant", ASSIGNMENT, ast.Constant(0)


def _call_name(node: ast.Call) -> str | None:
  return node.func.id if isinstance(node.func, ast.Name) else None


def _expression_rewrites(node: ast.AST, names: Sequence[str]) -> Iterator[tuple[str, str, ast.AST]]:
  """Candidate replacements of one expression node."""
  if isinstance(node, ast.Compare) and len(node.ops) == 1:
    op = type(node.ops[0])
    if op in _BOUNDARY:
      yield "boundary_shift", CHECKING, ast.Compare(node.left, [_BOUNDARY[op]()], node.comparators)
    if op in _COMPARE_SWAP:
      yield (
        "comparison_swap",
        CHECKING,
        ast.Compare(node.left, [_COMPARE_SWAP[op]()], node.comparators),
      )
  elif isinstance(node, ast.BoolOp):
    other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    yield "boolean_flip", CHECKING, ast.BoolOp(other, node.values)
  elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
    yield "negation_dropped", CHECKING, node.operand
  elif isinstance(node, ast.BinOp):
    for new_op in _ARITH.get(type(node.op), ()):
      yield "arithmetic_swap", ALGORITHM, ast.BinOp(node.left, new_op(), node.right)
  elif isinstance(node, ast.Constant):
    yield from _constant_rewrites(node)
  elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
    for other in names:
      if other != node.id:
        yield "wrong_variable", ASSIGNMENT, ast.Name(other, ast.Load())
        break
  elif (
    isinstance(node, ast.Subscript)
    and not isinstance(node.slice, ast.Slice)
    and isinstance(node.ctx, ast.Load)
  ):
    for delta in (1, -1):
      yield "index_shift", ALGORITHM, ast.Subscript(node.value, _plus(node.slice, delta), node.ctx)
  elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
    s = node.slice
    if s.step is not None and isinstance(s.step, ast.UnaryOp):
      yield (
        "slice_change",
        ALGORITHM,
        ast.Subscript(node.value, ast.Slice(s.lower, s.upper, None), node.ctx),
      )
    if s.upper is not None:
      yield (
        "slice_change",
        ALGORITHM,
        ast.Subscript(node.value, ast.Slice(s.lower, _plus(s.upper, 1), s.step), node.ctx),
      )
    if s.lower is not None:
      yield (
        "slice_change",
        ALGORITHM,
        ast.Subscript(node.value, ast.Slice(_plus(s.lower, 1), s.upper, s.step), node.ctx),
      )
    elif s.upper is not None:
      yield (
        "slice_change",
        ALGORITHM,
        ast.Subscript(node.value, ast.Slice(None, _plus(s.upper, -1), s.step), node.ctx),
      )
  elif isinstance(node, ast.Call):
    yield from _call_rewrites(node)


def _call_rewrites(node: ast.Call) -> Iterator[tuple[str, str, ast.AST]]:
  name = _call_name(node)
  args = node.args
  if name == "range" and args and not any(isinstance(a, ast.Starred) for a in args):
    if len(args) == 1:
      yield "range_bound", ALGORITHM, ast.Call(node.func, [_plus(args[0], 1)], node.keywords)
      yield "range_bound", ALGORITHM, ast.Call(node.func, [ast.Constant(1), args[0]], node.keywords)
    else:
      yield (
        "range_bound",
        ALGORITHM,
        ast.Call(node.func, [args[0], _plus(args[1], 1), *args[2:]], node.keywords),
      )
      yield (
        "range_bound",
        ALGORITHM,
        ast.Call(node.func, [_plus(args[0], 1), *args[1:]], node.keywords),
      )
  if name in _BUILTIN_SWAP and args:
    yield (
      "function_swap",
      ALGORITHM,
      ast.Call(ast.Name(_BUILTIN_SWAP[name], ast.Load()), args, node.keywords),
    )
  if name in _CONVERSIONS and len(args) == 1 and not node.keywords:
    yield "conversion_change", TIMING, ast.Call(ast.Name(_CONVERSIONS[name], ast.Load()), args, [])
  if name == "sorted" and not any(k.arg == "reverse" for k in node.keywords):
    yield (
      "order_change",
      TIMING,
      ast.Call(node.func, args, [*node.keywords, ast.keyword("reverse", ast.Constant(True))]),
    )
  if isinstance(node.func, ast.Attribute):
    attr, owner = node.func.attr, node.func.value
    if isinstance(owner, ast.Name) and (owner.id, attr) in _LIBRARY_SWAP:
      new_func = ast.Attribute(owner, _LIBRARY_SWAP[(owner.id, attr)], ast.Load())
      yield "library_function_swap", BUILD, ast.Call(new_func, args, node.keywords)
    elif attr in _METHOD_SWAP:
      new_func = ast.Attribute(owner, _METHOD_SWAP[attr], ast.Load())
      yield "method_swap", ALGORITHM, ast.Call(new_func, args, node.keywords)
  if (
    len(args) >= 2
    and not any(isinstance(a, ast.Starred) for a in args[:2])
    and ast.dump(args[0]) != ast.dump(args[1])
  ):
    yield (
      "argument_swap",
      ALGORITHM,
      ast.Call(node.func, [args[1], args[0], *args[2:]], node.keywords),
    )


# ---------------------------------------------------------------------------
# Enumeration
# ---------------------------------------------------------------------------


def _line_offsets(line: str, col: int) -> int:
  """Character index for an AST (UTF-8 byte) column offset."""
  return len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _parents(tree: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
  """id(node) -> (parent, field, index in the field's list or None), for in-place swaps."""
  out = {}
  for parent in ast.walk(tree):
    for field, value in ast.iter_fields(parent):
      if isinstance(value, ast.AST):
        out[id(value)] = (parent, field, None)
      elif isinstance(value, list):
        for i, item in enumerate(value):
          if isinstance(item, ast.AST):
            out[id(item)] = (parent, field, i)
  return out


def _dump_with(tree: ast.AST, parents, node: ast.AST, new: ast.AST) -> str:
  """`ast.dump(tree)` with `node` replaced by `new`: swapped in place and back (a deep copy of
  the tree per candidate cost half of task generation)."""
  parent, field, index = parents[id(node)]
  slot = getattr(parent, field)
  if index is None:
    setattr(parent, field, new)
  else:
    slot[index] = new
  try:
    return ast.dump(tree)
  finally:
    if index is None:
      setattr(parent, field, node)
    else:
      slot[index] = node


def _splice(lines: list[str], node: ast.AST, text: str) -> str:
  line = lines[node.lineno - 1]
  start, end = _line_offsets(line, node.col_offset), _line_offsets(line, node.end_col_offset)
  return line[:start] + text + line[end:]


def _scope_names(tree: ast.AST) -> dict[int, list[str]]:
  """Per line: variable names (parameters and assignment targets) of its function."""
  out: dict[int, list[str]] = {}
  for fn in ast.walk(tree):
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    names = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
    for node in ast.walk(fn):
      if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
        names.append(node.id)
    for line in range(fn.lineno, (fn.end_lineno or fn.lineno) + 1):
      out[line] = names  # inner functions come later in walk order and win
  return out


_SIMPLE_STATEMENTS = (
  ast.Assign,
  ast.AugAssign,
  ast.AnnAssign,
  ast.Expr,
  ast.Return,
  ast.Break,
  ast.Continue,
)


def _one_line(node: ast.AST) -> bool:
  return getattr(node, "lineno", None) is not None and node.lineno == node.end_lineno


def single_line_mutations(code: str, editable: Sequence[int]) -> list[Mutation]:
  """Every single-line candidate bug of `code` on `editable` lines, in a fixed order."""
  return _single_line_edits(code, editable, _expression_rewrites, statements=True)


Proposer = Callable[[ast.AST, Sequence[str]], Iterator[tuple[str, str, ast.AST]]]


def expression_edits(code: str, editable: Sequence[int], propose: Proposer) -> list[Mutation]:
  """The one-line edits `propose(node, names) -> (operator, category, new node)` makes of
  each one-line expression on an editable line, spliced into the line as bugs are (only
  splices that parse to the intended tree): other kinds of edit through the same machinery
  (data/rewrites.py: rewrites that keep the program's behaviour)."""
  return _single_line_edits(code, editable, propose, statements=False)


def _single_line_edits(
  code: str, editable: Sequence[int], propose: Proposer, *, statements: bool
) -> list[Mutation]:
  tree = ast.parse(code)
  reference = ast.dump(tree)
  parents = _parents(tree)
  lines = code.splitlines()
  allowed = set(editable)
  scope = _scope_names(tree)
  call_funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
  out: list[Mutation] = []
  seen: set[tuple[int, int, tuple[str, ...]]] = set()

  def add(m: Mutation) -> None:
    key = (m.start, m.end, m.replacement)
    if key not in seen and _parses(code, m):
      seen.add(key)
      out.append(m)

  for node in ast.walk(tree):
    if getattr(node, "lineno", None) not in allowed:
      continue
    if isinstance(node, ast.expr) and _one_line(node):
      if id(node) in call_funcs:
        continue
      for operator, category, new in propose(node, scope.get(node.lineno, ())):
        new_line = _spliced_line(lines, node, new, tree, parents, reference)
        if new_line is not None:
          add(Mutation(operator, category, node.lineno, node.lineno, (new_line,)))
    if statements and isinstance(node, ast.stmt):
      for m in _statement_mutations(node, lines):
        add(m)
  return out


def _parses(code: str, m: Mutation) -> bool:
  """Whether the mutated program is still valid Python (bugs are semantic, not syntax errors)."""
  try:
    ast.parse(apply_mutations(code, [m]))
  except (SyntaxError, ValueError):
    return False
  return True


def _safe_unparse(node: ast.AST) -> str | None:
  try:
    return ast.unparse(ast.fix_missing_locations(copy.deepcopy(node)))
  except (ValueError, TypeError, AttributeError, RecursionError):
    return None


def _render(new: ast.AST, line: str, line_no: int) -> str | None:
  """`ast.unparse(new)`, but sub-expressions taken unchanged from `line` keep their text.

  This keeps quotes, spacing and parentheses of the untouched parts, so a
  swapped operator reads like a one-token slip rather than a reformatted line.
  """
  segments: list[str] = []

  class _Keep(ast.NodeTransformer):
    def visit(self, node: ast.AST) -> ast.AST:
      if (
        isinstance(node, ast.expr)
        and getattr(node, "lineno", None) == line_no
        and node.end_lineno == line_no
      ):
        start = _line_offsets(line, node.col_offset)
        end = _line_offsets(line, node.end_col_offset)
        segments.append(line[start:end])
        return ast.Name(f"__pc_segment_{len(segments) - 1}__", ast.Load())
      return self.generic_visit(node)

  top = copy.deepcopy(new)
  for field, value in ast.iter_fields(top):  # the top node is new: only its children are kept
    if isinstance(value, ast.AST):
      setattr(top, field, _Keep().visit(value))
    elif isinstance(value, list):
      setattr(top, field, [_Keep().visit(v) if isinstance(v, ast.AST) else v for v in value])
  text = _safe_unparse(top)
  if text is None:
    return None
  for i in reversed(range(len(segments))):  # reversed: segment_1 is a prefix of segment_10
    text = text.replace(f"__pc_segment_{i}__", segments[i])
  return text


def _spliced_line(
  lines: list[str], node: ast.AST, new: ast.AST, tree: ast.AST, parents, reference: str
) -> str | None:
  """The line with `node` rewritten to `new`, or None if no rendering parses as intended."""
  original = lines[node.lineno - 1]
  for text in (_render(new, original, node.lineno), _safe_unparse(new)):
    if text is None:
      continue
    for candidate in (text, f"({text})"):
      new_line = _splice(lines, node, candidate)
      if new_line != original and _same_as_intended(
        lines, node.lineno, new_line, tree, parents, node, new, reference
      ):
        return new_line
  return None


def _same_as_intended(lines, line_no, new_line, tree, parents, node, new, reference) -> bool:
  """Whether the spliced program parses to the tree with `node` replaced by `new`."""
  new_lines = list(lines)
  new_lines[line_no - 1] = new_line
  try:
    parsed = ast.parse("\n".join(new_lines))
  except SyntaxError:
    return False
  got = ast.dump(parsed)
  return got != reference and got == _dump_with(tree, parents, node, new)


def _statement_mutations(node: ast.stmt, lines: list[str]) -> Iterator[Mutation]:
  line = lines[node.lineno - 1]
  indent = line[: len(line) - len(line.lstrip())]
  if isinstance(node, (ast.Break, ast.Continue)) and _one_line(node):
    other = "continue" if isinstance(node, ast.Break) else "break"
    yield Mutation("loop_control_swap", ALGORITHM, node.lineno, node.lineno, (indent + other,))
  if isinstance(node, (ast.If, ast.While)):
    test = node.test
    if (
      _one_line(test)
      and test.lineno == node.lineno
      and not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not))
    ):
      text = _safe_unparse(ast.UnaryOp(ast.Not(), test))
      if text is not None:
        yield Mutation(
          "negation_added", CHECKING, node.lineno, node.lineno, (_splice(lines, test, text),)
        )
  if isinstance(node, ast.AugAssign) and type(node.op) in _AUG and _one_line(node):
    new = ast.AugAssign(node.target, _AUG[type(node.op)](), node.value)
    text = _safe_unparse(new)
    if text is not None:
      yield Mutation("augassign_swap", ASSIGNMENT, node.lineno, node.lineno, (indent + text,))
  if (
    isinstance(node, _SIMPLE_STATEMENTS)
    and _one_line(node)
    and not isinstance(node, ast.Return)
    and line.rstrip().endswith(line.strip())
    and ";" not in line
  ):
    yield Mutation("line_deleted", ALGORITHM, node.lineno, node.lineno, ())
    if isinstance(node, ast.AugAssign) or (
      isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    ):
      yield Mutation("line_inserted", ALGORITHM, node.lineno, node.lineno - 1, (line.rstrip(),))


def _body_lists(tree: ast.AST) -> Iterator[list[ast.stmt]]:
  for node in ast.walk(tree):
    for field in ("body", "orelse", "finalbody"):
      body = getattr(node, field, None)
      if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        yield body


def multi_line_mutations(
  code: str, editable: Sequence[int], singles: Sequence[Mutation]
) -> list[Mutation]:
  """Contiguous 2-4-line candidate bugs: statement swaps, removed guards, combined rewrites."""
  tree = ast.parse(code)
  lines = code.splitlines()
  allowed = set(editable)
  out: list[Mutation] = []
  for body in _body_lists(tree):
    for a, b in zip(body, body[1:]):
      if (
        isinstance(a, _SIMPLE_STATEMENTS)
        and isinstance(b, _SIMPLE_STATEMENTS)
        and _one_line(a)
        and _one_line(b)
        and b.lineno == a.lineno + 1
        and {a.lineno, b.lineno} <= allowed
        and not isinstance(b, ast.Return)
        and lines[a.lineno - 1].strip() != lines[b.lineno - 1].strip()
      ):
        out.append(
          Mutation(
            "statement_swap", TIMING, a.lineno, b.lineno, (lines[b.lineno - 1], lines[a.lineno - 1])
          )
        )
    for stmt in body:
      if isinstance(stmt, ast.If) and not stmt.orelse and len(body) > 1:
        span = range(stmt.lineno, stmt.end_lineno + 1)
        if 2 <= len(span) <= 4 and set(span) <= allowed:
          out.append(Mutation("guard_removed", CHECKING, stmt.lineno, stmt.end_lineno, ()))
  # Rewrites of 2-3 consecutive lines: one single-line rewrite per line, a few
  # deterministic combinations per run (variant v takes each line's v-th rewrite).
  by_line: dict[int, list[Mutation]] = collections.defaultdict(list)
  for m in singles:
    if m.end == m.start and len(m.replacement) == 1:
      by_line[m.start].append(m)
  for start in sorted(by_line):
    for size in (2, 3):
      run = [by_line.get(start + i) for i in range(size)]
      if not all(run):
        continue
      combos = {tuple(options[v % len(options)] for options in run) for v in range(3)}
      for combo in sorted(combos, key=lambda c: [m.replacement for m in c]):
        category = collections.Counter(m.category for m in combo).most_common(1)[0][0]
        out.append(
          Mutation(
            "block_rewrite",
            category,
            start,
            start + size - 1,
            tuple(m.replacement[0] for m in combo),
          )
        )
  return [m for m in out if _parses(code, m)]
