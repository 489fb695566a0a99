"""execution.programs: when two sources are one program."""

import marshal
import warnings

from precisecoder.execution.shared import programs

BASE = 'def f(x):\n    """Add one."""\n    return x + 1\n'


def test_comments_and_trailing_space_do_not_change_identity():
  same = [BASE.replace("x + 1", "x + 1  # plus one"), BASE.replace("\n", "   \n"), BASE + "\n\n"]
  assert {programs.identity(s)[0] for s in same} == {programs.identity(BASE)[0]}


def test_anything_a_run_can_observe_changes_identity():
  different = [
    BASE.replace("x + 1", "x+1"),  # column positions
    BASE.replace("def f", "\ndef f"),  # line numbers
    BASE.replace("Add one.", "Add 1."),  # docstring
    BASE.replace("x + 1", "x + 2"),
  ]
  digests = {programs.identity(s)[0] for s in different} | {programs.identity(BASE)[0]}
  assert len(digests) == len(different) + 1


def test_a_program_that_does_not_compile_says_why():
  digest, problem = programs.identity("def f(:\n")
  assert digest is None and problem.startswith("syntax error at line 1")


def test_the_marshalled_code_is_the_program():
  namespace = {}
  exec(marshal.loads(programs.marshalled(BASE)[0]), namespace)  # pylint: disable=exec-used
  assert namespace["f"](1) == 2
  assert programs.marshalled("def f(:\n") == (None, programs.identity("def f(:\n")[1])


def test_compiling_a_program_prints_none_of_its_warnings():
  with warnings.catch_warnings(record=True) as caught:
    assert programs.identity("x = 1\nassert (x, 'is always true')\ny = x is 1\n")[0]
    warnings.warn("the scorer's own warning")
  assert [str(w.message) for w in caught] == ["the scorer's own warning"]
