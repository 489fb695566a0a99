"""Test code as the child sees it: expected literals held back by the pool, and the checks every
honest run reaches (the pool's verdicts on such code: test_pool.py)."""

import pytest

from precisecoder.execution.parent import expectations


def test_assert_literals_stay_in_the_pool():
  code = (
    "def check(candidate):\n  assert candidate(1) == (1, 2), 'msg'\n"
    "  assert [3] != candidate(2)\n  assert candidate(3) is None\n"
    "  assert abs(candidate(4) - 0.5) < 1e-6\ncheck(f)\n"
  )
  child_code, checks, reached = expectations.hide_expected_literals(
    code.replace("check(f)\n", "  assert candidate(5) > 2.5\n  assert not candidate(6)\ncheck(f)\n")
  )
  assert checks == [
    ("==", (1, 2)),
    ("!=", [3]),
    ("is", None),
    ("near<", (0.5, 1e-6, False)),
    ("falsy", None),
  ]
  assert reached == {0, 1, 2, 3, 4}
  for literal in ("(1, 2)", "[3]", "0.5", "1e-06", "not"):
    assert literal not in child_code
  assert "2.5" in child_code  # not a comparison the pool holds: it runs in the child unchanged


@pytest.mark.parametrize(
  "code, reached",
  [
    ("assert f(1) == 2\nfor x in [1]:\n  assert f(x) == 2\nif True:\n  assert f(1) == 2\n", {0}),
    ("def check(c):\n  assert c(1) == 2\ncheck(f)\n", {0}),
    ("def check(c):\n  assert c(1) == 2\n", set()),  # never called
    ("def check(c):\n  if c(0):\n    return\n  assert c(1) == 2\ncheck(f)\n", set()),
    ("def check(c):\n  assert c(1) == 2\ncheck = print\ncheck(f)\n", set()),  # rebound
    ("def check(c):\n  assert c(1) == 2\nif __name__ == '__main__':\n  check(f)\n", set()),
    (
      "def check(c):\n  try:\n    assert c(1) == 2\n  except Exception:\n    pass\n"
      "  assert c(2) == 3\ncheck(f)\n",
      {1},
    ),
  ],
)
def test_the_asserts_every_run_reaches(code, reached):
  assert expectations.hide_expected_literals(code)[2] == reached


def test_unittest_checks_with_literals_are_held_and_reached_unless_skipped():
  code = (
    "import unittest\nclass T(unittest.TestCase):\n  def test_a(self):\n"
    "    self.assertEqual(f(1), 2)\n    self.assertTrue(f(2), msg='m')\n"
    "    self.assertAlmostEqual(0.5, g(1), delta=0.01)\n    self.assertIsNone(h())\n"
    "    self.assertEqual(f(1), f(2))\n"
    "    for i in range(3):\n      self.assertEqual(f(i), 2)\n"
    "  @unittest.skip('later')\n  def test_b(self):\n    self.assertEqual(f(1), 2)\n"
    "  def test_c(self):\n    if f(0):\n      self.skipTest('no')\n"
    "    self.assertEqual(f(3), 4)\n"
  )
  child_code, checks, reached = expectations.hide_expected_literals(code, ["T"])
  assert checks == [
    ("==", 2),
    ("truthy", None),
    ("almost", (0.5, 7, 0.01)),
    ("is", None),
    ("==", 2),
    ("==", 2),
    ("==", 4),
  ]
  assert reached == {0, 1, 2, 3}  # not in a loop, a skipped test, or one that may skip itself
  assert "self.assertEqual(f(1), f(2))" in child_code and "0.01" not in child_code


@pytest.mark.parametrize(
  "code, checks, hidden",
  [
    (
      "def check(c):\n  want = [5, 42]\n  assert c(2, 3) == want[0]\n"
      "  assert c(40, 2) == want[1]\ncheck(f)\n",
      [("==", 5), ("==", 42)],
      True,
    ),
    (
      "def check():\n  want = 7\n  assert f(3) == want\n  assert f(1) < want\ncheck()\n",
      [("==", 7)],
      True,
    ),  # immutable: inlined anywhere
    ("want = 7\nassert f(3) == want\n", [], False),  # a module global: the program's too
    (
      "def check():\n  want = [1]\n  f(want)\n  assert g() == want\ncheck()\n",
      [],
      False,
    ),  # handed over
    (
      "def check():\n  want = [1]\n  want.append(2)\n  assert g() == want\ncheck()\n",
      [],
      False,
    ),  # mutated
    (
      "def check():\n  want = 1\n  want = 2\n  assert g() == want\ncheck()\n",
      [],
      False,
    ),  # bound twice
    (
      "def check():\n  want = [1]\n  def inner():\n    assert g() == want\n  inner()\ncheck()\n",
      [],
      False,
    ),  # read from a nested function
    (
      "import unittest\nclass T(unittest.TestCase):\n  def test_a(self):\n    want = {'a': 1}\n"
      "    self.assertEqual(g(), want)\n",
      [("==", {"a": 1})],
      True,
    ),
  ],
)
def test_names_bound_once_to_a_literal_are_held_like_the_literal(code, checks, hidden):
  classes = ["T"] if "unittest" in code else None
  child_code, found, _ = expectations.hide_expected_literals(code, classes)
  assert found == checks
  assert ("want =" not in child_code) == hidden
