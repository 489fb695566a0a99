"""What a job's test code shows the sandboxed child, and what the pool keeps to itself.

`split` validates a test spec (`specs.validate`) and separates it into the part sent to the
sandbox (programs, arguments, stdin, test code) and the part that never leaves this process
(`Expected`: return values, output, the literals of the checks the pool holds).
`hide_expected_literals` rewrites assert and unittest code so that each check reports its value
and the pool compares it (`verdicts.judge`); reading the caller's frame or constants in the child
finds no expected literal.
"""

from __future__ import annotations

import ast
import collections
import copy
import dataclasses
import json
from typing import Any, Mapping, Sequence

from precisecoder.execution.parent import specs


@dataclasses.dataclass(frozen=True)
class Expected:
  """What the verdict needs and the child never sees."""

  kind: str
  values: tuple = ()  # call: expected return values (after a JSON round trip)
  outputs: tuple = ()  # io: expected stdout per case
  test_names: frozenset = frozenset()  # unittest: every "Class.test_method" that must pass
  checks: tuple = ()  # assert, unittest: (operator, literal) per check the pool took over
  required: frozenset = frozenset()  # assert, unittest: the checks every honest run reports
  # assert: where every check is held and reports the program's return value (`held_order`),
  # the check indices in the order every honest run reports them, each report exactly once;
  # the pool then runs the job in one process and requires exactly this order.
  order: tuple[int, ...] | None = None


def split(tests: Mapping[str, Any]) -> tuple[dict, Expected]:
  """(spec for the child, expected results kept here). Raises InvalidTests (specs.validate)."""
  specs.validate(tests)
  kind = tests["kind"]
  if kind == "call":
    child_cases, values = [], []
    for case in tests["cases"]:
      child_cases.append(
        _round_trip({"args": case.get("args", []), "kwargs": dict(case.get("kwargs", {}))})
      )
      values.append(_round_trip(case["expected"]))
    return (
      {"kind": kind, "entry_point": tests["entry_point"], "cases": child_cases},
      Expected(kind, values=tuple(values)),
    )
  if kind == "io":
    child_cases = [{"stdin": case["stdin"]} for case in tests["cases"]]
    outputs = tuple(case["stdout"] for case in tests["cases"])
    return {"kind": kind, "cases": child_cases}, Expected(kind, outputs=outputs)
  code = tests["code"]
  if kind == "assert":
    child_code, checks, required = hide_expected_literals(code)
    order = held_order(child_code, len(checks))
    return (
      {"kind": kind, "code": child_code},
      Expected(kind, checks=tuple(checks), required=required, order=order),
    )
  classes, names = specs.test_names(code)
  child_code, checks, required = hide_expected_literals(code, classes)
  return (
    {"kind": kind, "code": child_code, "classes": classes},
    Expected(kind, test_names=frozenset(names), checks=tuple(checks), required=required),
  )


def _round_trip(value: Any) -> Any:
  """`value` as the child and the verdict see it (specs.validate checked it is JSON data)."""
  return json.loads(json.dumps(value))


EXPECT_NAME = "__precisecoder_expect__"  # harness.EXPECT_NAME
_OPERATORS = {ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not"}


def _literal(node: ast.AST) -> tuple[bool, Any]:
  """(True, its value) for a literal, or a constant subscript of one (`[5, 42][0]`), else
  (False, None)."""
  try:
    if isinstance(node, ast.Subscript):
      (known, container), (index_known, index) = _literal(node.value), _literal(node.slice)
      if not (known and index_known):
        return False, None
      return True, container[index]
    return True, ast.literal_eval(node)
  except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, LookupError):
    return False, None


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None))


def _immutable(value: Any) -> bool:
  if isinstance(value, (tuple, frozenset)):
    return all(_immutable(item) for item in value)
  return isinstance(value, _IMMUTABLE)


def _inline_constants(tree: ast.Module) -> None:
  """Puts the literal in place of a name bound once to it, where nothing can tell the difference,
  so that `want = [5, 42]` then `assert f(2, 3) == want[0]` is a check the pool holds too.

  A name qualifies when the test code binds it exactly once, by `NAME = LITERAL` at the top
  level of a function (HumanEval's `check`, a unittest test), never declares it global or
  nonlocal, and reads it only later in that same body (not from a nested function); a mutable
  value (a list, a dict) only as an operand of == or != or of assertEqual/assertNotEqual, or a
  constant subscript of one. The assignment becomes `pass`, so the literal leaves the child.
  Module-level names are left alone: the module's globals are the program's too, and a program's
  function may read the very global the tests bind.
  """
  bindings: collections.Counter = collections.Counter()
  loads: dict[str, list[ast.Name]] = collections.defaultdict(list)
  parents: dict[int, ast.AST] = {}
  nodes = [tree]
  for node in nodes:  # breadth first, as ast.walk, listing each node's parent on the way
    for child in ast.iter_child_nodes(node):
      parents[id(child)] = node
      nodes.append(child)
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
      loads[node.id].append(node)
    bindings.update(_bound_names(node))
  scopes = [node for node in nodes if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
  for scope in scopes:
    for position, statement in enumerate(scope.body):
      if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
      ):
        continue
      name = statement.targets[0].id
      known, value = _literal(statement.value)
      if not known or bindings[name] != 1 or not loads[name]:
        continue
      later = {id(node) for rest in scope.body[position + 1 :] for node in _same_scope(rest)}
      reads = loads[name]
      if not all(id(read) in later for read in reads):
        continue  # read before, elsewhere, or from a nested function
      if not _immutable(value) and not all(_compared(read, parents) for read in reads):
        continue
      for read in reads:
        _replace(parents[id(read)], read, ast.copy_location(copy.deepcopy(statement.value), read))
      scope.body[position] = ast.copy_location(ast.Pass(), statement)


def _bound_names(node: ast.AST) -> list[str]:
  """The names `node` itself binds: an assignment or deletion target, a def or class, an
  argument, an import. A global or nonlocal name counts twice: it is never bound just once."""
  if isinstance(node, ast.Name):
    return [] if isinstance(node.ctx, ast.Load) else [node.id]
  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
    return [node.name]
  if isinstance(node, ast.arg):
    return [node.arg]
  if isinstance(node, ast.alias):
    return [(node.asname or node.name).split(".")[0]]
  if isinstance(node, (ast.Global, ast.Nonlocal)):
    return list(node.names) * 2
  return []


def _same_scope(statement: ast.stmt):
  """The nodes of `statement` that run in its own scope (not in a nested function or class)."""
  stack = [statement]
  while stack:
    node = stack.pop()
    if isinstance(
      node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.comprehension)
    ):
      continue
    yield node
    stack.extend(ast.iter_child_nodes(node))


def _compared(read: ast.Name, parents: dict[int, ast.AST]) -> bool:
  """Whether `read` (or a constant subscript of it) is only compared with == or !=."""
  node, parent = read, parents.get(id(read))
  if isinstance(parent, ast.Subscript) and parent.value is node and _literal(parent.slice)[0]:
    node, parent = parent, parents.get(id(parent))
  if isinstance(parent, ast.Compare):
    return all(isinstance(op, (ast.Eq, ast.NotEq)) for op in parent.ops)
  return (
    isinstance(parent, ast.Call)
    and isinstance(parent.func, ast.Attribute)
    and parent.func.attr in ("assertEqual", "assertNotEqual")
    and node in parent.args
  )


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
  for field, value in ast.iter_fields(parent):
    if value is old:
      setattr(parent, field, new)
    elif isinstance(value, list):
      setattr(parent, field, [new if item is old else item for item in value])


class _AssertRewriter(ast.NodeTransformer):
  """`assert X == LITERAL` -> `__precisecoder_expect__(k, X)`; the pool keeps LITERAL."""

  def __init__(self):
    self.checks: list[tuple[str, Any]] = []

  def visit_FunctionDef(self, node):  # pylint: disable=invalid-name
    self.generic_visit(node)
    # Bound at definition time, before any program code runs inside the tests:
    # rebinding the global later cannot reach calls made from this function.
    node.args.kwonlyargs.append(ast.arg(EXPECT_NAME))
    node.args.kw_defaults.append(ast.Name(EXPECT_NAME, ast.Load()))
    return node

  visit_AsyncFunctionDef = visit_FunctionDef

  def visit_Assert(self, node):  # pylint: disable=invalid-name
    return self._hold(node, _comparison(node.test) or _tolerance(node.test) or _truth(node.test))

  def _hold(self, node: ast.stmt, held: tuple[ast.expr, str, Any] | None) -> ast.stmt:
    """`node` as a report of the held check's expression (the pool keeps the rest), or as is."""
    if held is None:
      return node
    expression, operator, literal = held
    self.checks.append((operator, literal))
    call = ast.Call(
      ast.Name(EXPECT_NAME, ast.Load()), [ast.Constant(len(self.checks) - 1), expression], []
    )
    return ast.copy_location(ast.Expr(call), node)


def _comparison(test: ast.expr) -> tuple[ast.expr, str, Any] | None:
  """`X == LITERAL` (also !=, is None/True/False; either side) -> (X, operator, LITERAL)."""
  if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPERATORS):
    return None
  operator = _OPERATORS[type(test.ops[0])]
  (left_literal, left), (right_literal, right) = _literal(test.left), _literal(test.comparators[0])
  if left_literal == right_literal:
    return None
  expression, literal = (test.comparators[0], left) if left_literal else (test.left, right)
  if operator in ("is", "is not") and literal not in (None, True, False):
    return None
  if literal is None and operator in ("==", "!="):
    return None  # hides nothing, and an object that is not plain data may define == None itself
  return expression, operator, literal


def _number(node: ast.expr) -> tuple[bool, Any]:
  known, value = _literal(node)
  return known and type(value) in (int, float), value  # pylint: disable=unidiomatic-typecheck


def _tolerance(test: ast.expr) -> tuple[ast.expr, str, Any] | None:
  """`abs(X - A) < T` (also <=, math.fabs, A - X) with A and T numbers
  -> (X, "near<" or "near<=", (A, T, whether it is math.fabs)).

  The pool computes the distance with the real abs: in the child, `abs` is looked up in the
  namespace the program shares."""
  if not (
    isinstance(test, ast.Compare)
    and len(test.ops) == 1
    and isinstance(test.ops[0], (ast.Lt, ast.LtE))
  ):
    return None
  call, (is_number, tolerance) = test.left, _number(test.comparators[0])
  if not (
    is_number
    and isinstance(call, ast.Call)
    and len(call.args) == 1
    and not call.keywords
    and ast.unparse(call.func) in ("abs", "math.fabs")
    and isinstance(call.args[0], ast.BinOp)
    and isinstance(call.args[0].op, ast.Sub)
  ):
    return None
  difference = call.args[0]
  (left_number, left), (right_number, right) = _number(difference.left), _number(difference.right)
  if left_number == right_number:
    return None
  expression, centre = (difference.right, left) if left_number else (difference.left, right)
  operator = "near<" if isinstance(test.ops[0], ast.Lt) else "near<="
  return expression, operator, (centre, tolerance, ast.unparse(call.func) == "math.fabs")


def _truth(test: ast.expr) -> tuple[ast.expr, str, Any] | None:
  """`assert X` / `assert not X` (X a call, name, attribute or subscript) -> (X, "truthy"/"falsy").

  The child code shows the same report call either way, so a program that forges reports does
  not learn which answer an index wants."""
  operator = "truthy"
  if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
    test, operator = test.operand, "falsy"
  if not isinstance(test, (ast.Call, ast.Name, ast.Attribute, ast.Subscript)):
    return None
  return test, operator, None


def hide_expected_literals(
  code: str, classes: Sequence[str] | None = None
) -> tuple[str, list[tuple[str, Any]], frozenset[int]]:
  """Test code without its expected literals, those literals, and which of them every run
  reaches. `classes`: the code is unittest code with these TestCase classes.

  Each `assert EXPR == LITERAL` (also `!=`, `is None/True/False`, either
  side; a tolerance; a truth) becomes a call that reports EXPR's value; the
  pool compares it with LITERAL, which never enters the child, so reading the
  caller's frame or constants finds nothing. In unittest code so do
  `self.assertEqual(EXPR, LITERAL)` and its kin (`_UNITTEST_CHECKS`). Other
  asserts run unchanged in the child.
  """
  try:
    tree = ast.parse(code)
  except SyntaxError:
    return code, [], frozenset()  # the child reports the syntax error as a failure
  _inline_constants(tree)
  rewriter = _AssertRewriter() if classes is None else _UnittestRewriter()
  tree = ast.fix_missing_locations(rewriter.visit(tree))
  if not rewriter.checks:
    return code, [], frozenset()
  reached = _reached_checks(tree) if classes is None else _reached_in_tests(tree, classes)
  return ast.unparse(tree), rewriter.checks, reached


class _UnittestRewriter(_AssertRewriter):
  """Also `self.assertEqual(EXPR, LITERAL)` and its kin -> a report of EXPR."""

  def visit_Expr(self, node):  # pylint: disable=invalid-name
    self.generic_visit(node)
    return self._hold(node, _unittest_check(node.value))


def _unittest_check(call: ast.expr) -> tuple[ast.expr, str, Any] | None:
  """`self.assertEqual(X, LITERAL)` (and `_UNITTEST_CHECKS`) -> (X, operator, literal)."""
  if not (
    isinstance(call, ast.Call)
    and isinstance(call.func, ast.Attribute)
    and isinstance(call.func.value, ast.Name)
    and call.func.value.id == "self"
    and call.func.attr in _UNITTEST_CHECKS
    and not any(isinstance(a, ast.Starred) for a in call.args)
  ):
    return None
  method, args = call.func.attr, call.args
  keywords = {k.arg: k.value for k in call.keywords}
  if None in keywords:  # **kwargs
    return None
  arity, extra = _UNITTEST_CHECKS[method]
  if len(args) < arity or len(args) > arity + len(extra) or not set(keywords) <= set(extra):
    return None
  options = dict(zip(extra, args[arity:])) | keywords
  options.pop("msg", None)
  if method in ("assertTrue", "assertFalse", "assertIsNone", "assertIsNotNone"):
    if options or _literal(args[0])[0]:
      return None
    operator = {
      "assertTrue": "truthy",
      "assertFalse": "falsy",
      "assertIsNone": "is",
      "assertIsNotNone": "is not",
    }[method]
    return args[0], operator, None
  if method == "assertAlmostEqual":
    known = [_number(node) for node in args]
    settings = {name: _literal(node) for name, node in options.items()}
    if known[0][0] == known[1][0] or not all(k for k, _ in settings.values()):
      return None
    places, delta = (settings.get(name, (True, None))[1] for name in ("places", "delta"))
    if places is not None and delta is not None:
      return None  # unittest refuses both: let it say so in the child
    expression, centre = (args[1], known[0][1]) if known[0][0] else (args[0], known[1][1])
    return expression, "almost", (centre, 7 if places is None else places, delta)
  if options:
    return None
  operator = {
    "assertEqual": ast.Eq,
    "assertNotEqual": ast.NotEq,
    "assertIs": ast.Is,
    "assertIsNot": ast.IsNot,
  }[method]
  return _comparison(ast.Compare(args[0], [operator()], [args[1]]))


# method -> (positional arguments it compares, further arguments it takes, in order)
_UNITTEST_CHECKS = {
  "assertEqual": (2, ("msg",)),
  "assertNotEqual": (2, ("msg",)),
  "assertIs": (2, ("msg",)),
  "assertIsNot": (2, ("msg",)),
  "assertTrue": (1, ("msg",)),
  "assertFalse": (1, ("msg",)),
  "assertIsNone": (1, ("msg",)),
  "assertIsNotNone": (1, ("msg",)),
  "assertAlmostEqual": (2, ("places", "msg", "delta")),
}


def _reached_in_tests(tree: ast.Module, classes: Sequence[str]) -> frozenset[int]:
  """The rewritten checks at the top level of a test method that every honest run of its
  TestCase reaches: no decorator on the class or method (skip, expectedFailure), no early
  return, and no skip anywhere in the method or in the class's setUp/setUpClass."""
  reached: set[int] = set()
  for node in tree.body:
    if not (isinstance(node, ast.ClassDef) and node.name in classes and not node.decorator_list):
      continue
    methods = {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
    if any(_skips(methods[name]) for name in ("setUp", "setUpClass") if name in methods):
      continue
    for name, method in methods.items():
      if (
        name.startswith("test")
        and not method.decorator_list
        and not _skips(method)
        and not _may_leave_early(method)
      ):
        reached |= _top_level_checks(method.body)
  return frozenset(reached)


def _skips(function: ast.FunctionDef) -> bool:
  """Whether the function mentions skipping (self.skipTest, raise SkipTest, unittest.skip)."""
  return any(
    isinstance(node, (ast.Name, ast.Attribute))
    and (node.id if isinstance(node, ast.Name) else node.attr) in ("skipTest", "SkipTest", "skip")
    for node in ast.walk(function)
  )


def _reached_checks(tree: ast.Module) -> frozenset[int]:
  """The rewritten asserts that every run which ends normally reports: those at the top level
  of the module, and those at the top level of a function the module calls at its top level
  (HumanEval's `def check(candidate): ...` then `check(f)`) that cannot return early.

  The pool requires a report of each: a program that forges the harness's records (it can
  find their nonce in its own memory) must still report these values, and only the right
  values pass, which it cannot know without computing them.
  """
  calls, bound = set(), collections.Counter()  # how often each top-level name is bound
  bodies = {}
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      bodies[node.name] = node
    elif (
      isinstance(node, ast.Expr)
      and isinstance(node.value, ast.Call)
      and isinstance(node.value.func, ast.Name)
    ):
      calls.add(node.value.func.id)
    for part in ast.walk(node) if not isinstance(node, ast.FunctionDef) else [node]:
      bound.update(_bound_names(part))
  reached = _top_level_checks(tree.body)
  for name in calls:
    function = bodies.get(name)
    if (
      function is not None
      and bound[name] == 1
      and not function.decorator_list
      and isinstance(function, ast.FunctionDef)
      and not _may_leave_early(function)
    ):
      reached |= _top_level_checks(function.body)
  return frozenset(reached)


def _top_level_checks(body: list[ast.stmt]) -> set[int]:
  return {
    node.value.args[0].value
    for node in body
    if isinstance(node, ast.Expr)
    and isinstance(node.value, ast.Call)
    and isinstance(node.value.func, ast.Name)
    and node.value.func.id == EXPECT_NAME
  }


def _may_leave_early(function: ast.FunctionDef) -> bool:
  """Whether a call can end without running the function's whole body (return, yield)."""
  stack = list(function.body)
  while stack:
    node = stack.pop()
    if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)):
      return True
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
      stack.extend(ast.iter_child_nodes(node))
  return False


def held_order(child_code: str, checks: int) -> tuple[int, ...] | None:
  """The order in which every run of assert test code (as `hide_expected_literals` left it)
  reports its `checks` checks, each exactly once, where the code can decide nothing itself; else
  None.

  Such code is, at its top level, only imports, constant assignments (`METADATA = {...}`),
  docstrings, `pass`, `assert` of a true constant, reports, function definitions (no decorator,
  plain positional parameters) whose bodies hold only the same statements but definitions, and
  calls `check(f)` of a function defined above with a name the tests never bind (the program's).
  Every report is `__precisecoder_expect__(k, F(ARGS))`: F a name the tests never bind, or the
  parameter of the function it is in, and ARGS constant expressions (literals and arithmetic on
  them). So no report sits in a loop, branch or `try`, no function can return early, and no
  value the program computes is examined before the pool has it: each reported value is a
  return value of the program, as a `call` job's are. The order is that of the statements, each
  call of a function standing for its reports.
  """
  try:
    tree = ast.parse(child_code)
  except SyntaxError:
    return None
  bound = collections.Counter()
  for node in ast.walk(tree):
    bound.update(_bound_names(node))
  bodies: dict[str, tuple[int, ...]] = {}
  order: list[int] = []
  for node in tree.body:
    if isinstance(node, ast.FunctionDef):
      reports = _held_function(node, bound)
      if reports is None or bound[node.name] != 1:
        return None
      bodies[node.name] = reports
      continue
    if _inert(node):
      continue
    report = _held_report(node, bound, parameter=None)
    if report is not None:
      order.append(report)
      continue
    if not (
      isinstance(node, ast.Expr)
      and isinstance(node.value, ast.Call)
      and isinstance(node.value.func, ast.Name)
      and node.value.func.id in bodies
      and len(node.value.args) == 1
      and not node.value.keywords
      and isinstance(node.value.args[0], ast.Name)
      and not bound[node.value.args[0].id]
    ):
      return None
    order.extend(bodies[node.value.func.id])
  if sorted(order) != list(range(checks)) or not checks:
    return None  # a check reported twice or never, or a report the rewriter did not make
  return tuple(order)


def _held_function(function: ast.FunctionDef, bound: collections.Counter) -> tuple[int, ...] | None:
  """The reports of a function of held code, in order (`held_order`), or None."""
  args = function.args
  if (
    function.decorator_list
    or function.returns is not None
    or args.posonlyargs
    or args.vararg
    or args.kwarg
    or args.defaults
    or len(args.args) != 1
    or [a.arg for a in args.kwonlyargs] != [EXPECT_NAME]
    or not (isinstance(args.kw_defaults[0], ast.Name) and args.kw_defaults[0].id == EXPECT_NAME)
  ):
    return None
  parameter = args.args[0].arg
  if bound[parameter] != 1:  # the parameter is bound nowhere else (no import, no assignment)
    return None
  reports = []
  for node in function.body:
    if _inert(node):
      continue
    report = _held_report(node, bound, parameter)
    if report is None:
      return None
    reports.append(report)
  return tuple(reports)


def _inert(node: ast.stmt) -> bool:
  """A statement of held code that can neither fail nor reach the program."""
  if isinstance(node, ast.Pass):
    return True
  if isinstance(node, (ast.Import, ast.ImportFrom)):  # not `*`: it binds names no one can list
    return all(alias.name != "*" for alias in node.names)
  if isinstance(node, ast.Expr):
    return isinstance(node.value, ast.Constant)
  if isinstance(node, ast.Assert):
    known, value = _literal(node.test)
    return known and bool(value)
  return (
    isinstance(node, ast.Assign)
    and all(isinstance(target, ast.Name) for target in node.targets)
    and _constant(node.value)
  )


def _held_report(node: ast.stmt, bound: collections.Counter, parameter: str | None) -> int | None:
  """k, for `__precisecoder_expect__(k, F(ARGS))` as `held_order` allows it; else None."""
  if not (
    isinstance(node, ast.Expr)
    and isinstance(node.value, ast.Call)
    and isinstance(node.value.func, ast.Name)
    and node.value.func.id == EXPECT_NAME
    and len(node.value.args) == 2
    and not node.value.keywords
  ):
    return None
  index, value = node.value.args
  if not (isinstance(index, ast.Constant) and type(index.value) is int):  # pylint: disable=unidiomatic-typecheck
    return None
  if not (
    isinstance(value, ast.Call)
    and isinstance(value.func, ast.Name)
    and (value.func.id == parameter or not bound[value.func.id])
    and all(_constant(arg) for arg in value.args)
    and all(keyword.arg is not None and _constant(keyword.value) for keyword in value.keywords)
  ):
    return None
  return index.value


_CONSTANT_NODES = (
  ast.Constant,
  ast.List,
  ast.Tuple,
  ast.Set,
  ast.Dict,
  ast.BinOp,
  ast.UnaryOp,
  ast.operator,
  ast.unaryop,
  ast.expr_context,
)


def _constant(node: ast.expr) -> bool:
  """Whether an expression is literals and arithmetic on them only: no name, call, attribute or
  subscript, so that it computes the same wherever it runs, and nothing of the program."""
  return all(isinstance(part, _CONSTANT_NODES) for part in ast.walk(node))
