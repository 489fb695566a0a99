"""What a run may not do at all, refused as it happens (assert and unittest kinds).

An audit hook (PEP 578), installed in the worker before it forks and armed by the harness just
before the program runs, refuses:

  - a trace or profile hook (`sys.settrace`, `sys.setprofile`, `threading.settrace`, cProfile):
    it would run the program's code inside the tests' frames, where it could rewrite their
    local variables and take itself away before any check;
  - an audit hook of the program's own (`sys.addaudithook`), which would run its code at
    every audited step of the tests;
  - new code, defaults or keyword defaults for a function the program did not write (a library
    assert, a TestCase method, the harness's own functions): swapped in place, the function
    object a module holds stays the same object, so nothing integrity compares would move. A
    library may still set them on its own functions as it loads during the run (pyparsing
    does): allowed where the writer is library code and the function's module was not loaded
    before the program ran;
  - a class given to an object (`obj.__class__ = ...`) whose comparisons the program wrote: the
    object could pass the guard's check first and change behaviour afterwards.

The refusal raises `Refused` (a RuntimeError) where the program made the call. Not caught: what
the program does through ctypes, which writes memory without any audited step.
"""

from __future__ import annotations

import sys
import types
from typing import Callable

_FUNCTION_STATE = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
_REFUSED = frozenset({"sys.settrace", "sys.setprofile", "sys.addaudithook"})
_EVENTS = _REFUSED | {"object.__setattr__"}
_FunctionType = types.FunctionType
_type = type
_getframe = sys._getframe  # pylint: disable=protected-access


class Refused(RuntimeError):
  """An operation no run may make (module docstring). A RuntimeError: `sys.addaudithook` then
  quietly adds nothing, as PEP 578 specifies."""


# The armed run's judges, or empty: (whether `writer` code may set a function's code or defaults,
# why a class's comparisons are the program's or None). A list filled in place, so that the
# hook, bound once, sees it.
_ARMED: list[
  tuple[Callable[[types.FunctionType, types.CodeType], bool], Callable[[type], str | None]]
] = []
_installed: list[bool] = []


def install() -> None:
  """Adds the audit hook to this process (once; an audit hook cannot be removed)."""
  if not _installed:
    sys.addaudithook(_audit)
    _installed.append(True)


def arm(
  may_rewrite: Callable[[types.FunctionType, types.CodeType], bool],
  class_problem: Callable[[type], str | None],
) -> None:
  """From now on, refuse (module docstring); `may_rewrite(function, writer)` says whether code
  `writer` may set the function's code or defaults, `class_problem(cls)` why objects of `cls`
  compare by the program's code."""
  _ARMED[:] = [(may_rewrite, class_problem)]


def disarm() -> None:
  _ARMED.clear()


def _audit(event: str, args: tuple, _events=_EVENTS, _armed=_ARMED) -> None:
  # Called for every audited event of the process (each id(), open(), import ...): the common
  # case, an event we do not watch, returns at once.
  if event not in _events or not _armed:
    return
  if event in _REFUSED:
    raise Refused(f"{event} is not allowed while tests run")
  target, name = args[0], args[1]
  may_rewrite, class_problem = _armed[0]
  if (
    name in _FUNCTION_STATE
    and _type(target) is _FunctionType
    and not may_rewrite(target, _getframe(1).f_code)
  ):
    raise Refused(f"cannot set {name} of {target.__qualname__}: it is not the program's function")
  if name == "__class__" and len(args) > 2:
    problem = class_problem(args[2])
    if problem is not None:
      raise Refused(f"cannot give an object the class {args[2].__qualname__}: {problem}")
