"""Split runs (docs/sandbox.md, "Split runs"): the tests in one process, the program in another.

Honest programs whose tests use mocks, the program's module name, seeded generators, in-place
mutation, pyplot's figures and the program's classes pass; hostile programs of the families that
forged passes where tests and program share an interpreter (issue 39), and programs aimed at the
split design itself (the decoder, references, the mock bridge, the channel, the test process),
never pass. Every hostile program returns wrong answers: a pass would be a forgery.
"""

from __future__ import annotations

import random
import textwrap

import numpy as np
import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status
from precisecoder.execution.test_side import split_tests

LIMITS = Limits(timeout_s=20.0, memory_mb=1024)


def _d(text: str) -> str:
  return textwrap.dedent(text).lstrip("\n")


def _unittest(body: str, prelude: str = "") -> dict:
  return {
    "kind": "unittest",
    "code": "import unittest\n"
    + _d(prelude)
    + "class TestTask(unittest.TestCase):\n"
    + textwrap.indent(_d(body), "  "),
  }


ADD_UNITTEST = _unittest("""
    def test_small(self):
      self.assertEqual(add(2, 3), 5)
    def test_large(self):
      self.assertEqual(add(40, 2), 42)
    """)
ADD_ASSERT = {
  "kind": "assert",
  "code": "def check(candidate):\n  assert candidate(2, 3) == 5\n"
  "  assert candidate(40, 2) == 42\ncheck(add)\n",
}

HONEST = [
  (
    "a mock the program calls",
    _d("""
        import json, urllib.request
        def fetch(url):
          with urllib.request.urlopen(url) as response:
            return json.loads(response.read())['value'] * 2
        """),
    _unittest(
      """
        @patch('urllib.request.urlopen')
        def test_fetch(self, urlopen):
          urlopen.return_value.__enter__.return_value.read.return_value = b'{"value": 21}'
          self.assertEqual(fetch('http://x'), 42)
          urlopen.assert_called_once_with('http://x')
        """,
      "from unittest.mock import patch\n",
    ),
  ),
  (
    "a patch of the program's own module",
    _d("""
        def helper():
          return 1
        def total():
          return helper() + 1
        """),
    _unittest(
      """
        def test_total(self):
          with patch(__name__ + '.helper', return_value=41):
            self.assertEqual(total(), 42)
          self.assertEqual(total(), 2)
        """,
      "from unittest.mock import patch\n",
    ),
  ),
  (
    "seeded generators",
    _d("""
        import random
        import numpy as np
        def draw():
          return random.randint(0, 10 ** 6), float(np.random.rand())
        """),
    _unittest(
      """
        def test_draw(self):
          random.seed(7); np.random.seed(7)
          got = draw()
          random.seed(7); np.random.seed(7)
          self.assertEqual(got, (random.randint(0, 10 ** 6), float(np.random.rand())))
        """,
      "import random\nimport numpy as np\n",
    ),
  ),
  (
    "in-place mutation",
    "def sort_in_place(xs):\n  xs.sort()\n",
    _unittest("""
        def test_sort(self):
          xs = [3, 1, 2]
          self.assertIsNone(sort_in_place(xs))
          self.assertEqual(xs, [1, 2, 3])
        """),
  ),
  (
    "pyplot's figures",
    _d("""
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        def draw(xs):
          fig, ax = plt.subplots()
          ax.plot(xs)
          ax.set_title('xs')
          return ax
        """),
    _unittest(
      """
        def test_draw(self):
          ax = draw([1, 2, 3])
          self.assertIsInstance(ax, plt.Axes)
          self.assertEqual(ax.get_title(), 'xs')
          self.assertEqual(list(ax.lines[0].get_ydata()), [1, 2, 3])
          self.assertEqual(plt.gca().get_title(), 'xs')
        """,
      "import matplotlib.pyplot as plt\n",
    ),
  ),
  (
    "the program's classes and generators",
    _d("""
        import dataclasses
        @dataclasses.dataclass(frozen=True)
        class Pt:
          x: int
          y: int
        def mid(a, b):
          \'\'\'The middle point.\'\'\'
          return Pt((a.x + b.x) // 2, (a.y + b.y) // 2)
        def evens(n):
          yield from range(0, n, 2)
        """),
    _unittest(
      """
        def test_mid(self):
          self.assertEqual(mid(Pt(0, 0), Pt(2, 2)), Pt(1, 1))
          self.assertEqual(list(evens(5)), [0, 2, 4])
          self.assertEqual(list(inspect.signature(mid).parameters), ['a', 'b'])
          self.assertEqual((mid.__name__, mid.__doc__), ('mid', 'The middle point.'))
        """,
      "import inspect\n",
    ),
  ),
  (
    "object.__setattr__ on the program's object, and issubclass of its classes",
    _d("""
        import json
        class Lazy:
          def __init__(self):
            object.__setattr__(self, '_ready', False)
          def __setattr__(self, name, value):
            raise AttributeError('read-only')
          def value(self):
            return 42 if object.__getattribute__(self, '_ready') else None
        lazy = Lazy()
        class Base:
          pass
        def make():
          class Made(Base, json.JSONEncoder):
            pass
          return Made
        """),
    _unittest("""
        def test_lazy(self):
          import json
          object.__setattr__(lazy, '_ready', True)
          self.assertEqual(lazy.value(), 42)
          made = make()
          self.assertTrue(issubclass(made, Base))
          self.assertTrue(issubclass(made, json.JSONEncoder))
          self.assertFalse(issubclass(made, int))
          self.assertFalse(issubclass(Base, made))
        """),
  ),
  (
    "a library set up by the tests' top level through a name the program imported",
    "import mimetypes\ndef kind(name):\n  return mimetypes.guess_type(name)[0]\n",
    _unittest(
      """
        def test_kind(self):
          self.assertEqual(kind('a.pcx1'), 'application/x-pc-test')
        """,
      "mimetypes.add_type('application/x-pc-test', '.pcx1')\n",
    ),
  ),
  (
    "a set of strings, in the order the tests' own set of them iterates (one hash seed)",
    "def uniq(words):\n  return list(set(words))\n",
    _unittest("""
        def test_uniq(self):
          words = ['apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape', 'kiwi']
          self.assertEqual(uniq(words), list(set(words)))
        """),
  ),
  (
    "a library set up by the tests' top level through its own import (BigCodeBench/76)",
    "import mimetypes\ndef kind(name):\n  return mimetypes.guess_type(name)[0]\n",
    _unittest(
      """
        def test_kind(self):
          self.assertEqual(kind('a.pcx2'), 'application/x-pc-own')
        """,
      "import mimetypes as types_of\n"
      "if True:\n  types_of.add_type('application/x-pc-own', '.pcx2')\n",
    ),
  ),
  (
    "library context the program's context manager sets, read inside the tests' with",
    "import numpy as np\ndef compact():\n  return np.printoptions(precision=2)\n",
    _unittest(
      """
        def test_compact(self):
          with compact():
            self.assertEqual(str(np.array([1 / 3])), '[0.33]')
          self.assertEqual(str(np.array([1 / 3])), '[0.33333333]')
        """,
      "import numpy as np\n",
    ),
  ),
  (
    "the tests draw on after the program seeded the generators and drew (BigCodeBench/93)",
    _d("""
        import random
        import numpy as np
        def make():
          np.random.seed(42)
          random.seed('seven')
          return float(np.random.rand()), random.random()
        """),
    _unittest(
      """
        def test_make(self):
          make()
          after = (float(np.random.rand()), random.random())
          np.random.seed(42)
          random.seed('seven')
          np.random.rand()
          random.random()
          self.assertEqual(after, (float(np.random.rand()), random.random()))
        """,
      "import random\nimport numpy as np\n",
    ),
  ),
  (
    "the program's own exception classes, raised and returned",
    _d("""
        class BadInput(ValueError):
          pass
        class Empty(BadInput):
          pass
        def parse(text):
          if not text:
            raise Empty('nothing')
          if not text.isdigit():
            raise BadInput(text)
          return int(text)
        def problem():
          return BadInput('kept')
        """),
    _unittest("""
        def test_parse(self):
          with self.assertRaises(BadInput):
            parse('x')
          with self.assertRaisesRegex(BadInput, 'nothing'):
            parse('')
          with self.assertRaises(ValueError):
            parse('y')
          try:
            parse('')
          except Empty as e:
            self.assertIsInstance(e, BadInput)
          self.assertTrue(issubclass(Empty, BadInput) and not issubclass(BadInput, Empty))
          self.assertIsInstance(problem(), BadInput)
          self.assertEqual(parse('7'), 7)
        """),
  ),
  (
    "the tests' own standard streams and command line: redirect_stdout, sys.stdout, sys.argv",
    "import sys\ndef greet(name):\n  print('hello', name)\n"
    "def twice():\n  return int(input()) * 2\ndef flags():\n  return sys.argv[1:]\n",
    _unittest(
      """
        def test_streams(self):
          with contextlib.redirect_stdout(io.StringIO()) as out:
            greet('a')
          self.assertEqual(out.getvalue(), 'hello a\\n')
          real_out, real_in, real_argv = sys.stdout, sys.stdin, sys.argv
          sys.stdout, sys.stdin = io.StringIO(), io.StringIO('21\\n')
          sys.argv = ['program', '--loud']
          try:
            greet('b')
            doubled, given = twice(), flags()
          finally:
            printed, sys.stdout, sys.stdin = sys.stdout.getvalue(), real_out, real_in
            sys.argv = real_argv
          self.assertEqual((printed, doubled, given), ('hello b\\n', 42, ['--loud']))
        """,
      "import contextlib, io, sys\n",
    ),
  ),
  (
    "the program's logs, watched by the tests' assertLogs",
    _d("""
        import logging
        log = logging.getLogger('task.part')
        def work(n):
          log.warning('careful %d', n)
          logging.info('root info')
          log.debug('not watched')
          return n
        """),
    _unittest(
      """
        def test_logs(self):
          with self.assertLogs('task', level='WARNING') as caught:
            work(3)
          self.assertEqual(caught.output, ['WARNING:task.part:careful 3'])
          with self.assertLogs(level='INFO') as caught:
            work(4)
          self.assertIn('INFO:root:root info', caught.output)
          self.assertEqual(caught.records[0].getMessage(), 'careful 4')
          with self.assertNoLogs('task', level='ERROR'):
            work(5)
        """,
    ),
  ),
  (
    "the program's warnings, caught by the tests' assertWarns and catch_warnings",
    _d("""
        import warnings
        class Stale(DeprecationWarning):
          pass
        def old(n):
          warnings.warn('old %d' % n, Stale)
          return n
        """),
    _unittest(
      """
        def test_warns(self):
          with self.assertWarns(DeprecationWarning):
            old(1)
          with self.assertWarnsRegex(Stale, 'old 2'):
            old(2)
          with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            old(3)
          self.assertEqual([str(w.message) for w in caught], ['old 3'])
          with warnings.catch_warnings():
            warnings.simplefilter('error')
            with self.assertRaises(DeprecationWarning):
              old(4)
        """,
      "import warnings\n",
    ),
  ),
  (
    "the program's module-level state read after a call (a cache, a counter)",
    "cache = {}\ncount = 0\ndef square(x):\n  global count\n  count += 1\n"
    "  cache[x] = x * x\n  return cache[x]\n",
    _unittest("""
        def test_state(self):
          self.assertEqual(square(3), 9)
          self.assertEqual((cache, count), ({3: 9}, 1))
          square(4)
          self.assertEqual((sorted(cache), count), ([3, 4], 2))
        """),
  ),
  (
    "a SystemExit the tests expect",
    "import sys\ndef main(code):\n  sys.exit(code)\n",
    _unittest("""
        def test_exit(self):
          with self.assertRaises(SystemExit) as caught:
            main(3)
          self.assertEqual(caught.exception.code, 3)
        """),
  ),
  (
    "an exception the tests expect",
    "def parse(text):\n  return int(text)\n",
    _unittest("""
        def test_parse(self):
          with self.assertRaises(ValueError):
            parse('x')
        """),
  ),
]

WRONG_ADD = "def add(a, b):\n  return a - b\n"
RAISES_UNITTEST = _unittest("""
    def test_a_valid(self):
      self.assertEqual(root(9), 3)
    def test_b_negative(self):
      with self.assertRaises(Exception):
        root(-4)
    """)


def _hostile(
  name: str, body: str, tests: dict = ADD_UNITTEST, plain: bool = False
) -> tuple[str, str, dict, bool]:
  """A hostile program; `plain`: it forges a pass where the program and its tests share one
  interpreter (checked below, so that its failing split is not vacuous)."""
  return name, _d(body), tests, plain


def _spy(entry: str, answer: str) -> str:
  """F1 of the red team (issue 39): the program runs the tests itself, in its own process,
  against a spy entry point whose `__eq__` (or the program's own `assert_frame_equal`) records
  what it is compared with, then answers each real call with the value learned. Forked from the
  test process, it finds the compiled tests in the harness's plan; in one interpreter, beside it.
  `answer`: its wrong answer where it learned nothing."""
  return _d(f"""
        import sys, unittest
        _LEARNED = {{}}
        class _Spy:
          def __init__(self, key):
            self.key = key
          def __eq__(self, other):
            _LEARNED[self.key] = other
            return True
          __hash__ = object.__hash__
        def _spy(*args, **kwargs):
          return _Spy(repr((args, kwargs)))
        def _run_cases(space):
          for value in list(space.values()):
            if isinstance(value, type) and issubclass(value, unittest.TestCase):
              for name in sorted(n for n in dir(value) if n.startswith('test')):
                try:
                  case = value(name)
                  case.setUp()
                  getattr(case, name)()
                  case.tearDown()
                except BaseException:
                  pass
        def _learn():
          _LEARNED['learning'] = True
          restore = []
          try:
            import pandas.testing as pdt
            def record(left, right, *args, **kwargs):
              if isinstance(left, _Spy):
                _LEARNED[left.key] = right
            restore.append((pdt, pdt.assert_frame_equal))
            pdt.assert_frame_equal = record
          except ImportError:
            pass
          try:
            harness = sys.modules.get('precisecoder.execution.worker_side.harness')
            plan = getattr(harness, '_PLAN', None)
            if plan and plan[0].tests is not None:  # forked: the compiled tests are here
              space = {{'__builtins__': __builtins__, '{entry}': _spy, '__name__': 'spy',
                       '__precisecoder_expect__': lambda *a: None}}
              try:
                exec(plan[0].tests, space)
              except BaseException:
                pass
              _run_cases(space)
            else:  # one interpreter: the tests are beside the program
              space = sys.modules['__main__'].__dict__
              real = space.get('{entry}')
              space['{entry}'] = _spy
              try:
                if callable(space.get('check')):
                  try:
                    space['check'](_spy)
                  except BaseException:
                    pass
                _run_cases(space)
              finally:
                space['{entry}'] = real
          finally:
            for holder, original in restore:
              holder.assert_frame_equal = original
        def {entry}(data):
          if 'learning' not in _LEARNED:
            _learn()
          return _LEARNED.get(repr(((data,), {{}})), {answer})
        """)


SORT_UNITTEST = _unittest("""
    def test_small(self):
      data = [3, 1, 2]
      expected = [1, 2, 3]
      self.assertEqual(sort_list(data), expected)
    def test_more(self):
      data = [5, 4, 9, 1]
      expected = sorted(data)
      self.assertEqual(sort_list(data), expected)
    """)
SORT_ASSERT = {
  "kind": "assert",
  "code": _d("""
      def check(candidate):
        data = [3, 1, 2]
        expected = sorted(data)
        assert candidate(data) == expected
        data = [9, 7, 8, 1]
        expected = sorted(data, reverse=True)[::-1]
        assert candidate(data) == expected
      check(sort_list)
      """),
}
FRAME_UNITTEST = _unittest(
  """
    def test_doubled(self):
      df = pd.DataFrame({'a': [1, 2], 'b': [3.5, 4.0]})
      expected = pd.DataFrame({'a': [2, 4], 'b': [7.0, 8.0]})
      pd.testing.assert_frame_equal(task_func(df), expected)
    """,
  "import pandas as pd\n",
)


HOSTILE = [
  # Families of the third red team (issue 39).
  _hostile(
    "a library of the program's making through __builtins__",
    """
        import builtins, sys, types
        fake = types.ModuleType('math')
        fake.isclose = lambda *args, **kwargs: True
        real = builtins.__import__
        builtins.__import__ = lambda name, *a, **k: fake if name == 'math' else real(name, *a, **k)
        sys.modules['math'] = fake
        def add(a, b):
          return 0
        """,
    _unittest("""
        def test_add(self):
          import math
          self.assertTrue(math.isclose(add(2, 3), 5))
        """),
    plain=True,
  ),
  _hostile(
    "a hijacked __build_class__",
    """
        import builtins
        real = builtins.__build_class__
        def build(function, name, *bases, **kwargs):
          cls = real(function, name, *bases, **kwargs)
          for key in list(vars(cls)):
            if key.startswith('test'):
              setattr(cls, key, lambda self: None)
          return cls
        builtins.__build_class__ = build
        def add(a, b):
          return 0
        """,
    plain=True,
  ),
  _hostile(
    "the tests' helpers and classes rebound from the program",
    """
        import gc, sys, unittest
        unittest.TestCase.assertEqual = lambda self, *args, **kwargs: None
        def add(a, b):
          for obj in gc.get_objects():
            if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
              obj.assertEqual = lambda self, *args, **kwargs: None
          frame = sys._getframe(1)
          while frame is not None:
            frame.f_globals['check'] = lambda candidate: None
            frame = frame.f_back
          return 0
        """,
    plain=True,
  ),
  _hostile(
    "a lazily imported module planted where the program can write",
    """
        import os, sys
        for folder in (os.getcwd(), os.path.expanduser('~'), '/tmp'):
          try:
            with open(os.path.join(folder, 'statistics.py'), 'w') as f:
              f.write('def mean(values):\\n  return 0\\n')
          except OSError:
            pass
        def add(a, b):
          return 0
        """,
    _unittest("""
        def test_add(self):
          import statistics
          self.assertEqual(add(2, 3), statistics.mean([5, 5]))
        """),
  ),
  _hostile(
    "a decimal context and the regex cache",
    """
        import decimal, re
        decimal.getcontext().prec = 1
        re.purge()
        re._cache[(str, r'\\d+', 0)] = re.compile(r'.*')
        def add(a, b):
          return decimal.Decimal(1) / decimal.Decimal(3) if a == 1 else 'x'
        """,
    _unittest("""
        def test_add(self):
          import decimal, re
          self.assertEqual(add(1, 2), decimal.Decimal(1) / decimal.Decimal(3) * 1)
          self.assertTrue(re.fullmatch(r'\\d+', add(2, 3)))
        """),
    plain=True,
  ),
  _hostile(
    "a checked value spoiled after the call",
    """
        import threading, time
        def add(a, b):
          out = [0]
          def spoil():
            time.sleep(0.05)
            out[0] = a + b
          threading.Thread(target=spoil).start()
          return out
        """,
    _unittest("""
        def test_add(self):
          import time
          got = add(2, 3)
          time.sleep(0.3)
          self.assertEqual(got, [5])
        """),
    plain=True,
  ),
  _hostile(
    "right only with a test on the stack",
    """
        import sys
        def add(a, b):
          frame = sys._getframe(1)
          while frame is not None:
            if frame.f_code.co_filename == '<tests>' or frame.f_code.co_name.startswith('test'):
              return a + b
            frame = frame.f_back
          return 0
        """,
    plain=True,
  ),
  _hostile(
    "Unicode names folded to ASCII, and the channel's nonce found in memory",
    """
        import gc, os, re
        ｎｏｎｃｅｓ = set()
        for obj in gc.get_objects():
          if isinstance(obj, dict):
            for value in list(obj.values()):
              if isinstance(value, str) and re.fullmatch('[0-9a-f]{32}', value):
                ｎｏｎｃｅｓ.add(value)
        def add(a, b):
          for nonce in ｎｏｎｃｅｓ:
            for name in ('TestTask.test_small', 'TestTask.test_large'):
              record = '{"test": "%s", "outcome": "ok", "detail": "", "nonce": "%s"}\\n' % (
                  name, nonce)
              for fd in range(3, 64):
                try:
                  os.write(fd, record.encode())
                  os.write(fd, ('{"end": "unittest", "expects": 2, "nonce": "%s"}\\n'
                                % nonce).encode())
                except OSError:
                  pass
          return 0
        """,
  ),
  # Aimed at the split design.
  _hostile(
    "an object equal to everything",
    """
        class Anything:
          def __eq__(self, other):
            return True
          __hash__ = object.__hash__
        class int(Anything):
          pass
        def add(a, b):
          return int()
        """,
    plain=True,
  ),
  _hostile(
    "a decoder bomb: deep, then huge",
    """
        def add(a, b):
          if a == 2:
            value = 5
            for _ in range(100000):
              value = [value]
            return value
          return 'x' * (80 << 20)
        """,
  ),
  _hostile(
    "forged tags from the program's own encoder",
    """
        import sys
        def add(a, b):
          codec = sys.modules.get('precisecoder.execution.shared.codec')
          if codec is not None:
            for tree in ({'ex': ['SystemExit', {'t': []}]}, {'h': 1}, {'h': 2},
                         {'r': [1, 'class', ['builtins', 'int']]}):
              codec.Codec.tree = lambda self, value, depth=0, tree=tree: tree
          return 0
        """,
  ),
  _hostile(
    "the mock bridge: a recorded call erased",
    """
        import urllib.request
        def add(a, b):
          urllib.request.urlopen('http://x')
          for name in ('reset_mock', 'configure_mock'):
            try:
              getattr(urllib.request.urlopen, name)()
            except Exception:
              pass
          try:
            urllib.request.urlopen.called = False
          except Exception:
            pass
          return a + b
        """,
    _unittest(
      """
        @patch('urllib.request.urlopen')
        def test_add(self, urlopen):
          self.assertEqual(add(2, 3), 5)
          urlopen.assert_not_called()
        """,
      "from unittest.mock import patch\n",
    ),
    plain=True,
  ),
  _hostile(
    "a flood of forged frames on the socket",
    """
        import os, socket, struct, stat
        def add(a, b):
          for fd in range(3, 64):
            try:
              if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack('!I', 0xFFFFFFF0) + b'x' * 65536)
                os.write(fd, b'\\x00\\x00\\x00\\x05hello')
            except OSError:
              pass
          return 0
        """,
  ),
  _hostile(
    "the test process killed, stopped or interrupted",
    """
        import os, signal
        def add(a, b):
          parent = os.getppid()
          for sig in (signal.SIGINT, signal.SIGUSR1, signal.SIGKILL):
            try:
              os.kill(parent, sig)
            except OSError:
              pass
          return 0
        """,
  ),
  _hostile(
    "the test process's memory and fds through /proc",
    """
        import os
        def add(a, b):
          parent = os.getppid()
          for path in (f'/proc/{parent}/mem', f'/proc/{parent}/fd/3'):
            try:
              fd = os.open(path, os.O_RDWR)
              os.write(fd, b'{"end": "unittest"}\\n')
            except OSError:
              pass
          return 0
        """,
  ),
  _hostile(
    "a builtin's name shadowed, past the program process's own check",
    """
        import builtins
        def round(x, n=None):
          return 5
        del builtins.round  # the program's process would then send its round as a name
        def add(a, b):
          return 0.25
        """,
    _unittest("""
        def test_add(self):
          self.assertEqual(round(add(2, 3)), 5)
        """),
    plain=True,
  ),
  # The decoder and references: objects that lie, and what they claim to be.
  _hostile(
    "a class that claims to be int and equals everything",
    """
        class Liar:
          def __eq__(self, other):
            return True
          def __ne__(self, other):
            return False
          __hash__ = object.__hash__
          def __int__(self):
            return 0
        Liar.__module__, Liar.__qualname__, Liar.__name__ = 'builtins', 'int', 'int'
        def add(a, b):
          return Liar()
        """,
    _unittest("""
        def test_add(self):
          self.assertEqual(add(2, 3), int('5'))
          self.assertEqual(int('42'), add(40, 2))
        """),
    plain=True,
  ),
  _hostile(
    "an object that lies on every comparison and every arithmetic",
    """
        class Liar:
          def __eq__(self, other):
            return True
          def __ne__(self, other):
            return False
          __le__ = __ge__ = __eq__
          __lt__ = __gt__ = __ne__
          __hash__ = object.__hash__
          def __sub__(self, other):
            return 0
          __rsub__ = __sub__
          def __iter__(self):
            return iter([])
        def add(a, b):
          return Liar()
        """,
    _unittest("""
        def test_ways(self):
          self.assertIn(add(40, 2), [42])
          self.assertAlmostEqual(add(1, 1), 2)
          self.assertGreaterEqual(add(2, 2), 4)
          self.assertLessEqual(add(2, 2), 4)
          self.assertTrue(add(2, 3) == 5 and not add(2, 3) != 5)
          self.assertEqual(sorted([add(2, 3), 5]), [5, 5])
        """),
    plain=True,
  ),
  _hostile(
    "an object that claims numpy.ndarray and equals any array",
    """
        import numpy as np
        class Anything:
          def __eq__(self, other):
            return True
          __hash__ = object.__hash__
        class Fake:
          shape = (1,)
          def __eq__(self, other):
            return np.array([True])
          __hash__ = object.__hash__
          def __array__(self, dtype=None, copy=None):
            array = np.empty(1, dtype=object)
            array[0] = Anything()
            return array
          def __len__(self):
            return 1
          def __getitem__(self, i):
            return Anything()
        Fake.__module__, Fake.__qualname__, Fake.__name__ = 'numpy', 'ndarray', 'ndarray'
        def add(a, b):
          return Fake()
        """,
    _unittest(
      """
        def test_add(self):
          got = add(np.array([2]), np.array([3]))
          self.assertTrue((got == np.array([5])).all())
          self.assertTrue(np.array_equal(got, np.array([5])))
        """,
      "import numpy as np\n",
    ),
    plain=True,
  ),
  _hostile(
    "a cycle, and twenty thousand references",
    """
        class Thing:
          pass
        def add(a, b):
          if a == 2:
            loop = []
            loop.append(loop)
            return loop
          return [Thing() for _ in range(20000)]
        """,
  ),
  _hostile(
    "a result that decodes to far more than its bytes",
    """
        def add(a, b):
          return [0] * 2_000_000
        """,
    _unittest("""
        def test_add(self):
          self.assertTrue(add(2, 3) == sum([2, 3]))
        """),
  ),
  # The mock bridge.
  _hostile(
    "a mock's record compared with an object equal to everything",
    """
        import urllib.request
        class Anything:
          def __eq__(self, other):
            return True
          __hash__ = object.__hash__
        def add(a, b):
          urllib.request.urlopen(Anything())
          return Anything()
        """,
    _unittest(
      """
        @patch('urllib.request.urlopen')
        def test_add(self, urlopen):
          add(2, 3)
          urlopen.assert_called_once_with('http://5')
        """,
      "from unittest.mock import patch\n",
    ),
    plain=True,
  ),
  _hostile(
    "a mock's counters, call lists and children reached by other names",
    """
        import urllib.request
        def add(a, b):
          mock = urllib.request.urlopen
          mock('http://x')
          for name in ('call_count', 'called', 'call_args', 'side_effect', 'return_value'):
            try:
              setattr(mock, name, 0 if name == 'call_count' else None)
            except Exception:
              pass
          for name in ('call_args_list', 'mock_calls', 'method_calls', '_mock_children',
                       '_mock_call_args_list', '_mock_mock_calls'):
            try:
              getattr(mock, name).clear()
            except Exception:
              pass
          return a + b
        """,
    _unittest(
      """
        @patch('urllib.request.urlopen')
        def test_add(self, urlopen):
          self.assertEqual(add(2, 3), 5)
          urlopen.assert_not_called()
        """,
      "from unittest.mock import patch\n",
    ),
    plain=True,
  ),
  _hostile(
    "a callback of the tests reached for its globals and code",
    """
        def apply(f, xs):
          reaches = (lambda: f.__globals__, lambda: getattr(f, '__globals__'),
                     lambda: f.__code__.co_consts, lambda: f.__closure__)
          for reach in reaches:
            try:
              found = reach()
              found['unittest'].TestCase.assertEqual = lambda *args, **kwargs: None
            except Exception:
              pass
          return []
        """,
    _unittest("""
        def test_apply(self):
          got = apply(lambda x: x + 1, [1, 2])
          self.assertEqual(got, [2, 3])
        """),
    plain=True,
  ),
  _hostile(
    "the tests' library context set by the program's with, read after it",
    """
        import numpy as np
        class Context:
          def __enter__(self):
            np.set_printoptions(formatter={'int': lambda x: '5'})
            return self
          def __exit__(self, *exc_info):
            return False
        def add(a, b):
          return 0
        def context():
          return Context()
        """,
    _unittest(
      """
        def test_add(self):
          with context():
            pass
          self.assertEqual(str(np.array([add(2, 3)])), '[5]')
        """,
      "import numpy as np\n",
    ),
    plain=True,
  ),
  _hostile(
    "the generator's state chosen, so the tests draw the inputs the program is right on",
    """
        import random
        def _small_seed():
          for seed in range(10 ** 7):
            random.seed(seed)
            if random.randint(0, 10 ** 6) < 10:
              return seed
        SEED = _small_seed()
        def double(x):
          random.Random.seed(random._inst, SEED)  # past a wrapper the harness may put on seed
          return 2 * x if x < 10 else 0
        """,
    _unittest(
      """
        def test_double(self):
          random.seed(0)
          self.assertEqual(double(0), 0)
          for _ in range(20):
            x = random.randint(0, 10 ** 6)
            self.assertEqual(double(x), 2 * x)
        """,
      "import random\n",
    ),
    plain=True,
  ),
  _hostile(
    "the generator's state set, so the tests draw the inputs the program is right on",
    """
        import random
        def _small_state():
          for seed in range(10 ** 7):
            generator = random.Random(seed)
            state = generator.getstate()
            if generator.randint(0, 10 ** 6) < 10:
              return state
        STATE = _small_state()
        def double(x):
          random.setstate(STATE)
          return 2 * x if x < 10 else 0
        """,
    _unittest(
      """
        def test_double(self):
          random.seed(0)
          self.assertEqual(double(0), 0)
          for _ in range(20):
            x = random.randint(0, 10 ** 6)
            self.assertEqual(double(x), 2 * x)
        """,
      "import random\n",
    ),
    plain=True,
  ),
  # The program's process dying or exiting where one interpreter would have died with it.
  _hostile(
    "sys.exit taken for the error a test expects",
    """
        import sys
        def root(n):
          if n < 0:
            sys.exit(1)
          return int(n ** 0.5)
        """,
    RAISES_UNITTEST,
  ),
  _hostile(
    "a crash (a segmentation fault) taken for the error a test expects",
    """
        import ctypes
        def root(n):
          return int(n ** 0.5) if n >= 0 else ctypes.string_at(0)
        """,
    RAISES_UNITTEST,
  ),
  _hostile(
    "the program's process gone, and the tests swallowing what that raised",
    """
        import os
        def root(n):
          if n < 0:
            os._exit(0)
          return int(n ** 0.5)
        """,
    _unittest("""
        def test_a_valid(self):
          self.assertEqual(root(9), 3)
        def test_b_negative(self):
          try:
            root(-4)
          except BaseException:
            return
          self.fail('no error')
        """),
  ),
  # The channel and the test's outcome.
  _hostile(
    "the program skips the tests",
    """
        import unittest
        def add(a, b):
          raise unittest.SkipTest('not today')
        """,
    plain=True,
  ),
  _hostile(
    "a forged error frame that skips the test, then the channel closed",
    """
        import json, os, socket, stat, struct
        def add(a, b):
          frame = json.dumps({'t': ['e', {'l': [{'l': ['unittest.case', 'SkipTest']}]},
                                    {'t': ['skipped']}, None]}).encode()
          for fd in range(3, 64):
            try:
              if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack('!I', len(frame)) + frame)
                os.close(fd)
            except OSError:
              pass
          os._exit(0)
        """,
  ),
  # F1 (issue 39): the tests run against a spy in the program's own process: every check whose
  # expected value the tests compute. Its process never held the tests (`program_boot`).
  _hostile(
    "the tests run against a spy [unittest]", _spy("sort_list", "data"), SORT_UNITTEST, True
  ),
  _hostile("the tests run against a spy [assert]", _spy("sort_list", "data"), SORT_ASSERT, True),
  _hostile(
    "the tests run against a spy [pandas assert_frame_equal]",
    _spy("task_func", "data"),
    FRAME_UNITTEST,
    True,
  ),
]


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:  # split: the default
    yield p


def test_honest_programs_pass_split(pool):
  results = pool.execute([Job(program, tests, LIMITS) for _, program, tests in HONEST])
  failed = [
    f"{name}: {r.status.value} {r.detail} {r.stderr[-300:]}"
    for (name, _, _), r in zip(HONEST, results)
    if not r.passed
  ]
  assert not failed, "\n".join(failed)


def test_hostile_programs_never_pass_split(pool):
  jobs = [Job(program, tests, LIMITS) for _, program, tests, _ in HOSTILE]
  jobs += [Job(program, ADD_ASSERT, LIMITS) for _, program, _, _ in HOSTILE[1:3]]
  names = [name for name, *_ in HOSTILE] + [f"{n} [assert]" for n, *_ in HOSTILE[1:3]]
  results = pool.execute(
    jobs
    + [
      Job(WRONG_ADD, ADD_UNITTEST, LIMITS),
      Job("def add(a, b):\n  return a + b\n", ADD_UNITTEST, LIMITS),
    ]
  )
  *hostile, wrong, right = results
  assert wrong.status is Status.FAIL and right.passed, (wrong, right)
  forged = [f"{name}: {r.detail}" for name, r in zip(names, hostile) if r.passed]
  assert not forged, "\n".join(forged)


# Whether this process's memory holds a text, found by a pattern that is not that text itself
# (its last character as a class), read from /proc/self/mem region by region (made dumpable
# first: PR_SET_DUMPABLE, which its own /proc/self/mem needs where it was not).
MEMORY_SCAN = _d("""
    import ctypes, re
    def _holds(head, last):  # never the whole text: the pattern is head, then a class of last
      ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable, as a fork of the test process is not
      pattern = re.compile(re.escape(head).encode() + b'[' + last.encode() + b']')
      with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:
        for line in maps:
          fields = line.split()
          start, end = (int(x, 16) for x in fields[0].split('-'))
          special = fields[-1] in ('[vvar]', '[vsyscall]')
          if 'r' not in fields[1] or end - start > 1 << 30 or special:
            continue
          try:
            mem.seek(start)
            chunk = mem.read(end - start)
          except (OSError, ValueError, OverflowError):
            continue
          if chunk and pattern.search(chunk):
            return 'found'
      return 'clean'
    def probe(text):
      return _holds(text[:-1], text[-1])
    def held():
      return [_holds('PCMARK-7f3a9c-TESTTEX', 'T'), _holds('PCMARK-5e1d02-TOPLEVE', 'L')]
    def kind(name):
      import mimetypes
      return mimetypes.guess_type(name)[0]
    """)


def test_the_programs_process_holds_no_trace_of_the_tests_text(pool):
  """The program's process starts from an image that never held the job's tests
  (`program_boot`): its whole memory holds no trace of a text only the test code has (in a test's
  docstring; a value its top level computes with a library), while a text it was handed (the
  probe: the scan works) is found, and the set-up call the tests' top level made into a library
  is repeated there (`split_program.replay`)."""
  tests = _unittest(
    """
      def test_probe(self):
        self.assertEqual(probe('PCPROBE-handed-' + str(6 * 7)), 'found')
      def test_tests_text(self):
        '''PCMARK-7f3a9c-TESTTEXT: a text only the tests hold (a docstring: kept as is)'''
        self.assertEqual(held(), ['clean', 'clean'])
      def test_library_set_up(self):
        self.assertEqual(kind('a.pcx3'), 'application/x-pc-scan')
      """,
    "import mimetypes, os\n"
    "mimetypes.add_type('application/x-pc-scan', '.pcx3')\n"
    "SECOND = os.path.basename('/x/PCMARK-5e1d02-TOPLEVEL')\n",
  )
  (result,) = pool.execute([Job(MEMORY_SCAN, tests, LIMITS)])
  assert result.passed, (result.detail, result.stderr[-500:])


def test_each_process_loads_only_the_zones_it_runs(pool):
  """The trust zones (execution/__init__.py, "Layout") as the processes load them: the program's
  process only program_side and shared (`program_boot` loads them by file path); the test process,
  forked from the worker, nothing of the parent's zone."""
  program = (
    "import sys\ndef loaded():\n"
    "  return sorted(m for m in sys.modules if m.startswith('precisecoder.'))\n"
  )
  tests = _unittest("""
      def test_program_process(self):
        zones = {m.split('.')[2] for m in loaded() if m.count('.') >= 2}
        self.assertEqual(sorted(zones), ['program_side', 'shared'])
      def test_test_process(self):
        import sys
        names = [m for m in sys.modules if m.startswith('precisecoder.')]
        zones = {m.split('.')[2] for m in names if m.count('.') >= 2}
        self.assertEqual(sorted(zones), ['program_side', 'shared', 'test_side', 'worker_side'])
      """)
  (result,) = pool.execute([Job(program, tests, LIMITS)])
  assert result.passed, (result.detail, result.stderr[-500:])


# The program and its tests in one interpreter, sandboxed (an `io` job: no split, no in-process
# defence), printing whether unittest's own runner passed them.
_PLAIN_RUNNER = """
import io as _io, unittest as _unittest
_suite = _unittest.TestSuite()
for _value in list(globals().values()):
  if isinstance(_value, type) and issubclass(_value, _unittest.TestCase):
    _suite.addTests(_unittest.defaultTestLoader.loadTestsFromTestCase(_value))
_result = _unittest.TextTestRunner(stream=_io.StringIO()).run(_suite)
print('PASSED' if _result.wasSuccessful() and _result.testsRun else 'FAILED')
"""


_PASSED = "\nprint('PASSED')\n"  # an assert kind's checks raise at its top level, or it passed


def test_the_hostile_programs_forge_a_pass_in_one_interpreter():
  """Those marked `plain` pass where the program and its tests share an interpreter, so that
  their failing split is the split design's doing, not a broken attack."""
  plain = [(name, program, tests) for name, program, tests, forges in HOSTILE if forges]
  assert len(plain) >= 15
  jobs = [
    Job(
      program + "\n" + tests["code"] + (_PLAIN_RUNNER if tests["kind"] == "unittest" else _PASSED),
      {"kind": "io", "cases": [{"stdin": "", "stdout": "PASSED\n"}]},
      LIMITS,
    )
    for _, program, tests in plain
  ]
  with ExecutionPool(workers=2) as p:  # io jobs: one process, judged here
    results = p.execute(jobs)
  broken = [f"{name}: {r.detail}" for (name, _, _), r in zip(plain, results) if not r.passed]
  assert not broken, "\n".join(broken)


def test_the_tests_draw_on_from_the_programs_draws_and_seeds_never_a_state_it_set():
  random.seed(7)
  before = random.getstate()
  for draw in (lambda: None, random.random, lambda: random.shuffle(list(range(5000)))):
    random.setstate(before)
    draw()
    after = random.getstate()
    assert split_tests._drawn_python(before, after) == (after[0], after[1], None)
  random.setstate(before)
  random.gauss(0, 1)  # its cached second value is dropped, not taken from the program
  assert split_tests._drawn_python(before, random.getstate())[2] is None
  random.seed(8)
  assert split_tests._drawn_python(before, random.getstate()) is None
  assert split_tests._drawn_python(before, (3, (0,) * 625, None)) is None
  assert split_tests._drawn_python(before, "x") is None
  np.random.seed(7)
  before = np.random.get_state()
  for draw in (lambda: None, lambda: np.random.rand(5000), np.random.normal):
    np.random.set_state(before)
    draw()
    after = np.random.get_state()
    drawn = split_tests._drawn_numpy(np, before, after)
    assert (drawn[1] == after[1]).all() and drawn[2] == after[2] and drawn[3] == 0
  np.random.seed(8)
  assert split_tests._drawn_numpy(np, before, np.random.get_state()) is None
  assert split_tests._drawn_numpy(np, before, ("MT19937", [1, 2], 3, 0, 0.0)) is None
  # From a seed the program gave, repeated here: numbers, text, bytes, arrays; never an object.
  random.seed("seven")
  random.random()
  seeded = split_tests._seeded(((b"x",), {}), random.Random, lambda g: g.getstate())
  assert seeded is not None and split_tests._drawn_python(seeded, random.getstate()) is None
  seeded = split_tests._seeded((("seven",), {}), random.Random, lambda g: g.getstate())
  assert split_tests._drawn_python(seeded, random.getstate()) is not None
  np.random.seed([1, 2])
  np.random.rand(3)
  read = lambda g: g.get_state(legacy=True)  # noqa: E731
  seeded = split_tests._seeded((([1, 2],), {}), np.random.RandomState, read)
  assert split_tests._drawn_numpy(np, seeded, np.random.get_state()) is not None
  for given in ((object(),), {}), ((), {"a": {}}), "x", ((1, 2, 3), {}):
    assert split_tests._seeded(given, random.Random, lambda g: g.getstate()) is None
