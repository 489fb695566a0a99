"""What crosses between a split run's two processes besides calls (docs/sandbox.md, "State that
crosses"), where the fork copied it already: the first request sends none of it, so each test here
changes it before or after the fork and checks the other side sees the change, as one interpreter
would."""

from __future__ import annotations

import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits

LIMITS = Limits(timeout_s=20.0, memory_mb=1024)


def _unittest(code: str) -> dict:
  return {"kind": "unittest", "classes": ["T"], "code": textwrap.dedent(code)}


CASES = [
  (
    # Seeded at the tests' top level, which runs before the fork: the program's process starts
    # with the same numpy generator and a reseeded `random`; its draws come back to the tests.
    "generators seeded before the fork, drawn on both sides",
    "import random\nimport numpy as np\n"
    "def draw():\n  return float(np.random.rand()), random.random()\n",
    _unittest("""
      import random, unittest
      import numpy as np
      np.random.seed(3)
      random.seed(3)
      class T(unittest.TestCase):
        def test_stream(self):
          a, c = draw()
          b, d = float(np.random.rand()), random.random()
          np.random.seed(3)
          random.seed(3)
          self.assertEqual([a, b], [float(x) for x in np.random.rand(2)])
          self.assertEqual([c, d], [random.random() for _ in range(2)])
      """),
  ),
  (
    "the environment and working directory, as the tests change them",
    "import os\ndef where():\n  return os.environ.get('TASK_MODE'), os.getcwd()\n",
    _unittest("""
      import os, tempfile, unittest
      class T(unittest.TestCase):
        def test_where(self):
          self.assertEqual(where(), (None, os.getcwd()))
          os.environ['TASK_MODE'] = 'fast'
          with tempfile.TemporaryDirectory() as folder:
            os.chdir(folder)
            self.assertEqual(where(), ('fast', os.getcwd()))
      """),
  ),
  (
    "the program's environment, left as the fork copied it",
    "import os\nHOME = os.environ.get('HOME')\ndef home():\n  return os.environ.get('HOME')\n",
    _unittest("""
      import os, unittest
      class T(unittest.TestCase):
        def test_home(self):
          self.assertEqual(home(), os.environ.get('HOME'))
          self.assertEqual(HOME, os.environ.get('HOME'))
      """),
  ),
]


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


def test_state_crosses_as_in_one_interpreter(pool):
  results = pool.execute([Job(program, tests, LIMITS) for _, program, tests in CASES])
  failed = [
    f"{name}: {r.status.value} {r.detail}"
    for (name, _, _), r in zip(CASES, results)
    if not r.passed
  ]
  assert not failed, "\n".join(failed)
