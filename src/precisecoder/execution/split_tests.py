"""The test process of a split run: runs the test code where the program never runs.

Called in the run's sandboxed child for an assert or unittest job sent with "split"
(docs/sandbox.md, "Split runs"). This process imports what the tests import, makes itself
non-dumpable (a process of its uid can then neither trace it nor read its memory or fds), keeps no
writable directory on its import path, and forks the program's process (`split_program`), which
never holds the pool's channel. The test code then runs here, in a namespace of its own with the
program's top-level names as data, as this process's own library modules and classes, or as
references (`bridge.Remote`); every check runs here, on data our decoder built (`codec`). The
records it writes are the harness's (`harness.Channel`), so the pool judges them as it judges any
run (`verdicts.judge`).
"""

from __future__ import annotations

import _socket
import builtins
import ctypes
import functools
import importlib
import os
import signal
import sys
import types
import unittest
from typing import Any

from precisecoder.execution import bridge
from precisecoder.execution import split_program

_PR_SET_DUMPABLE = 4
_CHANNEL_FD = 3  # worker.CHANNEL_FD: the program's process must not hold it
_libc = ctypes.CDLL(None, use_errno=True)


def _library_name(what: str, name: list) -> Any:
  """A module or class the program's namespace names, as this process's own, imported here from
  the read-only import path if need be (tests use what the program imported: `plt.Axes`); None
  (then a reference) for the program's own and what does not import."""
  module, qualname = name
  if module.startswith(split_program.PROGRAM_MODULE) or what not in ("module", "class", "attr"):
    return None
  try:
    loaded = importlib.import_module(module)
  except BaseException:  # pylint: disable=broad-except
    return None
  if what == "module":
    return loaded if loaded.__name__ == module else None
  if what == "attr":  # a library's object: this process's own of that name
    value = loaded.__dict__.get(qualname, loaded)
    # Never a function: the name is the program's claim, and the tests call what the program
    # names with data the program made (`decode(encode(x))` would run builtins.eval or
    # pickle.loads here, on the program's text). A library's object is this process's own, so
    # that what the tests compute with it stays theirs (`expected = norm.pdf(x)` with scipy's
    # `norm` taken from the program, which may have patched its own copy).
    if value is loaded or isinstance(value, _NOT_BY_NAME):
      return None
    return value
  return bridge._named_class(module, qualname)  # pylint: disable=protected-access


# pyplot's functions that read or change its figures, which live in the program's process: in a
# split run the tests' pyplot reaches the program's for these (`plt.gcf()` after a call).
PYPLOT_STATE = (
  "gcf",
  "gca",
  "gci",
  "get_fignums",
  "get_figlabels",
  "fignum_exists",
  "figure",
  "close",
  "clf",
  "cla",
  "subplots",
  "subplot",
  "axes",
  "sca",
  "savefig",
  "show",
  "title",
  "xlabel",
  "ylabel",
  "legend",
  "plot",
  "draw",
)


def _share_pyplot(end: bridge.Endpoint) -> None:
  pyplot = sys.modules.get("matplotlib.pyplot")
  if pyplot is None:
    return
  theirs = end.request("module", None, "matplotlib.pyplot")
  for name in PYPLOT_STATE:
    if callable(getattr(pyplot, name, None)):
      setattr(pyplot, name, getattr(theirs, name))


class _Patches:
  """The tests' active `unittest.mock` patches, as they enter and leave (this process's
  `_patch.__enter__`/`__exit__` are wrapped while the tests run)."""

  def __init__(self):
    self.active: list[tuple[Any, Any]] = []
    self.installed = False

  def install(self) -> None:
    """Wraps unittest.mock's patches, once the tests have loaded it (importing it costs runs that
    never mock more than their program's whole run: it imports asyncio)."""
    mock = sys.modules.get("unittest.mock")
    if self.installed or mock is None:
      return
    self.installed = True
    patches, patch_class = self, mock._patch  # pylint: disable=protected-access
    enter_patch, exit_patch = patch_class.__enter__, patch_class.__exit__

    def enter(patcher):
      new = enter_patch(patcher)
      patches.active.append((patcher, new))
      return new

    def leave(patcher, *exc_info):
      patches.active[:] = [(p, n) for p, n in patches.active if p is not patcher]
      return exit_patch(patcher, *exc_info)

    patch_class.__enter__, patch_class.__exit__ = enter, leave

  def described(self) -> list:
    return [(id(patcher), patcher.target, patcher.attribute, new) for patcher, new in self.active]

  def key(self) -> tuple:
    return tuple((id(patcher), id(new)) for patcher, new in self.active)


# What a program's name never stands for in the tests' namespace by name (`_library_name`).
_NOT_BY_NAME = (
  types.ModuleType,
  types.FunctionType,
  types.BuiltinFunctionType,
  types.MethodType,
  types.MethodWrapperType,
  types.WrapperDescriptorType,
  types.MethodDescriptorType,
  types.ClassMethodDescriptorType,
  functools.partial,
)

# What the tests' namespace shares with the program by name (`_State._provide`).
_PROVIDED = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


class _State:
  """What goes to the program's process with each request, when it changed (`apply_state` there),
  and what comes back."""

  def __init__(self, patches: _Patches):
    self.patches = patches
    self.sent: dict[str, Any] = {}
    self.space: dict = {}  # the tests' namespace, once made
    self.wanted: list[str] = []  # the names the program refers to but does not define
    self.provided: dict[str, int] = {}

  def _provide(self) -> dict:
    """The tests' names the program refers to (a node class the tests define), as they appear or
    change: they go to the program as references, as one namespace would have shared them. Only
    classes, functions and modules: the tests' data and instances (a table of cases and their
    expected values) would reach the program by reference, to be changed in place. The tests'
    TestCase classes never do."""
    given = {}
    for name in self.wanted:
      value = self.space.get(name, self.space)
      if (
        value is self.space
        or self.provided.get(name) == id(value)
        or (bridge.is_remote(value))
        or not isinstance(value, _PROVIDED)
        or (isinstance(value, type) and issubclass(value, unittest.TestCase))
      ):
        continue
      given[name] = value
      self.provided[name] = id(value)
    return given

  def outgoing(self) -> dict | None:
    out = {}
    self.patches.install()  # the tests may import unittest.mock late
    given = self._provide() if self.wanted else None
    if given:
      out["provide"] = given
    key = self.patches.key()
    if key != self.sent.get("patch_key"):
      out["patches"] = self.patches.described()
      self.sent["patch_key"] = key
    random = sys.modules.get("random")  # only where the tests use it: it reseeds on every fork
    if random is not None:
      now = random.getstate()
      if now != self.sent.get("random"):
        out["random"] = self.sent["random"] = now
    numpy = sys.modules.get("numpy")
    if numpy is not None:
      now = numpy.random.get_state(legacy=True)
      last = self.sent.get("numpy")
      if last is None or not split_program._same_numpy_state(now, last):  # pylint: disable=protected-access
        out["numpy"] = self.sent["numpy"] = now
    environ = dict(os.environ)
    if environ != self.sent.get("environ"):
      out["environ"] = self.sent["environ"] = environ
    cwd = os.getcwd()
    if cwd != self.sent.get("cwd"):
      out["cwd"] = self.sent["cwd"] = cwd
    return out or None

  def incoming(self, state: Any) -> None:
    if type(state) is not dict:
      return
    random = sys.modules.get("random")
    if random is not None and type(state.get("random")) is tuple:
      try:
        random.setstate(state["random"])
        self.sent["random"] = state["random"]
      except (TypeError, ValueError):
        pass
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(state.get("numpy")) is tuple:
      try:
        numpy.random.set_state(state["numpy"])
        self.sent["numpy"] = numpy.random.get_state(legacy=True)
      except (TypeError, ValueError):
        pass


def _writable_places() -> tuple[str, ...]:
  """Where a run may write: its home and working directory, and the shared scratch folders."""
  places = [os.getcwd(), os.path.expanduser("~"), "/tmp", "/var/tmp", "/dev/shm"]
  return tuple(os.path.realpath(p) + os.sep for p in places if p and p != "/")


def _read_only(path: str) -> bool:
  """Whether an import path entry is one the program cannot write to (nor create)."""
  if not path or not os.path.isabs(path) or not os.path.isdir(path):
    return False
  real = os.path.realpath(path) + os.sep
  if any(real.startswith(place) for place in _writable_places()):
    return False
  return os.getuid() == 0 or not os.access(path, os.W_OK)  # (root: the dropped-uid modes differ)


def _seal() -> None:
  """This process, before the program's exists: non-dumpable, no writable import path, SIGINT
  fatal (the program could otherwise raise KeyboardInterrupt inside a test)."""
  if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
  os.set_inheritable(_CHANNEL_FD, False)  # no program a test starts (os.system) holds it
  sys.path[:] = [p for p in sys.path if _read_only(p)]
  sys.path_importer_cache.clear()
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _import_quietly(names) -> None:
  for name in names:
    try:
      importlib.import_module(name)
    except BaseException:  # pylint: disable=broad-except
      pass


def seal(plan) -> None:
  """Before the program's process exists: what the tests import, loaded; this process sealed."""
  _import_quietly(plan.test_imports)
  _seal()


def start(job: dict, plan) -> bridge.Endpoint:
  """Forks the program's process and loads the program there; returns this side's endpoint (its
  `names`: the program's top-level names for the tests)."""
  ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
  pid = os.fork()
  if pid == 0:  # the program's process
    try:
      ours.close()
      os.closerange(_CHANNEL_FD, theirs.fileno())
      os.closerange(theirs.fileno() + 1, 1 << 16)
    except BaseException:  # pylint: disable=broad-except
      os._exit(1)  # pylint: disable=protected-access
    split_program.run(theirs, job, plan.program)
  theirs.close()
  patches = _Patches()
  state = _State(patches)
  end = bridge.Endpoint(ours, bridge.test_side_policy, _library_name)
  end.before_request = state.outgoing
  end.on_state = state.incoming
  loaded = end.request("load")
  end.resolving = False  # from here on, what the program hands over is data or a reference
  names, wanted = loaded if type(loaded) is tuple and len(loaded) == 2 else ({}, [])
  end.names = names if type(names) is dict else {}
  state.wanted = [name for name in wanted if type(name) is str] if type(wanted) is list else []
  end.state = state
  _share_pyplot(end)
  patches.install()
  return end


def namespace() -> dict:
  """The tests' namespace: a module of the program's name here (so that `patch(__name__ + '.f')`
  reaches the program's module)."""
  module = types.ModuleType(split_program.PROGRAM_MODULE)
  sys.modules[split_program.PROGRAM_MODULE] = module
  space = module.__dict__
  space["__builtins__"] = builtins
  return space


def add_program_names(end: bridge.Endpoint, space: dict) -> None:
  """The program's names as data, libraries or references, but those the tests bound (they ran
  after the program in one interpreter, so theirs win) and those of builtins: the program's
  process leaves those out, but that is the program's word, and a `sorted` or `len` of its own
  would answer the tests' checks (`sorted(result) == sorted(expected)`)."""
  for name, value in end.names.items():
    if (
      type(name) is str
      and not name.startswith("__")
      and name not in space
      and name not in builtins.__dict__
    ):
      space[name] = value
  end.state.space = space


def run_unittest_classes(channel, space: dict, classes, describe) -> None:
  """Runs each TestCase class's tests here (setUp, test, tearDown by hand, as the harness does)."""
  for class_name in classes:
    case_class = space.get(class_name)
    if not (isinstance(case_class, type) and issubclass(case_class, unittest.TestCase)):
      channel.send({"test": class_name, "outcome": "error", "detail": "not a TestCase"}, True)
      continue
    try:
      case_class.setUpClass()
      class_error = None
    except BaseException as e:  # pylint: disable=broad-except
      class_error = describe(e)
    for method in sorted(
      name
      for name in dir(case_class)
      if name.startswith("test") and callable(getattr(case_class, name))
    ):
      name = f"{class_name}.{method}"
      if class_error is not None:
        channel.send({"test": name, "outcome": "error", "detail": class_error}, True)
        continue
      outcome, detail = _run_one(case_class, method, describe)
      channel.send({"test": name, "outcome": outcome, "detail": detail}, True)
    try:
      case_class.tearDownClass()
    except BaseException:  # pylint: disable=broad-except
      pass


def _run_one(case_class: type, method: str, describe) -> tuple[str, str]:
  try:
    test = case_class(method)
    test.setUp()
    try:
      getattr(test, method)()
    finally:
      test.tearDown()
      test.doCleanups()
    return "ok", ""
  except unittest.SkipTest as e:
    return "skip", str(e)[:200]
  except AssertionError as e:
    return "fail", describe(e)
  except MemoryError:
    return "error", "MemoryError"
  except BaseException as e:  # pylint: disable=broad-except
    return "error", describe(e)


def finish(end: bridge.Endpoint) -> None:
  end.close()
