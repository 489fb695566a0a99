"""Whether a run changed the library its tests call (assert and unittest kinds).

The program and the tests share one interpreter, so a program can patch what
the tests call instead of computing the right answer: `math.isclose`,
`numpy.testing.assert_array_equal`, `operator.eq`, a unittest assert, a
builtin, the module `sys.modules` hands to the tests' `import`, a method of a
class the tests use (`pd.Series.equals`, `_AssertRaisesContext.__exit__`), or a
table a library consults (`copy._deepcopy_dispatch`). `Integrity` is taken
before the program runs, over every module loaded by then: the worker's warm
imports, and the modules the tests import, which the harness imports first for
this reason (`test_imports`). Of the modules the tests import (and unittest's
and the harness's own), the dicts of their classes (and of those classes'
bases) and the dicts they hold are watched too (`watch_reached`). After the
tests, after each unittest test and (`quick`) after each call the tests make
into the program, `violations()` names what changed.

Libraries change their own state lazily and honestly (matplotlib.pyplot notes
its display hook on the first figure, PIL.Image that it has loaded its
plugins, mimetypes rebuilds its tables, typing_extensions installs its own
`typing._check_generic` as it loads), so a change is judged by what now sits
where the tests, or the library they call, will look:

  - behaviour the program wrote (a function, class or object whose code is the
    program's, or a container holding one; `Guard.authored`): always tampering;
  - another callable, class or descriptor where one was (a library function
    swapped for another library function: `assertEqual = assertIsNot`),
    or a callable gone: tampering -- unless it is a library function of the
    same name from a module loaded during the run (a library patching another
    as it loads), or, in a table, a callable of another module than the
    table's (a registry another library updates: pandas' sqlite3 adapters);
  - other data in a name the tests themselves read (`string.ascii_letters`,
    from the tests' attribute chains): tampering;
  - other data elsewhere (a flag, a table, a cache), a name added, or an entry
    of a watched table removed: the library's own business;
  - any change at all to the harness's modules (and the classes and tables they
    hold) or to a function's keyword defaults; a module `sys.modules` no
    longer maps to the watched object; a trace or profile hook left installed.

What the tests' own imports change before the program runs is the snapshot.

A module dict that was written at all, though every name holds its object again
and none was added, is a patch put back (for example by the patch itself once the
tests have called it). `sys`, `warnings` and `time` are written in honest runs
(streams, `catch_warnings`, `tzset`), so only lasting changes count there; and
where the tests patch the library themselves (unittest.mock,
`tests_write_library`), only lasting changes count anywhere, checked once after
the last test. An allowed change becomes the new baseline.

Reading values in a forked child writes their reference counts and so copies
their pages; the dicts' version tags (PEP 509, `dict_versions.py`) say which
dicts moved at all, and only those are compared. Where the interpreter has no
tags (CPython 3.14+), every dict is compared and a patch put back is not seen.

Not caught: a patch put back in a dict that also gained a name during the run
(the tag cannot tell the two writes apart) by code that runs between the tests'
calls (`__del__`, a thread); other data rebound in a library's module or class
that the library reads but the tests do not name; a program that plants a module
for a library's own lazy import of a module nothing had loaded; an object the
program binds in its namespace that the tests then use under a module's name
without importing it; lists and sets a module holds.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import sys
import types
import unittest
from typing import Callable, Container, Iterable, Sequence

from precisecoder.execution.dict_versions import DictVersions, own_dict
from precisecoder.execution.guard import Guard

_isinstance = isinstance
_hasattr = hasattr
_getattr = getattr
_sorted = sorted
_type = type
_callable = callable
_modules = sys.modules
_ModuleType = types.ModuleType
_FunctionType = types.FunctionType
_MISSING = object()
_IGNORED_NAMES = frozenset({"__warningregistry__"})
# Modules that honest runs write, and the names they rebind (only lasting changes to the others
# count there): sys's streams and exception state, warnings.catch_warnings, time.tzset (pandas).
_VOLATILE = {
  "sys": frozenset(
    {
      "stdout",
      "stderr",
      "stdin",
      "exc_info",
      "_git",
      "path_importer_cache",
      "last_exc",
      "last_value",
      "last_type",
      "last_traceback",
      "ps1",
      "ps2",
      "displayhook",
      "excepthook",
      "__stdout__",
      "__stderr__",
    }
  ),
  "warnings": frozenset(),
  "time": frozenset({"tzname", "timezone", "altzone", "daylight"}),
}  # time.tzset()
# What a watched dict is, and so which changes count (module docstring).
MODULE, CLASS, TABLE, FROZEN = "module", "class", "table", "frozen"
_TABLE_TYPES = (dict,)  # exact types: a dict subclass may run its own code when read
_TAGS = DictVersions.available()


def _behaviour(value) -> bool:
  """A callable, class or descriptor: what a name holding it does is code, not data."""
  return _callable(value) or _hasattr(_type(value), "__get__")


class Integrity:
  """Snapshot of every loaded module's names (by identity) and dict version tags.

  `judge(value)`: why a value is behaviour the program wrote, or None (the run's
  `Guard.authored`; by default one trusting no test code).
  """

  def __init__(self, judge: Callable[[object], str | None] | None = None):
    self.judge = judge or Guard(frozenset()).authored
    self.reached: frozenset[str] = frozenset()  # "module.name" the tests read (`watch_reached`)
    self._labels: list[str] = []
    self._kinds: list[str] = []
    self._dicts: list[dict] = []
    self._saved: list[dict] = []
    self._tags: list = []  # each dict's version tag, read live (empty without tags)
    self._tag_values: list[int] = []  # ... and its value at the snapshot
    self._modules: dict[str, types.ModuleType] = {}
    self._index: dict[int, int] = {}  # id of a watched dict -> its position
    self._quick: list[int] = []  # positions `quick` checks: what the tests reach
    self._registry = DictVersions.view(_modules) if _TAGS else None  # sys.modules' own tag
    self._registry_value = -1  # at the last scan of sys.modules
    self._module_count = 0  # its length then
    self.see_put_back = True  # False while trusted tests patch the library themselves
    self._reach_cache: dict[tuple, list[int]] = {}  # watch_reached's arguments -> `_quick`
    self._module_positions: dict[tuple[str, str], list[int]] = {}  # (module, kind) -> positions
    self._classes: dict[int, type] = {}  # position of a class's dict -> the class
    self._classes[self._watch("TestCase", own_dict(unittest.TestCase), CLASS)] = unittest.TestCase
    self.watch_new_modules()

  def _watch(self, label: str, namespace: dict, kind: str, force: bool = False) -> int:
    """Watches `namespace` as `kind`; one already watched keeps its kind unless `force`."""
    index = self._index.get(id(namespace))
    if index is not None:
      if force:
        self._kinds[index] = kind
      return index
    self._index[id(namespace)] = index = len(self._dicts)
    self._labels.append(label)
    self._kinds.append(kind)
    self._dicts.append(namespace)
    self._saved.append(dict(namespace))
    return index

  def _tag_new(self) -> None:
    if self._registry is not None:
      # Made together, so that they share a few pages: every run reads them all, and a forked
      # run copies each page whose objects it touches.
      views = [DictVersions.view(d) for d in self._dicts[len(self._tags) :]]
      self._tags += views
      self._tag_values += [view.value for view in views]

  def watch_new_modules(self, skip: str = "") -> "Integrity":
    """Adds the modules loaded since the snapshot (in a child: what the tests' imports loaded),
    all but `skip` (the program's own module, which the program writes)."""
    if self._registry is not None and (
      self._registry.value == self._registry_value  # nothing loaded since
      or (len(_modules) == self._module_count + 1 and skip in _modules)
    ):  # only `skip`
      self._registry_value = self._registry.value
      return self  # skip touching every module: in a forked run each touch copies a page
    self._rebase()  # what the loading changed (typing_extensions patching typing) is trusted
    for name, module in list(_modules.items()):
      if (
        name not in self._modules
        and name != skip
        and issubclass(_type(module), _ModuleType)
        and _type(getattr(module, "__dict__", None)) is dict
      ):
        self._modules[name] = module
        self._watch(name, module.__dict__, MODULE)
    self._tag_new()
    if self._registry is not None:
      self._registry_value = self._registry.value
    self._module_count = len(_modules)
    return self

  def loaded_modules(self) -> Container[str]:
    """The names of the modules watched: those loaded before the program ran (read only)."""
    return self._modules

  def _rebase(self) -> None:
    """Takes the watched dicts as they are now as the snapshot (before the program runs)."""
    for index in range(len(self._tags) if _TAGS else len(self._dicts)):
      if not _TAGS or self._tags[index].value != self._tag_values[index]:
        self._saved[index] = dict(self._dicts[index])
        if _TAGS:
          self._tag_values[index] = self._tags[index].value

  def watch_reached(
    self, modules: Iterable[str], frozen: Iterable[str] = (), names: Iterable[str] = ()
  ) -> "Integrity":
    """Watches, besides every module, what the tests reach through `modules` (names of loaded
    modules): the dicts of the classes each holds (and of their bases) and the dicts it holds;
    `frozen` modules (the harness's own) may not change at all. `names`: the module attributes
    the tests read by name ("string.ascii_letters"). Positions of all these but the frozen,
    with unittest.TestCase and builtins, are what `quick` checks."""
    self.reached = frozenset(names)
    key = (tuple(frozen), tuple(modules))
    quick = self._reach_cache.get(key)
    if quick is None:
      # The harness binds what it calls before the program runs: its modules are checked with
      # everything else (`violations`), not after every call.
      quick = [0, self._index[id(builtins.__dict__)]]  # unittest.TestCase, builtins
      for name, kind in [*((n, FROZEN) for n in frozen), *((n, MODULE) for n in modules)]:
        positions = self._module_positions.get((name, kind))
        if positions is None:
          positions = self._module_positions[name, kind] = self._watch_module(name, kind)
        if kind != FROZEN:
          quick += positions
      self._tag_new()
      quick = self._reach_cache[key] = list(dict.fromkeys(quick))
    self._quick = quick
    return self

  def _watch_module(self, name: str, kind: str) -> list[int]:
    module = _modules.get(name)
    namespace = (
      _getattr(module, "__dict__", None) if issubclass(_type(module), _ModuleType) else None
    )
    if _type(namespace) is not dict:
      return []
    frozen = kind == FROZEN
    positions = [self._watch(name, namespace, kind, force=frozen)]
    for key, value in list(namespace.items()):
      if issubclass(_type(value), type):  # by type alone: a lazy proxy must stay untouched
        for klass in value.__mro__:
          if klass.__flags__ & _HEAPTYPE:
            members = own_dict(klass)
            positions.append(
              self._watch(klass.__qualname__, members, FROZEN if frozen else CLASS, force=frozen)
            )
            self._classes[positions[-1]] = klass
            positions += self._watch_defaults(klass.__qualname__, members.values())
      elif _type(value) in _TABLE_TYPES and not key.startswith("__") and value is not _modules:
        positions.append(self._watch(f"{name}.{key}", value, FROZEN if kind == FROZEN else TABLE))
    return positions + self._watch_defaults(name, namespace.values())

  def _watch_defaults(self, label: str, members: Iterable) -> list[int]:
    """The keyword defaults of the functions among `members`, which may not change (a program
    could widen a library check's tolerance in place)."""
    return [
      self._watch(f"{label}.{f.__name__}.__kwdefaults__", f.__kwdefaults__, FROZEN)
      for f in list(members)
      if _type(f) is _FunctionType and f.__kwdefaults__
    ]

  def violations(self) -> list[str]:
    """What the run changed (empty if nothing), most telling first; at most a few.

    The common case, nothing moved, runs in this one function's loop: each further function
    or comprehension a forked run executes for the first time copies a page of bytecode
    (CPython 3.11 writes its adaptive counters), and this check runs in every run.
    """
    if not _TAGS:
      return self._describe(range(len(self._dicts)), True)
    moved, index, values = [], 0, self._tag_values
    for tag in self._tags:
      if tag.value != values[index]:
        moved.append(index)
      index += 1
    swapped = self._registry.value != self._registry_value  # a module loaded, or swapped
    if moved or swapped or sys.gettrace() is not None or sys.getprofile() is not None:
      return self._describe(moved, swapped)
    return []

  def quick(self) -> list[str]:
    """`violations`, over what the tests reach only (`watch_reached`): after every call the
    tests make into the program, so that a patch that puts itself back when the tests call it
    is seen while it is in place."""
    lenient = not self.see_put_back  # the tests patch the library too: only what the program
    if not _TAGS:  # wrote counts until the lasting changes at the end
      return self._describe(self._quick, False, lenient)
    tags, values = self._tags, self._tag_values
    moved = [i for i in self._quick if tags[i].value != values[i]]
    return self._describe(moved, False, lenient) if moved else []

  def _describe(self, candidates, swapped: bool, lenient: bool = False) -> list[str]:
    """Names what changed among the dicts at `candidates`, in sys.modules and in the hooks;
    takes the allowed changes as the new baseline. `lenient`: only what the program wrote
    counts, and nothing becomes the baseline (the tests' own patches are in place)."""
    found = []
    for index in candidates:
      label, namespace, saved = self._labels[index], self._dicts[index], self._saved[index]
      changed = self._changed_names(index, lenient)
      if changed:
        found.append(f"{label}.{changed[0]}")
      elif lenient:
        continue
      elif (
        _TAGS
        and self.see_put_back
        and label not in _VOLATILE
        and self._kinds[index] != TABLE
        and _identical(namespace, saved)
      ):
        found.append(f"{label} (patched, then put back)")  # its tag moved: it was written
      else:
        self._saved[index] = dict(namespace)
        if _TAGS:
          self._tag_values[index] = self._tags[index].value
      if len(found) >= 3:
        break
    if swapped:
      found += [
        f"sys.modules[{name!r}]"
        for name, module in self._modules.items()
        if _modules.get(name) is not module
      ][:3]
    if sys.gettrace() is not None or sys.getprofile() is not None:
      found.append("a trace or profile hook")
    return found

  def _changed_names(self, index: int, lenient: bool = False) -> list[str]:
    """The names of watched dict `index` whose change is tampering (module docstring), each
    with why."""
    label, kind, namespace, saved = (
      self._labels[index],
      self._kinds[index],
      self._dicts[index],
      self._saved[index],
    )
    volatile = _VOLATILE.get(label, frozenset())
    found = []
    owner = self._classes.get(index)
    for key in [*saved, *(k for k in namespace if k not in saved)]:
      old, new = saved.get(key, _MISSING), namespace.get(key, _MISSING)
      if new is old or key in volatile or key in _IGNORED_NAMES:
        continue
      if old is _MISSING and owner is not None:  # a name added to a class shadows its bases'
        old = next(
          (own_dict(base)[key] for base in owner.__mro__[1:] if key in own_dict(base)), _MISSING
        )
      why = self._change_problem(kind, label, key, old, new, lenient)
      if why is not None:
        found.append(f"{key} ({why})")
    return _sorted(found)

  def _change_problem(
    self, kind: str, label: str, key, old, new, lenient: bool = False
  ) -> str | None:
    if kind == FROZEN:
      return "changed"
    if new is _MISSING:  # removed: a method or a module's name, not a cache entry
      if lenient or kind == TABLE or (kind == CLASS and not _behaviour(old)):
        return None
      return "removed"
    authored = self.judge(new)
    if authored is not None:
      return f"now {authored}"
    if lenient or old is _MISSING or old is None:
      return None  # added, or a lazy global filled in
    if kind == MODULE and f"{label}.{key}" in self.reached:
      return "rebound, and the tests read it"
    if not _behaviour(old) or self._library_patch(key, new):
      return None
    if kind == TABLE and _getattr(new, "__module__", None) != label.rpartition(".")[0]:
      return None  # a registry entry another library updates (sqlite3.adapters, by pandas)
    return f"now {_kind_name(new)}"

  def _library_patch(self, key, new) -> bool:
    """A library function named `key` from a module loaded during the run: a library that
    installs its own version of another's function as it loads (typing_extensions)."""
    return (
      _type(new) is _FunctionType
      and new.__name__ == key
      and _getattr(new, "__module__", None) not in self._modules
      and self.judge(new) is None
    )


def _kind_name(value) -> str:
  kind = _type(value)
  return f"a {_getattr(kind, '__module__', '?')}.{_getattr(kind, '__qualname__', '?')}"


_HEAPTYPE = 1 << 9


def _identical(namespace: dict, saved: dict) -> bool:
  """Whether every name holds the object it held and no name was added."""
  return len(namespace) == len(saved) and all(
    namespace.get(key, saved) is value for key, value in saved.items()
  )


# What test code writes the library with: unittest.mock (patch, patch.object, Mock objects
# standing in for functions), setattr/delattr, pytest's monkeypatch.
_WRITERS = frozenset(
  {
    "mock",
    "patch",
    "Mock",
    "MagicMock",
    "AsyncMock",
    "PropertyMock",
    "setattr",
    "delattr",
    "monkeypatch",
  }
)


def tests_write_library(nodes: Sequence[ast.AST]) -> bool:
  """Whether test code (ours, trusted; every node of its tree, as `ast.walk` lists them) may
  itself patch a module, and put it back.

  BigCodeBench-style tests patch `builtins.input`, `os.path.exists` or `random.random` for the
  length of a test. Their runs cannot tell a patch put back by the tests from one put back
  by the program (the dicts' tags say only "written"), and a patch the tests hold across
  tests (setUpClass) is a changed name between tests: such runs are checked once, after the
  last test, for lasting changes only.
  """
  modules = {
    alias.asname or alias.name.split(".")[0]
    for node in nodes
    if _isinstance(node, ast.Import)
    for alias in node.names
  }
  for node in nodes:
    if _isinstance(node, ast.Name) and node.id in _WRITERS:
      return True
    if _isinstance(node, ast.Attribute) and node.attr in _WRITERS:
      return True
    if _isinstance(node, ast.alias) and node.name.split(".")[-1] in _WRITERS:
      return True
    if _isinstance(node, (ast.Attribute, ast.Subscript)) and _isinstance(
      node.ctx, (ast.Store, ast.Del)
    ):
      root = node.value
      while _isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
      # os.environ = ..., sys.modules[k] = ...
      if _isinstance(root, ast.Name) and root.id in modules:
        return True
  return False


def test_imports(nodes: Sequence[ast.AST]) -> tuple[str, ...]:
  """The modules test code (ours, trusted; every node of its tree, as `ast.walk` lists them)
  imports, with the submodules it reaches by attribute.

  `import numpy as np` then `np.testing.assert_array_equal(...)` gives
  ("numpy", "numpy.testing", "numpy.testing.assert_array_equal"): importing
  them before the program runs puts them under the snapshot, so a program
  cannot plant or patch them first. Names that are not modules fail to import
  and are skipped (`import_quietly`).
  """
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


def import_quietly(names: tuple[str, ...]) -> None:
  """Imports each name that is a module; anything else (a function, a missing module) is left
  for the tests to meet. A name whose parent is loaded but is no package, or has an attribute
  of that name that is no module (`math.isclose`), is skipped without asking the import
  system, which would search the path."""
  for name in names:
    if name in _modules:
      continue
    parent, _, attribute = name.rpartition(".")
    owner = _modules.get(parent) if parent else None
    if owner is not None:
      if not _hasattr(owner, "__path__"):
        continue
      try:
        value = _getattr(owner, attribute, None)
      except Exception:  # pylint: disable=broad-except
        continue
      if value is not None and not issubclass(_type(value), _ModuleType):
        continue
    try:
      importlib.import_module(name)
    except Exception:  # pylint: disable=broad-except
      pass
