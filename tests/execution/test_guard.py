"""What a program may hand to the tests that run beside it, decided in-process by one `Guard`
(the same rules inside a sandboxed run, against real attacks: test_harness_redteam.py)."""

import fractions

import pytest

from precisecoder.execution import guard as guard_lib
from precisecoder.execution import provenance
from precisecoder.execution.programs import PROGRAM_FILENAME

PROGRAM = """
class Always:
  def __eq__(self, other):
    return True

class Plain:
  def __init__(self, x):
    self.x = x

class Sized:
  def __len__(self):
    return 3

def double(x):
  return 2 * x

def items():
  yield 1
  yield Always()

def maker():
  return lambda: Always()
"""


@pytest.fixture(name="program")
def program_namespace():
  namespace = {"__name__": "__main__"}
  exec(compile(PROGRAM, PROGRAM_FILENAME, "exec"), namespace)  # pylint: disable=exec-used
  return namespace


@pytest.fixture(name="guard")
def untrusting_guard():
  return guard_lib.Guard(frozenset())  # no test code trusted


def test_plain_data_and_library_objects_reach_the_tests(guard):
  for value in (1, "a", None, 2.5, [1, (2, {3: "x"})], frozenset({1}), fractions.Fraction(1, 3)):
    assert guard.checked(value) is value
    guard.check(value)


def test_an_object_whose_class_decides_comparisons_is_refused_wherever_it_sits(guard, program):
  always = program["Always"]()
  for value in (always, [1, always], {"k": (always,)}):
    with pytest.raises(guard_lib.PlainDataError, match="Always"):
      guard.check(value)
  guard.check(program["Plain"](1))  # only construction is the program's: its objects are data
  guard.check(program["Plain"]([1, 2]))
  with pytest.raises(guard_lib.PlainDataError):
    guard.check(program["Plain"](always))  # checked all the way down


def test_what_the_program_hands_over_lazily_is_checked_when_it_comes_out(guard, program):
  items = guard.checked(program["items"]())
  assert next(items) == 1
  with pytest.raises(guard_lib.PlainDataError):
    next(items)
  double = guard.checked(program["double"])
  assert double is not program["double"] and double(4) == 8  # wrapped, and still a function
  made = guard.checked(program["maker"])()
  with pytest.raises(guard_lib.PlainDataError):
    made()


def test_authored_names_the_programs_behaviour_and_only_it(guard, program):
  assert guard.authored(program["double"])
  assert guard.authored(program["Always"])
  assert guard.authored([program["double"]])  # a container holding it, at its top level
  assert guard.authored(len) is None and guard.authored(fractions.Fraction) is None
  assert guard.authored([1, "a"]) is None


def test_only_trusted_test_code_registers_classes_and_a_changed_test_class_is_named(program):
  test_code = compile(
    "@register\nclass Expected:\n  def value(self):\n    return 1\n", "<tests>", "exec"
  )
  guard = guard_lib.Guard(provenance.code_ids(test_code))
  namespace = {"register": guard.register_class}
  exec(test_code, namespace)  # pylint: disable=exec-used
  assert guard.changed_class() is None
  namespace["Expected"].value = program["double"]  # the program patches the tests' class
  assert guard.changed_class() == "Expected"
  untrusted = guard_lib.Guard(frozenset())
  exec(test_code, {"register": untrusted.register_class})  # pylint: disable=exec-used
  assert untrusted.changed_class() is None and not untrusted._test_classes  # pylint: disable=protected-access
