"""Whether a run changed the library its tests call (assert and unittest kinds).

The program and the tests share one interpreter, so a program can patch what
the tests call instead of computing the right answer: `math.isclose`,
`numpy.testing.assert_array_equal`, `operator.eq`, a unittest assert, a
builtin, or the module `sys.modules` hands to the tests' `import`.
`Integrity` is taken before the program runs, over every module loaded by
then: the worker's warm imports, and the modules the tests import, which the
harness imports first for this reason (`test_imports`). After the tests, and
after each unittest test, `violations()` names what changed:

  - a name of a watched module (or of `unittest.TestCase`) that no longer
    holds the object it held, or is gone. Libraries write their own globals
    lazily, so a name that held None may be bound and a new name may appear
    (a submodule import sets `pkg.sub`, a cache); `__warningregistry__`,
    which `warnings` writes in a module that warns, is ignored;
  - a module dict that was written at all, though every name holds its object
    again and none was added: a patch put back before this check, for example
    by the patch itself once the tests have called it. `sys`, `warnings` and
    `time` are written in honest runs (streams, `catch_warnings`, `tzset`), so
    only lasting changes to their other names count there; and where the tests
    patch the library themselves (unittest.mock, `tests_write_library`), only
    lasting changes count anywhere, checked once after the last test;
  - a module `sys.modules` no longer maps to the watched object;
  - a trace or profile hook left installed.

Reading values in a forked child writes their reference counts and so copies
their pages; the dicts' version tags (PEP 509, `guard.DictVersions`) say which
dicts moved at all, and only those are compared. Where the interpreter has no
tags (CPython 3.14+), every dict is compared and a patch put back is not seen.

Not caught: a patch put back in a module that also gained a name during the
run (the tag cannot tell the two writes apart); a name the tests use that
held None; a program that plants a module for a library's own lazy import of
a module nothing had loaded; an object the program binds in its namespace
that the tests then use under a module's name without importing it.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
import unittest
from typing import Sequence

from precisecoder.execution.guard import DictVersions, own_dict

_isinstance = isinstance
_hasattr = hasattr
_getattr = getattr
_sorted = sorted
_modules = sys.modules
_ModuleType = types.ModuleType
_IGNORED_NAMES = frozenset({"__warningregistry__"})
# Modules that honest runs write, and the names they rebind (only lasting changes to the others
# count there): sys's streams and exception state, warnings.catch_warnings, time.tzset (pandas).
_VOLATILE = {"sys": frozenset({"stdout", "stderr", "stdin", "exc_info", "_git", "path_importer_cache",
                               "last_exc", "last_value", "last_type", "last_traceback", "ps1",
                               "ps2", "displayhook", "excepthook", "__stdout__", "__stderr__"}),
             "warnings": frozenset(),
             "time": frozenset({"tzname", "timezone", "altzone", "daylight"})}  # time.tzset()
_TAGS = DictVersions.available()


class Integrity:
  """Snapshot of every loaded module's names (by identity) and dict version tags."""

  def __init__(self):
    self._labels: list[str] = []
    self._dicts: list[dict] = []
    self._saved: list[dict] = []
    self._tags: list = []  # each dict's version tag, read live (empty without tags)
    self._tag_values: list[int] = []  # ... and its value at the snapshot
    self._modules: dict[str, types.ModuleType] = {}
    self._registry = DictVersions.view(_modules) if _TAGS else None  # sys.modules' own tag
    self._registry_value = -1  # at the last scan of sys.modules
    self._module_count = 0  # its length then
    self.see_put_back = True  # False while trusted tests patch the library themselves
    self._watch("TestCase", own_dict(unittest.TestCase))
    self.watch_new_modules()

  def _watch(self, label: str, namespace: dict) -> None:
    self._labels.append(label)
    self._dicts.append(namespace)
    self._saved.append(dict(namespace))

  def watch_new_modules(self, skip: str = "") -> "Integrity":
    """Adds the modules loaded since the snapshot (in a child: what the tests' imports loaded),
    all but `skip` (the program's own module, which the program writes)."""
    if self._registry is not None and (
        self._registry.value == self._registry_value  # nothing loaded since
        or (len(_modules) == self._module_count + 1 and skip in _modules)):  # only `skip`
      self._registry_value = self._registry.value
      return self  # skip touching every module: in a forked run each touch copies a page
    for name, module in list(_modules.items()):
      if (name not in self._modules and name != skip and _isinstance(module, _ModuleType)
          and _isinstance(getattr(module, "__dict__", None), dict)):
        self._modules[name] = module
        self._watch(name, module.__dict__)
    if self._registry is not None:
      # Made together, so that they share a few pages: every run reads them all, and a forked
      # run copies each page whose objects it touches.
      views = [DictVersions.view(d) for d in self._dicts[len(self._tags):]]
      self._tags += views
      self._tag_values += [view.value for view in views]
      self._registry_value = self._registry.value
    self._module_count = len(_modules)
    return self

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

  def _describe(self, candidates, swapped: bool) -> list[str]:
    """Names what changed among the dicts at `candidates`, in sys.modules and in the hooks."""
    found = []
    for index in candidates:
      label, namespace, saved = self._labels[index], self._dicts[index], self._saved[index]
      changed = self._changed_names(label, namespace, saved)
      if changed:
        found.append(f"{label}.{changed[0]}")
      elif (_TAGS and self.see_put_back and label not in _VOLATILE
            and _identical(namespace, saved)):
        found.append(f"{label} (patched, then put back)")  # its tag moved: it was written
      if len(found) >= 3:
        break
    if swapped:
      found += [f"sys.modules[{name!r}]" for name, module in self._modules.items()
                if _modules.get(name) is not module][:3]
    if sys.gettrace() is not None or sys.getprofile() is not None:
      found.append("a trace or profile hook")
    return found

  @staticmethod
  def _changed_names(label: str, namespace: dict, saved: dict) -> list[str]:
    """Names that no longer hold what they held. A name that held None may be bound (a library's
    lazy global: pyarrow's compute module, say) and a new name may appear (a submodule import, a
    cache); neither replaces anything the tests were written against."""
    volatile = _VOLATILE.get(label, frozenset())
    return _sorted(key for key, value in saved.items()
                   if value is not None and namespace.get(key, saved) is not value
                   and key not in volatile and key not in _IGNORED_NAMES)


def _identical(namespace: dict, saved: dict) -> bool:
  """Whether every name holds the object it held and no name was added."""
  return len(namespace) == len(saved) and all(namespace.get(key, saved) is value
                                               for key, value in saved.items())


# What test code writes the library with: unittest.mock (patch, patch.object, Mock objects
# standing in for functions), setattr/delattr, pytest's monkeypatch.
_WRITERS = frozenset({"mock", "patch", "Mock", "MagicMock", "AsyncMock", "PropertyMock",
                      "setattr", "delattr", "monkeypatch"})


def tests_write_library(nodes: Sequence[ast.AST]) -> bool:
  """Whether test code (ours, trusted; every node of its tree, as `ast.walk` lists them) may
  itself patch a module, and put it back.

  BigCodeBench-style tests patch `builtins.input`, `os.path.exists` or `random.random` for the
  length of a test. Their runs cannot tell a patch put back by the tests from one put back
  by the program (the dicts' tags say only "written"), and a patch the tests hold across
  tests (setUpClass) is a changed name between tests: such runs are checked once, after the
  last test, for lasting changes only.
  """
  modules = {alias.asname or alias.name.split(".")[0] for node in nodes
             if _isinstance(node, ast.Import) for alias in node.names}
  for node in nodes:
    if _isinstance(node, ast.Name) and node.id in _WRITERS:
      return True
    if _isinstance(node, ast.Attribute) and node.attr in _WRITERS:
      return True
    if _isinstance(node, ast.alias) and node.name.split(".")[-1] in _WRITERS:
      return True
    if _isinstance(node, (ast.Attribute, ast.Subscript)) and _isinstance(node.ctx, (ast.Store, ast.Del)):
      root = node.value
      while _isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
      if _isinstance(root, ast.Name) and root.id in modules:  # os.environ = ..., sys.modules[k] = ...
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
      if value is not None and not _isinstance(value, _ModuleType):
        continue
    try:
      importlib.import_module(name)
    except Exception:  # pylint: disable=broad-except
      pass
