"""What an untrusted program may hand to tests that run beside it (assert and unittest kinds).

The program and the tests share one interpreter, so the tests compare values
the program made. Such a value may reach the tests when no code the program
wrote is handed the tests' expected value to decide a comparison (==, <, in,
arithmetic such as a - b in assertAlmostEqual): plain data, objects of library
types, objects of classes the (trusted) test code defined, objects of the
program's own classes that define no such method, and containers of those,
checked all the way down. Values the program hands over lazily are wrapped,
not refused: a generator or iterator so that each item is checked when it is
yielded, a returned function so that what it returns is checked, a coroutine
so that its result is; the program's module-level functions and its classes'
methods and value dunders (__iter__, __len__, __str__, ...) so that what they
return to the tests is checked. Calls within the program -- those made while a
call from the tests, or a generator or coroutine of the program's, runs -- are
not checked: their values go back to the program.

Whose code a function runs is `provenance.py`'s question. Classes the test code
defines are registered as they are created (`register_class`, a decorator the
harness adds to every class statement of the tests) together with a snapshot of
their members, so a program that monkey-patches one, subclasses it with its own
methods, or swaps an instance's `__class__` is refused.

Not caught (see the package docstring): a program that compiles its own code
under a library file's name, and state hidden more than one level deep inside
objects of library types.
"""

from __future__ import annotations

import collections
import functools
import itertools
import sys
import types
from typing import Callable, Container

from precisecoder.execution.dict_versions import TAGS, DictVersions, own_dict
from precisecoder.execution.provenance import (
  LRU_WRAPPER,
  PYTHON_WRAPPERS,
  UNWRAP,
  compiled_here,
  held,
  inherited,
  is_dataclass_method,
  is_namedtuple_new,
  library_class,
  library_file,
  own_members,
)

# Bound before any program runs: the program may patch builtins, the checks must not see it.
_type = type
# Identity without an audited event: id() raises one (PEP 578), which the run's audit hook
# (hooks.py) would see for every object checked; object's own hash is a rotation of the same
# address, as unique among live objects.
_id = object.__hash__
_isinstance = isinstance
_getattr = getattr
_hasattr = hasattr
_len = len
_list = list
_dict_items = dict.items
_list_iter = list.__iter__
_islice = itertools.islice
_getframe = sys._getframe  # pylint: disable=protected-access
_getlimit = sys.getrecursionlimit
_setlimit = sys.setrecursionlimit

# Py_TPFLAGS_HEAPTYPE: classes made at run time (Python code, or PyType_FromSpec).
_HEAPTYPE = 1 << 9
_SCALARS = frozenset({_type(None), bool, int, float, str, complex, bytes})
_CONTAINERS = frozenset({list, tuple, set, frozenset})
_C_CALLABLES = (
  types.BuiltinFunctionType,
  types.WrapperDescriptorType,
  types.MethodDescriptorType,
  types.ClassMethodDescriptorType,
  types.MethodWrapperType,
)
_WRAPPED_CALLABLES = (
  types.FunctionType,
  types.MethodType,
  types.BuiltinFunctionType,
  functools.partial,
)
# Program-written methods that may sit on a class whose objects reach the tests: they run when
# the object is made, never when the tests compare, print, convert or iterate it.
_CONSTRUCTION = frozenset(
  {
    "__init__",
    "__new__",
    "__post_init__",
    "__init_subclass__",
    "__set_name__",
    "__del__",
    "__class_getitem__",
  }
)
# Program-written dunders that hand the tests a value, as a method does (`str(obj)`, `len(obj)`,
# `list(obj)`, `obj[i]`, `obj()`, `bool(obj)`): in a class the program left at module level they
# are guarded as its methods are. The others (__eq__, __lt__, __contains__, __sub__, __rsub__,
# ...) are handed the tests' expected value and decide the comparison with it: refused.
_VALUE_DUNDERS = frozenset(
  {
    "__call__",
    "__repr__",
    "__str__",
    "__format__",
    "__bytes__",
    "__iter__",
    "__next__",
    "__reversed__",
    "__getitem__",
    "__getattr__",
    "__len__",
    "__length_hint__",
    "__bool__",
    "__hash__",
    "__int__",
    "__float__",
    "__complex__",
    "__index__",
    "__round__",
    "__trunc__",
    "__floor__",
    "__ceil__",
    "__abs__",
    "__neg__",
    "__pos__",
    "__fspath__",
    "__get__",
    "__getattribute__",
  }
)
# Dunders that never decide a comparison: Cython classes alias them (`__reduce__ =
# __reduce_cython__`), which the alias rule in `_member_problem` must not mistake for a forgery.
_INERT = _CONSTRUCTION | {
  "__reduce__",
  "__reduce_ex__",
  "__getstate__",
  "__setstate__",
  "__copy__",
  "__deepcopy__",
  "__sizeof__",
  "__dir__",
  "__getnewargs__",
  "__getnewargs_ex__",
  "__subclasshook__",
}


# Objects of each argument looked at before and after a call from the tests: enough for the
# inputs tests mutate in place, bounded so that a big input passed to many calls costs little.
_ARGUMENT_BUDGET = 128


class PlainDataError(TypeError):
  """A value the program made that the tests must not compare (its behaviour is the program's)."""


def kind_name(value) -> str:
  kind = _type(value)
  return f"{_getattr(kind, '__module__', '?')}.{_getattr(kind, '__qualname__', '?')}"


def _dunder(name: str) -> bool:
  return name[:2] == "__" and name[-2:] == "__"


# The comparisons (and the subtraction assertAlmostEqual makes) whose library code, borrowed into
# a class the program made, would decide a check for it (`_member_problem`).
_BORROWABLE = frozenset(
  {
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__contains__",
    "__sub__",
    "__rsub__",
  }
)


class Guard:
  """One run's checks: the test code it trusts, the test classes it has seen."""

  def __init__(self, trusted_codes: frozenset[int]):
    """`trusted_codes`: `code_ids` of the test code, which the caller keeps alive (so that no
    other code object can take one of those ids)."""
    self._trusted_codes = trusted_codes
    self._test_classes: dict[int, _TestClass] = {}
    self._versions: DictVersions | None = None  # over every test class's dict, where tags work
    self._guarded_classes: set[int] = set()
    # How many calls from the tests into the program are running (a list, so that wrappers bind
    # it): a call made while one runs is the program's own, its value goes back to the program.
    # Counted, not read from the caller's frame: `sys._getframe` is an audited event, which the
    # run's audit hook (`hooks.py`) would see at every call of a recursive program.
    self._running = [0]
    # Called after every call the tests make into the program: what the program changed in the
    # library the tests reach (`Integrity.quick`), checked while a patch is still in place.
    self.after_call: Callable[[], list[str]] | None = None
    self._instance = None  # the unittest test running now (`watch_instance`)
    self._equality_funcs: dict = {}  # its _type_equality_funcs as TestCase.__init__ left them
    # The program's classes whose objects the tests were handed: id -> [class, its dict's tag,
    # the tag then]. An object checked once must not change behaviour afterwards through its
    # class (an __eq__ added by a __del__, a thread, or a guarded __getitem__ the tests call).
    self._handed: dict[int, list] = {}
    self._handed_kinds: set[int] = set()  # the classes of handed objects already looked at

  # --- trust ---------------------------------------------------------------------------------

  def register_class(self, cls):
    """Class decorator for the test code's class statements: remembers the class as defined.

    Only a class statement of trusted test code can register: the caller's
    code object must be one of the trusted codes.
    """
    caller = _getframe(1).f_code
    if _id(caller) in self._trusted_codes and _isinstance(cls, type):
      self._test_classes[_id(cls)] = _TestClass(cls)
      self._snapshot_versions()
    return cls

  def _snapshot_versions(self) -> None:
    if TAGS:
      self._versions = DictVersions([own_dict(e.cls) for e in self._test_classes.values()])

  def changed_class(self) -> str | None:
    """The first test class the program changed since the tests defined it, if any.

    Runs after every call the tests make into the program, so where CPython
    keeps dict version tags an unchanged set of classes costs one read each.
    """
    entries = self._test_classes.values()
    for entry in entries:
      if entry.moved():
        return entry.cls.__qualname__
    if self._versions is not None and not self._versions.changed():
      return None
    for entry in entries:
      if entry.changed():
        return entry.cls.__qualname__
    self._snapshot_versions()  # only data changed (a counter the tests keep on a class)
    return None

  def _hand_over(self, kind: type) -> None:
    """Remembers the program's classes in `kind`'s MRO: objects of them reach the tests."""
    if _id(kind) in self._handed_kinds or not kind.__flags__ & _HEAPTYPE:
      return
    self._handed_kinds.add(_id(kind))
    for klass in kind.__mro__:
      if (
        _id(klass) not in self._handed
        and klass.__flags__ & _HEAPTYPE
        and _id(klass) not in self._test_classes
        and not library_class(klass)
      ):
        tag = DictVersions.view(own_dict(klass)) if TAGS else None
        self._handed[_id(klass)] = [klass, tag, tag.value if tag is not None else None]

  def handed_problem(self) -> str | None:
    """How a class of objects the tests were handed has come to decide comparisons since."""
    for entry in _list(self._handed.values()):
      klass, tag, value = entry
      if tag is not None and tag.value == value:
        continue
      problem = self._one_class_problem(klass, {})
      if problem is not None:
        return f"the class {klass.__qualname__} after the tests had its objects: {problem}"
      if tag is not None:
        entry[2] = tag.value
    return None

  def _intact(self) -> None:
    """After a call from the tests: the tests' classes, the test's instance, the classes of what
    they were handed and the library they reach are as they were (else the call raises, and the
    test fails)."""
    if self._test_classes:
      changed = self.changed_class()
      if changed is not None:
        raise PlainDataError(f"the program changed the tests' class {changed}")
    if self._handed:
      changed = self.handed_problem()
      if changed is not None:
        raise PlainDataError(f"the program changed {changed}")
    if self._instance is not None:
      changed = self.instance_problem()
      if changed is not None:
        raise PlainDataError(f"the program changed the test's instance: {changed}")
    if self.after_call is not None:
      found = self.after_call()
      if found:
        raise PlainDataError(f"the program tampered with {found[0]}")

  def watch_instance(self, test) -> None:
    """Watches the unittest test `test` (made, not yet set up) until the next call; None stops.

    Its dict may gain the tests' attributes, but nothing may shadow a method or assert of its
    class (`self.assertEqual = ...`), and `_type_equality_funcs` must keep what TestCase put
    there (the asserts assertEqual delegates to), adding only the tests' own."""
    self._instance = test
    if test is None:
      return
    funcs = _instance_dict(test).get("_type_equality_funcs")
    self._equality_funcs = dict(funcs) if _type(funcs) is dict else {}

  def instance_problem(self) -> str | None:
    """What the program changed in the watched test's instance (`watch_instance`), if anything."""
    attributes = _instance_dict(self._instance)
    kind = _type(self._instance)
    for name, value in _list(_dict_items(attributes)):
      member = _class_member(kind, name) if _type(name) is str else None
      if (
        member is not None
        and (callable(member) or _hasattr(_type(member), "__get__"))
        and not self._test_code(value)
      ):
        return f"{name} shadows its class's {name}"
    funcs = attributes.get("_type_equality_funcs")
    if _type(funcs) is not dict:
      return "_type_equality_funcs replaced" if self._equality_funcs else None
    for key, value in _list(_dict_items(funcs)):
      saved = self._equality_funcs.get(key, _ABSENT)
      if value is saved:
        continue
      # The tests may add their own (addTypeEqualityFunc): a function of theirs, or its name.
      named = _class_member(kind, value) if _type(value) is str else value
      if saved is not _ABSENT or not self._test_code(named):
        return f"_type_equality_funcs[{_getattr(key, '__name__', '?')}] changed"
    return None

  def _test_code(self, value) -> bool:
    """A function (or bound method) of the trusted test code."""
    inner = value.__func__ if _type(value) is types.MethodType else value
    return _type(inner) is types.FunctionType and _id(inner.__code__) in self._trusted_codes

  def may_rewrite(
    self, function: types.FunctionType, writer: types.CodeType, loaded: Container[str]
  ) -> bool:
    """Whether code `writer` may set `function`'s code or defaults: the program its own
    functions; a library those of a module not `loaded` before the program ran (its own, as
    it loads)."""
    if not self._trusted(function.__code__):
      return True
    return self._trusted(writer) and _getattr(function, "__module__", None) not in loaded

  def comparison_problem(self, cls: type) -> str | None:
    """Why objects of `cls` would compare, convert or iterate by the program's code, if so."""
    return self._class_problem(cls, {})

  def _trusted(self, code: types.CodeType) -> bool:
    return _id(code) in self._trusted_codes or library_file(code.co_filename)

  # --- wrapping ------------------------------------------------------------------------------

  def guard_namespace(self, namespace: dict) -> None:
    """Wraps what the program left at module level so that what it returns is checked.

    Functions are replaced by guarded ones; classes the program wrote get their methods guarded
    in place (`Solution().method`), and so do the classes of its callable objects. A library's
    callable object (scipy's `norm`, a framework's `current_user` proxy) stays itself, since the
    tests read its attributes too; only one that holds the program's functions (`np.vectorize`
    of one) is wrapped. Values are told apart by their type alone: reading an attribute of a
    lazy proxy (`isinstance` reads `__class__`) would run its set-up before the tests do theirs.
    """
    for name, value in _list(namespace.items()):
      if name.startswith("__"):
        continue
      kind = _type(value)
      if issubclass(kind, type):
        self._guard_class(value)
      elif kind in _WRAPPED_CALLABLES or kind is LRU_WRAPPER:
        namespace[name] = self.guarded(value)
      elif kind.__flags__ & _HEAPTYPE and _hasattr(kind, "__call__"):
        if self._class_runs_untrusted(kind):
          self._guard_class(kind)  # its __call__ (and value dunders) guarded in place
        elif self._holds_untrusted(value, program_source=True):
          namespace[name] = self.guarded(value)

  def _holds_untrusted(self, value, program_source: bool = False) -> bool:
    """Whether an object keeps a function the guard does not trust among its attributes (with
    `program_source`: one compiled from the program's source, not one a library made with
    exec, as scipy.stats does for its distributions' argument parsers)."""
    attributes = _instance_dict(value)
    for _, item in _dict_items(attributes):
      if _type(item) is types.FunctionType or _type(item) in UNWRAP or _type(item) is LRU_WRAPPER:
        if self._runs_untrusted(item) and (not program_source or compiled_here(item)):
          return True
    return False

  def _guard_class(self, cls: type) -> None:
    """Guards the methods of `cls` and of its Python bases, once each."""
    for klass in cls.__mro__:
      if _id(klass) not in self._guarded_classes and klass.__flags__ & _HEAPTYPE:
        self._guarded_classes.add(_id(klass))
        self._guard_methods(klass)

  def _guard_methods(self, klass: type) -> None:
    for name, member in _list(own_members(klass).items()):
      if _dunder(name) and name not in _VALUE_DUNDERS:
        continue
      replacement = self._guarded_member(member)
      if replacement is None:
        continue
      try:
        type.__setattr__(klass, name, replacement)
      except (TypeError, AttributeError):
        pass  # left as program code: `_class_problem` refuses the class's objects

  def _guarded_member(self, member):
    """`member` (a class attribute) with what it hands the tests checked, bound as before;
    None if it runs no code the guard does not trust (`_runs_untrusted`)."""
    kind = _type(member)
    if kind is property:
      if not any(self._runs_untrusted(f) for f in (member.fget, member.fset, member.fdel)):
        return None
      fget = member.fget and self.guarded(member.fget, method=True)
      return property(fget, member.fset, member.fdel, member.__doc__)
    if kind in PYTHON_WRAPPERS:  # descriptors, not callables themselves
      if not self._runs_untrusted(member):
        return None
      function = self.guarded(held(member, "func"), method=True)
      if kind is functools.partialmethod:
        return functools.partialmethod(function, *held(member, "args"), **held(member, "keywords"))
      replacement = functools.cached_property(function)
      replacement.attrname = held(member, "attrname")
      return replacement
    if not callable(member) or issubclass(kind, type):
      return None
    if (
      kind is not types.FunctionType
      and kind not in UNWRAP
      and kind is not LRU_WRAPPER
      and kind.__flags__ & _HEAPTYPE
    ):
      self._guard_class(kind)  # a callable object: its class's __call__ (and __get__) guarded
      return None
    if not self._runs_untrusted(member):
      return None
    if kind is staticmethod:
      return staticmethod(self.guarded(member.__func__))
    if kind is classmethod:
      return classmethod(self.guarded(member.__func__, method=True))
    if _hasattr(kind, "__get__"):  # binds like a method (a function, an lru_cache wrapper)
      return self.guarded(member, method=True)
    return staticmethod(self.guarded(member))  # called as it is (a functools.partial)

  def _runs_untrusted(self, member) -> bool:
    """Whether calling `member` runs a function the guard does not trust, through the
    wrappers the standard library puts around functions (bound methods, partials,
    lru_cache, staticmethod, classmethod, cached_property, partialmethod)."""
    inner = member
    for _ in range(16):
      kind = _type(inner)
      if kind is types.FunctionType:
        return not self._trusted(inner.__code__)
      attribute = UNWRAP.get(kind) or ("__wrapped__" if kind is LRU_WRAPPER else None)
      if attribute is not None:
        inner = held(inner, attribute)
      else:  # a C callable, or an object whose class runs code of its own when called
        return bool(kind.__flags__ & _HEAPTYPE) and self._class_runs_untrusted(kind)
    return True  # wrapped deeper than any library does

  def _class_runs_untrusted(self, cls: type) -> bool:
    return any(
      klass.__flags__ & _HEAPTYPE
      and any(
        _type(m) is types.FunctionType and not self._trusted(m.__code__)
        for _, m in own_members(klass).items()
      )
      for klass in cls.__mro__
    )

  def guarded(self, function, method: bool = False):
    """`function`, with what it returns checked (and wrapped: generators, functions).

    `method`: its first argument is the program's own object (self or cls), not the tests'.
    """
    checked, intact, clean_arguments, check, running = (
      self.checked,
      self._intact,
      self._clean_arguments,
      self.check,
      self._running,
    )

    def guarded(*args, **kwargs):
      # This wrapper adds a frame to every call, recursive ones included: the recursion limit
      # rises by one while it runs, so a program gets as much depth as it would unguarded.
      _setlimit(_getlimit() + 1)
      if running[0]:  # a call within the program hands its value back to the program: unchecked
        try:
          return function(*args, **kwargs)
        finally:
          _lower_limit()
      arguments = clean_arguments(args[1:] if method else args, kwargs)
      running[0] += 1
      try:
        value = function(*args, **kwargs)
      finally:
        running[0] -= 1
        _lower_limit()
      intact()
      for argument in arguments:  # what the tests of an in-place task compare
        check(argument, _ARGUMENT_BUDGET)
      return checked(value)

    for attribute in ("__name__", "__qualname__", "__doc__"):
      try:
        setattr(guarded, attribute, _getattr(function, attribute))
      except (AttributeError, TypeError):
        pass
    return guarded

  def _clean_arguments(self, args: tuple, kwargs: dict) -> list:
    """The tests' arguments that hold nothing of the program's yet (checked again after)."""
    clean = []
    for argument in (*args, *kwargs.values()):
      if _type(argument) in _SCALARS:
        continue
      try:
        self.check(argument, _ARGUMENT_BUDGET)
      except PlainDataError:
        continue  # the tests handed the program its own objects: nothing new to catch
      clean.append(argument)
    return clean

  def checked(self, value):
    """`value` if the tests may have it; a checking wrapper for what it hands over lazily.

    Raises PlainDataError when something the program wrote would decide how
    the tests compare it.
    """
    kind = _type(value)
    if kind in _SCALARS:
      return value
    if kind is types.GeneratorType or self._is_iterator(value):
      return self._checked_items(value)
    if kind is types.CoroutineType:
      return self._checked_result(value)
    if kind in _WRAPPED_CALLABLES:
      problem = self._code_problem("the function", value)
      if problem is None:
        return value  # library code: nothing of the program's comes out of it unchecked
      return self.guarded(value)
    if (kind is tuple or kind is list) and any(map(self._lazy, _head(value, kind, None))):
      # `return rows, count` where rows is a generator: each item as if returned on its own
      items = [self.checked(item) for item in _head(value, kind, None)]
      if kind is tuple:
        return tuple(items)
      value[:] = items
      return value
    self.check(value)
    return value

  def _lazy(self, value) -> bool:
    """A value handed over lazily (a generator, an iterator, a coroutine), checked as it runs."""
    kind = _type(value)
    return (
      kind is types.GeneratorType
      or kind is types.CoroutineType
      or (kind not in _SCALARS and self._is_iterator(value))
    )

  def _is_iterator(self, value) -> bool:
    kind = _type(value)
    return (
      _hasattr(kind, "__next__")
      and _hasattr(kind, "__iter__")
      and not (_id(kind) in self._test_classes or _is_file(value) or _is_double(kind))
    )

  def _checked_items(self, iterator):
    checked, intact, running = self.checked, self._intact, self._running

    def step(call, *args):
      """Runs the program's iterator one step: a call within the program, as `guarded` counts
      them, under two frames of the harness's (this and `items`: the recursion limit rises by
      two meanwhile)."""
      _setlimit(_getlimit() + 2)
      running[0] += 1
      try:
        return call(*args)
      finally:
        running[0] -= 1
        _lower_limit(2)

    def items():
      send = _getattr(iterator, "send", None)
      throw = _getattr(iterator, "throw", None)
      sent = None
      while True:
        try:
          item = step(next, iterator) if sent is None or send is None else step(send, sent)
        except StopIteration as stop:
          intact()
          return checked(stop.value)
        intact()
        try:
          sent = yield checked(item)
        except GeneratorExit:
          close = _getattr(iterator, "close", None)
          if close is not None:
            step(close)
          raise
        except BaseException as error:  # pylint: disable=broad-except  (thrown in by the tests)
          if throw is None:
            raise
          try:
            item = step(throw, error)
          except StopIteration as stop:
            return checked(stop.value)
          sent = None
          while True:  # the item the program yielded in answer to the throw
            try:
              sent = yield checked(item)
              break
            except GeneratorExit:
              step(iterator.close)
              raise
            except BaseException as again:  # pylint: disable=broad-except
              try:
                item = step(throw, again)
              except StopIteration as stop:
                return checked(stop.value)

    return items()

  def _checked_result(self, coroutine):
    checked, running = self.checked, self._running

    async def result():
      running[0] += 1  # the program's coroutine runs: its own calls are its own
      try:
        value = await coroutine
      finally:
        running[0] -= 1
      return checked(value)

    return result()

  # --- checks --------------------------------------------------------------------------------

  def check(self, root, budget: int | None = None) -> None:
    """Raises PlainDataError if `root` holds anything the program's code would decide.

    With a `budget`, looks at that many objects at most (the tests' own
    arguments, checked after every call for what the program put into them).
    """
    seen: set[int] = set()
    verdicts: dict[int, str | None] = {}
    stack = [root]
    while stack:
      value = stack.pop()
      if budget is not None:
        budget -= 1
        if budget < 0:
          return
      kind = _type(value)
      if kind in _SCALARS or _id(value) in seen:
        continue
      seen.add(_id(value))
      if kind in _CONTAINERS:
        if _SCALARS.issuperset(map(_type, _head(value, kind, budget))):
          # Only scalars (a big list of numbers, say): nothing inside can decide a comparison,
          # and this one pass over them runs in C rather than once per item in this loop.
          budget = None if budget is None else budget - min(_len(value), budget)
          continue
        stack.extend(_head(value, kind, budget))
        continue
      if kind is dict:
        items = _dict_items(value)
        for key, item in items if budget is None else _islice(items, budget):
          stack.append(key)
          stack.append(item)
        continue
      problem = self._class_problem(kind, verdicts) or _double_problem(value, kind)
      if problem is not None:
        raise PlainDataError(f"returned a {kind_name(value)}: {problem}")
      self._hand_over(kind)
      if value is not root and (
        kind is types.GeneratorType or kind is types.CoroutineType or self._is_iterator(value)
      ):
        raise PlainDataError(
          f"returned a {kind_name(value)} inside another value "
          "(only a returned or yielded one can be checked as it runs)"
        )
      if issubclass(kind, type):
        # A class handed over (a handler class made inside the function): the tests call it and
        # its methods as they call the program's module-level classes, whose methods are guarded
        # in place; only its metaclass decides how the class itself compares (`problem` above).
        self._guard_class(value)
        continue
      if kind in _WRAPPED_CALLABLES:
        problem = self._code_problem("a function", value)
        if problem is not None:
          raise PlainDataError(f"returned {problem} inside another value")
        continue
      stack.extend(self._contents(value, kind, verdicts, budget))

  def _contents(
    self, value, kind: type, verdicts: dict[int, str | None], budget: int | None = None
  ) -> list:
    """The parts of `value` the tests can reach and compare, to be checked in turn.

    Data containers, numpy object arrays and pandas object columns give their
    items; objects of the tests' or the program's classes their attributes.
    A library object's attributes are its own business, checked one level
    deep: no program function (`df.equals = lambda ...`), no program object.
    """
    parts: list = []
    if issubclass(kind, dict):
      for key, item in _islice(_dict_items(value), budget):
        parts += (key, item)
    elif issubclass(kind, (list, tuple, set, frozenset, collections.deque)):
      parts += _islice(value, budget)
    parts += _islice(_array_items(value, kind), budget)
    try:
      attributes = object.__getattribute__(value, "__dict__")
    except AttributeError:
      attributes = None
    attributes = [item for _, item in _dict_items(attributes)] if _type(attributes) is dict else []
    for klass in kind.__mro__:
      for slot in _slot_names(klass):
        try:
          attributes.append(object.__getattribute__(value, slot))
        except AttributeError:
          pass
    if self._owned(kind):
      return parts + attributes
    for item in attributes:
      item_kind = _type(item)
      if item_kind in _SCALARS or item_kind in _CONTAINERS or item_kind is dict:
        continue
      problem = (
        self._code_problem("the function", item)
        if item_kind in _WRAPPED_CALLABLES
        else self._class_problem(item_kind, verdicts)
      )
      if problem is not None:
        raise PlainDataError(f"returned a {kind_name(value)} holding {problem}")
    return parts

  def _owned(self, kind: type) -> bool:
    """Whether `kind` is a class of the tests or of the program (not a library's)."""
    for klass in kind.__mro__:
      if _id(klass) in self._test_classes:
        return True
      if klass.__flags__ & _HEAPTYPE and any(
        _type(m) is types.FunctionType and not self._trusted(m.__code__)
        for _, m in own_members(klass).items()
      ):
        return True
    return False

  def _class_problem(self, cls: type, verdicts: dict[int, str | None]) -> str | None:
    """None if no code the program wrote decides how objects of `cls` behave, else why."""
    key = _id(cls)
    if key in verdicts:
      return verdicts[key]
    verdicts[key] = None  # a class reached again while it is being judged
    problem = None
    meta = _type(cls)
    if meta is not type:
      problem = self._class_problem(meta, verdicts)
    for klass in () if problem else type.__dict__["__mro__"].__get__(cls):
      problem = self._one_class_problem(klass, verdicts)
      if problem:
        break
    verdicts[key] = problem
    return problem

  def _one_class_problem(self, klass: type, verdicts: dict[int, str | None]) -> str | None:
    registered = self._test_classes.get(_id(klass))
    if registered is not None:
      if registered.changed():  # (once per check: `changed_class` is the per-call fast path)
        return f"the tests' class {klass.__qualname__} was changed after they defined it"
      return None
    if not klass.__flags__ & _HEAPTYPE:
      return None  # a C type: nothing in it can change
    for name, member in _list(own_members(klass).items()):
      problem = self._member_problem(klass, name, member, verdicts)
      if problem is not None:
        return f"{klass.__qualname__}.{name} {problem}"
    return None

  def _member_problem(
    self, klass: type, name: str, member, verdicts: dict[int, str | None]
  ) -> str | None:
    kind = _type(member)
    if kind is types.FunctionType:
      if self._trusted(member.__code__):
        if name in _BORROWABLE and not library_class(klass) and not inherited(member, klass):
          # A library's comparison in a class the program made (`__eq__ = mock._ANY.__eq__`,
          # or a Mock configured with `m.__eq__ = ...`): written for a class this one does not
          # derive from, it decides this one's comparisons as the program chose.
          return f"is {_getattr(member, '__qualname__', '?')}, borrowed from another class"
        return None
      if is_namedtuple_new(name, member) or is_dataclass_method(klass, name, member):
        return None
      return None if name in _CONSTRUCTION else "is the program's code"
    if kind is staticmethod or kind is classmethod:  # judged as what it holds (aliases too)
      return self._member_problem(klass, name, member.__func__, verdicts)
    if kind is property:
      for accessor in (member.fget, member.fset, member.fdel):
        if accessor is not None:
          problem = self._member_problem(klass, name, accessor, verdicts)
          if problem is not None:
            return problem
      return None
    if (kind in UNWRAP or kind is LRU_WRAPPER) and self._runs_untrusted(member):
      return "wraps the program's code"  # else judged below (cached_property's class, say)
    if _dunder(name) and name not in _INERT and name not in _VALUE_DUNDERS and callable(member):
      # Handed the tests' value: a class (`__eq__ = SomeClass` makes a truthy object) or an
      # object that runs the program's code when called decides the comparison.
      if issubclass(kind, type):
        return f"is the class {_getattr(member, '__qualname__', '?')}"
      if not issubclass(kind, _C_CALLABLES) and self._runs_untrusted(member):
        return "is an object that runs the program's code"
    if issubclass(kind, _C_CALLABLES) or issubclass(kind, type):
      # A C method in a Python class: harmless as itself (`__hash__ = object.__hash__`), or
      # where it only hands a value over (IntEnum's `__str__ = int.__repr__`), but
      # `__eq__ = int.__ne__` would let the program choose what equality means.
      if (
        _dunder(name)
        and name not in _INERT
        and name not in _VALUE_DUNDERS
        and _getattr(member, "__name__", None) != name
      ):
        return f"is {_getattr(member, '__qualname__', '?')} under another name"
      return None
    if kind.__flags__ & _HEAPTYPE and _hasattr(kind, "__get__"):  # a descriptor a class wrote
      problem = self._class_problem(kind, verdicts)
      if problem is not None:
        return f"is a descriptor whose {problem}"
      for _, inner in _dict_items(_getattr(member, "__dict__", None) or {}):
        if _type(inner) is types.FunctionType and not self._trusted(inner.__code__):
          return "holds the program's code"
    return None

  def authored(self, value) -> str | None:
    """Why `value` is behaviour the program wrote -- its function (behind any library wrapper),
    its class, an object whose class runs its code, or a container holding one of those at its
    top level -- or None. Integrity asks this of what a run left in the library."""
    kind = _type(value)
    if kind in _SCALARS:
      return None
    if kind in _CONTAINERS or kind is dict:
      items = (
        _dict_items(value) if kind is dict else ((None, item) for item in _head(value, kind, None))
      )
      for key, item in items:
        why = (key is not None and self.authored(key)) or self._authored_one(item)
        if why:
          return why
      return None
    return self._authored_one(value)

  def _authored_one(self, value) -> str | None:
    kind = _type(value)
    if kind in _SCALARS or kind in _CONTAINERS or kind is dict:
      return None
    if kind is types.FunctionType or kind in UNWRAP or kind is LRU_WRAPPER:
      return (
        f"the program's function {_getattr(value, '__qualname__', '?')}"
        if (self._runs_untrusted(value))
        else None
      )
    if issubclass(kind, type):
      problem = self._class_problem(kind, {}) if kind is not type else None
      if problem is None and self._class_runs_untrusted(value):
        problem = "its methods are the program's code"
      return f"the class {_getattr(value, '__qualname__', '?')}: {problem}" if problem else None
    if kind.__flags__ & _HEAPTYPE and (
      self._class_runs_untrusted(kind) or self._holds_untrusted(value)
    ):
      return f"a {kind_name(value)}, which runs the program's code"
    return None

  def _code_problem(self, what: str, function) -> str | None:
    """Why calling `function` would hand the tests program-made values unchecked, if it would."""
    inner = function
    for _ in range(8):  # bound methods and partials around the function itself
      if _type(inner) is types.MethodType:
        inner = inner.__func__
      elif _type(inner) is functools.partial:
        inner = inner.func
      else:
        break
    if _type(inner) is types.FunctionType and not self._trusted(inner.__code__):
      return f"{what} {_getattr(inner, '__qualname__', '?')}, the program's code"
    if _type(inner) not in (types.FunctionType, types.BuiltinFunctionType):
      return f"{what} {kind_name(inner)}"
    return None


_ABSENT = object()
# The guard's own cache, written during runs, so kept in an instance (integrity freezes the
# harness modules' dicts and the dicts they hold): the code of unittest.mock's default side
# effects, by dunder name.
_CACHES = types.SimpleNamespace(mock_effects={})
# The dunders whose configured return value or side effect makes a Mock compare as told.
_DOUBLE_COMPARISONS = ("__eq__", "__ne__", "__lt__", "__gt__", "__le__", "__ge__", "__contains__")


def _is_double(kind: type) -> bool:
  """A class of unittest.mock's test doubles (Mock, MagicMock, ... and the per-object
  subclasses they make): they answer any attribute and any protocol, iteration included."""
  mock = sys.modules.get("unittest.mock")
  return mock is not None and issubclass(kind, mock.NonCallableMock)


def _double_problem(value, kind: type) -> str | None:
  """Why a library object built to stand in for anything would pass a comparison it did not
  earn: `unittest.mock.ANY` (equal to everything), or a Mock whose comparison dunders were
  given a return value, a side effect or something to wrap. An unconfigured Mock compares by
  identity, as tests that pass their own mocks through a program expect."""
  mock = sys.modules.get("unittest.mock")
  if mock is None:
    return None
  if issubclass(kind, mock._ANY):  # pylint: disable=protected-access
    return "unittest.mock.ANY equals anything"
  if not issubclass(kind, mock.NonCallableMock):
    return None
  children = _instance_dict(value).get("_mock_children")
  for name in _DOUBLE_COMPARISONS if _type(children) is dict else ():
    child = children.get(name)
    if child is None or not issubclass(_type(child), mock.NonCallableMock):
      continue
    state = _instance_dict(child)
    returned = state.get("_mock_return_value", mock.DEFAULT)
    effect = state.get("_mock_side_effect")
    default = mock._return_values.get(name, mock.DEFAULT)  # pylint: disable=protected-access
    if (
      (returned is not mock.DEFAULT and returned is not default)
      or (effect is not None and _type(effect) is not types.FunctionType)
      or (effect is not None and effect.__code__ is not _default_effect_code(mock, name))
      or (state.get("_mock_wraps") is not None)
    ):
      return f"its {name} was configured"
  return None


def _default_effect_code(mock, name: str):
  """The code of the side effect unittest.mock gives a MagicMock's `name` (__eq__, __ne__)."""
  make = mock._side_effect_methods.get(name)  # pylint: disable=protected-access
  if make is None:
    return None
  codes = _CACHES.mock_effects
  if name not in codes:
    codes[name] = make(mock.MagicMock()).__code__
  return codes[name]


def _class_member(kind: type, name: str):
  """`kind`'s attribute `name` as its class dicts hold it (no descriptor runs), else None."""
  for klass in kind.__mro__:
    members = own_members(klass)
    if name in members:
      return members[name]
  return None


def _instance_dict(obj) -> dict:
  """An object's own attribute dict, read past any __getattribute__ of its class."""
  try:
    attributes = object.__getattribute__(obj, "__dict__")
  except AttributeError:
    return {}
  return attributes if _type(attributes) is dict else {}


def _lower_limit(by: int = 1) -> None:
  """Undoes a wrapper's rise of the recursion limit (`Guard.guarded`)."""
  try:
    _setlimit(_getlimit() - by)
  except (RecursionError, ValueError):
    pass


def _head(value, kind: type, budget: int | None):
  """The items of a list, tuple, set or frozenset (exactly that type), the first `budget` only."""
  items = _list_iter(value) if kind is list else value
  return items if budget is None else _islice(items, budget)


class _TestClass:
  """A class the test code defined, as it was defined: what the program must not change."""

  def __init__(self, cls: type):
    self.cls = cls
    self._mro = cls.__mro__  # the same tuple object while nobody assigns __bases__
    self._meta = _type(cls)
    self._members = _behaviour(own_members(cls))

  def moved(self) -> bool:
    return self.cls.__mro__ is not self._mro or _type(self.cls) is not self._meta

  def changed(self) -> bool:
    return self.moved() or not _same_members(own_members(self.cls), self._members)


def _behaviour(members) -> list[tuple[str, object]]:
  """A class's members that decide behaviour: dunders, methods and other descriptors.

  Plain data attributes (a counter the tests keep on their class) may change.
  """
  return [
    (name, member)
    for name, member in members.items()
    if _dunder(name) or callable(member) or _hasattr(_type(member), "__get__")
  ]


def _same_members(now, saved: list[tuple[str, object]]) -> bool:
  current = _behaviour(now)
  if _len(current) != _len(saved):
    return False
  return all(name in now and now[name] is member for name, member in saved)


def _slot_names(klass: type) -> tuple:
  slots = own_members(klass).get("__slots__", ())
  if _type(slots) is str:
    slots = (slots,)
  try:
    return tuple(s for s in slots if _type(s) is str and s not in ("__dict__", "__weakref__"))
  except TypeError:
    return ()


def _is_file(value) -> bool:
  io = sys.modules.get("io")
  return io is not None and issubclass(_type(value), io.IOBase)


def _array_items(value, kind: type) -> list:
  """Objects inside numpy object arrays and pandas object columns (numbers need no check)."""
  numpy = sys.modules.get("numpy")
  if numpy is not None and issubclass(kind, numpy.ndarray):
    return _list(value.ravel()) if value.dtype.hasobject else []
  pandas = sys.modules.get("pandas")
  if pandas is None or not kind.__module__.startswith("pandas"):
    return []
  if issubclass(kind, pandas.DataFrame):
    parts = [value.index, value.columns]
    for i, dtype in enumerate(value.dtypes):
      if dtype == object:  # noqa: E721  (numpy's object dtype equals `object`; it is not it)
        parts += _list(value.iloc[:, i])
    return parts
  if issubclass(kind, pandas.Series):
    return [value.index] + (_list(value) if value.dtype == object else [])
  if issubclass(kind, pandas.Index):
    return _list(value) if value.dtype == object else []
  return []
