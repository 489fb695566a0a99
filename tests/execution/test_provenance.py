"""Whose code a function runs (the guard's and integrity's question), decided in-process."""

import collections
import dataclasses
import functools
import json
import os

from precisecoder.execution import provenance
from precisecoder.execution.programs import PROGRAM_FILENAME


def _program(source: str) -> dict:
  namespace = {"__name__": "__main__"}
  exec(compile(source, PROGRAM_FILENAME, "exec"), namespace)  # pylint: disable=exec-used
  return namespace


def test_library_files_are_those_under_the_import_path_or_frozen(tmp_path):
  assert provenance.library_file(json.__file__)
  assert provenance.library_file("<frozen os>") == bool(provenance.library_file("<frozen os>"))
  assert not provenance.library_file("<frozen not_a_frozen_module>")
  written = tmp_path / "mine.py"  # a file a program wrote is not library code, wherever it is
  written.write_text("x = 1\n")
  assert not provenance.library_file(str(written))
  assert not provenance.library_file(PROGRAM_FILENAME)
  assert not provenance.library_file(os.path.join(provenance.LIBRARY_ROOTS[0], "no_such.py"))


def test_code_ids_cover_nested_code_and_nothing_else():
  source = "def f():\n  def g():\n    return 1\n  return g\nclass C:\n  pass\n"
  code = compile(source, "<t>", "exec")
  ids = provenance.code_ids(code)
  nested = [c for c in code.co_consts if isinstance(c, type(code))]
  inner = [c for c in nested[0].co_consts if isinstance(c, type(code))]
  assert {object.__hash__(c) for c in (code, *nested, *inner)} == set(ids) and len(ids) == 4


def test_a_library_class_is_one_its_module_defines_and_names():
  assert provenance.library_class(collections.OrderedDict) is False  # a C type: no Python method
  assert provenance.library_class(json.JSONDecoder)
  forged = _program("class JSONDecoder:\n  def decode(self, s):\n    return 1\n")["JSONDecoder"]
  forged.__module__, forged.__qualname__ = "json", "JSONDecoder"  # claims json's name
  assert not provenance.library_class(forged)


def test_dataclass_methods_are_trusted_only_as_dataclasses_writes_them():
  point = dataclasses.make_dataclass("Point", [("x", int), ("y", int)], order=True)
  members = provenance.own_members(point)
  for name in ("__eq__", "__lt__", "__ge__"):
    assert provenance.is_dataclass_method(point, name, members[name])
  lying = _program("def __eq__(self, other):\n  return True\n")["__eq__"]
  assert not provenance.is_dataclass_method(point, "__eq__", lying)


def test_namedtuple_new_and_the_wrappers_around_program_code_are_recognised():
  pair = collections.namedtuple("Pair", "a b")
  assert provenance.is_namedtuple_new("__new__", provenance.own_members(pair)["__new__"].__func__)
  double = _program("def double(x):\n  return 2 * x\n")["double"]
  assert provenance.compiled_here(double)
  assert provenance.compiled_here(functools.partial(double, 1))
  assert provenance.compiled_here(functools.lru_cache(maxsize=None)(double))
  assert not provenance.compiled_here(json.dumps)
  assert provenance.held(functools.partial(double, 1), "func") is double


def test_an_order_total_ordering_derives_counts_as_inherited():
  ordered = functools.total_ordering(
    _program(
      "class Size:\n  def __lt__(self, other):\n    return False\n"
      "  def __eq__(self, other):\n    return False\n"
    )["Size"]
  )
  assert provenance.inherited(provenance.own_members(ordered)["__gt__"], ordered)
