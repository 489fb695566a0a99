"""Red team: hostile programs against the pool, each with the verdict it must get.

The task is `add(a, b)`; every hostile program gets it wrong (or never
defines it) and tries to pass anyway, hang the pool, escape, or leave
something behind. Honest programs in the same batches must pass. After each
batch no run process may survive and no file outside the runs may change.
FORGERIES are the families of a held-out red team (issue 22), in programs of our
own, each of which passes in a plain interpreter, and none in the pool (whose
assert and unittest runs are split): library objects that equal anything, code
and defaults swapped in place, patched library classes and tables, trace and
profile hooks, values changed after a check, the test's instance, a patch put
back, and task files read from disk.
"""

import contextlib
import ctypes
import json
import os
import pathlib
import re
import shutil
import socket
import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status

T, F, M, C = Status.TIMEOUT, Status.FAIL, Status.MEMORY, Status.CRASH
LIMITS = Limits(timeout_s=1.0, memory_mb=512)  # for programs that may run out of time
# Programs that must end on their own (honest ones, hostile ones that must fail) get a limit
# no loaded host reaches: their verdict must not depend on its speed.
PATIENT = Limits(timeout_s=60.0, memory_mb=512)
TESTS = {
  "assert": {
    "kind": "assert",
    "code": "def check(candidate):\n"
    "  assert candidate(2, 3) == 5\n  assert candidate(40, 2) == 42\ncheck(add)\n",
  },
  "call": {
    "kind": "call",
    "entry_point": "add",
    "cases": [{"args": [2, 3], "expected": 5}, {"args": [40, 2], "expected": 42}],
  },
  "unittest": {
    "kind": "unittest",
    "code": "import unittest\nclass TestAdd(unittest.TestCase):\n"
    "  def test_small(self):\n    self.assertEqual(add(2, 3), 5)\n"
    "  def test_large(self):\n    self.assertEqual(add(40, 2), 42)\n",
  },
  "io": {
    "kind": "io",
    "cases": [{"stdin": "2 3\n", "stdout": "5\n"}, {"stdin": "40 2\n", "stdout": "42\n"}],
  },
}
LIST_NODE = """
class ListNode:
  def __init__(self, val=0, next=None):
    self.val, self.next = val, next
  def __eq__(self, other):
    return isinstance(other, ListNode) and self.val == other.val and self.next == other.next
def build(values):
  head = None
  for value in reversed(values):
    head = ListNode(value, head)
  return head
"""
# Tests that compare the program's values in the child (no literal to hide): linked lists of a
# class the tests define, generators, a returned function, Solution().method, floats, numpy.
TESTS.update(
  {
    "assert_var": {
      "kind": "assert",
      "code": "def check(candidate):\n  want = [5, 42]\n"
      "  assert candidate(2, 3) == want[0]\n  assert candidate(40, 2) == want[1]\n"
      "check(add)\n",
    },
    "unittest_float": {
      "kind": "unittest",
      "code": "import unittest\nclass TestAdd(unittest.TestCase):\n"
      "  def test_float(self):\n    self.assertAlmostEqual(add(0.5, 0.25), 0.75)\n",
    },
    "list_assert": {
      "kind": "assert",
      "code": LIST_NODE + "assert reverse(build([1, 2, 3])) == build([3, 2, 1])\n",
    },
    "list_unittest": {
      "kind": "unittest",
      "code": "import unittest\n"
      + LIST_NODE
      + "class TestReverse(unittest.TestCase):\n  def test_reverse(self):\n"
      "    self.assertEqual(reverse(build([1, 2])), build([2, 1]))\n",
    },
    "gen_assert": {"kind": "assert", "code": "want = [0, 2, 4]\nassert list(evens(6)) == want\n"},
    "gen_unittest": {
      "kind": "unittest",
      "code": "import unittest\nclass TestEvens(unittest.TestCase):\n"
      "  def test_evens(self):\n    self.assertEqual(list(evens(6)), [0, 2, 4])\n",
    },
    "items_assert": {
      "kind": "assert",
      "code": "class Item:\n  def __init__(self, v):\n    self.v = v\n"
      "  def __eq__(self, other):\n    return self.v == other.v\n"
      "assert list(items(2)) == [Item(0), Item(1)]\n",
    },
    "adder_assert": {"kind": "assert", "code": "want = 7\nassert make_adder(3)(4) == want\n"},
    "solution_assert": {
      "kind": "assert",
      "code": "want = [0, 1]\nassert Solution().twoSum([2, 7, 11, 15], 9) == want\n",
    },
    "contains_unittest": {
      "kind": "unittest",
      "code": "import unittest\nclass TestEvens(unittest.TestCase):\n"
      "  def test_in(self):\n    self.assertIn(4, evens(6))\n",
    },
    "inplace_assert": {
      "kind": "assert",
      "code": "xs = [3, 1, 2]\nsort_in_place(xs)\nwant = [1, 2, 3]\nassert xs == want\n",
    },
    "float_assert": {"kind": "assert", "code": "assert abs(add(0.5, 0.25) - 0.75) < 1e-9\n"},
    "len_assert": {"kind": "assert", "code": "assert len('x' * add(2, 3)) == 5\n"},
    "isclose_assert": {
      "kind": "assert",
      "code": "import math\nassert math.isclose(add(0.5, 0.25), 0.75)\n",
    },
    "from_isclose_assert": {
      "kind": "assert",
      "code": "from math import isclose\nassert isclose(add(0.5, 0.25), 0.75)\n",
    },
    "allclose_assert": {
      "kind": "assert",
      "code": "import numpy as np\nassert np.allclose(add(0.5, 0.25), 0.75)\n",
    },
    "operator_assert": {
      "kind": "assert",
      "code": "import operator\nassert operator.eq(add(2, 3), 5)\n",
    },
    "mock_unittest": {
      "kind": "unittest",
      "code": "import unittest\nfrom unittest.mock import patch\n"
      "class TestAdd(unittest.TestCase):\n  @patch('builtins.input', return_value='1')\n"
      "  def test_float(self, _):\n    self.assertTrue(math.isclose(add(0.5, 0.25), 0.75))\n",
    },
    "dataclass_assert": {
      "kind": "assert",
      "code": "assert add(2, 3) == Box(5)\nassert add(40, 2) == Box(42)\n",
    },
    "numpy_unittest": {
      "kind": "unittest",
      "code": "import unittest\nimport numpy as np\n"
      "class TestCumsum(unittest.TestCase):\n  def test_cumsum(self):\n"
      "    np.testing.assert_array_equal(cumulative([1, 2, 3]), np.array([1, 3, 6]))\n",
    },
  }
)
# Tests whose expected values are computed, so compared in the child (not held in the pool), and
# tests that reach classes and tables of the library the program could patch instead.


def _unittest(body: str, imports: str = "") -> dict:
  """unittest tests: `body` (indented for a method) in one TestCase class."""
  return {
    "kind": "unittest",
    "code": f"import unittest\n{imports}class TestTask(unittest.TestCase):\n{body}",
  }


TESTS.update(
  {
    "computed_unittest": _unittest(
      "  def test_small(self):\n    expected = sum([2, 3])\n"
      "    self.assertEqual(add(2, 3), expected)\n"
      "  def test_large(self):\n    expected = sum([40, 2])\n"
      "    self.assertEqual(add(40, 2), expected)\n"
    ),
    "computed_assert": {
      "kind": "assert",
      "code": "expected = sum([2, 3])\nassert add(2, 3) == expected\n",
    },
    "touch_unittest": _unittest(
      "  def test_small(self):\n    result = add(2, 3)\n"
      "    repr(result)\n    self.assertEqual(result, sum([2, 3]))\n"
    ),
    "numpy_close_assert": {
      "kind": "assert",
      "code": "import numpy as np\nnp.testing.assert_allclose(add(0.5, 0.25), sum([0.5, 0.25]))\n",
    },
    "raises_unittest": _unittest(
      "  def test_none(self):\n    with self.assertRaises(TypeError):\n      add(None, 1)\n"
    ),
    "deepcopy_unittest": _unittest(
      "  def test_sorted_copy(self):\n    data = [3, 1, 2]\n    before = copy.deepcopy(data)\n"
      "    result = sorted_copy(data)\n    self.assertEqual(data, before)\n"
      "    self.assertEqual(result, sorted(before))\n",
      imports="import copy\n",
    ),
    "random_unittest": _unittest(
      "  def test_draw(self):\n    random.seed(3)\n    want = random.randint(0, 10 ** 9)\n"
      "    random.seed(3)\n    self.assertEqual(draw(), want)\n",
      imports="import random\n",
    ),
    "pandas_unittest": _unittest(
      "  def test_doubled(self):\n"
      "    self.assertTrue(doubled(pd.Series([1, 2])).equals(pd.Series([2, 4])))\n",
      imports="import pandas as pd\n",
    ),
  }
)
WRONG = "def add(a, b):\n  return a * b\n"
ALWAYS_EQUAL = "class AlwaysEqual:\n  def __eq__(self, other):\n    return True\n  def __ne__(self, other):\n    return False\n"

# (name, test kind, program, acceptable statuses). {outside} is a world-writable
# directory outside every run, {port} a listener the test opened on 127.0.0.1.
HOSTILE = [
  ("infinite loop", "assert", "while True:\n  pass\n", {T}),
  (
    "ignores SIGTERM and SIGALRM",
    "call",
    """
        import signal
        for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGXCPU, signal.SIGHUP):
          signal.signal(s, signal.SIG_IGN)
        signal.alarm(1)
        while True:
          pass
        """,
    {T},
  ),
  (
    "fork bomb",
    "assert",
    """
        import os
        while True:
          try:
            os.fork()
          except OSError:
            pass
        """,
    {T, F, C, M},
  ),
  (
    "double-fork setsid daemon",
    "assert",
    """
        import os, time
        if os.fork() == 0:
          os.setsid()
          if os.fork() == 0:
            while True:
              time.sleep(0.05)
          os._exit(0)
        """
    + WRONG,
    {F},
  ),
  ("memory bomb", "call", "x = ' ' * (1 << 34)\n" + WRONG, {M}),
  ("growing memory bomb", "assert", "x = []\nwhile True:\n  x.append(' ' * 10 ** 7)\n", {M, T}),
  (
    "a gigabyte of output",
    "call",
    "import sys\nwhile True:\n  sys.stdout.write('x' * 65536)\n",
    {F, T},
  ),
  (
    "output to stderr and stdout until killed",
    "io",
    "import os\nwhile True:\n  os.write(2, b'e' * 65536)\n",
    {F, T},
  ),
  ("deep recursion", "call", "def add(a, b):\n  return add(a, b)\n", {F}),
  (
    "recursion past the C stack",
    "assert",
    """
        import sys
        sys.setrecursionlimit(10 ** 7)
        def add(a, b):
          return add(a, b) + 1
        """,
    {C, F, M},
  ),
  ("sys.exit(0) before the asserts", "assert", WRONG + "import sys\nsys.exit(0)\n", {F}),
  ("os._exit(0) before the asserts", "assert", WRONG + "import os\nos._exit(0)\n", {F}),
  (
    "sys.exit(0) inside the tested function",
    "unittest",
    "import sys\ndef add(a, b):\n  sys.exit(0)\n",
    {F},
  ),
  (
    "os._exit(0) inside the tested function",
    "call",
    "import os\ndef add(a, b):\n  os._exit(0)\n",
    {F},
  ),
  (
    "kills its parent, init and everyone",
    "assert",
    """
        import os, signal
        for pid in (os.getppid(), 1, -1):
          try:
            os.kill(pid, signal.SIGKILL)
          except OSError:
            pass
        """
    + WRONG,
    {F, C},
  ),
  (
    "AlwaysEqual in an assert",
    "assert",
    """
        class AlwaysEqual:
          def __eq__(self, other):
            return True
          __hash__ = None
        def add(a, b):
          return AlwaysEqual()
        """,
    {F},
  ),
  (
    "AlwaysEqual in a call",
    "call",
    """
        class AlwaysEqual:
          def __eq__(self, other):
            return True
        def add(a, b):
          return AlwaysEqual()
        """,
    {F},
  ),
  (
    "AlwaysEqual through assertEqual",
    "unittest",
    """
        class AlwaysEqual:
          def __eq__(self, other):
            return True
          def __ne__(self, other):
            return False
        def add(a, b):
          return AlwaysEqual()
        """,
    {F},
  ),
  (
    "int subclass with a lying __eq__",
    "assert",
    """
        class Liar(int):
          def __eq__(self, other):
            return True
        def add(a, b):
          return Liar(0)
        """,
    {F},
  ),
  (
    "int subclass in a call",
    "call",
    """
        class Liar(int):
          def __eq__(self, other):
            return True
        def add(a, b):
          return Liar(0)
        """,
    {F},
  ),
  (
    "str subclass through assertEqual",
    "unittest",
    """
        class Liar(str):
          def __eq__(self, other):
            return True
          __hash__ = str.__hash__
        def add(a, b):
          return Liar('no')
        """,
    {F},
  ),
  (
    "patches unittest at import",
    "unittest",
    """
        import unittest
        unittest.TestCase.assertEqual = lambda self, *a, **k: None
        unittest.TestCase.run = lambda self, result=None: None
        unittest.TestResult.wasSuccessful = lambda self: True
        """
    + WRONG,
    {F},
  ),
  (
    "patches unittest while under test",
    "unittest",
    """
        import unittest
        def add(a, b):
          unittest.TestCase.assertEqual = lambda self, *a, **k: None
          return 0
        """,
    {F},
  ),
  (
    "patches builtins",
    "assert",
    """
        import builtins
        builtins.AssertionError = type('Quiet', (Exception,), {})
        builtins.__import__ = lambda *a, **k: None
        def add(a, b):
          builtins.isinstance = lambda *a: True
          return 0
        """,
    {F},
  ),
  # Patch, then put back before the end-of-run check: the check must see that builtins,
  # unittest or json were written at all, not only what they hold at the end.
  (
    "patches builtins.len and restores it from the patch",
    "len_assert",
    """
        import builtins
        def patch(real):  # the original kept in a closure, where nothing wraps it
          def fake(x):
            builtins.len = real
            return 5
          builtins.len = fake
        patch(builtins.len)
        del patch
        """
    + WRONG,
    {F},
  ),
  (
    "patches assertAlmostEqual and restores it from the patch",
    "unittest_float",
    """
        import unittest
        def patch(real):
          def fake(self, *args, **kwargs):
            unittest.TestCase.assertAlmostEqual = real
          unittest.TestCase.assertAlmostEqual = fake
        patch(unittest.TestCase.assertAlmostEqual)
        del patch
        def add(a, b):
          return 0.0
        """,
    {F},
  ),
  (
    "deletes a builtin and puts it back",
    "len_assert",
    """
        import builtins
        def patch(real):
          def fake(x):
            builtins.len = real
            return 5
          del builtins.len
          builtins.len = fake
        patch(builtins.len)
        del patch
        """
    + WRONG,
    {F},
  ),
  # The library the tests call: patched, swapped in sys.modules, or patched and put back.
  (
    "shadows abs for the tests, which share its namespace",
    "float_assert",
    """
        def abs(x):
          return 0.0
        def add(a, b):
          return 0.0
        """,
    {F},
  ),
  (
    "signs a forged report for a tolerance assert",
    "float_assert",
    """
        import gc, os
        channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')
        channel.send({"expect": 0, "value": {"f": "0.0"}}, signed=True)
        channel.send({"end": "assert", "expects": 1}, signed=True)
        os._exit(0)
        """,
    {F},
  ),
  (
    "a UserList holding the program's list subclass",
    "assert",
    """
        import collections
        class Liar(list):
          def __eq__(self, other):
            return True
        def add(a, b):
          wrapper = collections.UserList()
          wrapper.data = Liar()
          return wrapper
        """,
    {F},
  ),
  (
    "patches math.isclose",
    "isclose_assert",
    """
        import math
        math.isclose = lambda *args, **kwargs: True
        """
    + WRONG,
    {F},
  ),
  (
    "patches math.isclose before the tests import it by name",
    "from_isclose_assert",
    """
        import math
        math.isclose = lambda *args, **kwargs: True
        """
    + WRONG,
    {F},
  ),
  (
    "patches math.isclose and puts it back from the patch",
    "isclose_assert",
    """
        import math
        def patch(real):
          def fake(*args, **kwargs):
            math.isclose = real
            return True
          math.isclose = fake
        patch(math.isclose)
        del patch
        """
    + WRONG,
    {F},
  ),
  (
    "patches numpy.allclose",
    "allclose_assert",
    """
        import numpy
        numpy.allclose = lambda *args, **kwargs: True
        """
    + WRONG,
    {F},
  ),
  (
    "patches numpy.testing.assert_array_equal",
    "numpy_unittest",
    """
        import numpy
        import numpy.testing
        numpy.testing.assert_array_equal = lambda *args, **kwargs: None
        def cumulative(values):
          return numpy.array([0])
        """,
    {F},
  ),
  (
    "patches operator.eq",
    "operator_assert",
    """
        import operator
        operator.eq = lambda a, b: True
        """
    + WRONG,
    {F},
  ),
  (
    "patches math.isclose where the tests patch the library too",
    "mock_unittest",
    """
        import math
        math.isclose = lambda *args, **kwargs: True
        """
    + WRONG,
    {F},
  ),
  (
    "swaps math in sys.modules",
    "isclose_assert",
    """
        import sys, types
        fake = types.ModuleType('math')
        fake.isclose = lambda *args, **kwargs: True
        sys.modules['math'] = fake
        """
    + WRONG,
    {F},
  ),
  (
    "patches json",
    "call",
    """
        import json
        json.dumps = lambda *a, **k: '{"case":0,"value":5}'
        json.loads = lambda *a, **k: {"case": 0, "value": 5}
        """
    + WRONG,
    {F},
  ),
  (
    "trace hook that jumps over asserts",
    "assert",
    """
        import sys
        def tracer(frame, event, arg):
          if frame.f_code.co_name == 'check' and event == 'line':
            frame.f_lineno = frame.f_code.co_firstlineno + 3
          return tracer
        def add(a, b):
          sys.settrace(tracer)
          sys._getframe(1).f_trace = tracer
          return 0
        """,
    {F},
  ),
  (
    "reads expected values from the caller's frames",
    "call",
    """
        import sys
        def add(a, b):
          frame = sys._getframe(1)
          while frame is not None:
            for value in list(frame.f_locals.values()):
              if isinstance(value, dict) and 'expected' in value:
                return value['expected']
            frame = frame.f_back
          return 0
        """,
    {F},
  ),
  (
    "reads the expected constant after its call site",
    "assert",
    """
        import dis, sys
        def add(a, b):
          frame = sys._getframe(1)
          while frame is not None and frame.f_code.co_filename != '<tests>':
            frame = frame.f_back
          if frame is None:
            return 0
          for instruction in dis.get_instructions(frame.f_code):
            if instruction.offset > frame.f_lasti and instruction.opname == 'LOAD_CONST':
              return instruction.argval
          return 0
        """,
    {F},
  ),
  (
    "collects every constant of the test code",
    "assert",
    """
        import gc, sys, types
        def add(a, b):
          consts = set()
          for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType) and obj.__code__.co_filename == '<tests>':
              consts |= {c for c in obj.__code__.co_consts if type(c) is int}
          add.calls = getattr(add, 'calls', -1) + 1
          return sorted(consts)[add.calls % len(consts)] if consts else 0
        """,
    {F},
  ),
  (
    "walks gc.get_objects() for expected values",
    "call",
    """
        import gc
        def add(a, b):
          for obj in gc.get_objects():
            if isinstance(obj, dict) and 'expected' in obj:
              return obj['expected']
            if isinstance(obj, list) and obj and isinstance(obj[0], dict) and 'expected' in obj[0]:
              return obj[0]['expected']
          return 0
        """,
    {F},
  ),
  (
    "reads /proc/*/mem",
    "call",
    """
        import os, re
        found = []
        for pid in os.listdir('/proc'):
          if pid.isdigit():
            try:
              with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb') as mem:
                for line in maps:
                  start, end = (int(x, 16) for x in line.split()[0].split('-'))
                  mem.seek(start)
                  found += re.findall(rb'"expected": ?(\\d+)', mem.read(min(end - start, 1 << 22)))
            except (OSError, ValueError, OverflowError):
              pass
        def add(a, b):
          return int(found[0]) if found else 0
        """,
    {F, T},
  ),
  # The nonce is in the child's memory: a program can sign records. Literal asserts every run
  # reaches must still be reported, with values it would have to compute.
  (
    "signs a forged end record with the channel from the harness's frame",
    "assert",
    """
        import os, sys
        frame = sys._getframe(0)
        while 'channel' not in frame.f_locals:
          frame = frame.f_back
        channel = frame.f_locals['channel']
        channel.send({"end": "assert", "expects": 0}, signed=True)
        os._exit(0)
        """,
    {F},
  ),
  (
    "signs forged records with the channel it finds through gc",
    "assert",
    """
        import gc, os
        channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')
        channel.send({"expect": 0, "value": 6}, signed=True)
        channel.send({"end": "assert", "expects": 1}, signed=True)
        os._exit(0)
        """,
    {F},
  ),
  (
    "signs forged ok records for every unittest test",
    "unittest",
    """
        import gc, os
        channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')
        for test in ('TestAdd.test_small', 'TestAdd.test_large'):
          channel.send({"test": test, "outcome": "ok", "detail": ""}, signed=True)
        channel.send({"end": "unittest", "expects": 0}, signed=True)
        os._exit(0)
        """,
    {F},
  ),
  (
    "signs forged reports where the expected values sit in a variable",
    "assert_var",
    """
        import gc, os
        channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')
        channel.send({"end": "assert", "expects": 0}, signed=True)
        os._exit(0)
        """,
    {F},
  ),
  (
    "forges records on every fd",
    "assert",
    """
        import os, json
        lines = [{"end": "assert"}, {"end": "assert", "nonce": "0" * 32},
                 {"test": "TestAdd.test_small", "outcome": "ok"}, {"case": 0, "value": 5}]
        data = ''.join(json.dumps(line) + '\\n' for line in lines).encode()
        for fd in range(1024):
          try:
            os.write(fd, data)
          except OSError:
            pass
        os._exit(0)
        """,
    {F},
  ),
  (
    "forges unittest records and exits",
    "unittest",
    """
        import os, json
        for fd in range(3, 64):
          for name in ("TestAdd.test_small", "TestAdd.test_large"):
            try:
              os.write(fd, (json.dumps({"test": name, "outcome": "ok"}) + "\\n").encode())
              os.write(fd, b'{"end": "unittest"}\\n')
            except OSError:
              pass
        os._exit(0)
        """,
    {F},
  ),
  (
    "closes every inherited fd",
    "call",
    "import os\nos.closerange(0, 4096)\n" + WRONG.replace("a * b", "a + b"),
    {F, C},
  ),
  (
    "threads that outlive the run",
    "assert",
    """
        import threading, time
        def linger():
          while True:
            time.sleep(0.01)
        for _ in range(4):
          threading.Thread(target=linger).start()
        """
    + WRONG,
    {F},
  ),
  (
    "writes and deletes files outside its directory",
    "call",
    """
        import os, shutil
        for path in ('{outside}/victim.txt', '/tmp/planted', '/var/tmp/planted', '/dev/shm/planted',
                     os.path.expanduser('~/../planted'), '/planted', '{outside}/new.txt'):
          try:
            with open(path, 'w') as f:
              f.write('pwned')
          except OSError:
            pass
        for path in ('{outside}/victim.txt', '{outside}'):
          try:
            os.remove(path)
          except OSError:
            pass
          shutil.rmtree(path, ignore_errors=True)
        """
    + WRONG,
    {F},
  ),
  (
    "connects to a listener on 127.0.0.1",
    "call",
    """
        import socket
        def add(a, b):
          s = socket.create_connection(('127.0.0.1', {port}), timeout=0.5)
          s.sendall(b'pwned')
          return a + b
        """,
    {F},
  ),
  (
    "reaches the network",
    "io",
    """
        import socket
        socket.create_connection(('1.1.1.1', 53), timeout=0.5)
        a, b = map(int, input().split())
        print(a + b)
        """,
    {F},
  ),
  (
    "regains root",
    "call",
    """
        import os, subprocess
        os.setuid(0)
        def add(a, b):
          return a + b
        """,
    {F},
  ),
  (
    "prints PASS and exits 0",
    "assert",
    "print('All tests passed\\nOK')\nimport sys\nsys.stdout.flush()\nimport os\nos._exit(0)\n",
    {F},
  ),
  (
    "raises KeyboardInterrupt in the test",
    "unittest",
    "def add(a, b):\n  raise KeyboardInterrupt\n",
    {F},
  ),
  ("kills itself", "io", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", {C}),
  # What a program could hand the tests through a generator, a returned function or an
  # object of the tests' own classes.
  (
    "int subclass whose __eq__ is int.__ne__",
    "assert_var",
    """
        class Liar(int):
          __eq__ = int.__ne__
        def add(a, b):
          return Liar(0)
        """,
    {F},
  ),
  (
    "imports AlwaysEqual from a module it wrote",
    "assert_var",
    """
        import os, sys
        places = (os.getcwd(), os.path.join(os.getcwd(), 'lib'))  # the only writable places
        for where in places:
          os.makedirs(where, exist_ok=True)
          with open(os.path.join(where, 'liar_' + str(len(where)) + '.py'), 'w') as f:
            f.write('class AlwaysEqual:\\n  def __eq__(self, other):\\n    return True\\n')
          sys.path.insert(0, where)
        import importlib
        liars = [importlib.import_module('liar_' + str(len(w))) for w in places]
        calls = [0]
        def add(a, b):
          calls[0] += 1
          return liars[calls[0] % 2].AlwaysEqual()
        """,
    {F},
  ),
  (
    "float subclass with a lying __rsub__ through assertAlmostEqual",
    "unittest_float",
    """
        class Liar(float):
          def __rsub__(self, other):
            return 0.0
          __sub__ = __rsub__
        def add(a, b):
          return Liar(0)
        """,
    {F},
  ),
  (
    "subclass of the tests' class with a lying __eq__",
    "list_assert",
    """
        def reverse(head):
          class Liar(ListNode):
            def __eq__(self, other):
              return True
          return Liar(0)
        """,
    {F},
  ),
  (
    "subclass of the tests' class through assertEqual",
    "list_unittest",
    """
        def reverse(head):
          Liar = type('Liar', (type(head),), {'__eq__': lambda self, other: True})
          return Liar(0)
        """,
    {F},
  ),
  (
    "monkey-patches the tests' class",
    "list_assert",
    """
        def reverse(head):
          ListNode.__eq__ = lambda self, other: True
          return head
        """,
    {F},
  ),
  (
    "patches the tests' class through type() in unittest",
    "list_unittest",
    """
        def reverse(head):
          type(head).__eq__ = lambda self, other: True
          return None
        """,
    {F},
  ),
  (
    "swaps an instance's __class__",
    "list_unittest",
    """
        def reverse(head):
          class Liar(ListNode):
            __eq__ = lambda self, other: True
          head.__class__ = Liar
          return head
        """,
    {F},
  ),
  (
    "a node of the tests' class holding AlwaysEqual",
    "list_assert",
    ALWAYS_EQUAL
    + """
        def reverse(head):
          node = ListNode(AlwaysEqual())
          node.next = AlwaysEqual()
          return node
        """,
    {F},
  ),
  (
    "registers its own class as a test class",
    "list_assert",
    """
        def reverse(head):
          cls = type('Liar', (ListNode,), {'__eq__': lambda self, other: True})
          globals()['__precisecoder_class__'](cls)
          return cls(0)
        """,
    {F},
  ),
  (
    "its own class named like the tests' class",
    "list_assert",
    """
        class ListNode:
          def __init__(self, *args):
            pass
          def __eq__(self, other):
            return True
        _Mine = ListNode
        def reverse(head):
          return _Mine()
        """,
    {F},
  ),
  (
    "generator yielding AlwaysEqual",
    "gen_assert",
    ALWAYS_EQUAL
    + """
        def evens(n):
          for _ in range(3):
            yield AlwaysEqual()
        """,
    {F},
  ),
  (
    "iter() over AlwaysEqual objects",
    "gen_unittest",
    ALWAYS_EQUAL
    + """
        def evens(n):
          return iter([AlwaysEqual()] * 3)
        """,
    {F},
  ),
  (
    "iterator class yielding AlwaysEqual",
    "gen_assert",
    ALWAYS_EQUAL
    + """
        class It:
          def __init__(self):
            self.left = 3
          def __iter__(self):
            return self
          def __next__(self):
            self.left -= 1
            if self.left < 0:
              raise StopIteration
            return AlwaysEqual()
          def __eq__(self, other):
            return True
        def evens(n):
          return It()
        """,
    {F},
  ),
  (
    "generator that patches the tests' class after its last item",
    "items_assert",
    """
        def items(n):
          Item = globals()['Item']
          yield Item(9)
          yield Item(9)
          Item.__eq__ = lambda self, other: True
        """,
    {F},
  ),
  (
    "a program class whose __contains__ says yes through assertIn",
    "contains_unittest",
    """
        class Everything:
          def __contains__(self, item):
            return True
        def evens(n):
          return Everything()
        """,
    {F},
  ),
  (
    "puts AlwaysEqual into the list it sorts in place",
    "inplace_assert",
    ALWAYS_EQUAL
    + """
        def sort_in_place(xs):
          xs[:] = [AlwaysEqual()] * len(xs)
        """,
    {F},
  ),
  (
    "returned function returning AlwaysEqual",
    "adder_assert",
    ALWAYS_EQUAL
    + """
        def make_adder(k):
          return lambda x: AlwaysEqual()
        """,
    {F},
  ),
  (
    "Solution().method returning AlwaysEqual",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        class Solution:
          def twoSum(self, nums, target):
            return AlwaysEqual()
        """,
    {F},
  ),
  (
    "Solution().method that is a functools.partial of the program's code",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        import functools
        def _two_sum(nums, target):
          return AlwaysEqual()
        class Solution:
          twoSum = functools.partial(_two_sum)
        """,
    {F},
  ),
  (
    "Solution().method behind functools.lru_cache",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        import functools
        class Solution:
          @functools.lru_cache(maxsize=None)
          def twoSum(self, nums, target):
            return AlwaysEqual()
        """,
    {F},
  ),
  (
    "Solution().method behind functools.partialmethod",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        import functools
        class Solution:
          def _two_sum(self, nums, target):
            return AlwaysEqual()
          twoSum = functools.partialmethod(_two_sum)
        """,
    {F},
  ),
  (
    "Solution().method handed out by a functools.cached_property",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        import functools
        class Solution:
          @functools.cached_property
          def twoSum(self):
            return functools.partial(lambda nums, target: AlwaysEqual())
        """,
    {F},
  ),
  (
    "Solution().method compiled under another file name",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        namespace = {'AlwaysEqual': AlwaysEqual}
        exec(compile('def twoSum(self, nums, target):\\n  return AlwaysEqual()\\n',
                     '/usr/lib/python3.11/heapq.py', 'exec'), namespace)
        class Solution:
          twoSum = namespace['twoSum']
        """,
    {F},
  ),
  (
    "__eq__ that is a functools.partial",
    "assert_var",
    """
        import functools
        class Forged:
          __eq__ = functools.partial(lambda *args: True)
          __hash__ = None
        def add(a, b):
          return Forged()
        """,
    {F},
  ),
  (
    "a dataclass whose module rebinds NotImplemented",
    "assert_var",
    """
        import dataclasses
        NotImplemented = True
        @dataclasses.dataclass
        class Box:
          x: int
        def add(a, b):
          return Box(0)
        """,
    {F},
  ),
  (
    "a dataclass made under forged builtins",
    "assert_var",
    """
        import builtins, dataclasses
        __builtins__ = dict(vars(builtins), NotImplemented=True)
        @dataclasses.dataclass
        class Box:
          x: int
        def add(a, b):
          return Box(0)
        """,
    {F},
  ),
  (
    "a dataclass's __eq__ swapped for one compiled as '<string>'",
    "assert_var",
    """
        import dataclasses
        namespace = {}
        exec(compile('def __eq__(self, other):\\n  if other.__class__ is self.__class__:\\n'
                     '    return (self.x,)==(other.x,)\\n  return True\\n', '<string>', 'exec'),
             namespace)
        @dataclasses.dataclass(eq=False)
        class Box:
          x: int
          __eq__ = namespace['__eq__']
          __hash__ = None
        def add(a, b):
          return Box(0)
        """,
    {F},
  ),
  (
    "__eq__ that is a class named __eq__ (its objects are truthy)",
    "assert_var",
    """
        class __eq__:
          def __init__(self, other):
            pass
        class Forged:
          __eq__ = __eq__
          __hash__ = None
        def add(a, b):
          return Forged()
        """,
    {F},
  ),
  (
    "__eq__ that is a callable object of a class made inside a function",
    "assert_var",
    """
        def make():
          class Yes:
            def __call__(self, other):
              return True
          return Yes()
        class Forged:
          __eq__ = make()
          __hash__ = None
        def add(a, b):
          return Forged()
        """,
    {F},
  ),
  (
    "Solution().method that is a callable object of a class made inside a function",
    "solution_assert",
    ALWAYS_EQUAL
    + """
        def make():
          class TwoSum:
            def __call__(self, nums, target):
              return AlwaysEqual()
          return TwoSum()
        class Solution:
          twoSum = make()
        """,
    {F},
  ),
  (
    "a dataclass holding AlwaysEqual",
    "dataclass_assert",
    ALWAYS_EQUAL
    + """
        import dataclasses
        @dataclasses.dataclass
        class Box:
          v: object
        def add(a, b):
          return Box(AlwaysEqual())
        """,
    {F},
  ),
  (
    "an int subclass whose __eq__ says yes, against a literal",
    "assert",
    """
        class Yes(int):
          def __eq__(self, other):
            return True
          __hash__ = int.__hash__
        def add(a, b):
          return Yes(0)
        """,
    {F},
  ),
  (
    "a Fraction whose class is patched to show another numerator",
    "assert",
    """
        import fractions
        zero = fractions.Fraction(0)
        fractions.Fraction._numerator = property(lambda self: 5)
        fractions.Fraction.numerator = property(lambda self: 5)
        def add(a, b):
          return zero
        """,
    {F},
  ),
  (
    "an IntEnum subclass whose __eq__ is int.__ne__",
    "assert_var",
    """
        import enum
        class Level(enum.IntEnum):
          LOW = 7
          __eq__ = int.__ne__
          __hash__ = int.__hash__
        def add(a, b):
          return Level.LOW
        """,
    {F},
  ),
  (
    "numpy object array of AlwaysEqual",
    "numpy_unittest",
    ALWAYS_EQUAL
    + """
        import numpy as np
        def cumulative(xs):
          out = np.empty(3, dtype=object)
          out[:] = [AlwaysEqual() for _ in range(3)]
          return out
        """,
    {F},
  ),
]


def _on_the_test_instance(statement: str) -> str:
  """A wrong `add` that finds the running test's instance (`test`) in its callers' frames and
  runs `statement` on it before it returns."""
  return (
    "import sys, unittest\ndef add(a, b):\n  frame = sys._getframe()\n"
    "  while frame is not None:\n    test = frame.f_locals.get('self')\n"
    "    if isinstance(test, unittest.TestCase):\n"
    f"      {statement}\n      break\n    frame = frame.f_back\n  return a * b\n"
  )


# Each family of the second held-out red team (issue 22), in programs of our own. Each passes in
# a plain interpreter: the defences, not the task, make it fail. Run with room for the tests'
# own imports (pandas), beside honest programs for the same tests (FORGERY_HONEST).
FORGERIES = [
  # Library objects built to compare equal to anything.
  (
    "returns unittest.mock.ANY",
    "computed_unittest",
    "from unittest import mock\ndef add(a, b):\n  return mock.ANY\n",
    {F},
  ),
  (
    "returns unittest.mock.ANY inside a list",
    "computed_assert",
    "from unittest.mock import ANY\ndef add(a, b):\n  return [ANY][0]\n",
    {F},
  ),
  (
    "returns a MagicMock configured to equal anything",
    "computed_unittest",
    """
        from unittest.mock import MagicMock
        def add(a, b):
          m = MagicMock()
          m.__eq__.return_value = True
          return m
        """,
    {F},
  ),
  (
    "returns a MagicMock whose __eq__ is the program's",
    "computed_unittest",
    """
        from unittest.mock import MagicMock
        def add(a, b):
          m = MagicMock()
          m.__eq__ = lambda self, other: True
          return m
        """,
    {F},
  ),
  (
    "borrows mock._ANY.__eq__ as a class member",
    "computed_unittest",
    """
        from unittest import mock
        class Forged:
          __eq__ = mock._ANY.__eq__
          __ne__ = mock._ANY.__ne__
          __hash__ = None
        def add(a, b):
          return Forged()
        """,
    {F},
  ),
  (
    "borrows mock._ANY.__eq__ under _ANY's own names",
    "computed_assert",
    """
        from unittest import mock
        class Forged:
          __eq__ = mock._ANY.__eq__
          __hash__ = None
        Forged.__module__, Forged.__qualname__, Forged.__name__ = 'unittest.mock', '_ANY', '_ANY'
        def add(a, b):
          return Forged()
        """,
    {F},
  ),
  # In-place code and defaults swaps: the function object stays, so identity shows nothing.
  (
    "swaps the code of TestCase.assertEqual",
    "computed_unittest",
    WRONG
    + """
        import unittest
        forged = lambda self, first, second, msg=None: None
        unittest.TestCase.assertEqual.__code__ = forged.__code__
        """,
    {F},
  ),
  (
    "swaps the code of a library assert the tests call",
    "numpy_unittest",
    """
        import numpy as np
        np.testing.assert_array_equal.__code__ = (lambda *args, **kwargs: None).__code__
        def cumulative(xs):
          return np.array(xs)
        """,
    {F},
  ),
  (
    "widens numpy's assert_allclose through its defaults",
    "numpy_close_assert",
    WRONG
    + """
        import numpy as np
        np.testing.assert_allclose.__defaults__ = (1e9, 1e9, True, '', True)
        """,
    {F},
  ),
  (
    "swaps the code of the harness's own check",
    "computed_unittest",
    ALWAYS_EQUAL
    + """
        import sys
        guard = sys.modules.get('precisecoder.execution.guard')
        if guard is not None:
          guard.Guard.checked.__code__ = (lambda self, value: value).__code__
          guard.Guard.check.__code__ = (lambda self, root, budget=None: None).__code__
        def add(a, b):
          return AlwaysEqual()
        """,
    {F},
  ),
  # Classes and tables of the library the tests reach.
  (
    "patches pandas.Series.equals",
    "pandas_unittest",
    """
        import pandas as pd
        pd.Series.equals = lambda self, other: True
        def doubled(s):
          return s
        """,
    {F},
  ),
  (
    "patches pandas.Series.equals with another library method",
    "pandas_unittest",
    """
        import pandas as pd
        pd.Series.equals = pd.Series.dot  # a number, truthy: 10
        def doubled(s):
          return s
        """,
    {F},
  ),
  (
    "makes assertRaises swallow the missing exception",
    "raises_unittest",
    """
        import unittest.case
        unittest.case._AssertRaisesContext.__exit__ = lambda self, *exc: True
        def add(a, b):
          return 0 if a is None else a + b
        """,
    {F},
  ),
  (
    "fixes random's draws to its own answer",
    "random_unittest",
    """
        import random
        random.Random._randbelow = lambda self, n: 7
        def draw():
          return 7
        """,
    {F},
  ),
  (
    "makes deepcopy hand back the list it sorts in place",
    "deepcopy_unittest",
    """
        import copy
        copy._deepcopy_dispatch[list] = lambda x, memo, deepcopy=None: x
        def sorted_copy(data):
          data.sort()
          return data
        """,
    {F},
  ),
  (
    "makes deepcopy atomic with copy's own function",
    "deepcopy_unittest",
    """
        import copy
        copy._deepcopy_dispatch[list] = copy._deepcopy_atomic
        def sorted_copy(data):
          data.sort()
          return data
        """,
    {F},
  ),
  # Hooks that rewrite the tests' locals and leave before any check.
  (
    "a trace hook that rewrites the tests' expected value",
    "computed_unittest",
    WRONG
    + """
        import sys
        def tracer(frame, event, arg):
          if frame.f_code.co_name.startswith('test_') and 'expected' in frame.f_locals:
            frame.f_locals['expected'] = {5: 6, 42: 80}.get(frame.f_locals['expected'], 0)
            if frame.f_code.co_name == 'test_small':
              sys.settrace(None)  # gone before any check
          return tracer
        sys.settrace(tracer)
        """,
    {F},
  ),
  (
    "a profile hook that makes assertEqual compare its first value with itself",
    "computed_unittest",
    WRONG
    + """
        import sys
        calls = []
        def profiler(frame, event, arg):
          if event == 'call' and frame.f_code.co_name == 'assertEqual':
            frame.f_locals['second'] = frame.f_locals['first']
            calls.append(1)
            if len(calls) == 2:
              sys.setprofile(None)  # gone before any check
        sys.setprofile(profiler)
        """,
    {F},
  ),
  # Values mutated after the guard's one check.
  (
    "a guarded __repr__ that adds __eq__ to the class",
    "touch_unittest",
    """
        class Box:
          def __repr__(self):
            Box.__eq__ = lambda self, other: True
            Box.__hash__ = None
            return 'Box'
        def add(a, b):
          return Box()
        """,
    {F},
  ),
  (
    "a __del__ that adds __eq__ after the check",
    "touch_unittest",
    """
        class Box:
          def __repr__(self):
            Trigger()
            return 'Box'
        class Trigger:
          def __del__(self):
            Box.__eq__ = lambda self, other: True
        def add(a, b):
          return Box()
        """,
    {F},
  ),
  (
    "a gc callback that adds __eq__ after the check",
    "touch_unittest",
    """
        import gc
        class Box:
          def __repr__(self):
            gc.callbacks.append(lambda phase, info: setattr(Box, '__eq__', lambda s, o: True))
            gc.collect()
            return 'Box'
        def add(a, b):
          return Box()
        """,
    {F},
  ),
  (
    "reassigns __class__ after the check",
    "touch_unittest",
    ALWAYS_EQUAL
    + """
        class Box:
          def __repr__(self):
            self.__class__ = AlwaysEqual
            return 'Box'
        def add(a, b):
          return Box()
        """,
    {F},
  ),
  # The TestCase instance.
  (
    "shadows _baseAssertEqual on the test's instance",
    "computed_unittest",
    _on_the_test_instance("test._baseAssertEqual = lambda first, second, msg=None: None"),
    {F},
  ),
  (
    "rewrites the instance's _type_equality_funcs",
    "computed_unittest",
    _on_the_test_instance("test._type_equality_funcs[int] = 'assertNotEqual'"),
    {F},
  ),
  # A patch that puts itself back when the tests call it, with a new name to cover the write.
  (
    "patches assertEqual, puts it back when called, and adds a name",
    "touch_unittest",
    """
        import unittest
        real = unittest.TestCase.assertEqual
        def forged(self, first, second, msg=None):
          unittest.TestCase.assertEqual = real  # nothing left to see once the tests have called it
        unittest.TestCase.assertEqual = forged
        unittest.TestCase._cover = 1  # TestCase's dict then differs: no 'put back' to see
        def add(a, b):
          return a * b
        """,
    {F},
  ),
  # Reading the task file, for every kind: the expected outputs, the gold program.
  (
    "reads the expected values from the task file",
    "call",
    """
        import json
        cases = json.load(open('{taskfile}'))['call']['cases']
        answers = {tuple(c['args']): c['expected'] for c in cases}
        def add(a, b):
          return answers[(a, b)]
        """,
    {F},
  ),
  (
    "reads the expected output from the task file",
    "io",
    """
        import json
        cases = json.load(open('{taskfile}'))['io']['cases']
        line = input()
        print(next(c['stdout'] for c in cases if c['stdin'].strip() == line.strip()), end='')
        """,
    {F},
  ),
  (
    "finds task files on the file system",
    "call",
    """
        import json, os
        answers = {}
        for root in ('/tmp', '/var', '/work', '/root', '/home', '/opt', '/srv', '/mnt',
                     os.path.dirname('{taskfile}')):
          for folder, _, files in os.walk(root):
            for name in files:
              if name.endswith('.json'):
                try:
                  for c in json.load(open(os.path.join(folder, name)))['call']['cases']:
                    answers[tuple(c['args'])] = c['expected']
                except Exception:
                  pass
        def add(a, b):
          return answers[(a, b)]
        """,
    {F},
  ),
  (
    "reads the task sets this package ships",
    "unittest",
    """
        import gzip, json, os, precisecoder
        folder = os.path.join(os.path.dirname(precisecoder.__file__), 'data', 'builtin')
        shipped = [json.loads(line) for name in os.listdir(folder) if name.endswith('.gz')
                   for line in gzip.open(os.path.join(folder, name), 'rt')]
        def add(a, b):
          return len(shipped) and a + b
        """,
    {F},
  ),
]

FORGERY_HONEST = [
  ("computed", "computed_unittest", "def add(a, b):\n  return a + b\n"),
  ("computed, assert", "computed_assert", "def add(a, b):\n  return a + b\n"),
  ("a plain object compared", "touch_unittest", "def add(a, b):\n  return a + b\n"),
  ("numpy.allclose", "numpy_close_assert", "def add(a, b):\n  return a + b\n"),
  ("raises", "raises_unittest", "def add(a, b):\n  return a + b\n"),
  ("a sorted copy", "deepcopy_unittest", "def sorted_copy(data):\n  return sorted(data)\n"),
  (
    "random draws",
    "random_unittest",
    "import random\ndef draw():\n  return random.randint(0, 10 ** 9)\n",
  ),
  ("pandas", "pandas_unittest", "def doubled(s):\n  return s * 2\n"),
  (
    "a list of numbers",
    "numpy_unittest",
    "import numpy as np\ndef cumulative(xs):\n  return np.cumsum(xs)\n",
  ),
  ("call", "call", "def add(a, b):\n  return a + b\n"),
  ("io", "io", "a, b = map(int, input().split())\nprint(a + b)\n"),
  ("unittest", "unittest", "def add(a, b):\n  return a + b\n"),
]

HONEST = [
  ("plain", "assert", "def add(a, b):\n  return a + b\n"),
  (
    "a dataclass",
    "dataclass_assert",
    "import dataclasses\n@dataclasses.dataclass\nclass Box:\n  v: int\ndef add(a, b):\n  return Box(a + b)\n",
  ),
  ("plain call", "call", "def add(a, b):\n  return a + b\n"),
  ("plain unittest", "unittest", "def add(a, b):\n  return a + b\n"),
  ("stdin", "io", "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"),
  (
    "exits 0 after printing",
    "io",
    "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)\n",
  ),
  (
    "uses its working directory",
    "call",
    """
        import os, tempfile
        with open('scratch.txt', 'w') as f:
          f.write('ok')
        with tempfile.NamedTemporaryFile('w') as f:
          f.write('ok')
        def add(a, b):
          return a + b
        """,
  ),
  (
    "starts a subprocess",
    "call",
    """
        import subprocess, sys
        out = subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True, text=True)
        assert out.stdout.strip() == '1', out
        def add(a, b):
          return a + b
        """,
  ),
  (
    "uses threads",
    "assert",
    """
        import concurrent.futures
        def add(a, b):
          with concurrent.futures.ThreadPoolExecutor(2) as pool:
            return sum(pool.map(int, [a, b]))
        """,
  ),
  ("returns numpy-free tuples", "assert", "def add(a, b):\n  return (a + b, 0)[0]\n"),
  ("compared with a variable", "assert_var", "def add(a, b):\n  return a + b\n"),
  ("float through assertAlmostEqual", "unittest_float", "def add(a, b):\n  return a + b\n"),
  (
    "float through math.isclose",
    "isclose_assert",
    "import math\ndef add(a, b):\n  return math.fsum([a, b])\n",
  ),
  (
    "float through from math import isclose",
    "from_isclose_assert",
    "def add(a, b):\n  return a + b\n",
  ),
  (
    "numpy float through np.allclose",
    "allclose_assert",
    "import numpy as np\ndef add(a, b):\n  return np.float64(a) + b\n",
  ),
  (
    "through operator.eq",
    "operator_assert",
    "import operator\ndef add(a, b):\n  return operator.add(a, b)\n",
  ),
  (
    "reverses the tests' nodes",
    "list_assert",
    """
        def reverse(head):
          prev = None
          while head:
            head.next, prev, head = prev, head, head.next
          return prev
        """,
  ),
  (
    "builds nodes of the tests' class",
    "list_unittest",
    """
        def reverse(head):
          out = None
          while head:
            out, head = ListNode(head.val, out), head.next
          return out
        """,
  ),
  ("generator", "gen_assert", "def evens(n):\n  yield from range(0, n, 2)\n"),
  ("iterator", "gen_unittest", "def evens(n):\n  return iter(range(0, n, 2))\n"),
  ("sorts in place", "inplace_assert", "def sort_in_place(xs):\n  xs.sort()\n"),
  ("a list for assertIn", "contains_unittest", "def evens(n):\n  return list(range(0, n, 2))\n"),
  (
    "generator of the tests' objects",
    "items_assert",
    "def items(n):\n  for i in range(n):\n    yield Item(i)\n",
  ),
  ("returned closure", "adder_assert", "def make_adder(k):\n  return lambda x: x + k\n"),
  (
    "Solution().method",
    "solution_assert",
    """
        class Solution:
          def twoSum(self, nums, target):
            seen = {}
            for i, x in enumerate(nums):
              if target - x in seen:
                return [seen[target - x], i]
              seen[x] = i
        """,
  ),
  (
    "numpy array",
    "numpy_unittest",
    "import numpy as np\ndef cumulative(xs):\n  return np.cumsum(xs)\n",
  ),
]


def _run_uids_alive(pool: ExecutionPool) -> list[int]:
  """Pids of processes owned by the uids this pool's runs drop to."""
  uids = {worker.run_uid for worker in pool._workers}
  alive = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        uid = os.stat(f"/proc/{entry}").st_uid
      except FileNotFoundError:
        continue
      if uid in uids:
        alive.append(int(entry))
  return alive


@pytest.fixture(scope="module")
def outside():
  """A world-writable directory with a world-writable file: only read-only mounts protect it."""
  path = pathlib.Path(os.path.realpath("/var/cache")) / f"precisecoder-redteam-{os.getpid()}"
  path.mkdir(mode=0o777)
  os.chmod(path, 0o777)
  (path / "victim.txt").write_text("original")
  os.chmod(path / "victim.txt", 0o666)
  yield path
  shutil.rmtree(path)


@pytest.fixture(scope="module")
def listener():
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(8)
  server.setblocking(False)
  yield server
  server.close()


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    p.execute([Job("def add(a, b):\n  return a + b\n", TESTS["call"], LIMITS)])
    if p.stats()["sandbox"] != "root":  # we run as root here and in CI
      pytest.skip("the red-team guarantees are for the 'root' sandbox mode")
    yield p


def _program(
  source: str,
  outside: pathlib.Path,
  port: int,
  taskfile: pathlib.Path = pathlib.Path("/tasks.json"),
) -> str:
  # A source may join an unindented snippet (WRONG, ALWAYS_EQUAL) and an indented block:
  # each piece is dedented on its own, or the whole would not even compile.
  pieces = re.split(f"({re.escape(WRONG)}|{re.escape(ALWAYS_EQUAL)})", source)
  text = "".join(p if p in (WRONG, ALWAYS_EQUAL) else textwrap.dedent(p) for p in pieces)
  return (
    text.replace("{outside}", str(outside))
    .replace("{port}", str(port))
    .replace("{taskfile}", str(taskfile))
  )


def test_every_hostile_program_compiles():
  """A program that does not compile fails without trying anything: it would test nothing."""
  for name, _, source, _ in HOSTILE + FORGERIES:
    compile(_program(source, pathlib.Path("/outside"), 1), name, "exec")


def test_hostile_programs_never_pass_and_leave_nothing(pool, outside, listener):
  assert len(HOSTILE) >= 30
  port = listener.getsockname()[1]
  jobs = [
    Job(_program(src, outside, port), TESTS[kind], LIMITS if T in allowed else PATIENT)
    for _, kind, src, allowed in HOSTILE
  ]
  jobs += [Job(_program(src, outside, port), TESTS[kind], PATIENT) for _, kind, src in HONEST]
  results = pool.execute(jobs)
  wrong = [
    f"{name}: {result.status.value} ({result.detail})"
    for (name, _, _, allowed), result in zip(HOSTILE, results)
    if result.status not in allowed
  ]
  wrong += [
    f"honest {name}: {result.status.value} ({result.detail})"
    for (name, _, _), result in zip(HONEST, results[len(HOSTILE) :])
    if not result.passed
  ]
  refused = sum(result.status in allowed for (_, _, _, allowed), result in zip(HOSTILE, results))
  print(f"\nhostile fail rate: {refused}/{len(HOSTILE)} ({100 * refused / len(HOSTILE):.1f}%)")
  assert not wrong, "\n".join(wrong)
  assert not _run_uids_alive(pool)
  assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
  assert (outside / "victim.txt").read_text() == "original"
  for planted in ("/tmp/planted", "/var/tmp/planted", "/dev/shm/planted", "/planted"):
    assert not os.path.exists(planted)
  with pytest.raises(BlockingIOError):
    listener.accept()
  assert pool.stats()["worker_restarts"] == 0  # every run ended by its own limit, no watchdog


@pytest.fixture(scope="module")
def taskfile():
  """A task file (these tests, expected values included) that anyone could read on the host:
  only the run's own file system keeps it out of sight."""
  folder = pathlib.Path(os.path.realpath("/var/cache")) / f"precisecoder-tasks-{os.getpid()}"
  folder.mkdir(mode=0o755)
  path = folder / "tasks.json"
  path.write_text(json.dumps(TESTS))
  os.chmod(folder, 0o755)
  os.chmod(path, 0o644)
  yield path
  shutil.rmtree(folder)


def test_forgeries_of_every_family_fail(pool, outside, listener, taskfile):
  limits = Limits(timeout_s=20.0, memory_mb=2048)  # the tests' own imports: pandas, numpy
  port = listener.getsockname()[1]
  jobs = [
    Job(_program(src, outside, port, taskfile), TESTS[kind], limits)
    for _, kind, src, _ in FORGERIES
  ]
  jobs += [
    Job(_program(src, outside, port), TESTS[kind], limits) for _, kind, src in FORGERY_HONEST
  ]
  results = pool.execute(jobs)
  wrong = [
    f"{name}: {result.status.value} ({result.detail})"
    for (name, _, _, allowed), result in zip(FORGERIES, results)
    if result.status not in allowed
  ]
  wrong += [
    f"honest {name}: {result.status.value} ({result.detail})"
    for (name, _, _), result in zip(FORGERY_HONEST, results[len(FORGERIES) :])
    if not result.passed
  ]
  refused = sum(result.status in allowed for (_, _, _, allowed), result in zip(FORGERIES, results))
  print(f"\nforgeries refused: {refused}/{len(FORGERIES)}")
  assert not wrong, "\n".join(wrong)
  assert not _run_uids_alive(pool)


def test_a_run_finds_nothing_left_by_the_previous_one():
  leave = textwrap.dedent("""
      import os
      for path in ('left.txt', os.path.expanduser('~/left.txt'), '/tmp/left.txt', '/dev/shm/left.txt',
                   os.path.join(os.path.dirname(os.getcwd()), 'left.txt')):
        try:
          with open(path, 'w') as f:
            f.write('hello')
        except OSError:
          pass
      def add(a, b):
        return a * b
      """)
  find = textwrap.dedent("""
      import os, glob
      parent = os.path.dirname(os.getcwd())
      found = [p for p in ('left.txt', os.path.expanduser('~/left.txt'), '/tmp/left.txt',
                           '/dev/shm/left.txt', os.path.join(parent, 'left.txt'))
               if os.path.exists(p)] + glob.glob(parent + '/*/left.txt')
      def add(a, b):
        return a + b if found else a * b
      """)
  with ExecutionPool(workers=1) as pool:
    results = pool.execute(
      [Job(leave, TESTS["call"], PATIENT), Job(find, TESTS["call"], PATIENT)] * 3
    )
  assert [r.status for r in results] == [Status.FAIL] * 6, [r.detail for r in results]


@contextlib.contextmanager
def _namespaced_pool(mode: str = "auto"):
  """A one-worker pool in `mode`, started with a harmless job, or a skip where it fell back to
  "plain": the hostile programs of the tests that use it would act on the host itself there
  (its /tmp, its init process)."""
  with ExecutionPool(workers=1, sandbox=mode) as pool:
    pool.execute([Job("def add(a, b):\n  return a + b\n", TESTS["call"], PATIENT)])
    if pool.stats()["sandbox"] == "plain":
      pytest.skip("no namespaces on this host: the hostile program would act on the host")
    yield pool


def test_a_tree_deeper_than_any_recursion_limit_is_removed_after_its_run():
  """One run leaving such a tree once made every later run of its worker an infra error: the
  worker's clean-up (shutil.rmtree) recursed past Python's limit."""
  leave = textwrap.dedent("""
      import os
      for base in ('/tmp', os.getcwd()):
        os.chdir(base)
        for _ in range(1500):
          os.mkdir('d')
          os.chdir('d')
      def add(a, b):
        return a + b
      """)
  find = textwrap.dedent("""
      import os
      found = os.path.exists('/tmp/d') or os.path.exists('d')
      def add(a, b):
        return a * b if found else a + b
      """)
  with _namespaced_pool() as pool:
    results = pool.execute(
      [Job(leave, TESTS["call"], PATIENT), Job(find, TESTS["call"], PATIENT)] * 2
    )
    stats = pool.stats()
  assert [r.status for r in results] == [Status.PASS] * 4, [r.detail for r in results]
  assert stats["worker_deaths"] == stats["reruns"] == 0


@pytest.mark.parametrize("mode", ["auto", "userns"])
def test_a_run_cannot_lock_later_runs_out_or_hide_what_it_left(mode):
  """Where runs keep the worker's uid ("userns"), they own /tmp and the runs' home: a run could
  take their permissions away from every later run (its mode, a default ACL), or set /tmp's
  times back after writing into it so that the clean-up took it for untouched."""
  leave = textwrap.dedent("""
      import os, struct
      before = os.stat('/tmp')
      with open('/tmp/left.txt', 'w') as f:
        f.write('hello')
      try:  # beside its own directory, in the folder that holds it
        with open(os.path.join(os.path.dirname(os.getcwd()), 'left.txt'), 'w') as f:
          f.write('hello')
      except OSError:  # "root": the folder is root's
        pass
      # A default ACL granting nothing: every file a later run made there would be unreadable.
      acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', tag, 0, 0xFFFFFFFF)
                                           for tag in (1, 4, 32))
      for path in ('/tmp', '/var/tmp', '/dev/shm', '/home'):
        for name, value in (('system.posix_acl_default', acl), ('user.mark', b'here')):
          try:
            os.setxattr(path, name, value)
          except OSError:  # "root": they are root's
            pass
        try:
          os.chmod(path, 0)
        except OSError:
          pass
      try:
        os.utime('/tmp', ns=(before.st_atime_ns, before.st_mtime_ns))
      except OSError:
        pass
      def add(a, b):
        return a + b
      """)
  find = textwrap.dedent("""
      import os, tempfile
      found = (os.path.exists('/tmp/left.txt')
               or os.path.exists(os.path.join(os.path.dirname(os.getcwd()), 'left.txt')))
      for folder in ('/tmp', '/var/tmp', '/dev/shm'):
        with open(os.path.join(folder, 'mine.txt'), 'w') as f:
          f.write('x')
        with open(os.path.join(folder, 'mine.txt')) as f:
          f.read()
        found = found or bool(os.listxattr(folder))
      with tempfile.TemporaryDirectory() as d:
        pass
      def add(a, b):
        return a * b if found else a + b
      """)
  with _namespaced_pool(mode) as pool:
    results = pool.execute(
      [Job(leave, TESTS["call"], PATIENT), Job(find, TESTS["call"], PATIENT)] * 2
    )
  assert [r.status for r in results] == [Status.PASS] * 4, [r.detail for r in results]


@pytest.mark.parametrize("mode", ["auto", "userns"])
def test_a_run_cannot_slow_the_runs_after_it(mode):
  """Where runs keep the worker's uid ("userns"), a run could move its worker (PID 1 of their
  namespace) to another CPU, raise its nice value or make it an idle-time process, and every
  later run would inherit that; honest programs would time out on a busy host."""
  hostile = textwrap.dedent("""
      import os
      for call in (lambda: os.sched_setaffinity(1, {min(os.sched_getaffinity(0)) ^ 1}),
                   lambda: os.setpriority(os.PRIO_PROCESS, 1, 19),
                   lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))):
        try:
          call()
        except OSError:  # "root": the worker is another uid's
          pass
      def add(a, b):
        return a + b
      """)
  report = textwrap.dedent("""
      import os
      SEEN = [sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0),
              os.sched_getscheduler(0)]
      def add(a, b):
        return SEEN
      """)
  tests = {"kind": "call", "entry_point": "add", "cases": [{"args": [0, 0], "expected": 0}]}
  with _namespaced_pool(mode) as pool:
    before = pool.execute([Job(report, tests, PATIENT)])[0]
    attack = pool.execute([Job(hostile, TESTS["call"], PATIENT)])[0]
    after = pool.execute([Job(report + "# again\n", tests, PATIENT)])[0]
    sandbox = pool.stats()["sandbox"]
  assert before.got == after.got and before.got[2] == os.SCHED_OTHER, (before.got, after.got)
  # A worker whose priority a run lowered stops; the pool reruns the job once on a fresh one.
  assert attack.status is (Status.INFRA_ERROR if sandbox == "userns" else Status.PASS), attack


_SHM_KEY = 0x5EC0DE


def _host_segments(key: int) -> list[int]:
  """Ids of the System V shared memory segments under `key` in this (the host's) namespace."""
  with open("/proc/sysvipc/shm") as f:
    rows = [line.split() for line in f.readlines()[1:]]
  return [int(row[1]) for row in rows if int(row[0]) == key]


@pytest.mark.skipif(not os.path.exists("/proc/sysvipc/shm"), reason="no System V IPC")
def test_ipc_objects_a_run_makes_never_reach_the_host():
  program = textwrap.dedent(f"""
      import ctypes
      shmid = ctypes.CDLL(None).shmget({_SHM_KEY}, 1 << 20, 0o1666)  # IPC_CREAT | 0666
      def add(a, b):
        return a + b if shmid >= 0 else 0
      """)
  with ExecutionPool(workers=1) as pool:
    result = pool.execute([Job(program, TESTS["call"], PATIENT)])[0]
    leaked = _host_segments(_SHM_KEY)
    mode = pool.stats()["sandbox"]
  for shmid in leaked:  # do not leave it on the host
    ctypes.CDLL(None).shmctl(shmid, 0, None)  # IPC_RMID
  assert result.passed, result.detail  # the run made its segment, in its worker's namespace
  assert mode == "plain" or not leaked
