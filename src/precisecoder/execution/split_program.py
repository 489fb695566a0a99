"""The program's process of a split run: runs the program and answers the test process.

Forked by the test process (`split_tests`); it keeps only its end of their socket and fds 0-2
(the pool's channel is closed before the program runs), runs the program as a module, and serves
requests until the test process leaves. Nothing here is trusted: the test process decodes what
this process sends as data (`codec`) and treats every object as a reference (`bridge.Remote`).

Each request may carry the test process's state (`apply_state`): the mocks it has patched in (put
here as bridges to the test process's mocks), its `random` and numpy generator states, its
environment and working directory. Each answer carries this process's generator states back.
"""

from __future__ import annotations

import array
import builtins
import importlib
import os
import sys
import types
from typing import Any

from precisecoder.execution import bridge
from precisecoder.execution.programs import compile_program

PROGRAM_MODULE = "__precisecoder_program__"
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
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # as the fork copied it: the test process counts it sent (`forked`)
      self.synced["numpy"] = _numpy_state(numpy)

  def load(self) -> dict:
    """Runs the program; returns its top-level names for the tests' namespace."""
    module = types.ModuleType(PROGRAM_MODULE)
    module.__builtins__ = builtins
    sys.modules[PROGRAM_MODULE] = module
    code = self.code if self.code is not None else compile_program(self.job["program"])
    exec(code, module.__dict__)  # pylint: disable=exec-used
    self.module = module
    names = {
      name: _named(name, value)
      for name, value in module.__dict__.items()
      if type(name) is str and not name.startswith("__") and not hasattr(builtins, name)
    }
    return names, sorted(_global_names(code) - module.__dict__.keys())

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
    if "provide" in state:
      self.provide(state["provide"])
    if "patches" in state:
      self._patch(state["patches"])
    if "random" in state:  # the tests use random: so may the program
      import random  # pylint: disable=import-outside-toplevel

      unpacked = unpack_random(state["random"])
      if unpacked is not None:
        random.setstate(unpacked)
        self.synced["random"] = unpacked
    if "numpy" in state:
      numpy = sys.modules.get("numpy")
      if numpy is not None:
        numpy.random.set_state(state["numpy"])
        self.synced["numpy"] = _numpy_state(numpy)
    if "environ" in state:
      os.environ.clear()
      os.environ.update(state["environ"])
    if "cwd" in state:
      os.chdir(state["cwd"])

  def state(self) -> dict | None:
    """The generator states that changed since they were last exchanged."""
    out = {}
    random = sys.modules.get("random")
    if random is not None and "random" in self.synced:
      now = random.getstate()
      if now != self.synced["random"]:
        self.synced["random"] = now
        out["random"] = pack_random(now)
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in self.synced:
      now = _numpy_state(numpy)
      if not _same_numpy_state(now, self.synced["numpy"]):
        out["numpy"] = self.synced["numpy"] = now
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


def run(sock, job: dict, code: types.CodeType | None) -> None:
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
