"""A red team of the split design itself (issue 39, item 5): hostile programs that attack what a
split run rests on (docs/sandbox.md, "Split runs"), and honest programs that use the same features.

Each hostile program returns wrong answers, so a pass would be a forgery; most would forge a pass
in a plain interpreter. Families: the codec (type confusion, edge values, masked items, bombs),
references (claimed library classes, answers that lie or change, comparisons of every kind), the
mock bridge, the tests' objects the program can name, exceptions the harness treats apart, the
channel (the socket's frames, the pool's pipe reopened by a path), state that crosses, files in
the shared working directory, and the test process's resources. Families that still forge a pass
are in /work/notes/redteam_forges.md, not here.
"""

from __future__ import annotations

import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status

LIMITS = Limits(timeout_s=20.0, memory_mb=1024)
SHORT = Limits(timeout_s=2.0, memory_mb=1024)  # hostile programs that loop: a timeout is a fail


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


ADD = _unittest("""
  def test_small(self):
    self.assertEqual(add(2, 3), 5)
  def test_large(self):
    got, want = add(40, 2), 40 + 2
    self.assertEqual(got, want)
  """)
ADD_CALL = {
  "kind": "call",
  "entry_point": "add",
  "cases": [{"args": [2, 3], "expected": 5}, {"args": [40, 2], "expected": 42}],
}
WRONG = "def add(a, b):\n  return a - b\n"
ADD_IO = {"kind": "io", "cases": [{"stdin": "2 3\n", "stdout": "5\n"}]}
SCALE = _unittest(
  """
  def test_scale(self):
    np.testing.assert_array_equal(scale(np.array([1, 2, 3]), 2), np.array([2, 4, 6]))
  def test_scale_float(self):
    np.testing.assert_array_almost_equal(scale(np.array([0.5, 1.5]), 3), np.array([1.5, 4.5]))
  """,
  "import numpy as np\n",
)
SAVE = _unittest("""
  def test_save(self):
    with open('out.csv', 'w') as f:
      save_rows([[1, 2], [3, 4]], f)
    with open('out.csv') as f:
      self.assertEqual(f.read(), '1,2\\n3,4\\n')
  """)
CASE_TABLE = _unittest(
  """
  def test_cases(self):
    for case in CASES:
      self.assertEqual(add(*case.args), case.want)
  """,
  """
  import dataclasses
  @dataclasses.dataclass
  class Case:
    args: tuple
    want: int
  CASES = [Case((2, 3), 5), Case((40, 2), 42)]
  """,
)
# The pool's nonce, which a program's process holds (a fork of the test process's memory).
_NONCE = """
import gc, sys
def _nonce():
  harness = sys.modules['precisecoder.execution.worker_side.harness']
  for obj in gc.get_objects():
    if type(obj) is harness.Channel:
      return obj._nonce
"""
# Reads the run's channel back through /proc: its "ready" line gone, the run is an infra error.
_READ_BACK = """
import os
try:
  os.read(os.open('/proc/self/fd/3', os.O_RDONLY | os.O_NONBLOCK), 1 << 16)
except OSError:
  pass
"""

# Signed records written by whatever code runs in the test process: a pass if it runs there.
_FORGE = (
  "import gc, os, sys, unittest\n"
  "h = sys.modules['precisecoder.execution.worker_side.harness']\n"
  "ch = next(o for o in gc.get_objects() if type(o) is h.Channel)\n"
  "for cname, cls in list(sys.modules['__precisecoder_program__'].__dict__.items()):\n"
  "  if isinstance(cls, type) and issubclass(cls, unittest.TestCase):\n"
  "    for m in dir(cls):\n"
  "      if m.startswith('test'):\n"
  "        ch.send({'test': cname + '.' + m, 'outcome': 'ok', 'detail': ''}, True)\n"
  "ch.send({'end': 'unittest', 'expects': 0}, True)\n"
  "os._exit(0)\n"
)
# The program's process answers "load" with its names; these claim library functions by name.
_CLAIM = (
  """
import sys
_split = sys.modules['precisecoder.execution.program_side.split_program']
_bridge = sys.modules['precisecoder.execution.shared.bridge']
_real = _split._named
def _named(name, value):
  return _bridge.ByName(value, *CLAIMS[name]) if name in CLAIMS else _real(name, value)
_split._named = _named
FORGE = %r
"""
  % _FORGE
)
ROUND_TRIP = _unittest("""
  def test_round_trip(self):
    data = {'a': [1, 2, 3], 'b': 'x'}
    self.assertEqual(decode(encode(data)), data)
  """)
STREAM = _unittest(
  """
  def test_round_trip(self):
    data = {'a': [1, 2, 3]}
    self.assertEqual(Loader(io.BytesIO(dump(data))).load(), data)
  """,
  "import io\n",
)
SESSION = _unittest(
  """
  def test_session(self):
    with open_session('db') as s:
      self.assertEqual(s.query('x'), expected_rows('x'))
  def test_count(self):
    with open_session('db') as s:
      self.assertEqual(s.count(), len(expected_rows('x')))
  def test_quiet(self):
    with open_session('db') as s:
      s.fail('x')
  """,
  "def expected_rows(q):\n  return [q, q.upper()]\n",
)
COLUMNS = _unittest("""
  def test_columns(self):
    self.assertEqual(COLUMNS, list('abc'))
  """)
UNIQUE = _unittest("""
  def test_unique(self):
    result = unique([3, 1, 3, 2])
    self.assertEqual(len(result), len({1, 2, 3}))
    self.assertEqual(sorted(result), sorted([1, 2, 3]))
    self.assertTrue(all(isinstance(x, int) for x in result))
  """)

HONEST = [
  (
    "the codec: numpy results",
    "import numpy as np\ndef scale(xs, k):\n  return xs * k\n",
    SCALE,
  ),
  (
    "the codec: a masked array with masked items, through a reference",
    _d("""
      import numpy as np
      def mask_neg(xs):
        return np.ma.masked_less(np.asarray(xs), 0)
      def peak(xs):
        data = np.ma.masked_invalid(np.asarray(xs, dtype=float))
        return data[data == data.max()][:1]
      """),
    _unittest(
      """
      def test_mask(self):
        got = mask_neg([1, -2, 3])
        self.assertEqual(got.count(), 2)
        self.assertEqual(got.mask.tolist(), [False, True, False])
        self.assertEqual(got.sum(), 4)
        self.assertEqual(peak([1, float('nan'), 3]), 3.0)
      """,
      "import numpy as np\n",
    ),
  ),
  (
    "the channel: a file the tests opened, lent to the program",
    _d("""
      def save_rows(rows, f):
        for row in rows:
          f.write(','.join(map(str, row)) + '\\n')
      """),
    SAVE,
  ),
  ("the tests' objects: a case table", "def add(a, b):\n  return a + b\n", CASE_TABLE),
  ("claims by name: an honest unique", "def unique(xs):\n  return list(set(xs))\n", UNIQUE),
  (
    "claims by name: an honest Loader",
    _d("""
      import json
      class Loader:
        def __init__(self, stream): self.stream = stream
        def load(self): return json.loads(self.stream.read())
      def dump(data):
        return json.dumps(data).encode()
      """),
    STREAM,
  ),
  (
    "claims by name: library names the tests take from the program's imports",
    _d("""
      from datetime import datetime, timedelta
      from collections import Counter, UserDict
      from scipy.stats import norm
      def next_day(d):
        return d + timedelta(days=1)
      def letters(text):
        return Counter(text)
      def density(x):
        return norm.pdf(x, 0, 1)
      """),
    _unittest(
      """
      def test_day(self):
        got = next_day(datetime(2020, 1, 31))
        self.assertEqual(got, datetime(2020, 2, 1))
        self.assertIsInstance(got, datetime)
        self.assertEqual(datetime.strptime('2020-02-01', '%Y-%m-%d'), got)
      def test_letters(self):
        self.assertEqual(letters('aab'), Counter({'a': 2, 'b': 1}))
        self.assertIsInstance(letters('x'), Counter)
        self.assertTrue(issubclass(Counter, dict))
        self.assertTrue(issubclass(Loud, UserDict))
      def test_density(self):
        self.assertAlmostEqual(density(0.5), norm.pdf(0.5, 0, 1))
      """,
      """
      class Loud(UserDict):
        pass
      """,
    ),
  ),
  (
    "claims by name: an honest round trip",
    _d("""
      import json
      def encode(data):
        return json.dumps(data)
      def decode(text):
        return json.loads(text)
      """),
    ROUND_TRIP,
  ),
  (
    "the tests' objects: a class and a function the program uses",
    _d("""
      def build(values):
        head = None
        for v in reversed(values):
          head = ListNode(square(v), head)
        return head
      """),
    _unittest(
      """
      def test_build(self):
        head = build([1, 2])
        self.assertEqual((head.val, head.next.val, head.next.next), (1, 4, None))
      """,
      """
      class ListNode:
        def __init__(self, val=0, next=None):
          self.val = val
          self.next = next
      def square(x):
        return x * x
      """,
    ),
  ),
  (
    "references: a context manager that suppresses the program's own error",
    _d("""
      class Session:
        def __enter__(self): return self
        def __exit__(self, *exc): return True
        def query(self, q): return [q, q.upper()]
        def count(self): return 2
        def fail(self, q):
          raise KeyError(q)
      def open_session(name):
        return Session()
      """),
    SESSION,
  ),
  (
    "state: the program's prints caught by the tests' patch of sys.stdout",
    "def greet(name):\n  print(f'hello {name}')\n",
    _unittest(
      """
      @patch('sys.stdout', new_callable=io.StringIO)
      def test_print(self, out):
        greet('bob')
        self.assertEqual(out.getvalue(), 'hello bob\\n')
      """,
      "import io\nfrom unittest.mock import patch\n",
    ),
  ),
  (
    "references: a key function the tests pass",
    "def order(xs, key):\n  return sorted(xs, key=key)\n",
    _unittest("""
      def test_order(self):
        self.assertEqual(order(['bb', 'a', 'ccc'], key=len), ['a', 'bb', 'ccc'])
        self.assertEqual(order([3, 1], key=lambda v: -v), [3, 1])
      """),
  ),
  (
    "claims by name: library functions the tests take from the program's imports",
    _d("""
      import os
      from unittest.mock import patch
      from scipy.stats import skew
      import xml.etree.ElementTree as ET
      def count_txt(path):
        return sum(name.endswith('.txt') for name in os.listdir(path))
      def spread(xs):
        return skew(xs)
      def root_tag(text):
        return ET.fromstring(text).tag
      """),
    _unittest(
      """
      @patch('os.listdir', return_value=['a.txt', 'b.csv', 'c.txt'])
      def test_count(self, listdir):
        self.assertEqual(count_txt('.'), 2)
        listdir.assert_called_once_with('.')
      def test_spread(self):
        self.assertAlmostEqual(spread([1, 2, 10]), skew([1, 2, 10]))
      def test_tag(self):
        self.assertEqual(root_tag('<a><b/></a>'), ET.fromstring('<a/>').tag)
      """,
      "import os\n",
    ),
  ),
  (
    "claims by name: a library class and constant the program binds under another name",
    _d("""
      import pickle
      from pickle import Unpickler as Loader
      from unittest.mock import ANY as WILDCARD
      def dump(data):
        return pickle.dumps(data)
      def matches(value):
        return WILDCARD == value
      """),
    _unittest(
      """
      def test_round_trip(self):
        data = {'a': [1, 2, 3]}
        self.assertEqual(Loader(io.BytesIO(dump(data))).load(), data)
      def test_any(self):
        self.assertTrue(matches(3))
      """,
      "import io\n",
    ),
  ),
  (
    "pyplot: the tests' own reference plot beside the program's figures",
    _d("""
      import matplotlib
      matplotlib.use('Agg')
      import matplotlib.pyplot as plt
      def plot_counts(items):
        labels = sorted(set(items))
        fig, ax = plt.subplots()
        ax.bar(labels, [items.count(x) for x in labels])
        ax.set_title('Counts')
        return ax
      def draw_line(ys):
        plt.figure()
        plt.plot(ys)
      """),
    _unittest(
      """
      def tearDown(self):
        plt.close('all')
      def test_counts(self):
        fig, ref = plt.subplots()
        ref.bar(['a', 'b'], [2, 1])
        ax = plot_counts(['a', 'b', 'a'])
        heights = [p.get_height() for p in ref.patches]
        self.assertEqual([p.get_height() for p in ax.patches], heights)
        self.assertEqual(plt.gca().get_title(), 'Counts')
        self.assertEqual(len(plt.get_fignums()), 2)
        plt.close(fig)
        self.assertEqual(len(plt.get_fignums()), 1)
      def test_current(self):
        draw_line([1, 2, 3])
        self.assertEqual(list(plt.gca().lines[0].get_ydata()), [1, 2, 3])
        plt.figure()
        plt.plot([4, 5])
        self.assertEqual(list(plt.gca().lines[0].get_ydata()), [4, 5])
        self.assertEqual(len(plt.gcf().axes), 1)
      """,
      "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n",
    ),
  ),
  (
    "references: arguments of collections' types changed in place",
    _d("""
      def tally(counts, order, groups, window, word):
        counts[word] += 1
        order[word] = len(order)
        order.move_to_end(next(iter(order)))
        groups[len(word)].append(word)
        window.append(word)
      """),
    _unittest(
      """
      def test_tally(self):
        counts, order = Counter({'a': 1}), OrderedDict([('x', 0), ('y', 1)])
        groups, window = defaultdict(list), deque(['p', 'q'], maxlen=2)
        tally(counts, order, groups, window, 'ab')
        self.assertEqual(counts, Counter({'a': 1, 'ab': 1}))
        self.assertEqual(list(order.items()), [('y', 1), ('ab', 2), ('x', 0)])
        self.assertEqual(groups[2], ['ab'])
        self.assertEqual(groups.default_factory, list)
        self.assertEqual(list(window), ['q', 'ab'])
        self.assertEqual(window.maxlen, 2)
      """,
      "from collections import Counter, OrderedDict, defaultdict, deque\n",
    ),
  ),
  (
    "pyplot: the program's current figure, through the plt the tests take from the program",
    _d("""
      import matplotlib
      matplotlib.use('Agg')
      import matplotlib.pyplot as plt
      def draw(xs):
        plt.figure(figsize=(6, 3))
        plt.subplot(1, 2, 1)
        plt.title('before')
        plt.subplot(1, 2, 2)
        plt.plot(xs)
        plt.title('after')
        plt.show()
      """),
    _unittest(
      """
      @patch('matplotlib.pyplot.show')
      def test_titles(self, show):
        draw([1, 2])
        show.assert_called()
        self.assertEqual([ax.get_title() for ax in plt.gcf().axes], ['before', 'after'])
        self.assertEqual(plt.gca().get_title(), 'after')
      """,
      "from unittest.mock import patch\n",
    ),
  ),
  (
    "records: a dataclass whose method changes its fields, with len and str of its own",
    _d("""
      from dataclasses import dataclass, field
      @dataclass
      class Account:
        balance: int = 0
        history: list = field(default_factory=list)
        def deposit(self, amount):
          self.balance += amount
          self.history.append(amount)
        def __len__(self):
          return len(self.history)
        def __str__(self):
          return f'balance {self.balance}'
      def open_account():
        return Account()
      """),
    _unittest("""
      def test_deposit(self):
        acc = open_account()
        self.assertEqual(acc.balance, 0)
        acc.deposit(5)
        self.assertEqual(acc.balance, 5)
        self.assertEqual(acc, Account(5, [5]))
        self.assertEqual(len(acc), 1)
        self.assertEqual(str(acc), 'balance 5')
        self.assertEqual(list(acc.history), [5])
      """),
  ),
  (
    "state: patch.dict of the program's own dict",
    _d("""
      CONFIG = {'debug': False, 'level': 1}
      def is_debug():
        return CONFIG['debug']
      def level():
        return CONFIG.get('level')
      """),
    _unittest(
      """
      def test_debug(self):
        with patch.dict(CONFIG, {'debug': True}):
          self.assertTrue(is_debug())
          self.assertEqual(level(), 1)
        self.assertFalse(is_debug())
      @patch.dict(CONFIG, {'debug': True}, clear=True)
      def test_cleared(self):
        self.assertTrue(is_debug())
        self.assertIsNone(level())
      def test_after(self):
        self.assertEqual((is_debug(), level()), (False, 1))
      """,
      "from unittest.mock import patch\n",
    ),
  ),
]

HONEST_ONE_PROCESS = [  # call and io: the program's one process, its channel sealed the same way
  ("call: an honest add", "def add(a, b):\n  return a + b\n", ADD_CALL),
  ("io: an honest sum", "a, b = map(int, input().split())\nprint(a + b)\n", ADD_IO),
  (
    "io exit paths: output of a thread the interpreter waits for, and of atexit",
    _d("""
      import atexit, threading, time
      a, b = map(int, input().split())
      def later():
        time.sleep(0.05)
        print(a, end='')
      threading.Thread(target=later).start()
      atexit.register(lambda: print(' + %d =' % b, a + b))
      """),
    {"kind": "io", "cases": [{"stdin": "2 3\n", "stdout": "2 + 3 = 5\n"}]},
  ),
  (
    "io exit paths: stdout replaced, os._exit after a flush",
    _d("""
      import io, os, sys
      a, b = map(int, sys.stdin.buffer.read().split())
      sys.stdout = io.TextIOWrapper(open(1, 'wb', closefd=False))
      sys.stdout.write(f'{a + b}\\n')
      sys.stdout.flush()
      os._exit(0)
      """),
    ADD_IO,
  ),
]


def _hostile(family: str, program: str, tests: dict = ADD, limits: Limits = LIMITS) -> tuple:
  return family, _d(program), tests, limits


HOSTILE = [
  # --- the codec ---------------------------------------------------------------------------------
  _hostile(
    "codec: a 0-d masked array, equal to any array in numpy's checks",
    "import numpy as np\ndef scale(xs, k):\n  return np.ma.masked_all(())\n",
    SCALE,
  ),
  _hostile(
    "codec: NaN, -0.0, float and str subclasses with __eq__",
    """
      class F(float):
        def __eq__(self, o): return True
        __hash__ = float.__hash__
      class S(str):
        def __eq__(self, o): return True
        __hash__ = str.__hash__
      def area(r):
        return F('nan') if r == 1 else [S('x'), F(-0.0)]
      """,
    _unittest("""
      def test_area(self):
        want = 3.14159 * 1
        self.assertEqual(area(1), want)
        self.assertEqual(area(2), ['a' * 2, float(2)])
      """),
  ),
  _hostile(
    "codec: Decimal's signalling NaN, a Fraction past int's digit limit",
    """
      import decimal, fractions
      def half(x):
        return decimal.Decimal('sNaN') if x == 1 else fractions.Fraction(10 ** 5000, 3)
      """,
    _unittest(
      """
      def test_half(self):
        want = decimal.Decimal(1) / 2
        self.assertEqual(half(1), want)
        self.assertEqual(half(2), fractions.Fraction(1, 1))
      """,
      "import decimal, fractions\n",
    ),
  ),
  _hostile(
    "codec: object arrays of always-equal items, structured arrays",
    """
      import numpy as np
      class Any:
        def __eq__(self, o): return True
        __hash__ = object.__hash__
      def arr(n):
        if n == 1:
          a = np.empty(2, dtype=object); a[0] = Any(); a[1] = Any()
          return a
        return np.zeros(2, dtype=[('a', 'i4'), ('b', 'f8')])
      """,
    _unittest(
      """
      def test_arr(self):
        np.testing.assert_array_equal(arr(1), np.arange(2) + 1)
        self.assertTrue((arr(2) == np.ones(2)).all())
      """,
      "import numpy as np\n",
    ),
  ),
  _hostile(
    "codec: a pandas extension array of NA",
    "import pandas as pd\ndef col(n):\n  return pd.Series([pd.NA] * n, dtype='Int64')\n",
    _unittest(
      """
      def test_col(self):
        pd.testing.assert_series_equal(col(2), pd.Series([1, 2], dtype='Int64'))
      """,
      "import pandas as pd\n",
    ),
  ),
  _hostile(
    "codec: a self-referential answer, then a huge one",
    """
      def nest(n):
        if n == 1:
          x = []
          x.append(x)
          return x
        return {i: 'x' * 1000 for i in range(70000)}
      """,
    _unittest("""
      def test_nest(self):
        self.assertEqual(nest(1), [[1]])
        self.assertEqual(nest(2), {})
      """),
  ),
  # --- references --------------------------------------------------------------------------------
  _hostile(
    "references: an object claiming to be a list",
    """
      class Fake:
        def __len__(self): return 1
        def __getitem__(self, i):
          if i >= 1: raise IndexError
          return 0
        def __eq__(self, other): return True
        __hash__ = object.__hash__
      Fake.__module__, Fake.__qualname__, Fake.__name__ = 'builtins', 'list', 'list'
      def pair(a, b):
        return Fake()
      """,
    _unittest("""
      def test_pair(self):
        got = pair(1, 2)
        self.assertIsInstance(got, list)
        self.assertListEqual(got, sorted([2, 1]))
      """),
  ),
  _hostile(
    "references: an object claiming to be a DataFrame, equal to anything",
    """
      class Frame:
        shape = (2, 1)
        def __eq__(self, other): return True
        def equals(self, other): return True
        def __getattr__(self, name):
          return lambda *a, **k: True
      Frame.__module__, Frame.__qualname__ = 'pandas.core.frame', 'DataFrame'
      def table(xs):
        return Frame()
      """,
    _unittest(
      """
      def test_table(self):
        expected = pd.DataFrame({'x': [1, 2]})
        got = table([1, 2])
        self.assertIsInstance(got, pd.DataFrame)
        pd.testing.assert_frame_equal(got, expected)
      """,
      "import pandas as pd\n",
    ),
  ),
  _hostile(
    "references: assertAlmostEqual, assertCountEqual, assertIn, sorted",
    """
      class Any:
        def __eq__(self, o): return True
        def __ne__(self, o): return False
        def __sub__(self, o): return 0
        __rsub__ = __sub__
        def __abs__(self): return 0
        def __lt__(self, o): return True
        __gt__ = __le__ = __ge__ = __lt__
        def __iter__(self): return iter([Any(), Any()])
        def __len__(self): return 2
        def __getitem__(self, i):
          if i >= 2: raise IndexError
          return Any()
        def __float__(self): return 0.0
        __hash__ = object.__hash__
      def stats(xs):
        return Any()
      """,
    _unittest(
      """
      def test_mean(self):
        self.assertAlmostEqual(stats([1, 2, 3]), sum([1, 2, 3]) / 3)
      def test_count(self):
        self.assertCountEqual(stats([1, 2]), [2, 1])
      def test_in(self):
        self.assertIn(len([1, 2]), stats([1, 2]))
      def test_sorted(self):
        self.assertEqual(sorted(stats([2, 1])), sorted([1, 2]))
      """
    ),
  ),
  _hostile(
    "references: answers that change between questions",
    """
      class Shifty:
        def __init__(self): self.n = 0
        def __len__(self):
          self.n += 1
          return 3 if self.n == 1 else 0
        def __iter__(self): return iter([])
      def make(n):
        return Shifty()
      """,
    _unittest("""
      def test_make(self):
        got = make(3)
        self.assertEqual(len(got), len([0, 1, 2]))
        self.assertEqual(list(got), list(range(3)))
      """),
  ),
  _hostile(
    "references: a context manager that swallows the tests' failed checks",
    """
      class Session:
        def __enter__(self): return self
        def __exit__(self, *exc): return True
        def query(self, q): return []
        def count(self): return -1
      def open_session(name):
        return Session()
      """,
    SESSION,
  ),
  # --- exceptions the harness treats apart ------------------------------------------------------
  _hostile(
    "exceptions: SkipTest raised by the program, and one claiming its name",
    """
      import unittest
      class SkipTest(Exception):
        pass
      SkipTest.__module__ = 'unittest.case'
      def add(a, b):
        raise unittest.SkipTest('later') if a == 2 else SkipTest('later')
      """,
  ),
  _hostile(
    "exceptions: StopIteration, KeyboardInterrupt and SystemExit out of the program",
    """
      import sys
      def add(a, b):
        if a == 2:
          raise StopIteration
        if a == 40:
          raise KeyboardInterrupt
        sys.exit(0)
      """,
  ),
  # --- the mock bridge and what the tests lend ---------------------------------------------------
  _hostile(
    "mock bridge: a mock's records and settings reached through what it returns",
    """
      import requests
      def fetch(url):
        r = requests.get(url)
        for attr in ('_mock_parent', '_mock_children', 'call_args_list', 'mock_calls'):
          try:
            getattr(r, attr)
          except Exception:
            pass
        try:
          requests.get.side_effect = None
        except Exception:
          pass
        return 0
      """,
    _unittest(
      """
      @patch('requests.get')
      def test_fetch(self, get):
        get.return_value.json.return_value = {'v': 7}
        self.assertEqual(fetch('http://x'), 7)
        get.assert_called_once_with('http://x')
      """,
      "from unittest.mock import patch\n",
    ),
  ),
  _hostile(
    "mock bridge: a patched name called with an argument equal to anything",
    """
      import os
      class Path:
        def __eq__(self, o): return True
        def __fspath__(self): return '/nowhere'
        __hash__ = object.__hash__
      def clean(path):
        os.remove(Path())
      """,
    _unittest(
      """
      @patch('os.remove')
      def test_clean(self, remove):
        clean('/tmp/a.txt')
        remove.assert_called_once_with('/tmp/a.txt')
      """,
      "from unittest.mock import patch\n",
    ),
  ),
  _hostile(
    "lent objects: a callback's globals, self, class; a TestCase method's owner",
    """
      def apply(f, xs):
        for attr in ('__globals__', '__self__', '__class__', '__dict__', '__code__'):
          try:
            owner = getattr(f, attr)
            owner.assertEqual = lambda *a: None
          except Exception:
            pass
        try:
          f.__class__.__subclasses__()
        except Exception:
          pass
        return [0 for x in xs]
      """,
    _unittest("""
      def test_apply(self):
        def double(x):
          return 2 * x
        self.assertEqual(apply(double, [1, 2]), [2, 4])
        self.assertEqual(apply(self.triple, [1]), [3])
      def triple(self, x):
        return 3 * x
      """),
  ),
  _hostile(
    "the tests' objects: a case table's expected values rewritten by name",
    """
      def add(a, b):
        for case in CASES:
          case.want = 0
        return 0
      """,
    CASE_TABLE,
  ),
  _hostile(
    "the tests' objects: an expected list emptied through its methods",
    "def evens(xs):\n  SPEC.expected.clear()\n  return []\n",
    _unittest(
      """
      def test_evens(self):
        self.assertEqual(evens(SPEC.given), SPEC.expected)
      """,
      "import types\nSPEC = types.SimpleNamespace(given=[1, 2, 3, 4], expected=[2, 4])\n",
    ),
  ),
  # --- library objects claimed by name -----------------------------------------------------------
  _hostile(
    "claims by name: decode bound to the test process's eval",
    _CLAIM
    + _d("""
      CLAIMS = {'decode': ('builtins', 'eval')}
      def decode(text):
        return None
      def encode(data):
        return 'exec(%r, {})' % FORGE
      """),
    ROUND_TRIP,
  ),
  _hostile(
    "claims by name: decode bound to the test process's pickle.loads",
    _CLAIM
    + _d("""
      import pickle
      CLAIMS = {'decode': ('pickle', 'loads')}
      class Payload:
        def __reduce__(self):
          return (exec, (FORGE, {}))
      def decode(blob):
        return None
      def encode(data):
        return pickle.dumps(Payload())
      """),
    ROUND_TRIP,
  ),
  _hostile(
    "claims by name: the tests' expected values from the program's own patched scipy norm",
    """
      from scipy.stats import norm
      norm.pdf = lambda *args, **kwargs: 0.0
      def density(x):
        return 0.0
      """,
    _unittest("""
      def test_density(self):
        expected = norm.pdf(0.5, 0, 1)
        self.assertAlmostEqual(density(0.5), expected)
      """),
  ),
  _hostile(
    "claims by name: a class of the program claiming pickle.Unpickler's names",
    _CLAIM
    + _d("""
      import pickle
      CLAIMS = {}
      class Payload:
        def __reduce__(self):
          return (exec, (FORGE, {}))
      class Loader:
        def __init__(self, stream): self.stream = stream
        def load(self): return None
      Loader.__module__, Loader.__qualname__ = 'pickle', 'Unpickler'
      def dump(data):
        return pickle.dumps(Payload())
      """),
    STREAM,
  ),
  _hostile(
    "claims by name: a class of the program claiming pickle.Unpickler, the program importing it",
    _CLAIM
    + _d("""
      import pickle
      from pickle import Unpickler
      CLAIMS = {}
      class Payload:
        def __reduce__(self):
          return (exec, (FORGE, {}))
      class Loader:
        def __init__(self, stream): self.stream = stream
        def load(self): return None
      Loader.__module__, Loader.__qualname__ = 'pickle', 'Unpickler'
      def dump(data):
        return pickle.dumps(Payload())
      """),
    STREAM,
  ),
  _hostile(
    "claims by name: the truthful import of pickle.Unpickler under the tests' name",
    _CLAIM
    + _d("""
      import pickle
      from pickle import Unpickler as Loader
      CLAIMS = {}
      class Payload:
        def __reduce__(self):
          return (exec, (FORGE, {}))
      def dump(data):
        return pickle.dumps(Payload())
      """),
    STREAM,
  ),
  _hostile(
    "claims by name: the truthful import of pickle.loads under the tests' name",
    _CLAIM
    + _d("""
      import pickle
      from pickle import loads as decode
      CLAIMS = {}
      class Payload:
        def __reduce__(self):
          return (exec, (FORGE, {}))
      def encode(data):
        return pickle.dumps(Payload())
      """),
    ROUND_TRIP,
  ),
  _hostile(
    "claims by name: a program constant claimed to be unittest.mock.ANY",
    _CLAIM
    + _d("""
      from unittest.mock import ANY
      CLAIMS = {'COLUMNS': ('unittest.mock', 'ANY')}
      class _Columns:
        pass
      COLUMNS = _Columns()
      """),
    COLUMNS,
  ),
  _hostile(
    "claims by name: unittest.mock.ANY imported under the tests' name",
    "from unittest.mock import ANY as COLUMNS\n",
    COLUMNS,
  ),
  _hostile(
    "claims by name: the truthful import of pickle.loads under its own name, the entry point",
    _CLAIM
    + _d("""
      import pickle
      from pickle import loads
      CLAIMS = {}
      class Payload:
        def __reduce__(self):
          return (exec, (FORGE, {}))
      def dumps(data):
        return pickle.dumps(Payload())
      """),
    _unittest("""
      def test_round_trip(self):
        data = {'a': [1, 2, 3], 'b': 'x'}
        self.assertEqual(loads(dumps(data)), data)
      """),
  ),
  _hostile(
    "claims by name: the program's sorted, len and all in place of the tests' builtins",
    """
      import sys
      program_side = sys.modules['precisecoder.execution.program_side.split_program']
      program_side.hasattr = lambda obj, name: False
      def sorted(xs, *args, **kwargs):
        return []
      def len(xs):
        return 0
      def all(xs):
        return True
      def unique(xs):
        return ['x']
      """,
    UNIQUE,
  ),
  # --- pyplot ------------------------------------------------------------------------------------
  _hostile(
    "pyplot: the tests' reference plot drawn by the program's patched Axes.bar",
    """
      import matplotlib
      matplotlib.use('Agg')
      import matplotlib.pyplot as plt
      from matplotlib.axes import Axes
      Axes.bar = lambda self, *args, **kwargs: None
      def plot_counts(items):
        fig, ax = plt.subplots()
        return ax
      """,
    _unittest(
      """
      def test_counts(self):
        ax = plot_counts(['a', 'b', 'a'])
        fig, ref = plt.subplots()
        ref.bar(['a', 'b'], [2, 1])
        heights = [p.get_height() for p in ref.patches]
        self.assertEqual([p.get_height() for p in ax.patches], heights)
      """,
      "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n",
    ),
  ),
  # --- the channels ------------------------------------------------------------------------------
  _hostile(
    "socket: answers to requests never made, then a request of its own",
    """
      import os, socket, stat, struct, json
      def _send(s, tree):
        data = json.dumps(tree).encode()
        s.sendall(struct.pack('!I', len(data)) + data)
      def add(a, b):
        for fd in range(3, 64):
          try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
              s = socket.socket(fileno=os.dup(fd))
              for value in (5, 42):
                _send(s, {'t': ['a', {'t': [value, {'d': []}, None]}, None]})
              _send(s, {'t': ['q', 'call', {'h': 1}, None, {'t': []}, {'d': []}, {'l': []}]})
          except OSError:
            pass
        return a - b
      """,
  ),
  _hostile(
    "pipe: the tests led to write the program's records into /proc/self/fd/3",
    _NONCE
    + _d("""
      import os, time
      os.symlink('/proc/self/fd/3', 'out.csv')
      def save_rows(rows, f):
        n = _nonce()
        f.write('{"test": "TestTask.test_save", "outcome": "ok", "detail": "", "nonce": "%s"}\\n'
                '{"end": "unittest", "expects": 0, "nonce": "%s"}\\n' % (n, n))
        f.flush()
        time.sleep(0.3)
        os.remove('out.csv')
        os.mkfifo('out.csv')
      """),
    SAVE,
  ),
  _hostile("pipe: a call run's channel read back (no ready line)", _READ_BACK + WRONG, ADD_CALL),
  _hostile("pipe: an io run's channel read back", _READ_BACK + "print(0)\n", ADD_IO),
  _hostile(
    "pipe: a call run's thread writing case records after the harness's",
    """
      import os, threading, time, json
      def late():
        time.sleep(0.05)
        for i, v in enumerate((5, 42)):
          os.write(3, (json.dumps({"case": i, "value": v}) + "\\n").encode())
      threading.Thread(target=late).start()
      def add(a, b):
        return a - b
      """,
    ADD_CALL,
  ),
  _hostile(
    "pipe: an io run's forged end record, wrong output, exit status 1",
    'import os, sys\nos.write(3, b\'{"end": "io", "exit": 0}\\n\')\nprint(5)\nsys.exit(1)\n',
    ADD_IO,
  ),
  # --- state that crosses, the shared working directory ------------------------------------------
  _hostile(
    "state: the generators reseeded by the program",
    """
      import random
      import numpy as np
      def roll():
        random.seed(0)
        np.random.seed(0)
        return 0
      """,
    _unittest(
      """
      def test_roll(self):
        random.seed(7); np.random.seed(7)
        got = roll()
        random.seed(7); np.random.seed(7)
        self.assertEqual(got, random.randint(1, 6) + int(np.random.randint(1, 7)))
      """,
      "import random\nimport numpy as np\n",
    ),
  ),
  _hostile(
    "files: modules the tests import, planted in the working directory",
    """
      import os
      for name in ('unittest.py', 'numpy.py', '__precisecoder_program__.py', 'sitecustomize.py'):
        with open(name, 'w') as f:
          f.write('raise SystemExit(0)\\n')
      os.makedirs('json', exist_ok=True)
      with open('json/__init__.py', 'w') as f:
        f.write('loads = lambda *a, **k: 5\\n')
      def parse(text):
        return 0
      """,
    _unittest("""
      def test_parse(self):
        import json
        self.assertEqual(parse('5'), json.loads('5'))
      """),
  ),
  _hostile(
    "held literals: the tests run against a spy, memory searched for the answers",
    """
      import gc, sys
      SEEN = {}
      def sort_list(xs):
        if not SEEN:
          class Spy:
            def __eq__(self, other):
              SEEN[repr(xs)] = other
              return True
            __hash__ = object.__hash__
          space = {'sort_list': lambda *a: Spy(), '__precisecoder_expect__': lambda *a: None}
          exec(sys.modules['precisecoder.execution.worker_side.harness']._PLAN[0].tests, space)
        for obj in gc.get_objects():
          if type(obj) is list and obj == [1, 2, 3] and obj is not xs:
            return obj
        return SEEN.get(repr(xs), xs)
      """,
    {
      "kind": "assert",
      "code": "def check(candidate):\n  assert candidate([3, 1, 2]) == [1, 2, 3]\n"
      "  assert candidate([9, 8]) == [8, 9]\ncheck(sort_list)\n",
    },
  ),
  # --- the test process's resources --------------------------------------------------------------
  _hostile(
    "resources: the test process's mock called without end",
    "import os\ndef touch(path):\n  while True:\n    os.path.exists(path)\n",
    _unittest(
      """
      @patch('os.path.exists', return_value=True)
      def test_touch(self, exists):
        self.assertEqual(touch('a'), 1)
      """,
      "from unittest.mock import patch\n",
    ),
    SHORT,
  ),
  _hostile(
    "resources: an endless iterator the tests sort",
    "import itertools\ndef items():\n  return itertools.count()\n",
    _unittest("""
      def test_items(self):
        self.assertEqual(sorted(items()), [1, 2])
      """),
    SHORT,
  ),
]


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


def test_honest_programs_pass(pool):
  cases = HONEST + HONEST_ONE_PROCESS
  results = pool.execute([Job(program, tests, LIMITS) for _, program, tests in cases])
  failed = [
    f"{name}: {r.status.value} {r.detail} {r.stderr[-300:]}"
    for (name, _, _), r in zip(cases, results)
    if not r.passed
  ]
  assert not failed, "\n".join(failed)


def test_hostile_programs_never_pass(pool):
  results = pool.execute([Job(program, tests, limits) for _, program, tests, limits in HOSTILE])
  forged = [f"{name}: {r.detail}" for (name, *_), r in zip(HOSTILE, results) if r.passed]
  assert not forged, "\n".join(forged)
  unscored = [name for (name, *_), r in zip(HOSTILE, results) if r.status is Status.INFRA_ERROR]
  assert not unscored, unscored  # a program must not make its own run an infrastructure failure


def test_the_channel_stays_closed_where_the_run_owns_its_pipe():
  """In "userns" the run's uid owns the channel's pipe: without the harness's seal it could open
  it again through /proc/self/fd/3 (a forged pass through the tests' own writes; an unscored
  infrastructure error by reading back the "ready" line)."""
  channel = [case for case in HOSTILE if case[0].startswith("pipe:")]
  with ExecutionPool(workers=1, sandbox="userns") as userns:
    results = userns.execute(
      [Job(program, tests, limits) for _, program, tests, limits in channel]
      + [Job(HONEST[2][1], SAVE, LIMITS)]
    )
    if userns.stats()["sandbox"] != "userns":
      pytest.skip("no user namespaces on this host")
  *hostile, honest = results
  assert honest.passed, (honest.detail, honest.stderr[-300:])
  assert [r.status for r in hostile] == [Status.FAIL] * len(channel), [
    (name, r.status.value, r.detail) for (name, *_), r in zip(channel, hostile)
  ]
