"""No false negatives: every correct program of an honest corpus passes.

The corpus, built here in code, holds over 300 correct programs in the four
test kinds, returning what real tasks return: generators and iterators (send,
throw, infinite ones, recursive `yield from`), deep recursion, objects of
classes the test code defines (linked lists, trees, graphs with cycles,
slotted, dataclass and namedtuple nodes), the program's own dataclasses,
namedtuples and enums, fractions and decimals, nested containers, floats compared
with a tolerance, returned functions, `Solution().method` entry points and
design classes, numpy and pandas results, in-place mutation, and
stdin/stdout programs, and real code's patterns (REAL_CODE: libraries that change
their own state as they run, lazy proxies, library callable objects, generators in
a returned tuple, classes made in a function, masked arrays, the tests' own mocks,
files in /tmp, a server on loopback); each family has several equivalent
implementations.
The red team (test_harness_redteam.py) checks the other side: the split runs
that let these through (docs/sandbox.md) still fail every forgery.
"""

from __future__ import annotations

import collections
import textwrap

import pytest

from precisecoder.execution import ExecutionPool, Job, Limits, Status


def _d(text: str) -> str:
  return textwrap.dedent(text).lstrip("\n")


def _assert(code: str) -> dict:
  return {"kind": "assert", "code": _d(code)}


def _unittest(body: str, prelude: str = "") -> dict:
  return {
    "kind": "unittest",
    "code": "import unittest\n"
    + _d(prelude)
    + "class TestTask(unittest.TestCase):\n"
    + textwrap.indent(_d(body), "  "),
  }


def _call(entry_point: str, cases: list[tuple[list, object]]) -> dict:
  return {
    "kind": "call",
    "entry_point": entry_point,
    "cases": [{"args": args, "expected": expected} for args, expected in cases],
  }


def _io(cases: list[tuple[str, str]]) -> dict:
  return {"kind": "io", "cases": [{"stdin": i, "stdout": o} for i, o in cases]}


# --- generators and iterators -----------------------------------------------------------------

EVENS = {
  "generator": "def evens(n):\n  for i in range(0, n, 2):\n    yield i\n",
  "while generator": "def evens(n):\n  i = 0\n  while i < n:\n    yield i\n    i += 2\n",
  "generator expression": "def evens(n):\n  return (i for i in range(n) if i % 2 == 0)\n",
  "yield from": "def evens(n):\n  yield from range(0, n, 2)\n",
  "filter": "def evens(n):\n  return filter(lambda i: i % 2 == 0, range(n))\n",
  "map": "def evens(n):\n  return map(lambda i: 2 * i, range((n + 1) // 2))\n",
  "iter of a list": "def evens(n):\n  return iter([i for i in range(n) if not i % 2])\n",
  "iterator class": _d("""
        class Evens:
          def __init__(self, n):
            self.i, self.n = 0, n
          def __iter__(self):
            return self
          def __next__(self):
            if self.i >= self.n:
              raise StopIteration
            self.i += 2
            return self.i - 2
        def evens(n):
          return Evens(n)
        """),
  "itertools": "import itertools\ndef evens(n):\n  return itertools.islice(itertools.count(0, 2), (n + 1) // 2)\n",
}
EVENS_TESTS = [
  _assert("assert list(evens(10)) == [0, 2, 4, 6, 8]\nassert list(evens(0)) == []\n"),
  _assert("""
        def check(candidate):
          expected = [0, 2, 4]
          assert list(candidate(5)) == expected
          assert sum(candidate(7)) == 12
          assert next(iter(candidate(3))) == 0
        check(evens)
        """),
  _unittest("""
        def test_list(self):
          self.assertEqual(list(evens(9)), [0, 2, 4, 6, 8])
        def test_loop(self):
          seen = []
          for value in evens(4):
            seen.append(value)
          self.assertListEqual(seen, [0, 2])
        def test_sorted(self):
          self.assertEqual(sorted(evens(6), reverse=True), [4, 2, 0])
        """),
]

NATURALS = {
  "infinite generator": "def naturals():\n  n = 0\n  while True:\n    yield n\n    n += 1\n",
  "itertools.count": "import itertools\ndef naturals():\n  return itertools.count()\n",
  "recursive generator": "def naturals(start=0):\n  yield start\n  yield from naturals(start + 1)\n",
}
NATURALS_TESTS = [
  _assert("import itertools\nassert list(itertools.islice(naturals(), 5)) == [0, 1, 2, 3, 4]\n"),
  _unittest("""
        def test_prefix(self):
          it = naturals()
          self.assertEqual([next(it) for _ in range(3)], [0, 1, 2])
        """),
]

AVERAGER = {
  "send": _d("""
        def averager():
          total, count, average = 0.0, 0, None
          while True:
            value = yield average
            total += value
            count += 1
            average = total / count
        """),
  "send with a class of state": _d("""
        class _State:
          def __init__(self):
            self.values = []
        def averager():
          state = _State()
          average = None
          while True:
            state.values.append((yield average))
            average = sum(state.values) / len(state.values)
        """),
}
AVERAGER_TESTS = [
  _assert("""
        avg = averager()
        assert next(avg) is None
        assert avg.send(10) == 10.0
        assert avg.send(20) == 15.0
        avg.close()
        """),
  _unittest("""
        def test_send(self):
          import inspect
          avg = averager()
          self.assertTrue(inspect.isgenerator(avg))
          next(avg)
          self.assertAlmostEqual(avg.send(1), 1.0)
          self.assertAlmostEqual(avg.send(2), 1.5)
        def test_throw(self):
          avg = averager()
          next(avg)
          with self.assertRaises(ValueError):
            avg.throw(ValueError("stop"))
        """),
]

TREE_WALK = {
  "recursive yield from": _d("""
        def walk(tree, depth=0):
          label, children = tree
          yield (label, depth)
          for child in children:
            yield from walk(child, depth + 1)
        """),
  "explicit stack": _d("""
        def walk(tree):
          stack = [(tree, 0)]
          while stack:
            (label, children), depth = stack.pop()
            yield (label, depth)
            stack.extend((child, depth + 1) for child in reversed(children))
        """),
}
TREE_WALK_TESTS = [
  _assert("""
        tree = ('a', [('b', [('d', [])]), ('c', [])])
        assert list(walk(tree)) == [('a', 0), ('b', 1), ('d', 2), ('c', 1)]
        def chain(n):
          node = ('leaf', [])
          for i in range(n):
            node = (i, [node])
          return node
        assert len(list(walk(chain(300)))) == 301
        """),
]

# --- recursion ----------------------------------------------------------------------------------

RECURSION = [
  (
    "depth 900",
    "def depth(n):\n  return 0 if n == 0 else 1 + depth(n - 1)\n",
    _assert("assert depth(900) == 900\n"),
    _call("depth", [([900], 900), ([0], 0)]),
  ),
  (
    "mutual recursion",
    _d("""
        def is_even(n):
          return True if n == 0 else is_odd(n - 1)
        def is_odd(n):
          return False if n == 0 else is_even(n - 1)
        """),
    _assert("assert is_even(400) is True\nassert is_odd(401) is True\n"),
    _call("is_even", [([400], True), ([7], False)]),
  ),
  (
    "memoised fibonacci",
    _d("""
        import functools
        @functools.lru_cache(maxsize=None)
        def fib(n):
          return n if n < 2 else fib(n - 1) + fib(n - 2)
        """),
    _assert(
      "assert fib(90) == 2880067194370816120\nassert [fib(i) for i in range(8)] == "
      "[0, 1, 1, 2, 3, 5, 8, 13]\n"
    ),
    _call("fib", [([90], 2880067194370816120), ([1], 1)]),
  ),
  (
    "dict-memo fibonacci",
    _d("""
        def fib(n, memo={}):
          if n < 2:
            return n
          if n not in memo:
            memo[n] = fib(n - 1) + fib(n - 2)
          return memo[n]
        """),
    _assert("assert fib(300) % 1000 == 0 or fib(300) > 0\nassert fib(10) == 55\n"),
    _call("fib", [([10], 55)]),
  ),
  (
    "permutations",
    _d("""
        def permutations(items):
          if len(items) <= 1:
            return [list(items)]
          out = []
          for i, item in enumerate(items):
            for rest in permutations(items[:i] + items[i + 1:]):
              out.append([item] + rest)
          return out
        """),
    _assert(
      "assert sorted(permutations([1, 2, 3])) == [[1, 2, 3], [1, 3, 2], [2, 1, 3], "
      "[2, 3, 1], [3, 1, 2], [3, 2, 1]]\nassert len(permutations(list(range(6)))) == 720\n"
    ),
    _call("permutations", [([[1, 2]], [[1, 2], [2, 1]])]),
  ),
  (
    "flatten",
    _d("""
        def flatten(value):
          if not isinstance(value, list):
            return [value]
          return [x for item in value for x in flatten(item)]
        """),
    _assert("assert flatten([1, [2, [3, [4, []]]], 5]) == [1, 2, 3, 4, 5]\n"),
    _call("flatten", [([[1, [2, [3]]]], [1, 2, 3])]),
  ),
  (
    "hanoi",
    _d("""
        def hanoi(n, a='A', b='B', c='C'):
          if n == 0:
            return []
          return hanoi(n - 1, a, c, b) + [(a, c)] + hanoi(n - 1, b, a, c)
        """),
    _assert(
      "assert hanoi(2) == [('A', 'B'), ('A', 'C'), ('B', 'C')]\nassert len(hanoi(10)) == 1023\n"
    ),
    _call("hanoi", [([1], [["A", "C"]])]),
  ),
  (
    "ackermann-style nesting",
    _d("""
        def nest(n):
          return [] if n == 0 else [nest(n - 1)]
        """),
    _assert(
      "value = nest(40)\ndepth = 0\nwhile value:\n  value = value[0]\n  depth += 1\n"
      "assert depth == 40\n"
    ),
    _call("nest", [([2], [[[]]])]),
  ),
  (
    "raised recursion limit",
    _d("""
        import sys
        sys.setrecursionlimit(10000)
        def total(n):
          return 0 if n == 0 else n + total(n - 1)
        """),
    _assert("assert total(3000) == 4501500\n"),
    _call("total", [([3000], 4501500)]),
  ),
]

# --- classes the test code defines ---------------------------------------------------------------

LIST_NODE = _d("""
    class ListNode:
      def __init__(self, val=0, next=None):
        self.val = val
        self.next = next
      def __eq__(self, other):
        return isinstance(other, ListNode) and self.val == other.val and self.next == other.next
    def build(values):
      head = None
      for value in reversed(values):
        head = ListNode(value, head)
      return head
    def to_list(node):
      out = []
      while node is not None:
        out.append(node.val)
        node = node.next
      return out
    """)
REVERSE = {
  "iterative": _d("""
        def reverse(head):
          prev = None
          while head:
            head.next, prev, head = prev, head, head.next
          return prev
        """),
  "recursive": _d("""
        def reverse(head):
          if head is None or head.next is None:
            return head
          new_head = reverse(head.next)
          head.next.next = head
          head.next = None
          return new_head
        """),
  "rebuilt with the tests' class": _d("""
        def reverse(head):
          out = None
          while head is not None:
            out = ListNode(head.val, out)
            head = head.next
          return out
        """),
  "rebuilt with type(head)": _d("""
        def reverse(head):
          out = None
          while head is not None:
            out = type(head)(head.val, out)
            head = head.next
          return out
        """),
}
REVERSE_TESTS = [
  _assert(
    LIST_NODE + "assert to_list(reverse(build([1, 2, 3]))) == [3, 2, 1]\n"
    "assert reverse(None) is None\n"
    "assert reverse(build([1, 2, 3, 4])) == build([4, 3, 2, 1])\n"
    "assert to_list(reverse(build(list(range(500))))) == list(range(499, -1, -1))\n"
  ),
  _unittest(
    """
        def test_equal_nodes(self):
          self.assertEqual(reverse(build([5, 6])), build([6, 5]))
        def test_values(self):
          self.assertEqual(to_list(reverse(build([1]))), [1])
        def test_instance(self):
          self.assertIsInstance(reverse(build([1, 2])), ListNode)
        """,
    LIST_NODE,
  ),
]
MIDDLE = {
  "two pointers": _d("""
        def middle(head):
          slow = fast = head
          while fast and fast.next:
            slow, fast = slow.next, fast.next.next
          return slow
        """),
  "count then walk": _d("""
        def middle(head):
          n, node = 0, head
          while node:
            n, node = n + 1, node.next
          for _ in range(n // 2):
            head = head.next
          return head
        """),
}
MIDDLE_TESTS = [
  _assert(
    LIST_NODE + "head = build([1, 2, 3, 4, 5])\nassert middle(head) is head.next.next\n"
    "assert middle(build([1, 2])).val == 2\n"
  ),
]

TREE_NODE = _d("""
    class TreeNode:
      __slots__ = ('val', 'left', 'right')
      def __init__(self, val=0, left=None, right=None):
        self.val, self.left, self.right = val, left, right
    def inorder(node):
      return inorder(node.left) + [node.val] + inorder(node.right) if node else []
    """)
TREES = {
  "invert recursive": (
    "invert",
    _d("""
        def invert(root):
          if root:
            root.left, root.right = invert(root.right), invert(root.left)
          return root
        """),
  ),
  "invert with a stack": (
    "invert",
    _d("""
        def invert(root):
          stack = [root]
          while stack:
            node = stack.pop()
            if node:
              node.left, node.right = node.right, node.left
              stack += [node.left, node.right]
          return root
        """),
  ),
  "build a BST": (
    "bst",
    _d("""
        def bst(values):
          def insert(node, value):
            if node is None:
              return TreeNode(value)
            if value < node.val:
              node.left = insert(node.left, value)
            else:
              node.right = insert(node.right, value)
            return node
          root = None
          for value in values:
            root = insert(root, value)
          return root
        """),
  ),
  "balanced from sorted": (
    "bst",
    _d("""
        def bst(values):
          values = sorted(values)
          def make(lo, hi):
            if lo >= hi:
              return None
            mid = (lo + hi) // 2
            return TreeNode(values[mid], make(lo, mid), make(mid + 1, hi))
          return make(0, len(values))
        """),
  ),
}
TREE_TESTS = {
  "invert": [
    _assert(
      TREE_NODE + "root = TreeNode(2, TreeNode(1), TreeNode(3))\n"
      "assert inorder(invert(root)) == [3, 2, 1]\nassert invert(None) is None\n"
    ),
    _unittest(
      """
            def test_invert(self):
              root = TreeNode(4, TreeNode(2, TreeNode(1)), TreeNode(7))
              out = invert(root)
              self.assertIs(out, root)
              self.assertEqual(inorder(out), [7, 4, 2, 1])
            """,
      TREE_NODE,
    ),
  ],
  "bst": [
    _assert(
      TREE_NODE + "assert inorder(bst([5, 3, 8, 1])) == [1, 3, 5, 8]\n"
      "assert isinstance(bst([1]), TreeNode)\n"
    ),
    _unittest(
      """
            def test_sorted(self):
              self.assertEqual(inorder(bst([9, 2, 7])), [2, 7, 9])
            """,
      TREE_NODE,
    ),
  ],
}

GRAPH_NODE = _d("""
    class Node:
      def __init__(self, val, neighbors=None):
        self.val = val
        self.neighbors = neighbors if neighbors is not None else []
    def cycle(n):
      nodes = [Node(i + 1) for i in range(n)]
      for i, node in enumerate(nodes):
        node.neighbors = [nodes[i - 1], nodes[(i + 1) % n]]
      return nodes[0]
    def shape(node):
      seen, order, queue = {}, [], [node]
      while queue:
        current = queue.pop(0)
        if current.val in seen:
          continue
        seen[current.val] = sorted(n.val for n in current.neighbors)
        queue += current.neighbors
      return seen
    """)
CLONE = {
  "dfs with a map": _d("""
        def clone(node):
          copies = {}
          def visit(n):
            if n in copies:
              return copies[n]
            copy = copies[n] = Node(n.val)
            copy.neighbors = [visit(m) for m in n.neighbors]
            return copy
          return visit(node) if node else None
        """),
  "bfs": _d("""
        import collections
        def clone(node):
          if node is None:
            return None
          copies = {node: Node(node.val)}
          queue = collections.deque([node])
          while queue:
            n = queue.popleft()
            for m in n.neighbors:
              if m not in copies:
                copies[m] = Node(m.val)
                queue.append(m)
              copies[n].neighbors.append(copies[m])
          return copies[node]
        """),
}
CLONE_TESTS = [
  _assert(
    GRAPH_NODE + "original = cycle(4)\ncopy = clone(original)\n"
    "assert copy is not original\nassert shape(copy) == shape(original)\n"
    "assert clone(None) is None\n"
  ),
  _unittest(
    """
        def test_clone(self):
          original = cycle(5)
          copy = clone(original)
          self.assertIsNot(copy, original)
          self.assertEqual(shape(copy), shape(original))
        """,
    GRAPH_NODE,
  ),
]

POINT_KINDS = {
  "dataclass": "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Point:\n  x: int\n  y: int\n",
  "namedtuple": "import collections\nPoint = collections.namedtuple('Point', 'x y')\n",
  "class with __eq__ and __hash__": _d("""
        class Point:
          def __init__(self, x, y):
            self.x, self.y = x, y
          def __eq__(self, other):
            return (self.x, self.y) == (other.x, other.y)
          def __hash__(self):
            return hash((self.x, self.y))
          def __repr__(self):
            return f'Point({self.x}, {self.y})'
        """),
}
POINT_PROGRAMS = {
  "comprehension": "def corners(n):\n  return [Point(x, y) for x in (0, n) for y in (0, n)]\n",
  "set then sort": "def corners(n):\n  return sorted({Point(x, y) for x in (0, n) for y in (0, n)}, "
  "key=lambda p: (p.x, p.y))\n",
}


def _point_tests(point: str) -> list[dict]:
  return [
    _assert(
      point + "assert corners(2) == [Point(0, 0), Point(0, 2), Point(2, 0), Point(2, 2)]\n"
      "assert set(corners(1)) == {Point(0, 0), Point(0, 1), Point(1, 0), Point(1, 1)}\n"
    ),
    _unittest(
      """
          def test_corners(self):
            self.assertEqual(corners(3)[-1], Point(3, 3))
            self.assertIn(Point(0, 3), corners(3))
          """,
      point,
    ),
  ]


# --- containers, floats, functions, entry points ------------------------------------------------

CONTAINERS = [
  (
    "group by length",
    {
      "dict of lists": "def group(words):\n  out = {}\n  for w in words:\n    out.setdefault(len(w), []).append(w)\n  return out\n",
      "defaultdict": "import collections\ndef group(words):\n  out = collections.defaultdict(list)\n  for w in words:\n    out[len(w)].append(w)\n  return out\n",
      "groupby to dict": "import itertools\ndef group(words):\n  key = len\n  return {k: list(g) for k, g in itertools.groupby(sorted(words, key=key), key)}\n",
    },
    [
      _assert("assert group(['a', 'bb', 'c']) == {1: ['a', 'c'], 2: ['bb']}\n"),
      _assert(
        "def check(f):\n  want = {3: ['abc', 'xyz']}\n  assert f(['abc', 'xyz']) == want\ncheck(group)\n"
      ),
      _unittest(
        "def test_group(self):\n  self.assertDictEqual(dict(group(['aa', 'b'])), {2: ['aa'], 1: ['b']})\n"
      ),
      _call("group", [([["a", "bb"]], {"1": ["a"], "2": ["bb"]})]),
    ],
  ),
  (
    "counts",
    {
      "Counter": "import collections\ndef counts(text):\n  return collections.Counter(text.split())\n",
      "dict": "def counts(text):\n  out = {}\n  for w in text.split():\n    out[w] = out.get(w, 0) + 1\n  return out\n",
    },
    [
      _assert("assert counts('a b a') == {'a': 2, 'b': 1}\n"),
      _unittest(
        "def test_counts(self):\n  self.assertEqual(counts('x x y')['x'], 2)\n"
        "  self.assertEqual(dict(counts('q')), {'q': 1})\n"
      ),
      _call("counts", [(["a b a"], {"a": 2, "b": 1})]),
    ],
  ),
  (
    "nested structure",
    {
      "literal": "def nested():\n  return {'a': [(1, 2), {3, 4}], 'b': frozenset({5}), 'c': {'d': [None, True, 1.5, b'x', 1j]}}\n",
      "built": "def nested():\n  out = {}\n  out['a'] = [tuple([1, 2]), set([3, 4])]\n  out['b'] = frozenset([5])\n  out['c'] = dict(d=[None, True, 3 / 2, bytes([120]), complex(0, 1)])\n  return out\n",
    },
    [
      _assert(
        "assert nested() == {'a': [(1, 2), {3, 4}], 'b': frozenset({5}), 'c': {'d': [None, True, 1.5, b'x', 1j]}}\n"
      ),
      _unittest("def test_nested(self):\n  self.assertEqual(nested()['a'][1], {3, 4})\n"),
    ],
  ),
  (
    "deque window",
    {
      "deque": "import collections\ndef window(xs, k):\n  return collections.deque(xs, maxlen=k)\n",
      "list slice": "def window(xs, k):\n  return list(xs)[-k:]\n",
    },
    [
      _assert("assert list(window([1, 2, 3, 4], 2)) == [3, 4]\n"),
      _unittest(
        "def test_window(self):\n  self.assertEqual(list(window(range(5), 3)), [2, 3, 4])\n"
      ),
    ],
  ),
  (
    "ordered pairs",
    {
      "OrderedDict": "import collections\ndef pairs(n):\n  return collections.OrderedDict((i, i * i) for i in range(n))\n",
      "zip": "def pairs(n):\n  return dict(zip(range(n), (i * i for i in range(n))))\n",
    },
    [
      _assert(
        "assert pairs(3) == {0: 0, 1: 1, 2: 4}\nassert list(pairs(3).items())[-1] == (2, 4)\n"
      ),
      _unittest("def test_pairs(self):\n  self.assertEqual(pairs(2)[1], 1)\n"),
    ],
  ),
  (
    "in-place sort",
    {
      "list.sort": "def sort_in_place(xs):\n  xs.sort()\n",
      "insertion sort": "def sort_in_place(xs):\n  for i in range(1, len(xs)):\n    j = i\n    while j and xs[j - 1] > xs[j]:\n      xs[j - 1], xs[j] = xs[j], xs[j - 1]\n      j -= 1\n",
    },
    [
      _assert("xs = [3, 1, 2]\nassert sort_in_place(xs) is None\nassert xs == [1, 2, 3]\n"),
      _unittest(
        "def test_sort(self):\n  xs = [5, 4]\n  sort_in_place(xs)\n  self.assertEqual(xs, [4, 5])\n"
      ),
    ],
  ),
  (
    "library values",
    {
      "fractions and dates": "import datetime, fractions, decimal\ndef values():\n  return [fractions.Fraction(1, 3), datetime.date(2024, 1, 2), decimal.Decimal('1.5'), range(3)]\n",
    },
    [
      _assert(
        "import datetime, fractions, decimal\nv = values()\n"
        "assert v[0] == fractions.Fraction(1, 3) and v[1] == datetime.date(2024, 1, 2)\n"
        "assert v[2] == decimal.Decimal('1.5') and list(v[3]) == [0, 1, 2]\n"
      ),
      _unittest(
        "def test_values(self):\n  import fractions\n  self.assertEqual(values()[0] * 3, 1)\n"
        "  self.assertEqual(values()[0], fractions.Fraction(2, 6))\n"
      ),
    ],
  ),
  (
    "program objects the tests build",
    {
      "__lt__ and sort": _d("""
            class Job:
              def __init__(self, priority, name):
                self.priority, self.name = priority, name
              def __lt__(self, other):
                return self.priority < other.priority
            def order(jobs):
              jobs.sort()
              return [job.name for job in jobs]
            """),
      "heapq": _d("""
            import heapq
            class Job:
              def __init__(self, priority, name):
                self.priority, self.name = priority, name
              def __lt__(self, other):
                return self.priority < other.priority
            def order(jobs):
              heapq.heapify(jobs)
              return [heapq.heappop(jobs).name for _ in range(len(jobs))]
            """),
    },
    [
      _assert(
        "jobs = [Job(3, 'c'), Job(1, 'a'), Job(2, 'b')]\nassert order(jobs) == ['a', 'b', 'c']\n"
      ),
      _unittest(
        "def test_order(self):\n  self.assertEqual(order([Job(2, 'x'), Job(1, 'y')]), ['y', 'x'])\n"
      ),
    ],
  ),
  (
    "in-place on the tests' nodes",
    {
      "unlink": "def delete_next(node):\n  node.next = node.next.next\n",
      "copy forward": "def delete_next(node):\n  nxt = node.next\n  node.next = nxt.next\n  nxt.next = None\n",
    },
    [
      _assert(
        LIST_NODE + "head = build([1, 2, 3])\nassert delete_next(head) is None\n"
        "assert to_list(head) == [1, 3]\nassert head == build([1, 3])\n"
      )
    ],
  ),
  (
    "own container class",
    {
      "generator __iter__": _d("""
            class Bag:
              def __init__(self, items):
                self.items = sorted(items)
              def __len__(self):
                return len(self.items)
              def __iter__(self):
                yield from self.items
              def __getitem__(self, i):
                return self.items[i]
              def __repr__(self):
                return 'Bag(' + ', '.join(map(str, self.items)) + ')'
            def make_bag(xs):
              return Bag(xs)
            """),
      "sequence protocol": _d("""
            class Bag:
              def __init__(self, items):
                self._items = tuple(sorted(items))
              def __getitem__(self, i):
                return self._items[i]
              def __len__(self):
                return len(self._items)
              def __str__(self):
                return 'Bag(%s)' % ', '.join(str(x) for x in self._items)
              __repr__ = __str__
            def make_bag(xs):
              return Bag(xs)
            """),
    },
    [
      _assert(
        "b = make_bag([3, 1, 2])\nassert len(b) == 3 and b\nassert list(b) == [1, 2, 3]\n"
        "assert b[0] == 1 and str(b) == 'Bag(1, 2, 3)'\nassert not make_bag([])\n"
      ),
      _unittest(
        "def test_bag(self):\n  b = make_bag([2, 1])\n  self.assertEqual(list(b), [1, 2])\n"
        "  self.assertTrue(b)\n  self.assertEqual(repr(b), 'Bag(1, 2)')\n"
        "  self.assertEqual(sorted(b, reverse=True), [2, 1])\n"
      ),
    ],
  ),
  (
    "own record class",
    {
      "plain class": "class Stats:\n  def __init__(self, lo, hi):\n    self.lo, self.hi = lo, hi\n"
      "def stats(xs):\n  return Stats(min(xs), max(xs))\n",
      "slots class": "class Stats:\n  __slots__ = ('lo', 'hi')\n  def __init__(self, lo, hi):\n    self.lo, self.hi = lo, hi\n"
      "def stats(xs):\n  return Stats(min(xs), max(xs))\n",
    },
    [
      _assert("s = stats([3, 1, 2])\nassert (s.lo, s.hi) == (1, 3)\n"),
      _unittest(
        "def test_stats(self):\n  s = stats([7])\n  self.assertEqual(s.lo, 7)\n  self.assertEqual(s.hi, 7)\n"
      ),
    ],
  ),
]

# Records and numbers the standard library makes for the program: dataclasses (whose methods
# dataclasses writes, with no source file), namedtuples, enums, fractions and decimals, compared
# in the child or, against a literal, in the pool; library classes; methods behind functools.
RECORDS = [
  (
    "the program's dataclass",
    {
      "dataclass": "import dataclasses\n@dataclasses.dataclass\nclass Pt:\n  x: int\n  y: int\n"
      "def mid(a, b):\n  return Pt((a.x + b.x) // 2, (a.y + b.y) // 2)\n",
      "frozen dataclass": "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass Pt:\n"
      "  x: int\n  y: int\ndef mid(a, b):\n  return Pt(*((u + v) // 2 for u, v in "
      "((a.x, b.x), (a.y, b.y))))\n",
      "slotted ordered dataclass": "import dataclasses\n@dataclasses.dataclass(slots=True, order=True)\n"
      "class Pt:\n  x: int\n  y: int = 0\ndef mid(a, b):\n"
      "  lo, hi = sorted([a, b])\n  return Pt((lo.x + hi.x) // 2, (lo.y + hi.y) // 2)\n",
    },
    [
      _assert(
        "assert mid(Pt(0, 0), Pt(2, 4)) == Pt(1, 2)\nassert mid(Pt(1, 1), Pt(1, 1)) != Pt(0, 0)\n"
        "assert [mid(Pt(0, 0), Pt(2, 2))] == [Pt(1, 1)]\n"
      ),
      _unittest(
        "def test_mid(self):\n  self.assertEqual(mid(Pt(0, 2), Pt(2, 0)), Pt(1, 1))\n"
        "  self.assertEqual(repr(mid(Pt(0, 0), Pt(0, 0))), 'Pt(x=0, y=0)')\n"
      ),
    ],
  ),
  (
    "the program's dataclass holding a list",
    {
      "default_factory": "import dataclasses\n@dataclasses.dataclass\nclass Tree:\n  val: int\n"
      "  kids: list = dataclasses.field(default_factory=list)\n"
      "def chain(n):\n  return Tree(n, [chain(n - 1)] if n else [])\n",
      "frozen tuple field": "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Tree:\n"
      "  val: int\n  kids: tuple = ()\ndef chain(n):\n  t = Tree(0)\n"
      "  for v in range(1, n + 1):\n    t = Tree(v, (t,))\n  return t\n",
    },
    [
      _assert(
        "assert chain(0).val == 0\nassert chain(2).kids[0].kids[0].val == 0\n"
        "assert chain(1) == chain(1) and chain(1) != chain(2)\n"
      )
    ],
  ),
  (
    "the program's namedtuple",
    {
      "collections": "import collections\nSpan = collections.namedtuple('Span', 'lo hi')\n"
      "def span(xs):\n  return Span(min(xs), max(xs))\n",
      "typing": "from typing import NamedTuple\nclass Span(NamedTuple):\n  lo: int\n  hi: int\n"
      "def span(xs):\n  s = sorted(xs)\n  return Span(s[0], s[-1])\n",
    },
    [
      _assert(
        "assert span([3, 1, 2]) == (1, 3)\nassert span([5]) == Span(5, 5)\nassert span([1, 2]).hi == 2\n"
      ),
      _unittest(
        "def test_span(self):\n  self.assertEqual(span([4, 2]), (2, 4))\n  self.assertEqual(span([1]).lo, 1)\n"
      ),
      _call("span", [([[3, 1, 2]], [1, 3])]),
    ],
  ),
  (
    "the program's enum",
    {
      "Enum": "import enum\nclass Level(enum.Enum):\n  LOW = 1\n  HIGH = 2\n"
      "def level(n):\n  return Level.HIGH if n > 5 else Level.LOW\n",
      "auto and a method": "import enum\nclass Level(enum.Enum):\n  LOW = enum.auto()\n  HIGH = enum.auto()\n"
      "  def flip(self):\n    return Level.LOW if self is Level.HIGH else Level.HIGH\n"
      "def level(n):\n  return Level.LOW.flip() if n > 5 else Level.LOW\n",
    },
    [
      _assert("assert level(9) == Level.HIGH\nassert level(1) is Level.LOW\n"),
      _unittest(
        "def test_level(self):\n  self.assertIs(level(7), Level.HIGH)\n  self.assertEqual(level(0).name, 'LOW')\n"
      ),
    ],
  ),
  (
    "the program's IntEnum",
    {
      "IntEnum": "import enum\nclass Level(enum.IntEnum):\n  LOW = 1\n  HIGH = 2\n"
      "def level(n):\n  return Level.HIGH if n > 5 else Level.LOW\n",
      "IntFlag": "import enum\nclass Level(enum.IntFlag):\n  LOW = 1\n  HIGH = 2\n"
      "def level(n):\n  return Level.HIGH if n > 5 else Level.LOW\n",
    },
    [
      _assert("assert level(9) == 2\nassert level(1) == Level.LOW\nassert level(8) > Level.LOW\n"),
      _unittest(
        "def test_level(self):\n  self.assertEqual(level(7), 2)\n  self.assertEqual(str(int(level(0))), '1')\n"
      ),
      _call("level", [([9], 2), ([0], 1)]),
    ],
  ),
  (
    "generic classes (__class_getitem__ = classmethod(GenericAlias))",
    {
      "queue.Queue": "import queue\ndef make(xs):\n  q = queue.Queue()\n  for x in xs:\n    q.put(x)\n  return q\n",
      "own generic class": "import types\nclass Q:\n  __class_getitem__ = classmethod(types.GenericAlias)\n"
      "  def __init__(self):\n    self.items = []\n  def put(self, x):\n    self.items.append(x)\n"
      "  def get(self):\n    return self.items.pop(0)\n"
      "def make(xs):\n  q = Q()\n  for x in xs:\n    q.put(x)\n  return q\n",
    },
    [
      _assert("q = make([3, 4])\nassert q.get() == 3\nassert q.get() == 4\n"),
      _unittest(
        "def test_fifo(self):\n  q = make('ab')\n  self.assertEqual([q.get(), q.get()], ['a', 'b'])\n"
      ),
    ],
  ),
  (
    "library classes built on collections.abc",
    {
      "ChainMap": "import collections\ndef layered(base, top):\n  return collections.ChainMap(top, base)\n",
      "UserDict": "import collections\ndef layered(base, top):\n  return collections.UserDict({**base, **top})\n",
    },
    [
      _assert(
        "want = {'a': 1, 'b': 3}\nassert layered({'a': 1, 'b': 2}, {'b': 3}) == want\n"
        "assert layered({}, {'x': 0})['x'] == 0\n"
      ),
      _assert(
        "assert layered({'a': 1, 'b': 2}, {'b': 3}) == {'a': 1, 'b': 3}\n"
        "assert layered({'a': 1}, {}) != {'a': 2}\n"
      ),
      _unittest(
        "def test_layered(self):\n  self.assertEqual(dict(layered({'a': 1}, {})), {'a': 1})\n"
        "  self.assertEqual(layered({'a': 1}, {'b': 2}), {'a': 1, 'b': 2})\n"
      ),
    ],
  ),
  (
    "a linked list of the tests' class, against None",
    {
      "built": "def make(n):\n  head = None\n  for i in range(n):\n    head = ListNode(i, head)\n  return head\n",
    },
    [
      _assert(
        LIST_NODE + "assert make(3) is not None\nassert make(0) is None\nassert make(2)\n"
        "assert make(2) != None\n"
      ),
      _unittest(
        "def test_make(self):\n  self.assertIsNotNone(make(2))\n  self.assertIsNone(make(0))\n"
        "  self.assertTrue(make(1))\n  self.assertNotEqual(make(1), None)\n",
        LIST_NODE,
      ),
    ],
  ),
  (
    "dict views and numpy dtypes against literals",
    {
      "views": "import numpy as np\ndef summary(d):\n  return d.keys(), d.items(), np.array(list(d.values())).dtype\n",
    },
    [
      _assert(
        "keys, items, dtype = summary({'a': 1, 'b': 2})\nassert keys == {'a', 'b'}\n"
        "assert keys != ['a', 'b']\nassert items == {('a', 1), ('b', 2)}\nassert dtype == 'int64'\n"
        "assert dtype != 'float64'\n"
      ),
      _unittest(
        "def test_summary(self):\n  keys, items, dtype = summary({'x': 1.5})\n"
        "  self.assertEqual(keys, {'x'})\n  self.assertEqual(items, {('x', 1.5)})\n"
        "  self.assertEqual(dtype, 'float64')\n  self.assertNotEqual(dtype, 'int64')\n"
      ),
    ],
  ),
  (
    "UserList against a list literal",
    {
      "UserList": "import collections\ndef doubled(xs):\n  return collections.UserList(x * 2 for x in xs)\n",
    },
    [
      _assert(
        "assert doubled([1, 2]) == [2, 4]\nassert doubled([1]) != (2,)\nassert doubled([]) is not None\n"
      ),
      _unittest("def test_doubled(self):\n  self.assertEqual(doubled([3]), [6])\n"),
    ],
  ),
  (
    "UserString against a str literal",
    {
      "UserString": "import collections\ndef doubled(xs):\n  return collections.UserString(''.join(c * 2 for c in xs))\n",
    },
    [
      _assert("assert doubled('ab') == 'aabb'\nassert doubled('ab') != 'ab'\n"),
      _unittest("def test_doubled(self):\n  self.assertEqual(doubled('x'), 'xx')\n"),
    ],
  ),
  (
    "methods behind functools wrappers",
    {
      "cached_property": "import functools\nclass Solution:\n  @functools.cached_property\n  def squares(self):\n"
      "    return [i * i for i in range(10)]\n  def square(self, i):\n    return self.squares[i]\n",
      "partialmethod": "import functools\nclass Solution:\n  def power(self, x, k):\n    return x ** k\n"
      "  square = functools.partialmethod(power, k=2)\n",
      "lru_cache": "import functools\nclass Solution:\n  @functools.lru_cache(maxsize=None)\n  def square(self, i):\n"
      "    return i * i if i < 2 else self.square(i - 1) + 2 * i - 1\n",
      "staticmethod of a partial": "import functools, operator\nclass Solution:\n"
      "  square = staticmethod(functools.partial(pow, exp=2))\n",
    },
    [
      _assert(
        "want = 9\nassert Solution().square(3) == want\nassert [Solution().square(i) for i in range(3)] == [0, 1, 4]\n"
      ),
      _unittest("def test_square(self):\n  self.assertEqual(Solution().square(4), 16)\n"),
    ],
  ),
  (
    "fractions",
    {
      "Fraction": "from fractions import Fraction\ndef share(a, b):\n  return Fraction(a, a + b)\n",
      "Fraction sum": "import fractions\ndef share(a, b):\n  return sum(fractions.Fraction(1, a + b) for _ in range(a))\n",
    },
    [
      _assert(
        "from fractions import Fraction\nassert share(1, 1) == 0.5\nassert share(1, 2) * 3 == 1\n"
        "assert share(2, 4) == Fraction(1, 3)\n"
      ),
      _unittest("def test_share(self):\n  self.assertEqual(share(1, 3), 0.25)\n"),
    ],
  ),
  (
    "decimals",
    {
      "Decimal": "from decimal import Decimal\ndef price(cents):\n  return Decimal(cents) / 100\n",
      "quantize": "import decimal\ndef price(cents):\n  return (decimal.Decimal(cents) / 100).quantize(decimal.Decimal('0.01'))\n",
    },
    [
      _assert(
        "from decimal import Decimal\nassert price(150) == 1.5\nassert price(5) == Decimal('0.05')\n"
      ),
      _unittest("def test_price(self):\n  self.assertEqual(price(250), 2.5)\n"),
    ],
  ),
]

FLOATS = {
  "mean": (
    "mean",
    {
      "sum/len": "def mean(xs):\n  return sum(xs) / len(xs)\n",
      "statistics": "import statistics\ndef mean(xs):\n  return statistics.fmean(xs)\n",
      "fsum": "import math\ndef mean(xs):\n  return math.fsum(xs) / len(xs)\n",
    },
    [([0.1, 0.2, 0.3], 0.2), ([1, 2], 1.5)],
  ),
  "hypot": (
    "norm",
    {
      "sqrt": "def norm(x, y):\n  return (x * x + y * y) ** 0.5\n",
      "math.hypot": "import math\ndef norm(x, y):\n  return math.hypot(x, y)\n",
    },
    [(3, 4), 5.0],
  ),
}


def _float_cases():
  for family, (name, programs, cases) in FLOATS.items():
    if family == "mean":
      tests = [
        _assert("assert abs(mean([0.1, 0.2, 0.3]) - 0.2) < 1e-9\nassert mean([1, 2]) == 1.5\n"),
        _assert("import math\nassert math.isclose(mean([0.1, 0.2, 0.3]), 0.2, rel_tol=1e-9)\n"),
        _unittest(
          "def test_mean(self):\n  self.assertAlmostEqual(mean([0.1, 0.2, 0.3]), 0.2)\n"
          "  self.assertAlmostEqual(mean([1, 2, 4]), 7 / 3, places=6)\n"
        ),
      ]
    else:
      tests = [
        _assert("assert abs(norm(3, 4) - 5) < 1e-12\nassert norm(0, 0) == 0\n"),
        _unittest("def test_norm(self):\n  self.assertAlmostEqual(norm(1, 1), 2 ** 0.5)\n"),
        _call("norm", [([3, 4], 5.0), ([0, 0], 0.0)]),
      ]
    for variant, program in programs.items():
      for i, spec in enumerate(tests):
        yield f"float {name} {variant} #{i}", program, spec


FUNCTIONS = {
  "closure": "def make_adder(k):\n  def add(x):\n    return x + k\n  return add\n",
  "lambda": "def make_adder(k):\n  return lambda x: x + k\n",
  "partial": "import functools, operator\ndef make_adder(k):\n  return functools.partial(operator.add, k)\n",
  "callable object": "class Adder:\n  def __init__(self, k):\n    self.k = k\n  def __call__(self, x):\n    return x + self.k\n"
  "def make_adder(k):\n  return Adder(k)\n",
  "nested closures": "def make_adder(k):\n  def outer():\n    return lambda x: x + k\n  return outer()\n",
}
FUNCTION_TESTS = [
  _assert(
    "assert make_adder(3)(4) == 7\nassert [make_adder(i)(1) for i in range(3)] == [1, 2, 3]\n"
  ),
  _assert(
    "add5 = make_adder(5)\nexpected = 12\nassert add5(7) == expected\nassert callable(add5)\n"
  ),
  _unittest(
    "def test_adder(self):\n  self.assertEqual(make_adder(-1)(1), 0)\n"
    "  self.assertEqual(list(map(make_adder(1), [1, 2])), [2, 3])\n"
  ),
]

SOLUTIONS = {
  "two sum with a dict": _d("""
        class Solution:
          def twoSum(self, nums, target):
            seen = {}
            for i, x in enumerate(nums):
              if target - x in seen:
                return [seen[target - x], i]
              seen[x] = i
        """),
  "two sum brute force": _d("""
        from typing import List
        class Solution:
          def twoSum(self, nums: List[int], target: int) -> List[int]:
            for i in range(len(nums)):
              for j in range(i + 1, len(nums)):
                if nums[i] + nums[j] == target:
                  return [i, j]
            return []
        """),
  "two sum via a helper method": _d("""
        class Solution:
          def _index(self, nums):
            return {x: i for i, x in enumerate(nums)}
          def twoSum(self, nums, target):
            index = self._index(nums)
            for i, x in enumerate(nums):
              j = index.get(target - x)
              if j is not None and j != i:
                return sorted([i, j])
        """),
  "two sum staticmethod": _d("""
        class Solution:
          @staticmethod
          def _pairs(n):
            return ((i, j) for i in range(n) for j in range(i + 1, n))
          def twoSum(self, nums, target):
            return next([i, j] for i, j in self._pairs(len(nums)) if nums[i] + nums[j] == target)
        """),
}
SOLUTION_TESTS = [
  _call("Solution().twoSum", [([[2, 7, 11, 15], 9], [0, 1]), ([[3, 2, 4], 6], [1, 2])]),
  _assert(
    "assert Solution().twoSum([2, 7, 11, 15], 9) == [0, 1]\n"
    "want = [1, 2]\nassert Solution().twoSum([3, 2, 4], 6) == want\n"
  ),
  _unittest("def test_two_sum(self):\n  self.assertEqual(Solution().twoSum([3, 3], 6), [0, 1])\n"),
]

MIN_STACK = {
  "two lists": _d("""
        class MinStack:
          def __init__(self):
            self.items, self.mins = [], []
          def push(self, x):
            self.items.append(x)
            self.mins.append(min(x, self.mins[-1]) if self.mins else x)
          def pop(self):
            self.mins.pop()
            return self.items.pop()
          def getMin(self):
            return self.mins[-1]
          @property
          def size(self):
            return len(self.items)
        """),
  "pairs": _d("""
        class MinStack:
          def __init__(self):
            self.stack = []
          def push(self, x):
            self.stack.append((x, min(x, self.stack[-1][1]) if self.stack else x))
          def pop(self):
            return self.stack.pop()[0]
          def getMin(self):
            return self.stack[-1][1]
          @property
          def size(self):
            return len(self.stack)
        """),
}
MIN_STACK_TESTS = [
  _assert(
    "s = MinStack()\nfor x in (3, 1, 2):\n  s.push(x)\nassert s.getMin() == 1\n"
    "assert s.pop() == 2\nassert s.size == 2\ns.pop()\nassert s.getMin() == 3\n"
  ),
  _unittest(
    "def test_stack(self):\n  s = MinStack()\n  s.push(5)\n  s.push(4)\n"
    "  self.assertEqual(s.getMin(), 4)\n  self.assertEqual(s.pop(), 4)\n"
    "  self.assertEqual(s.getMin(), 5)\n"
  ),
]

MISC = [
  # Tests that patch the library themselves (BigCodeBench does): the patch, put back by the
  # tests, is not the program's.
  (
    "reads a patched input()",
    "def double_input():\n  return 2 * int(input())\n",
    [
      _unittest(
        "@patch('builtins.input', return_value='5')\ndef test_double(self, _):\n"
        "  self.assertEqual(double_input(), 10)\n",
        "from unittest.mock import patch\n",
      )
    ],
  ),
  (
    "calls a patched os.path.exists",
    "import os\ndef exists(path):\n  return os.path.exists(path)\n",
    [
      _unittest(
        "def test_exists(self):\n  with mock.patch('os.path.exists', return_value=True):\n"
        "    self.assertTrue(exists('/nowhere'))\n",
        "from unittest import mock\n",
      )
    ],
  ),
  (
    "draws from random.random patched in setUp",
    "import random\ndef coin():\n  return 'heads' if random.random() >= 0.5 else 'tails'\n",
    [
      _unittest(
        "def setUp(self):\n  self.patcher = patch('random.random', return_value=0.5)\n"
        "  self.patcher.start()\ndef tearDown(self):\n  self.patcher.stop()\n"
        "def test_coin(self):\n  self.assertEqual(coin(), 'heads')\n",
        "from unittest.mock import patch\n",
      )
    ],
  ),
  (
    "reads an environment the tests set",
    "import os\ndef home():\n  return os.environ['HOME_DIR']\n",
    [
      _unittest(
        "@mock.patch.dict(os.environ, {'HOME_DIR': '/x'})\ndef test_home(self):\n"
        "  self.assertEqual(home(), '/x')\n",
        "import os\nfrom unittest import mock\n",
      )
    ],
  ),
  (
    "returns None",
    "def nothing(x):\n  x.append(1)\n",
    [_assert("xs = []\nassert nothing(xs) is None\nassert xs == [1]\n")],
  ),
  (
    "raises",
    "def positive(x):\n  if x <= 0:\n    raise ValueError('not positive')\n  return x\n",
    [
      _assert(
        "try:\n  positive(-1)\n  assert False\nexcept ValueError:\n  pass\nassert positive(2) == 2\n"
      ),
      _unittest("def test_raises(self):\n  with self.assertRaises(ValueError):\n    positive(0)\n"),
    ],
  ),
  (
    "bytes and complex",
    "def pack(n):\n  return n.to_bytes(2, 'big'), complex(n, -n)\n",
    [_assert("assert pack(258) == (b'\\x01\\x02', 258 - 258j)\n"), _call("pack", [])],
  ),
  (
    "strings",
    "def title(s):\n  return ' '.join(w.capitalize() for w in s.split())\n",
    [
      _assert("assert title('hello  world') == 'Hello World'\n"),
      _unittest(
        "def test_title(self):\n  self.assertEqual(title('a b'), 'A B')\n  self.assertTrue(title('x').istitle())\n"
      ),
      _call("title", [(["ab cd"], "Ab Cd")]),
    ],
  ),
  (
    "uses threads",
    "import concurrent.futures\ndef squares(xs):\n  with concurrent.futures.ThreadPoolExecutor(2) as ex:\n"
    "    return list(ex.map(lambda x: x * x, xs))\n",
    [_assert("assert squares([1, 2, 3]) == [1, 4, 9]\n"), _call("squares", [([[2]], [4])])],
  ),
  (
    "bool results",
    "def is_sorted(xs):\n  return all(a <= b for a, b in zip(xs, xs[1:]))\n",
    [
      _assert(
        "assert is_sorted([1, 2]) is True\nassert is_sorted([2, 1]) is False\nassert is_sorted([])\n"
      ),
      _unittest(
        "def test_sorted(self):\n  self.assertTrue(is_sorted([1]))\n  self.assertFalse(is_sorted([3, 2]))\n"
      ),
    ],
  ),
  (
    "returns a class",
    "class Greeter:\n  def greet(self, name):\n    return 'hi ' + name\n"
    "def make():\n  return Greeter\n",
    [_assert("assert make()().greet('x') == 'hi x'\n")],
  ),
  (
    "generator of records",
    "def rows(n):\n  for i in range(n):\n    yield {'id': i, 'tags': [str(i)] * i}\n",
    [
      _assert(
        "assert list(rows(3)) == [{'id': 0, 'tags': []}, {'id': 1, 'tags': ['1']}, {'id': 2, 'tags': ['2', '2']}]\n"
      ),
      _unittest("def test_rows(self):\n  self.assertEqual(max(r['id'] for r in rows(4)), 3)\n"),
    ],
  ),
]

NUMPY = [
  (
    "numpy array",
    "import numpy as np\ndef cumulative(xs):\n  return np.cumsum(np.asarray(xs))\n",
    [
      _unittest(
        "def test_cumsum(self):\n  import numpy as np\n"
        "  np.testing.assert_array_equal(cumulative([1, 2, 3]), np.array([1, 3, 6]))\n"
        "  self.assertTrue(np.allclose(cumulative([0.5, 0.5]), [0.5, 1.0]))\n"
      ),
      _assert(
        "import numpy as np\nassert np.array_equal(cumulative([1, 1]), [1, 2])\n"
        "assert cumulative([4])[0] == 4\n"
      ),
    ],
  ),
  (
    "numpy scalar",
    "import numpy as np\ndef total(xs):\n  return np.sum(np.asarray(xs, dtype=np.int64))\n",
    [
      _assert("assert total([1, 2, 3]) == 6\n"),
      _call("total", [([[1, 2, 3]], 6)]),
      _unittest("def test_total(self):\n  self.assertEqual(total([5]), 5)\n"),
    ],
  ),
  (
    "numpy float scalar",
    "import numpy as np\ndef average(xs):\n  return np.mean(xs)\n",
    [
      _unittest("def test_mean(self):\n  self.assertAlmostEqual(average([1.0, 2.0]), 1.5)\n"),
      _assert("assert average([1.0, 2.0]) == 1.5\n"),
    ],
  ),
  (
    "numpy object array",
    "import numpy as np\ndef words(text):\n  return np.array(text.split(), dtype=object)\n",
    [_unittest("def test_words(self):\n  self.assertEqual(list(words('a b')), ['a', 'b'])\n")],
  ),
  (
    "pandas frame",
    _d("""
        import pandas as pd
        def frame(rows):
          df = pd.DataFrame(rows, columns=['name', 'score'])
          return df.sort_values('score', ascending=False).reset_index(drop=True)
        """),
    [
      _unittest("""
            def test_frame(self):
              import pandas as pd
              got = frame([('a', 1), ('b', 3)])
              want = pd.DataFrame({'name': ['b', 'a'], 'score': [3, 1]})
              pd.testing.assert_frame_equal(got, want)
              self.assertEqual(list(got['name']), ['b', 'a'])
            """)
    ],
  ),
  (
    "pandas series and a dict",
    _d("""
        import pandas as pd
        def summary(values):
          s = pd.Series(values, name='v')
          return s.describe(), {'n': int(s.count())}
        """),
    [
      _unittest("""
            def test_summary(self):
              stats, info = summary([1.0, 2.0, 3.0])
              self.assertAlmostEqual(stats['mean'], 2.0)
              self.assertEqual(info, {'n': 3})
            """)
    ],
  ),
]

# Real code, as BigCodeBench's golds are written (each pattern a false verdict once): libraries
# that change their own state as they run, lazy proxies the tests configure, library callable
# objects read by attribute, generators inside what a function returns, classes made inside a
# function, masked arrays, the tests' own mocks handed back, files in /tmp, a server on loopback.
REAL_CODE = [
  (
    "libraries' lazy state: pyplot, PIL, mimetypes, typing_extensions, pandas' sqlite adapters",
    _d("""
        import mimetypes, sqlite3, datetime
        import typing_extensions  # installs its own typing._check_generic as it loads
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        import pandas as pd
        from PIL import Image
        def run(path):
          fig, ax = plt.subplots()  # pyplot notes its display hook on the first figure
          ax.plot([1, 2])
          Image.new('RGB', (2, 2)).save(path)
          with Image.open(path) as im:  # PIL loads its plugins, once
            size = im.size
          kind = mimetypes.guess_type(path)[0]  # mimetypes builds its tables, once
          frame = pd.DataFrame({'day': [datetime.date(2024, 1, 2)]})
          with sqlite3.connect(':memory:') as db:  # pandas registers sqlite3 adapters
            frame.to_sql('t', db, index=False)
            rows = db.execute('select count(*) from t').fetchone()[0]
          return len(ax.lines), size, kind, rows
        """),
    [
      _unittest("""
            def test_run(self):
              import os, tempfile
              path = os.path.join(tempfile.mkdtemp(), 'x.png')
              self.assertEqual(run(path), (1, (2, 2), 'image/png', 1))
            """),
      _assert(
        "import os, tempfile\npath = os.path.join(tempfile.mkdtemp(), 'y.png')\n"
        "assert run(path) == (1, (2, 2), 'image/png', 1)\n"
      ),
    ],
  ),
  (
    "a lazy proxy the tests configure",
    _d("""
        class Settings:
          def __init__(self):
            object.__setattr__(self, '_ready', False)
          def __getattribute__(self, name):
            if not object.__getattribute__(self, '_ready'):
              raise RuntimeError('settings are not configured: ' + name)
            return object.__getattribute__(self, name)
          def __call__(self):
            return self
          def configure(self, **values):
            for key, value in values.items():
              object.__setattr__(self, key, value)
        settings = Settings()
        def greeting():
          return 'hello ' + settings.NAME
        """),
    [
      _unittest("""
            @classmethod
            def setUpClass(cls):
              object.__setattr__(settings, '_ready', True)
              settings.configure(NAME='x')
            def test_greeting(self):
              self.assertEqual(greeting(), 'hello x')
            """)
    ],
  ),
  (
    "library and program callable objects at module level",
    _d("""
        from scipy.stats import norm
        import operator
        class Scale:
          def __init__(self, k):
            self.k = k
          def __call__(self, x):
            return self.k * x
        double = Scale(2)
        second = operator.itemgetter(1)
        def density(x):
          return round(float(norm.pdf(x)), 4)
        """),
    [
      _unittest("""
            def test_objects(self):
              self.assertEqual(density(0), 0.3989)
              self.assertAlmostEqual(norm.cdf(0), 0.5)
              self.assertEqual(double(4), 8)
              self.assertEqual(double.k, 2)
              self.assertEqual(second('ab'), 'b')
            """)
    ],
  ),
  (
    "generators inside what a function returns",
    _d("""
        def split(xs):
          def evens():
            yield from (x for x in xs if x % 2 == 0)
          return evens(), sum(1 for x in xs if x % 2)
        def batches(xs, n):
          return [iter(xs[i:i + n]) for i in range(0, len(xs), n)]
        """),
    [
      _unittest("""
            def test_split(self):
              evens, odd = split([1, 2, 3, 4])
              self.assertEqual(list(evens), [2, 4])
              self.assertEqual(odd, 2)
              self.assertEqual([list(b) for b in batches([1, 2, 3], 2)], [[1, 2], [3]])
            """),
      _assert("evens, odd = split([5, 6])\nassert list(evens) == [6] and odd == 1\n"),
    ],
  ),
  (
    "a handler class made inside the function",
    _d("""
        import http.server
        def make_handler(greeting):
          class Handler(http.server.BaseHTTPRequestHandler):
            def reply(self, name):
              return f'{greeting} {name}'
          return Handler
        """),
    [
      _unittest("""
            def test_handler(self):
              import http.server
              handler = make_handler('hi')
              self.assertTrue(issubclass(handler, http.server.BaseHTTPRequestHandler))
              self.assertEqual(handler.reply(None, 'x'), 'hi x')
            """)
    ],
  ),
  (
    "masked and one-item arrays against literals",
    _d("""
        import numpy as np
        def peak(values):
          data = np.ma.masked_invalid(np.asarray(values, dtype=float))
          return data[data == data.max()][:1]
        def total(values):
          return np.array([sum(values)])
        """),
    [
      _unittest("""
            def test_peak(self):
              self.assertEqual(peak([1, float('nan'), 3]), 3.0)
              self.assertEqual(total([1, 2]), 3)
              self.assertNotEqual(total([1, 2]), 4)
            """),
      _assert("assert peak([2, 5]) == 5\nassert total([4]) == 4\n"),
    ],
  ),
  (
    "the tests' own mocks, handed back",
    _d("""
        def send(client, message):
          client.connect()
          client.send(message)
          return client
        def reply(client):
          return client.receive()
        """),
    [
      _unittest("""
            def test_send(self):
              from unittest.mock import MagicMock
              client = MagicMock()
              self.assertIs(send(client, 'hi'), client)
              client.send.assert_called_once_with('hi')
              self.assertIs(reply(client), client.receive.return_value)
            """)
    ],
  ),
  (
    "files in /tmp",
    _d("""
        import json, os
        def load(path):
          with open(path) as f:
            return json.load(f)
        def save(data, path='/tmp/precisecoder_out.json'):
          with open(path, 'w') as f:
            json.dump(data, f)
          return os.path.getsize(path)
        """),
    [
      _unittest("""
            def setUp(self):
              with open('/tmp/test_data.json', 'w') as f:
                f.write('{"a": 1}')
            def tearDown(self):
              import os
              os.remove('/tmp/test_data.json')
            def test_files(self):
              self.assertEqual(load('/tmp/test_data.json'), {'a': 1})
              self.assertEqual(save([1]), 3)
            """)
    ],
  ),
  (
    "a local server on loopback",
    _d("""
        import urllib.request
        def fetch(port):
          with urllib.request.urlopen(f'http://127.0.0.1:{port}/x', timeout=5) as response:
            return response.status, response.read().decode()
        """),
    [
      _unittest("""
            def test_fetch(self):
              import http.server, threading
              class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                  self.send_response(200)
                  self.end_headers()
                  self.wfile.write(b'ok')
                def log_message(self, *args):
                  pass
              server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
              thread = threading.Thread(target=server.serve_forever, daemon=True)
              thread.start()
              try:
                self.assertEqual(fetch(server.server_address[1]), (200, 'ok'))
              finally:
                server.shutdown()
            """)
    ],
  ),
]

IO_PROGRAMS = {
  "sum": (
    _io([("1 2 3\n", "6\n"), ("10\n", "10\n")]),
    {
      "read all": "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
      "input": "print(sum(int(x) for x in input().split()))\n",
      "main guard": "import sys\ndef main():\n  data = sys.stdin.read().split()\n  print(sum(map(int, data)))\n"
      "if __name__ == '__main__':\n  main()\n",
      "stdout.write": "import sys\nsys.stdout.write(str(sum(map(int, sys.stdin.readline().split()))) + '\\n')\n",
    },
  ),
  "reverse lines": (
    _io([("a\nb\nc\n", "c\nb\na\n"), ("x\n", "x\n")]),
    {
      "readlines": "import sys\nlines = sys.stdin.read().splitlines()\nprint('\\n'.join(reversed(lines)))\n",
      "loop": "import sys\nout = []\nfor line in sys.stdin:\n  out.append(line.rstrip('\\n'))\nfor line in out[::-1]:\n  print(line)\n",
      "recursive": "import sys\ndef emit(lines):\n  if lines:\n    emit(lines[1:])\n    print(lines[0])\nemit(sys.stdin.read().split())\n",
    },
  ),
  "word counts": (
    _io([("b a b\n", "a 1\nb 2\n"), ("z\n", "z 1\n")]),
    {
      "Counter": "import collections\nc = collections.Counter(input().split())\nfor w in sorted(c):\n  print(w, c[w])\n",
      "dict": "counts = {}\nfor w in input().split():\n  counts[w] = counts.get(w, 0) + 1\nfor w, n in sorted(counts.items()):\n  print(f'{w} {n}')\n",
      "generator": "def pairs(words):\n  for w in sorted(set(words)):\n    yield w, words.count(w)\nfor w, n in pairs(input().split()):\n  print(w, n)\n",
    },
  ),
  "grid": (
    _io([("2 3\n", "...\n...\n"), ("1 1\n", ".\n")]),
    {
      "print rows": "h, w = map(int, input().split())\nfor _ in range(h):\n  print('.' * w)\n",
      "print sep": "h, w = map(int, input().split())\nprint(*(['.' * w] * h), sep='\\n')\n",
      "exits 0": "import sys\nh, w = map(int, input().split())\nprint('\\n'.join('.' * w for _ in range(h)))\nsys.exit(0)\n",
    },
  ),
  "fibonacci": (
    _io([("10\n", "55\n"), ("1\n", "1\n")]),
    {
      "loop": "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n  a, b = b, a + b\nprint(a)\n",
      "recursion": "import functools\n@functools.lru_cache(None)\ndef f(n):\n  return n if n < 2 else f(n - 1) + f(n - 2)\nprint(f(int(input())))\n",
      "generator": "def fibs():\n  a, b = 0, 1\n  while True:\n    yield a\n    a, b = b, a + b\nimport itertools\nn = int(input())\nprint(next(itertools.islice(fibs(), n, None)))\n",
    },
  ),
}

# --- plain functions, each in all three function kinds ------------------------------------------

PURE = {
  "dedupe": (
    "dedupe",
    {
      "seen set": "def dedupe(xs):\n  seen, out = set(), []\n  for x in xs:\n    if x not in seen:\n      seen.add(x)\n      out.append(x)\n  return out\n",
      "dict.fromkeys": "def dedupe(xs):\n  return list(dict.fromkeys(xs))\n",
      "generator to list": "def _unique(xs):\n  seen = set()\n  for x in xs:\n    if x not in seen:\n      seen.add(x)\n      yield x\ndef dedupe(xs):\n  return list(_unique(xs))\n",
    },
    [([[3, 1, 3, 2, 1]], [3, 1, 2]), ([[]], [])],
  ),
  "transpose": (
    "transpose",
    {
      "zip": "def transpose(m):\n  return [list(row) for row in zip(*m)]\n",
      "indices": "def transpose(m):\n  return [[m[i][j] for i in range(len(m))] for j in range(len(m[0]))] if m else []\n",
      "recursive": "def transpose(m):\n  if not m or not m[0]:\n    return []\n  return [[row[0] for row in m]] + transpose([row[1:] for row in m])\n",
    },
    [([[[1, 2, 3], [4, 5, 6]]], [[1, 4], [2, 5], [3, 6]]), ([[[7]]], [[7]])],
  ),
  "merge intervals": (
    "merge",
    {
      "sort and sweep": "def merge(iv):\n  out = []\n  for a, b in sorted(iv):\n    if out and a <= out[-1][1]:\n      out[-1][1] = max(out[-1][1], b)\n    else:\n      out.append([a, b])\n  return out\n",
      "recursive": "def merge(iv):\n  iv = sorted(iv)\n  if len(iv) < 2:\n    return [list(x) for x in iv]\n  rest = merge(iv[1:])\n  a, b = iv[0]\n  if rest[0][0] <= b:\n    return [[a, max(b, rest[0][1])]] + rest[1:]\n  return [[a, b]] + rest\n",
    },
    [([[[1, 3], [2, 6], [8, 10]]], [[1, 6], [8, 10]]), ([[[1, 4], [4, 5]]], [[1, 5]])],
  ),
  "gcd": (
    "gcd",
    {
      "euclid loop": "def gcd(a, b):\n  while b:\n    a, b = b, a % b\n  return a\n",
      "euclid recursion": "def gcd(a, b):\n  return a if b == 0 else gcd(b, a % b)\n",
      "math.gcd": "import math\ndef gcd(a, b):\n  return math.gcd(a, b)\n",
    },
    [([12, 18], 6), ([7, 0], 7), ([2**40, 2**20 * 3], 2**20)],
  ),
  "roman": (
    "roman",
    {
      "table": "def roman(n):\n  out = ''\n  for v, s in ((1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')):\n    while n >= v:\n      out += s\n      n -= v\n  return out\n",
      "divmod": "VALUES = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\ndef roman(n):\n  parts = []\n  for v, s in VALUES:\n    k, n = divmod(n, v)\n    parts.append(s * k)\n  return ''.join(parts)\n",
    },
    [([1994], "MCMXCIV"), ([4], "IV"), ([3999], "MMMCMXCIX")],
  ),
  "primes": (
    "primes",
    {
      "sieve": "def primes(n):\n  sieve = [True] * (n + 1)\n  out = []\n  for i in range(2, n + 1):\n    if sieve[i]:\n      out.append(i)\n      sieve[i * i::i] = [False] * len(sieve[i * i::i])\n  return out\n",
      "trial division": "def primes(n):\n  return [p for p in range(2, n + 1) if all(p % d for d in range(2, int(p ** 0.5) + 1))]\n",
      "generator inside": "def _gen(n):\n  found = []\n  for p in range(2, n + 1):\n    if all(p % q for q in found):\n      found.append(p)\n      yield p\ndef primes(n):\n  return list(_gen(n))\n",
    },
    [([20], [2, 3, 5, 7, 11, 13, 17, 19]), ([1], [])],
  ),
  "binary search": (
    "search",
    {
      "loop": "def search(xs, x):\n  lo, hi = 0, len(xs)\n  while lo < hi:\n    mid = (lo + hi) // 2\n    if xs[mid] < x:\n      lo = mid + 1\n    else:\n      hi = mid\n  return lo if lo < len(xs) and xs[lo] == x else -1\n",
      "bisect": "import bisect\ndef search(xs, x):\n  i = bisect.bisect_left(xs, x)\n  return i if i < len(xs) and xs[i] == x else -1\n",
      "recursive": "def search(xs, x, lo=0, hi=None):\n  hi = len(xs) if hi is None else hi\n  if lo >= hi:\n    return -1\n  mid = (lo + hi) // 2\n  if xs[mid] == x:\n    return mid if mid == 0 or xs[mid - 1] != x else search(xs, x, lo, mid)\n  return search(xs, x, mid + 1, hi) if xs[mid] < x else search(xs, x, lo, mid)\n",
    },
    [([[1, 3, 5, 7], 5], 2), ([[1, 3], 4], -1), ([[], 1], -1)],
  ),
  "pairs summing": (
    "pair_sums",
    {
      "comprehension": "def pair_sums(xs, t):\n  return sorted([a, b] for i, a in enumerate(xs) for b in xs[i + 1:] if a + b == t)\n",
      "set": "def pair_sums(xs, t):\n  out = set()\n  for i, a in enumerate(xs):\n    for b in xs[i + 1:]:\n      if a + b == t:\n        out.add((a, b))\n  return [list(p) for p in sorted(out)]\n",
    },
    [([[1, 2, 3, 4], 5], [[1, 4], [2, 3]])],
  ),
  "word lengths": (
    "lengths",
    {
      "dict comprehension": "def lengths(text):\n  return {w: len(w) for w in text.split()}\n",
      "zip": "def lengths(text):\n  words = text.split()\n  return dict(zip(words, map(len, words)))\n",
    },
    [(["ab c"], {"ab": 2, "c": 1})],
  ),
  "running max": (
    "running_max",
    {
      "accumulate": "import itertools\ndef running_max(xs):\n  return list(itertools.accumulate(xs, max))\n",
      "loop": "def running_max(xs):\n  out = []\n  for x in xs:\n    out.append(x if not out else max(x, out[-1]))\n  return out\n",
    },
    [([[1, 3, 2, 5]], [1, 3, 3, 5]), ([[]], [])],
  ),
}


def _pure_tests(entry: str, cases: list) -> list[dict]:
  calls = [f"{entry}(*{args!r})" for args, _ in cases]
  literal = "".join(f"assert {c} == {e!r}\n" for c, (_, e) in zip(calls, cases))
  checked = (
    "def check(candidate):\n"
    + "".join(f"  expected = {e!r}\n  assert candidate(*{a!r}) == expected\n" for a, e in cases)
    + f"check({entry})\n"
  )
  unit = "def test_cases(self):\n" + "".join(
    f"  self.assertEqual({c}, {e!r})\n" for c, (_, e) in zip(calls, cases)
  )
  return [_assert(literal), _assert(checked), _unittest(unit), _call(entry, cases)]


def honest_cases() -> list[tuple[str, str, dict]]:
  cases: list[tuple[str, str, dict]] = []

  def add(name: str, program: str, tests: list[dict]) -> None:
    for spec in tests:
      if spec["kind"] == "call" and not spec["cases"]:
        continue
      cases.append((f"{name} [{spec['kind']} #{len(cases)}]", program, spec))

  for family, programs, tests in [
    ("evens", EVENS, EVENS_TESTS),
    ("naturals", NATURALS, NATURALS_TESTS),
    ("averager", AVERAGER, AVERAGER_TESTS),
    ("tree walk", TREE_WALK, TREE_WALK_TESTS),
    ("reverse list", REVERSE, REVERSE_TESTS),
    ("middle node", MIDDLE, MIDDLE_TESTS),
    ("clone graph", CLONE, CLONE_TESTS),
    ("adder", FUNCTIONS, FUNCTION_TESTS),
    ("Solution", SOLUTIONS, SOLUTION_TESTS),
    ("min stack", MIN_STACK, MIN_STACK_TESTS),
  ]:
    for variant, program in programs.items():
      add(f"{family}: {variant}", program, tests)
  for name, program, *tests in RECURSION:
    add(f"recursion: {name}", program, tests)
  for variant, (kind, program) in TREES.items():
    add(f"tree: {variant}", program, TREE_TESTS[kind])
  for point_kind, point in POINT_KINDS.items():
    for variant, program in POINT_PROGRAMS.items():
      add(f"points ({point_kind}): {variant}", program, _point_tests(point))
  for family, programs, tests in CONTAINERS + RECORDS:
    for variant, program in programs.items():
      add(f"{family}: {variant}", program, tests)
  for name, program, spec in _float_cases():
    cases.append((name, program, spec))
  for name, program, tests in MISC + NUMPY + REAL_CODE:
    add(name, program, tests)
  for family, (entry, programs, values) in PURE.items():
    for variant, program in programs.items():
      add(f"{family}: {variant}", program, _pure_tests(entry, values))
  for family, (spec, programs) in IO_PROGRAMS.items():
    for variant, program in programs.items():
      add(f"io {family}: {variant}", program, [spec])
  return cases


# Generous: a pass must not hinge on how busy a shared 2-core machine is (pandas imports in ~1 s).
LIMITS = Limits(timeout_s=10.0, memory_mb=2048)


@pytest.fixture(scope="module")
def pool():
  with ExecutionPool(workers=2) as p:
    yield p


def test_every_honest_program_passes(pool):
  cases = honest_cases()
  kinds = collections.Counter(tests["kind"] for _, _, tests in cases)
  assert len(cases) >= 300 and set(kinds) == {"assert", "unittest", "call", "io"}, kinds
  assert len({name for name, _, _ in cases}) == len(cases)
  results = pool.execute([Job(program, tests, LIMITS) for _, program, tests in cases])
  failed = [
    f"{name}: {r.status.value} ({r.detail})"
    for (name, _, _), r in zip(cases, results)
    if not r.passed
  ]
  print(
    f"\nhonest pass rate: {len(cases) - len(failed)}/{len(cases)} "
    f"({100 * (len(cases) - len(failed)) / len(cases):.1f}%), by kind {dict(kinds)}"
  )
  assert not failed, "\n".join(failed)
  assert all(r.status is Status.PASS for r in results)
