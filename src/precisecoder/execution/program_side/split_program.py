"""The program's process of a split run: runs the program and answers the test process.

Started by the test process (`split_tests.start`) as a fresh interpreter (`program_boot`), which
never held the tests; it holds only its end of their socket and fds 0-2 (never the pool's
channel), runs the program as a module, and serves requests until the test process leaves.
Nothing here is trusted: the test process decodes what this process sends as data (`codec`) and
treats every object as a reference (`bridge.Remote`).

Each request may carry the test process's state (`apply_state`): the mocks it has patched in (put
here as bridges to the test process's mocks), its `random` and numpy generator states, its
environment and working directory. Each answer carries this process's generator states back.
"""

from __future__ import annotations

import array
import builtins
import collections
import importlib
import os
import sys
import types
from typing import Any

from precisecoder.execution.shared import bridge

PROGRAM_MODULE = "__precisecoder_program__"
_BUILTIN_NAMES = frozenset(dir(builtins))
_SIZED = (list, dict, set, bytearray, collections.deque, collections.OrderedDict)
_MISSING = object()


def resolve_name(what: str, name: list) -> Any:
  """A module or class the test process names, as this process's own (importing it)."""
  module, qualname = name
  if module == PROGRAM_MODULE and what == "module":  # patch(__name__ + '.helper') in the tests
    return sys.modules.get(PROGRAM_MODULE)
  if module.startswith(PROGRAM_MODULE):
    return None
  try:
    value = importlib.import_module(module)
  except Exception:  # pylint: disable=broad-except
    return None
  if what == "module":
    return value
  if what not in ("class", "function"):
    return None
  for part in qualname.split("."):
    value = getattr(value, part, None)
  if what == "function":
    return value if callable(value) else None
  return value if isinstance(value, type) else None


class ProgramSide:
  """The program process's state: the module, the patches put in place, the synced states."""

  def __init__(self, sock, job: dict, code: types.CodeType | None):
    self.end = bridge.Endpoint(sock, bridge.program_policy, resolve_name)
    self.end.handlers.update(load=self.load, module=_module)
    self.end.on_request_state = self.apply_state
    self.end.reply_state = self.state
    self.job = job
    self.code = code
    self.module: types.ModuleType | None = None
    self.patches: dict[int, tuple] = {}  # patch id -> (target, attribute, original)
    self.synced: dict[str, Any] = {}  # what the generators held when last exchanged
    # The generators the program seeded or set itself since their states were last exchanged:
    # the seed it gave (args, kwargs), which the test process can repeat and walk on from
    # (`split_tests._State.incoming`), or None (a state it set, a seed from the OS): then the
    # state is its own, and is not sent back (the test process would refuse it).
    self.reseeded: dict[str, Any] = {}
    self.streams = {name: getattr(sys, name) for name in ("stdin", "stdout", "stderr")}
    self.watched_logs: list[tuple[Any, tuple]] = []  # (logger, what the tests' watch set aside)
    self.fingerprints: dict | None = None  # the program's top-level names, as last sent
    self.catching: Any = None  # a warnings.catch_warnings while the tests are in one

  def load(self) -> dict:
    """Runs the program; returns its top-level names for the tests' namespace."""
    module = types.ModuleType(PROGRAM_MODULE)
    module.__builtins__ = builtins
    sys.modules[PROGRAM_MODULE] = module
    code = self.code
    if code is None:  # the pool could not compile it: compiled here, to report why
      from precisecoder.execution.shared.programs import compile_program  # pylint: disable=import-outside-toplevel

      code = compile_program(self.job["program"])
    exec(code, module.__dict__)  # pylint: disable=exec-used
    self.module = module
    names = {
      name: _named(name, value)
      for name, value in module.__dict__.items()
      if type(name) is str and not name.startswith("__") and not hasattr(builtins, name)
    }
    self.fingerprints = self._fingerprints()
    self._glance()
    return names, sorted(_global_names(code) - module.__dict__.keys())

  def _glance(self) -> None:
    """What `_changed_globals` compares: the module's values' ids and its containers' sizes."""
    values = self.module.__dict__.values()
    self.glance = (tuple(map(id, values)), [v for v in values if type(v) in _SIZED])
    self.sizes = tuple(map(len, self.glance[1]))

  def _changed_globals(self) -> bool:
    """Whether a top-level name may have changed since the last answer: a quick look, in C."""
    ids, containers = self.glance
    return (
      tuple(map(id, self.module.__dict__.values())) != ids
      or tuple(map(len, containers)) != self.sizes
    )

  def _fingerprints(self) -> dict:
    """Each top-level name's object and, for a container, its size: what changes when the
    program rebinds a global (`count += 1`) or adds to one (`cache[x] = y`)."""
    return {
      name: (id(value), len(value) if type(value) in _SIZED else -1)
      for name, value in self.module.__dict__.items()
      if type(name) is str and name[:2] != "__" and name not in _BUILTIN_NAMES
    }

  def provide(self, names: Any) -> None:
    """The tests' objects under the names the program refers to but does not define (a class the
    tests define, as in one namespace): references to the test process's objects."""
    if type(names) is dict and self.module is not None:
      for name, value in names.items():
        if type(name) is str and name not in self.module.__dict__:
          self.module.__dict__[name] = value

  def apply_state(self, state: Any) -> None:
    if type(state) is not dict:
      return
    if "replay" in state and self.module is None:
      replay(state["replay"])
    if "provide" in state:
      self.provide(state["provide"])
    if "patches" in state:
      self._patch(state["patches"])
    if type(state.get("dicts")) is dict and self.module is not None:
      self._dicts(state["dicts"])
    if "random" in state:  # the tests use random: so may the program
      import random  # pylint: disable=import-outside-toplevel

      unpacked = unpack_random(state["random"])
      if unpacked is not None:
        self._watch("random", random, ("seed", "setstate"))
        random._inst.setstate(unpacked)  # pylint: disable=protected-access
        self.synced["random"] = unpacked
        self.reseeded.pop("random", None)
    if "numpy" in state:
      numpy = sys.modules.get("numpy")
      if numpy is not None:
        self._watch("numpy", numpy.random, ("seed", "set_state"))
        numpy.random.mtrand._rand.set_state(state["numpy"])  # pylint: disable=protected-access
        self.synced["numpy"] = _numpy_state(numpy)
        self.reseeded.pop("numpy", None)
    if "environ" in state:
      os.environ.clear()
      os.environ.update(state["environ"])
    if "cwd" in state:
      os.chdir(state["cwd"])
    if type(state.get("argv")) is list:
      sys.argv = state["argv"]
    if "logs" in state:
      self._logs(state["logs"])
    if "warnings" in state:
      self._warnings(state["warnings"] is True)
    if "streams" in state and type(state["streams"]) is dict:  # the tests' own, or ours again
      for name, stream in state["streams"].items():
        if name in self.streams:
          setattr(sys, name, self.streams[name] if stream is None else stream)

  def _dicts(self, dicts: dict) -> None:
    """The contents of the program's top-level dicts as a `patch.dict` of the tests' left them
    (on the tests' copy): put in place here, in the same dict, and not reported back as the
    program's change."""
    names = self.module.__dict__
    for name, value in dicts.items():
      current = names.get(name) if type(name) is str else None
      if type(current) is dict and type(value) is dict:
        current.clear()
        current.update(value)
    if self.fingerprints is not None:
      self.fingerprints = self._fingerprints()
      self._glance()

  def _warnings(self, caught: bool) -> None:
    """While the tests catch warnings, every warning here is sent to the test process, whose
    filters decide (an "error" filter there raises here, as in one interpreter)."""
    import warnings  # pylint: disable=import-outside-toplevel

    if caught and self.catching is None:
      self.catching = warnings.catch_warnings()
      self.catching.__enter__()
      warnings.simplefilter("always")
      end = self.end

      def forward(message, category, filename, lineno, file=None, line=None):
        names = bridge._class_names(category) if isinstance(category, type) else []  # pylint: disable=protected-access
        end.request("warn", None, str(message), names, str(filename), int(lineno))

      warnings.showwarning = forward
    elif not caught and self.catching is not None:
      self.catching.__exit__(None, None, None)
      self.catching = None

  def _logs(self, watched: Any) -> None:
    """The loggers the tests watch (assertLogs), watched here the same way (their own handlers
    set aside, their level set, not propagating), with a handler that sends each record to the
    test process as data; those the tests stopped watching, as they were."""
    import logging  # pylint: disable=import-outside-toplevel

    for logger, saved in self.watched_logs:
      logger.handlers, logger.level, logger.propagate = saved
    self.watched_logs = []
    for entry in watched if type(watched) is list else []:
      if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str:
        continue
      logger = logging.getLogger(entry[0] or None)
      self.watched_logs.append((logger, (logger.handlers[:], logger.level, logger.propagate)))
      forward = _Forward(self.end)
      forward.setLevel(entry[1])
      logger.handlers, logger.propagate = [forward], False
      logger.setLevel(entry[1])

  def _watch(self, key: str, module: types.ModuleType, names: tuple[str, ...]) -> None:
    """Notes in `reseeded` when the program calls `module`'s `names`: the seed it gave to
    `seed`, None for anything else (setting the state)."""
    for name in names:
      original = getattr(module, name, None)
      if original is None or getattr(original, "_pc_watched", None) is self:
        continue

      def watched(*args, _original=original, _seeds=name == "seed", **kwargs):
        given = [*args, *kwargs.values()]
        seeded = _seeds and given and all(value is not None for value in given)
        self.reseeded[key] = (args, kwargs) if seeded else None
        return _original(*args, **kwargs)

      watched._pc_watched = self  # pylint: disable=protected-access
      setattr(module, name, watched)

  def state(self) -> dict | None:
    """The generator states that changed since they were last exchanged, with the seed the
    program gave where it seeded one (none that the program set otherwise), and the top-level
    names the program rebound or added to since the last answer (the tests read them after a
    call, as one namespace would show them)."""
    out = {}
    if self.module is not None and self.fingerprints is not None and self._changed_globals():
      now = self._fingerprints()
      if now != self.fingerprints:
        names = self.module.__dict__
        out["globals"] = {
          name: _named(name, names[name])
          for name in now
          if now[name] != self.fingerprints.get(name)
        }
        self.fingerprints = now
      self._glance()
    if not self.synced:  # the tests use neither generator
      return out or None
    random = sys.modules.get("random")
    numpy = sys.modules.get("numpy")
    for key, module, read, same in (
      ("random", random, lambda: random.getstate(), lambda a, b: a == b),
      ("numpy", numpy, lambda: _numpy_state(numpy), _same_numpy_state),
    ):
      if module is None or key not in self.synced:
        continue
      seed = self.reseeded.get(key, ())
      if seed is None:  # a state the program set: its own
        continue
      now = read()
      if not same(now, self.synced[key]):
        out[key] = self.synced[key] = now
        if seed != ():
          out[f"{key}_seed"] = seed
          del self.reseeded[key]
    return out or None

  def _patch(self, patches: Any) -> None:
    """Puts the test process's active patches in place here, and takes away those it left."""
    wanted = {}
    for item in patches if type(patches) is list else []:
      if type(item) is tuple and len(item) == 4 and type(item[0]) is int and type(item[2]) is str:
        wanted[item[0]] = item
    for key in [k for k in self.patches if k not in wanted][::-1]:
      target, attribute, original = self.patches.pop(key)
      _restore(target, attribute, original)
    for key, (_, target, attribute, new) in wanted.items():
      if key in self.patches or target is None:
        continue
      if bridge.is_remote(target):  # a test-side object: nothing of ours to patch
        continue
      if isinstance(target, dict) and attribute == "":  # patch.dict: the values given
        continue
      original = _original(target, attribute)
      try:
        setattr(target, attribute, new)
      except (AttributeError, TypeError):
        continue
      self.patches[key] = (target, attribute, original)

  def serve(self) -> None:
    self.end.serve_until_closed()


def _forward_class():
  import logging  # pylint: disable=import-outside-toplevel

  class Forward(logging.Handler):
    """Sends each record to the test process as data (`split_tests._log_record`)."""

    def __init__(self, end):
      super().__init__()
      self.end = end

    def emit(self, record):
      fields = {
        "name": record.name,
        "msg": record.getMessage(),
        "levelno": record.levelno,
        "levelname": record.levelname,
        "pathname": record.pathname,
        "filename": record.filename,
        "module": record.module,
        "funcName": record.funcName,
        "lineno": record.lineno,
        "created": record.created,
      }
      self.end.request("log", None, fields)

  return Forward


def _Forward(end):  # pylint: disable=invalid-name
  global _FORWARD  # pylint: disable=global-statement
  if _FORWARD is None:
    _FORWARD = _forward_class()
  return _FORWARD(end)


_FORWARD = None


def library_object(how: tuple) -> Any:
  """The library object a program's import binds (`split_tests._import_bindings`):
  ("from", module, attribute) or ("module", imported, bound); imported here."""
  kind, module, name = how
  if type(module) is not str or type(name) is not str or module.startswith(PROGRAM_MODULE):
    raise ImportError("not a library")
  loaded = importlib.import_module(module)
  if kind == "from":
    value = getattr(loaded, name, None)
    return importlib.import_module(f"{module}.{name}") if value is None else value
  if kind == "module":
    return sys.modules[name]
  raise ImportError("not an import")


def replay(calls: Any) -> None:
  """Repeats here, before the program loads, the set-up calls the tests' top level made into
  libraries (`split_tests.run_top_level`): what they set up there (`settings.configure(...)`) is
  there for the program, as one interpreter would have it. Each is a
  library object reached by an import, attribute names, and arguments that are data alone; one
  that fails is skipped."""
  for call in calls if type(calls) is list else []:
    try:
      how, path, kind, args, kwargs = call
      if kind != "call" or type(args) is not tuple or type(kwargs) is not dict:
        continue
      target = library_object(tuple(how))
      for name in path:
        target = getattr(target, name)
      target(*args, **kwargs)
    except Exception:  # pylint: disable=broad-except
      continue


def _module(name: Any) -> Any:
  """One of this process's library modules, for the test process to reach by reference (pyplot,
  whose figures live here)."""
  if type(name) is not str or name.startswith(PROGRAM_MODULE):
    raise ValueError("not a library module")
  return bridge.ByReference(importlib.import_module(name))


def _named(name: str, value: Any) -> Any:
  """`value`, or, where it is the attribute of that name of its class's library module
  (`from django.conf import settings`), that name (`bridge.ByName`)."""
  module = getattr(type(value), "__module__", None)
  if type(module) is not str or module.startswith(PROGRAM_MODULE) or module == "builtins":
    return value
  holder = sys.modules.get(module)
  if (
    holder is not None
    and holder.__dict__.get(name) is value
    and not issubclass(
      type(value), (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)
    )
  ):
    return bridge.ByName(value, module, name)
  return value


def _global_names(code: types.CodeType) -> set[str]:
  """The names the program's code (nested code included) may look up as globals."""
  names, stack = set(), [code]
  while stack:
    current = stack.pop()
    names.update(current.co_names)
    stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
  return {name for name in names if not hasattr(builtins, name)}


def _original(target, attribute):
  if isinstance(target, type):
    return target.__dict__.get(attribute, _MISSING)
  return getattr(target, attribute, _MISSING)


def _restore(target, attribute, original) -> None:
  try:
    if original is _MISSING:
      delattr(target, attribute)
    else:
      setattr(target, attribute, original)
  except (AttributeError, TypeError):
    pass


_WORDS = "I" if array.array("I").itemsize == 4 else "L"


def pack_random(state: tuple) -> tuple:
  """random's generator state as it crosses: its 625 words as bytes (a tuple of ints would be
  625 items to encode and build on every request of a test that draws between its calls)."""
  version, words, gauss = state
  try:
    return version, array.array(_WORDS, words).tobytes(), gauss
  except (OverflowError, TypeError):
    return state


def unpack_random(packed: Any) -> tuple | None:
  """The state `pack_random` sent, or None if it is not one."""
  if type(packed) is not tuple or len(packed) != 3:
    return None
  version, words, gauss = packed
  if type(words) is bytes:
    if len(words) % 4:
      return None
    words = tuple(array.array(_WORDS, words))
  return (version, words, gauss) if type(words) is tuple else None


def _numpy_state(numpy):
  return numpy.random.get_state(legacy=True)


def _same_numpy_state(a, b) -> bool:
  return a[0] == b[0] and a[2:] == b[2:] and bool((a[1] == b[1]).all())


def rehearse(job: dict, code: types.CodeType | None) -> None:
  """This side's part of a toy split run, answered here in the worker (`harness._rehearse_split`):
  a test side's requests (load, calls of the program's function) written to one end of a socket
  pair and served from the other, one at a time, so nothing waits."""
  import _socket  # pylint: disable=import-outside-toplevel

  tests_sock, program_sock = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
  try:
    side = ProgramSide(program_sock, job, code)
    tests = bridge.Endpoint(tests_sock, bridge.test_side_policy, None)
    tests.resolving = False

    def ask(*message):
      tests._send(message)  # pylint: disable=protected-access
      side.end._serve(side.end._receive())  # pylint: disable=protected-access
      return tests._receive()  # pylint: disable=protected-access

    names, _ = ask("q", "load", None, None)[1]
    for name, value in names.items():
      if bridge.is_remote(value):
        for args in ([1], [2], [[3, 4]]):
          ask("q", "call", value, None, args, {}, [0] if type(args[0]) is list else [])
        ask("q", "getattr", value, None, "__name__")
  finally:
    sys.modules.pop(PROGRAM_MODULE, None)
    tests_sock.close()
    program_sock.close()


def execute(sock, job: dict, code: types.CodeType | None) -> None:
  """The program process's life: serve, then exit; never returns."""
  status = 0
  try:
    ProgramSide(sock, job, code).serve()
  except BaseException as e:  # pylint: disable=broad-except
    status = 1
    try:
      os.write(2, f"the program's process stopped: {type(e).__name__}: {e}\n"[:500].encode())
    except BaseException:  # pylint: disable=broad-except
      pass
  try:
    sys.stdout.flush()
    sys.stderr.flush()
  except BaseException:  # pylint: disable=broad-except
    pass
  os._exit(status)  # pylint: disable=protected-access
