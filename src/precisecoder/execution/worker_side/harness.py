"""The code that runs inside a sandboxed child, around the untrusted program.

It executes the program, runs the part of the test spec that the child may
see, and writes JSON lines to the private channel fd. It never decides a
verdict: the pool judges the records (`verdicts.py`). Call and io jobs run the
program here: their records hold only what the program returned or printed,
which the pool compares with expected values the child never sees. Assert and
unittest jobs run split (`_run_split`): the test code here, the program in a
process of its own (`split_tests`), so no record is ever written where the
program runs. The one-process path for them (`_run_one_process`) has no
defence and runs only where the pool was told it is unsafe.

Records (one JSON object per line; N is the run's nonce):
  {"ready": NONCE}                          sandbox up, program about to run
  {"case": i, "value": V} / {"case": i, "error": E}      call: one per case
  {"expect": k, "value": TAGGED, "nonce": N}            a value the pool judges (assert,
                                                        unittest), or, not being plain data,
  {"expect": k, "truthy": bool, "error": E, "nonce": N} its truth alone
  {"test": NAME, "outcome": "ok"|"fail"|"error"|"skip", "detail": D, "nonce": N}
  {"end": KIND, "nonce": N[, "expects": count]}        the harness reached its last line
  {"error": E, "memory": bool}              the program or test code raised
"""

from __future__ import annotations

import ast
import atexit
import base64
import builtins
import collections
import dataclasses
import decimal
import fractions
import functools
import gc
import marshal
import os
import stat
import sys
import traceback
import types
from typing import Iterable

from precisecoder.execution.shared.programs import PROGRAM_FILENAME, compile_program, marshalled
from precisecoder.execution.shared.protocol import compact_encoder
from precisecoder.execution.program_side import split_program
from precisecoder.execution.test_side import split_tests  # loaded by the worker: runs fork with it

_write = os.write


class PlainDataError(TypeError):
  """A value that is not the exact-typed data a check's report holds (`to_plain`, `to_tagged`)."""


def kind_name(value) -> str:
  kind = type(value)
  return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"


def _refuse(value):
  raise TypeError(f"a {kind_name(value)} is not JSON data")


# Made before any fork. Records hold only what to_plain / to_tagged built, which stop at
# _MAX_DEPTH, so the encoder's missing circular-reference check is not needed.
_encode = compact_encoder(_refuse)


_exit = os._exit
_type = type
_isinstance = isinstance
_getattr = getattr
_sorted = sorted
_plain_scalars = (_type(None), bool, int, float, str)
# Library dicts that compare as the dict they hold; sent as that dict (read with dict.items).
_DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)
_dict_items = dict.items
_dict_update = dict.update
# Dict views compare as Python compares them (keys and items as sets, values never equal): sent
# as their contents and rebuilt in the pool as real views of a dict.
_VIEWS = {_type({}.keys()): "ks", _type({}.items()): "is", _type({}.values()): "vs"}
# Reads an instance's attribute past any __getattr__ of its class.
_attribute = object.__getattribute__
# Library containers that compare as the built-in value they wrap (collections.abc's Mapping.__eq__,
# UserList's and UserString's own), sent as that value when it is exactly of the base type.
_WRAPPERS = {collections.UserDict: dict, collections.UserList: list, collections.UserString: str}
# Subclasses of these (IntEnum, namedtuple, a str enum) are sent as the base value they hold,
# read by the base type's own C method: what a subclass overrides never runs. The pool then
# compares that value, as the base type's comparison would.
_BASE_VALUES = (
  (int, int.__int__),
  (float, float.__float__),
  (str, str.__str__),
  (tuple, lambda value: tuple(tuple.__iter__(value))),
)
# Library numbers, read through descriptors bound now, before any program can patch the classes.
_FRACTION, _DECIMAL = fractions.Fraction, decimal.Decimal
_FRACTION_PARTS = (
  _FRACTION.__dict__["_numerator"].__get__,
  _FRACTION.__dict__["_denominator"].__get__,
)
_decimal_text = decimal.Decimal.__str__
_MAX_DEPTH = 64
TESTS_FILENAME = "<tests>"
EXIT_UNCAUGHT = 1


def _numpy_scalar(value):
  """A numpy scalar (exact numpy type) as the Python value it equals, else None."""
  numpy = sys.modules.get("numpy")
  if numpy is None or _type(value) not in _numpy_scalar_types(numpy):
    return None
  return value.item()


def _numpy_dtype(value) -> str | None:
  """A plain numpy dtype (numbers, bool, text, dates) as its descriptor ('<i8'), else None:
  `df['a'].dtype == 'int64'` is a comparison numpy decides, so the pool rebuilds the dtype."""
  numpy = sys.modules.get("numpy")
  if numpy is None or not issubclass(_type(value), numpy.dtype) or value.fields is not None:
    return None
  return value.str if value.kind in "biufcmMSU" else None


_ARRAY_ITEMS = 64  # what a literal is compared with: one item, or a few (larger: not plain data)


def _numpy_array(value, kind: type) -> list | None:
  """A small numpy array or masked array of numbers, bools or text, exactly of those types, as
  [dtype, shape, items, mask or None] for the pool to rebuild: `assertEqual(a, 5)` holds when
  `a == 5` is true, as numpy decides it (a one-item array, masked or not), else None."""
  numpy = sys.modules.get("numpy")
  if numpy is None or kind is not numpy.ndarray and kind is not numpy.ma.MaskedArray:
    return None
  dtype = value.dtype
  if dtype.kind not in "biufcUS" or dtype.fields is not None or value.size > _ARRAY_ITEMS:
    return None
  data = numpy.asarray(value)  # a masked array's data, as an ndarray
  mask = numpy.ma.getmaskarray(value).ravel().tolist() if kind is not numpy.ndarray else None
  return [value.dtype.str, list(value.shape), to_tagged(data.ravel().tolist()), mask]


@functools.lru_cache(maxsize=1)
def _numpy_scalar_types(numpy) -> frozenset:
  return frozenset(
    t
    for t in numpy.sctypeDict.values()
    if t not in (numpy.object_, numpy.void) and issubclass(t, numpy.generic)
  )


def _base_value(value, kind: type):
  """A subclass of int, float, str or tuple as the exact base value it holds, else None."""
  for base, read in _BASE_VALUES:
    if issubclass(kind, base):
      return read(value)
  return None


def to_plain(value, depth: int = 0):
  """`value` as JSON-ready data with exact types; subclasses of int, float, str and tuple
  as their base value (`_base_value`), other subclasses are rejected."""
  kind = _type(value)
  if depth > _MAX_DEPTH:
    raise PlainDataError("value nested too deeply")
  if kind in _plain_scalars:
    return value
  if kind is list or kind is tuple:
    return [to_plain(item, depth + 1) for item in value]
  if kind in _DICT_TYPES:
    out = {}
    for key, item in _dict_items(value):
      if _type(key) not in _plain_scalars:
        raise PlainDataError(f"dict key of type {kind_name(key)}")
      out[key] = to_plain(item, depth + 1)
    return out
  scalar = _numpy_scalar(value)
  if scalar is None:
    scalar = _base_value(value, kind)
  if scalar is not None:
    return to_plain(scalar, depth)
  raise PlainDataError(f"a {kind_name(value)} is not JSON data")


def to_tagged(value, depth: int = 0):
  """Exact-typed JSON for assert-kind values: containers tagged, so the pool rebuilds them."""
  kind = _type(value)
  if depth > _MAX_DEPTH:
    raise PlainDataError("value nested too deeply")
  if kind in _plain_scalars:
    return {"f": repr(value)} if kind is float else value
  if kind is list or kind is tuple:
    return {"l" if kind is list else "t": [to_tagged(v, depth + 1) for v in value]}
  if kind is set or kind is frozenset:
    return {"s" if kind is set else "fs": [to_tagged(v, depth + 1) for v in value]}
  if kind in _DICT_TYPES:
    return {
      "d": [[to_tagged(k, depth + 1), to_tagged(v, depth + 1)] for k, v in _dict_items(value)]
    }
  if kind is bytes:
    return {"b": value.hex()}
  if kind is complex:
    return {"c": [value.real, value.imag]}
  if kind is _FRACTION:
    return {"q": [to_tagged(part(value), depth + 1) for part in _FRACTION_PARTS]}
  if kind is _DECIMAL:
    return {"m": _decimal_text(value)}
  view = _VIEWS.get(kind)
  if view is not None:
    return {view: [to_tagged(v, depth + 1) for v in value]}
  dtype = _numpy_dtype(value)
  if dtype is not None:
    return {"dt": dtype}
  array = _numpy_array(value, kind)
  if array is not None:
    return {"nd": array}
  scalar = _numpy_scalar(value)
  if scalar is None:
    scalar = _base_value(value, kind)
  if scalar is None:
    scalar = _wrapped(value, kind)
  if scalar is not None:  # equal to the value it holds, but no singleton: `is True` fails
    return {"v": to_tagged(scalar, depth)}
  raise PlainDataError(f"a {kind_name(value)} is not plain data")


def _wrapped(value, kind: type):
  """A UserDict, UserList, UserString or ChainMap as the built-in value it compares as, else None.

  Only exact library types, holding exact built-in data: a program's subclass, or one whose data
  it swapped for its own object, is not plain data."""
  base = _WRAPPERS.get(kind)
  if base is not None:
    data = _attribute(value, "data")
    return data if _type(data) is base else None
  if kind is collections.ChainMap:
    maps = _attribute(value, "maps")
    if _type(maps) is not list or any(_type(layer) is not dict for layer in maps):
      return None
    merged = {}
    for layer in reversed(maps):  # the first map holding a key gives its value
      _dict_update(merged, layer)
    return merged
  return None


class Channel:
  """Records for the private fd; a closed or hijacked fd loses them.

  Each record is written as it is made: the worker reads the pipe only when the run ends or at
  its ticks, so a write costs the run a system call and wakes nobody, and a record that fails
  the run is in the pipe before the tests go on (the pool stops such a run at the next tick:
  `verdicts.RunningChecks`). "ready" is the first (the worker reads it as "the sandbox came
  up").
  """

  def __init__(self, fd: int, nonce: str):
    self._fd = fd
    self._nonce = nonce

  def send_ready(self) -> None:
    self._write(f'{{"ready":"{self._nonce}"}}\n')

  def send(self, record: dict, signed: bool = False) -> None:
    if signed:
      record["nonce"] = self._nonce
    self._write(_encode(record) + "\n")

  def _write(self, text: str) -> None:
    data = text.encode()
    while data:
      data = data[_write(self._fd, data) :]


# The next run's plan, made by `warm`: a list filled in place.
_PLAN: list["_Plan"] = []


def prepare() -> None:
  """Called by the worker before it forks: children inherit all of this for free."""
  _rehearse()
  _rehearse_split()


# Trusted toy jobs, one per kind that loads a module: child-side specs, as expectations.split
# makes them.
_REHEARSAL_PROGRAM = "def f(x):\n  return x + 1\n"
_REHEARSAL_TESTS = (
  {"kind": "call", "entry_point": "f", "cases": [{"args": [1], "kwargs": {}}]},
  {"kind": "assert", "code": "__precisecoder_expect__(0, f(1))\nassert f(1) > 1\n"},
  {
    "kind": "unittest",
    "classes": ["Rehearsal"],
    "code": "import unittest\nclass Rehearsal(unittest.TestCase):\n"
    "  def test_f(self, *, __precisecoder_expect__=__precisecoder_expect__):\n"
    "    __precisecoder_expect__(0, f(1))\n    self.assertGreater(f(1), 1)\n",
  },
)
_REHEARSAL_CODE = base64.b64encode(marshalled(_REHEARSAL_PROGRAM)[0]).decode("ascii")
_PROGRAM_MODULE = "__precisecoder_program__"


def _rehearse(times: int = 64) -> None:
  """Runs the child-side code on the toy jobs here in the worker, before any fork.

  CPython 3.11 specialises bytecode in place as it runs it, and caches the
  attributes it finds on types in a table of its own. Code that first runs in
  a child writes its code objects and that table, which the child shares with
  the worker copy-on-write, and so pays for copied pages, specialising and
  looking up anew on every run. Rehearsed here (all of `_session`), every child
  inherits it specialised and found. What only a child runs (`worker._child`,
  `Sandbox.enter_child`) calls what it needs bound, reading no attributes.
  """
  sink = os.open(os.devnull, os.O_WRONLY)
  try:
    for _ in range(times):
      for tests in _REHEARSAL_TESTS:
        job = {"code": _REHEARSAL_CODE, "tests": tests}
        warm(job)
        if _session(Channel(sink, "0" * 32), job) != 0:
          raise RuntimeError(f"the harness failed its own {tests['kind']} rehearsal")
  finally:
    _PLAN.clear()
    sys.modules.pop(_PROGRAM_MODULE, None)
    os.close(sink)
    gc.collect()  # the toy TestCase classes: garbage now, not frozen into every child


@dataclasses.dataclass(frozen=True)
class _Plan:
  """What a run needs that trusted input alone decides, made in the worker before it forks:
  work a child would repeat in every run, copying the pages it writes (lru_caches rewrite their
  links on a hit, compiling allocates)."""

  program: types.CodeType | None  # as the pool compiled it; None: the child compiles the source
  tests: types.CodeType | None  # assert and unittest kinds
  test_imports: tuple[str, ...] = ()  # split runs: loaded before the program's process exists
  # Split runs: the names the tests' top level takes from the program (none: it stands alone).
  tests_top_names: frozenset[str] = frozenset()


def warm(job: dict) -> None:
  """In the worker, before the fork: plans the run of `job` (`_Plan`).

  "code" is the program as the pool compiled it (base64 of `programs.marshalled`): our own
  compiler's output, loaded here so that the child neither compiles nor loads it.
  """
  program = marshal.loads(base64.b64decode(job["code"])) if "code" in job else None
  tests = job["tests"]
  if tests["kind"] in ("assert", "unittest"):
    plan = _Plan(program, *_planned_tests(tests["code"]))
  else:
    plan = _Plan(program, None)
  _PLAN[:] = [plan]


@functools.lru_cache(maxsize=256)
def _planned_tests(code: str) -> tuple[types.CodeType, tuple[str, ...], frozenset[str]]:
  """The part of a plan that the test code alone decides (`_Plan` from `tests` on), worked out
  once per test code (ours, trusted): RL scores many programs against one spec."""
  tree = ast.parse(code, TESTS_FILENAME)
  compiled = compile(tree, TESTS_FILENAME, "exec", dont_inherit=True, optimize=0)
  return compiled, test_imports(ast.walk(tree)), top_level_names(tree, (EXPECT_NAME,))


def test_imports(nodes: Iterable[ast.AST]) -> tuple[str, ...]:
  """The modules test code (ours, trusted; every node of its tree, as `ast.walk` lists them)
  imports, with the submodules it reaches by attribute.

  `import numpy as np` then `np.testing.assert_array_equal(...)` gives ("numpy",
  "numpy.testing", "numpy.testing.assert_array_equal"): a split run's test process imports them
  before the program's process exists (`split_tests.seal`), from read-only directories only.
  Names that are not modules fail to import and are skipped.
  """
  nodes = list(nodes)
  aliases: dict[str, str] = {}
  found: list[str] = []
  for node in nodes:
    if _isinstance(node, ast.Import):
      for alias in node.names:
        found.append(alias.name)
        if alias.asname:  # import numpy.testing as npt: npt is numpy.testing
          aliases[alias.asname] = alias.name
        else:  # import os.path: the name bound is os
          aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
    elif _isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      found.append(node.module)
      for alias in node.names:  # from numpy import testing: testing may be a module
        if alias.name != "*":
          found.append(f"{node.module}.{alias.name}")
          aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
  for node in nodes:
    chain = _dotted(node) if _isinstance(node, ast.Attribute) else None
    if chain and chain[0] in aliases:
      root = aliases[chain[0]]
      found += [".".join([root, *chain[1:i]]) for i in range(2, len(chain) + 1)]
  return tuple(dict.fromkeys(found))


def _dotted(node) -> list[str] | None:
  """["np", "testing", "assert_array_equal"] for the expression np.testing.assert_array_equal."""
  parts = []
  while _isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not (_isinstance(node, ast.Name) and parts):
    return None
  return [node.id, *reversed(parts)]


def top_level_names(tree, given: tuple[str, ...] = ()) -> frozenset[str]:
  """The names the test code's top level (what runs when the module runs: statements, class
  bodies, decorators, defaults; not function bodies) uses but neither binds nor finds in builtins:
  what it takes from the program. None: a split run runs it before the program's process is
  forked, so that what it sets up in libraries (Django's settings.configure()) is there for the
  program too, as in one interpreter (`_run_split`)."""
  loads, bound = set(), {"__name__", "__file__", "__doc__", "__builtins__", "__spec__", *given}
  stack = list(tree.body)
  while stack:
    node = stack.pop()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      bound.add(node.name)
      stack.extend(node.decorator_list)
      stack.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
      continue
    if isinstance(node, ast.Lambda):
      stack.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
      continue
    if isinstance(node, ast.ClassDef):
      bound.add(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    elif isinstance(node, ast.Name):
      (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
    elif isinstance(node, ast.ExceptHandler) and node.name:
      bound.add(node.name)
    stack.extend(ast.iter_child_nodes(node))
  return frozenset(name for name in loads if name not in bound and not hasattr(builtins, name))


def _load_module(name: str, job: dict) -> types.ModuleType:
  module = types.ModuleType(name)
  module.__builtins__ = builtins
  sys.modules[name] = module
  code = _PLAN[0].program
  if code is None:  # the pool could not compile it: the run reports why
    code = compile_program(job["program"])
  exec(code, module.__dict__)  # pylint: disable=exec-used
  return module


def _describe(error: BaseException) -> str:
  """One line: the error and the innermost line of the program or tests it came from.

  Walks the traceback itself: the traceback module would format every frame
  and look each source line up, a real cost on a run that fails.
  """
  if _isinstance(error, SystemExit):
    return f"SystemExit({error.code!r}) before the tests finished"
  where = ""
  tb = error.__traceback__
  while tb is not None:
    filename = tb.tb_frame.f_code.co_filename
    if filename in (PROGRAM_FILENAME, TESTS_FILENAME):
      where = f"{filename}:{tb.tb_lineno}"
    tb = tb.tb_next
  text = f"{_type(error).__name__}: {error}"[:500]
  return f"{text} ({where})" if where else text


def _resolve(namespace: dict, entry_point: str):
  if entry_point.startswith("Solution()."):
    return _getattr(namespace["Solution"](), entry_point.split(".", 1)[1])
  if entry_point not in namespace:
    raise NameError(f"the program defines no {entry_point!r}")
  return namespace[entry_point]


def run_call(channel: Channel, module: types.ModuleType, tests: dict) -> None:
  function = None
  for index, case in enumerate(tests["cases"]):
    try:
      if function is None:
        function = _resolve(module.__dict__, tests["entry_point"])
      value = function(*case.get("args", ()), **case.get("kwargs", {}))
      record = {"case": index, "value": to_plain(value)}
    except MemoryError:
      record = {"case": index, "error": "MemoryError", "memory": True}
    except BaseException as e:  # pylint: disable=broad-except
      record = {"case": index, "error": _describe(e)}
    channel.send(record)
  channel.send({"end": "call"}, signed=True)


EXPECT_NAME = "__precisecoder_expect__"


def _run_one_process(channel: Channel, module: types.ModuleType, tests: dict) -> None:
  """An assert or unittest job with the test code in the program's namespace, as a plain
  interpreter runs it: nothing stands between the program and the tests, so its verdict holds
  only for checks the pool holds (`expectations.hide_expected_literals`). Runs only where the
  pool was told so (`ExecutionPool(unsafe_one_process=True)`)."""
  namespace = module.__dict__
  reported = _install_reports(channel, namespace)
  exec(_PLAN[0].tests, namespace)  # pylint: disable=exec-used
  if tests["kind"] == "unittest":
    split_tests.run_unittest_classes(channel, namespace, tests["classes"], _describe)
  channel.send({"end": tests["kind"], "expects": reported[0]}, signed=True)


def _install_reports(channel: Channel, namespace: dict, remote=None) -> list[int]:
  """Binds the report call the pool rewrote held checks into (expectations.hide_expected_literals);
  returns the count of reports made, in a list the caller reads at the end. `remote`: in a split
  run, whether a value is a reference to a program's object, which equals nothing but itself."""
  reported = [0]

  def expect(index, value):  # a check the pool judges: report the value, exactly typed
    try:
      if remote is not None and remote(value):
        record = {"expect": index, "truthy": bool(value), "remote": True}
      else:
        record = {"expect": index, "value": to_tagged(value)}
    except PlainDataError as e:  # enough for a truth check; any other check fails on it
      record = {"expect": index, "truthy": bool(value), "error": str(e)}
    channel.send(record, signed=True)
    reported[0] += 1

  namespace[EXPECT_NAME] = expect
  return reported


def execute(channel_fd: int, nonce: str, job: dict) -> None:
  """Runs one job's program and tests in this (already sandboxed) process; never returns."""
  _seal_channel(channel_fd)
  status = _session(Channel(channel_fd, nonce), job)
  if job["tests"]["kind"] == "io":
    _shut_down()
  _exit(status)


def _shut_down() -> None:
  """What the interpreter does before it exits, for a program run as a script: waits for its
  threads, then runs its atexit functions (output printed there is the program's too)."""
  threading = sys.modules.get("threading")
  try:
    if threading is not None:
      threading._shutdown()  # pylint: disable=protected-access
    _run_exit_functions()
  except BaseException:  # pylint: disable=broad-except
    pass
  _flush_output()


_run_exit_functions = atexit._run_exitfuncs  # pylint: disable=protected-access


_fstat, _fchmod, _geteuid, _is_fifo = os.fstat, os.fchmod, os.geteuid, stat.S_ISFIFO


def _seal_channel(fd: int) -> None:
  """Makes the channel's pipe open for no one by a path: a run holds its fd, but could open it
  again through /proc/self/fd (to read back what was written, "ready" included, or, in a split
  run, to have the test process write the program's text into it through a file of the
  program's naming that links there). Where the run's uid owns the pipe ("userns", "plain"),
  mode 0 refuses it; in "root" the pipe is the worker's, 0600, already closed to the run."""
  status = _fstat(fd)
  if _is_fifo(status.st_mode) and status.st_uid == _geteuid():
    _fchmod(fd, 0)


def _session(channel: Channel, job: dict) -> int:
  """Everything a run does but exit (which `execute` does with the status returned), apart so that
  the worker can rehearse it (`_rehearse`)."""
  kind = job["tests"]["kind"]
  exit_code = 0
  try:
    channel.send_ready()
    if kind == "io":
      sys.argv = ["program"]
      try:
        _load_module("__main__", job)
      except SystemExit as e:  # exit codes follow the interpreter's own rules
        exit_code = e.code if _type(e.code) is int else (0 if e.code is None else 1)
      channel.send({"end": "io", "exit": exit_code}, signed=True)
      _flush_output()
      return exit_code
    if job.get("held") and kind == "assert":
      _run_held(channel, job)
      _flush_output()
      return exit_code
    if job.get("split") and kind in ("assert", "unittest"):
      _run_split(channel, job)
      _flush_output()
      return exit_code
    module = _load_module(_PROGRAM_MODULE, job)
    if kind == "call":
      run_call(channel, module, job["tests"])
    elif kind in ("assert", "unittest"):
      _run_one_process(channel, module, job["tests"])
    else:
      raise ValueError(f"unknown test kind {kind!r}")
  except MemoryError:
    exit_code = EXIT_UNCAUGHT
    _safe_send(channel, {"error": "MemoryError", "memory": True})
  except BaseException as e:  # pylint: disable=broad-except
    exit_code = EXIT_UNCAUGHT
    _safe_send(channel, {"error": _describe(e), "memory": False})
    if kind == "io":
      traceback.print_exc()
  _flush_output()
  return exit_code


def _run_held(channel: Channel, job: dict) -> None:
  """An assert job whose every check the pool holds, and whose test code does nothing but report
  the program's return values in an order the pool requires (`expectations.held_order`): it runs
  in one process, as a call job does. No defence here: whatever the program does to the tests,
  the verdict is the pool's comparison of what is reported with what never left the pool."""
  module = _load_module(_PROGRAM_MODULE, job)
  namespace = module.__dict__
  reported = _install_reports(channel, namespace)
  exec(_PLAN[0].tests, namespace)  # pylint: disable=exec-used
  channel.send({"end": "assert", "expects": reported[0]}, signed=True)


def _rehearse_split(times: int = 10) -> None:
  """`_rehearse` for split runs: a test side and the program's side answer each other here in
  the worker over a socket pair (`split_program.rehearse`), so that every run's test process
  inherits the bridge and the codec specialised (CPython 3.11 quickens a function on its 8th
  call: each runs at least that often here). The program's process is a fresh interpreter
  (`program_boot`) and inherits nothing of this."""
  try:
    for _ in range(times):
      for tests in _REHEARSAL_TESTS[1:]:
        job = {"code": _REHEARSAL_CODE, "tests": tests, "split": True}
        warm(job)
        split_program.rehearse(job, _PLAN[0].program)
  finally:
    _PLAN.clear()
    sys.modules.pop(_PROGRAM_MODULE, None)
    split_tests.bridge.spare_classes()
    gc.collect()


def _run_split(channel: Channel, job: dict) -> split_tests.bridge.Endpoint:
  """An assert or unittest job with the test code in this process and the program in another
  (`split_tests`; docs/sandbox.md, "Split runs"): every check runs where the program never ran.
  Returns the test side's endpoint, closed."""
  tests, plan = job["tests"], _PLAN[0]
  split_tests.seal(plan)
  namespace = split_tests.namespace()
  reported = _install_reports(channel, namespace, split_tests.bridge.is_remote)
  unittest_kind = tests["kind"] == "unittest"
  first = unittest_kind and (
    not plan.tests_top_names or split_tests.bind_library_names(job, plan, namespace)
  )
  if first:  # its library set-up (settings.configure()) is then the program's too
    split_tests.run_top_level(job, plan.tests, namespace)
  end = split_tests.start(job, plan)
  split_tests.add_program_names(end, namespace, job, plan)
  if not first:
    exec(plan.tests, namespace)  # pylint: disable=exec-used
  if tests["kind"] == "unittest":
    split_tests.run_unittest_classes(channel, namespace, tests["classes"], _describe)
  split_tests.check_program(end)
  channel.send({"end": tests["kind"], "expects": reported[0]}, signed=True)
  split_tests.finish(end)
  return end


def _safe_send(channel: Channel, record: dict) -> None:
  try:
    channel.send(record)
  except BaseException:  # pylint: disable=broad-except
    pass


def _flush_output() -> None:
  """Writes out the program's buffered output."""
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except BaseException:  # pylint: disable=broad-except
      pass
