"""The audit hook: what no run may do, refused as it happens (armed only during a run)."""

import sys
import unittest

import pytest

from precisecoder.execution import hooks
from precisecoder.execution.guard import Guard
from precisecoder.execution.programs import PROGRAM_FILENAME


def _program_function(source: str):
  namespace = {}
  exec(compile(source, PROGRAM_FILENAME, "exec"), namespace)  # pylint: disable=exec-used
  return namespace


@pytest.fixture
def armed():
  """This process's hook (installed once, for good), armed with a guard that trusts no tests."""
  hooks.install()
  guard = Guard(frozenset())
  hooks.arm(
    lambda function, writer: guard.may_rewrite(function, writer, sys.modules),
    guard.comparison_problem,
  )
  yield
  hooks.disarm()


@pytest.mark.usefixtures("armed")
def test_trace_profile_and_audit_hooks_are_refused():
  for install in (sys.settrace, sys.setprofile):
    with pytest.raises(hooks.Refused, match="is not allowed while tests run"):
      install(lambda *args: None)
  assert sys.gettrace() is None and sys.getprofile() is None
  sys.addaudithook(lambda event, args: None)  # refused quietly, as PEP 578 says


@pytest.mark.usefixtures("armed")
def test_code_and_defaults_of_library_functions_are_refused():
  own = _program_function("def f(a, b=1):\n  return a + b\n")["f"]
  for name, value in (
    ("__code__", own.__code__),
    ("__defaults__", (2,)),
    ("__kwdefaults__", {"x": 1}),
  ):
    with pytest.raises(hooks.Refused, match="it is not the program's function"):
      setattr(unittest.TestCase.assertEqual, name, value)
  own.__defaults__ = (5,)  # the program's own function: its business
  assert own(1) == 6


@pytest.mark.usefixtures("armed")
def test_a_class_whose_comparisons_are_the_program_s_cannot_be_given_to_an_object():
  namespace = _program_function(
    "class Plain:\n  pass\nclass Yes:\n  def __eq__(self, other):\n    return True\n"
  )
  value = namespace["Plain"]()
  with pytest.raises(hooks.Refused, match="cannot give an object the class Yes"):
    value.__class__ = namespace["Yes"]


def test_disarmed_it_refuses_nothing():
  hooks.install()
  hooks.disarm()

  def f(a=1):
    return a

  f.__defaults__ = (2,)
  sys.setprofile(None)
  assert f() == 2
