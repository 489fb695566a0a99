"""Whose code a function runs: the tests', a library's, or the program's (assert and unittest).

The guard (`guard.py`) and integrity (`integrity.py`) ask this of every function and class a
run hands them. Provenance is decided from code objects: code the program compiled carries
PROGRAM_FILENAME; test code is trusted by the identity of the code objects the harness compiled
(`code_ids`), never by a name a program could copy; library code comes from files under the
import path the worker started with (or CPython's frozen modules), never from a file the program
wrote (`library_file`); a library's class is one its module defines and names (`library_class`);
the methods dataclasses writes for a class (exec'd text, no file) are trusted only when their
code is exactly what dataclasses writes for the attributes they read and no name they look up is
rebound (`is_dataclass_method`). Any other code is the program's, whatever its file name, and so
is a function behind a partial, lru_cache, cached_property or the like (`UNWRAP`).

Not caught (see the package docstring): a program that compiles its own code under a library
file's name.
"""

from __future__ import annotations

import _imp
import builtins
import dataclasses
import functools
import os
import sys
import types

from precisecoder.execution.programs import PROGRAM_FILENAME

# Bound before any program runs: the program may patch builtins, the checks must not see it.
_type = type
_id = object.__hash__  # identity without an audited event (see guard.py)
_getattr = getattr
_len = len
_isfile = os.path.isfile


# Standard-library wrappers around a function, and where each keeps it (`_runs_untrusted`).
UNWRAP = {
  types.MethodType: "__func__",
  staticmethod: "__func__",
  classmethod: "__func__",
  functools.partial: "func",
  functools.partialmethod: "func",
  functools.cached_property: "func",
}
# Those written in Python keep it in the instance dict, read there: a program may patch the class.
PYTHON_WRAPPERS = frozenset({functools.partialmethod, functools.cached_property})
LRU_WRAPPER = _type(functools.lru_cache(maxsize=None)(lambda: None))


def held(wrapper, attribute: str):
  """What a standard-library wrapper holds under `attribute`, read without running its class."""
  if _type(wrapper) in PYTHON_WRAPPERS or _type(wrapper) is LRU_WRAPPER:
    return object.__getattribute__(wrapper, "__dict__").get(attribute)
  return _getattr(wrapper, attribute)


# functools.total_ordering's derivations: each defers to the class's own __lt__ (or __le__, ...),
# judged in its turn, so they decide nothing of their own.
_DERIVED_ORDER = frozenset(
  function
  for table in functools._convert.values()  # pylint: disable=protected-access
  for _, function in table
)


def inherited(function: types.FunctionType, klass: type) -> bool:
  """Whether library `function` was written for `klass` or a library class it derives from
  (enum copies Flag.__or__ into each Flag class), or derives an order (total_ordering)."""
  if function in _DERIVED_ORDER:
    return True
  owner = _getattr(function, "__qualname__", "").rpartition(".")[0]
  module = _getattr(function, "__module__", None)
  # A class a library makes inside a function (`<locals>` in its name) cannot be looked up: its
  # own name and module must then match where the function was written.
  return any(
    _getattr(base, "__qualname__", None) == owner
    and _getattr(base, "__module__", None) == module
    and (library_class(base) or "<locals>" in owner)
    for base in klass.__mro__
  )


def library_class(klass: type) -> bool:
  """Whether `klass` is a class a library module defines: its `__module__` is a module loaded
  from a library file, its `__qualname__` leads from there to `klass` itself, and it has a
  method of library code written in its body (the method's `__qualname__` says so). A class the
  program made, whatever names it claims, leads elsewhere or nowhere, or has no such method."""
  key = _id(klass)
  known = _CACHES.library_classes.get(key)
  if known is None or known[0] is not klass:
    known = _CACHES.library_classes[key] = (klass, _find_library_class(klass))
  return known[1]


def _find_library_class(klass: type) -> bool:
  module = sys.modules.get(_getattr(klass, "__module__", None) or "")
  filename = _getattr(module, "__file__", None)
  qualname = _getattr(klass, "__qualname__", None)
  if _type(filename) is not str or not library_file(filename) or _type(qualname) is not str:
    return False
  found = module
  for part in qualname.split("."):
    found = _getattr(found, part, None) if part != "<locals>" else None
  if found is not klass:
    return False
  prefix = qualname + "."
  return any(
    _type(m) is types.FunctionType
    and _getattr(m, "__qualname__", "").startswith(prefix)
    and library_file(m.__code__.co_filename)
    for m in own_members(klass).values()
  )


# Where library code lives: the import path as the worker started (read-only mounts in the
# sandbox). A file a program writes (its working directory, /tmp) and imports is not library code.
LIBRARY_ROOTS = tuple(
  sorted(
    {
      os.path.join(root, "")
      for entry in sys.path
      if os.path.isabs(entry) and os.path.isdir(entry)
      for root in (entry, os.path.realpath(entry))
    }
  )
)


@functools.lru_cache(maxsize=4096)
def library_file(filename: str) -> bool:
  """Code from a source file under the import path or a frozen stdlib module ('<frozen abc>')."""
  if filename.startswith("<frozen ") and filename.endswith(">"):
    return _imp.is_frozen(filename[8:-1])
  return filename.startswith(LIBRARY_ROOTS) and _isfile(filename)


def is_namedtuple_new(name: str, function) -> bool:
  """collections.namedtuple's `__new__`, made by eval (so '<string>'), only calls tuple.__new__."""
  code = function.__code__
  return (
    name == "__new__"
    and code.co_filename == "<string>"
    and code.co_names == ("_tuple_new",)
    and function.__globals__.get("_tuple_new") is tuple.__new__
  )


# Methods the dataclasses module writes for a class (exec'd text, so '<string>', no file):
# recognised by regenerating that text for the attributes the method reads and comparing the
# code objects, so they are trusted for what they are, never for their file name.
_COMPARISONS = {"__eq__": "==", "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}
_DATACLASS_GLOBALS = ("NotImplemented", "hash", "type", "super")  # the names their code looks up
_BUILTINS = builtins.__dict__
_BUILTIN_VALUES = {name: _BUILTINS[name] for name in _DATACLASS_GLOBALS}
_FROZEN_ERROR = dataclasses.FrozenInstanceError
# Caches written during runs, so kept in an instance (integrity freezes the
# harness modules' dicts and the dicts they hold): which code objects matched dataclasses'
# templates, by (name, id); which classes are a library's (`library_class`), by id. Each entry
# holds its object, so that the id stays its own.
_CACHES = types.SimpleNamespace(templates={}, library_classes={})


def _fields_tuple(obj: str, fields: tuple) -> str:
  return f"({','.join(f'{obj}.{f}' for f in fields)},)" if fields else "()"


def _dataclass_source(name: str, code: types.CodeType) -> tuple[str, tuple] | None:
  """(the text dataclasses (3.11) writes for method `name` over the fields `code` reads,
  the names of its closure), or None for a name it does not write."""
  if name in _COMPARISONS:
    fields = code.co_names[1:-1]
    line = (
      f"return {_fields_tuple('self', fields)}{_COMPARISONS[name]}{_fields_tuple('other', fields)}"
    )
    args, body, local = (
      "self,other",
      ["if other.__class__ is self.__class__:", " " + line, "return NotImplemented"],
      (),
    )
  elif name == "__hash__":
    args, body, local = "self", [f"return hash({_fields_tuple('self', code.co_names[1:])})"], ()
  elif name in ("__setattr__", "__delattr__"):
    fields = next((c for c in code.co_consts if _type(c) is tuple), ())
    listed = "(" + ",".join(repr(f) for f in fields) + ",)" if fields else "()"
    verb, call = (
      ("assign to", "__setattr__(name, value)")
      if name == "__setattr__"
      else ("delete", "__delattr__(name)")
    )
    args = "self,name,value" if name == "__setattr__" else "self,name"
    body = [
      f"if type(self) is cls or name in {listed}:",
      f' raise FrozenInstanceError(f"cannot {verb} field {{name!r}}")',
      f"super(cls, self).{call}",
    ]
    local = ("cls", "FrozenInstanceError")
  else:
    return None
  text = "\n".join(f"  {line}" for line in body)
  return (
    f"def __create_fn__({', '.join(local)}):\n def {name}({args}):\n{text}\n return {name}",
    local,
  )


def is_dataclass_method(klass: type, name: str, function) -> bool:
  """Whether `function`, found as `klass.<name>`, is exactly what dataclasses writes."""
  if not _DATACLASS_TEMPLATES:
    return False
  code = function.__code__
  made = _dataclass_source(name, code)
  if made is None or function.__defaults__ or function.__kwdefaults__:
    return False
  source, local = made
  if function.__builtins__ is not _BUILTINS or any(
    function.__globals__.get(n, v) is not v or _BUILTINS.get(n) is not v
    for n, v in _BUILTIN_VALUES.items()
  ):
    return False  # a rebound NotImplemented, hash, type or super would decide the comparison
  closure = dict(zip(code.co_freevars, function.__closure__ or ()))
  if sorted(closure) != sorted(local) or (
    local
    and (
      closure["cls"].cell_contents is not klass
      or closure["FrozenInstanceError"].cell_contents is not _FROZEN_ERROR
    )
  ):
    return False
  cached = _CACHES.templates.get((name, _id(code)))
  if cached is not None and cached[0] is code:
    return cached[1]
  try:
    namespace: dict = {}
    exec(compile(source, "<string>", "exec", dont_inherit=True), {}, namespace)  # pylint: disable=exec-used
    matches = namespace["__create_fn__"](*(klass, _FROZEN_ERROR)[: _len(local)]).__code__ == code
  except (SyntaxError, ValueError):
    matches = False
  _CACHES.templates[(name, _id(code))] = (code, matches)  # holds `code`: its id stays its own
  return matches


def _dataclass_templates_match() -> bool:
  """Whether this interpreter's dataclasses writes what `_dataclass_source` expects
  (checked once, before any program runs); where not, dataclass methods are not trusted."""
  names = [*_COMPARISONS, "__hash__", "__setattr__", "__delattr__"]
  try:
    probes = [
      dataclasses.make_dataclass(name, fields, order=True, frozen=True)
      for name, fields in (("Probe", [("a", int), ("b", str)]), ("Empty", []))
    ]
    return all(is_dataclass_method(c, n, own_members(c)[n]) for c in probes for n in names)
  except Exception:  # pylint: disable=broad-except  (another interpreter's dataclasses)
    return False


def code_ids(code: types.CodeType) -> frozenset[int]:
  """The ids of `code` and of every code object nested in it (the harness's compiled test code)."""
  ids, stack = set(), [code]
  while stack:
    current = stack.pop()
    if _id(current) not in ids:
      ids.add(_id(current))
      stack.extend(c for c in current.co_consts if _type(c) is types.CodeType)
  return frozenset(ids)


def compiled_here(member) -> bool:
  """Whether `member` (through the standard library's wrappers) is code of the program's source."""
  for _ in range(16):
    kind = _type(member)
    if kind is types.FunctionType:
      return member.__code__.co_filename == PROGRAM_FILENAME
    attribute = UNWRAP.get(kind) or ("__wrapped__" if kind is LRU_WRAPPER else None)
    if attribute is None:
      return False
    member = held(member, attribute)
  return False


def own_members(cls: type) -> types.MappingProxyType:
  """A class's own namespace, read without any lookup the class or its metaclass could override."""
  return type.__dict__["__dict__"].__get__(cls)


_DATACLASS_TEMPLATES = True  # for the one check below, made at import, before any program runs
_DATACLASS_TEMPLATES = _dataclass_templates_match()
