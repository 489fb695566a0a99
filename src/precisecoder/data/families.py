"""Function families for the task generator: small, self-contained, correct Python.

A family is a code template with a natural-language description, knobs
(function name, argument name, constants) and an input sampler. Families are
dealt to splits round-robin (6 train : 1 validation : 1 test), and every
function name belongs to one family, so the splits share no function.

Templates use `string.Template` placeholders ($fn, $xs, $k, ...), so braces in
the code stay literal.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import random
import string
import textwrap
import tokenize
from typing import Any, Callable

SPLITS = ("train", "validation", "test")
_DEAL = ("train",) * 6 + ("validation", "test")

Sampler = Callable[[random.Random, dict[str, Any]], list[Any]]


@dataclasses.dataclass(frozen=True)
class Family:
  key: str
  names: tuple[str, ...]
  prompt: str
  code: str
  sample: Sampler  # one argument list from (rng, knobs)
  knobs: dict[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
  edge: tuple[tuple[Any, ...], ...] = ()  # argument lists always tested (may use knobs by name)

  def render(self, rng: random.Random) -> tuple[str, str, str, dict[str, Any]]:
    """(function name, description, code, knobs) of one member of the family."""
    knobs = {name: rng.choice(choices) for name, choices in sorted(self.knobs.items())}
    fn = rng.choice(self.names)
    values = {**knobs, "fn": fn}
    code = string.Template(textwrap.dedent(self.code).strip("\n") + "\n").substitute(values)
    prompt = string.Template(self.prompt).substitute(values)
    return fn, prompt, rename_locals(code, rng), knobs


# Local variable names and the synonyms a family member may use instead.
_SYNONYMS = {
  "count": ("count", "found", "hits", "n_found"),
  "total": ("total", "acc", "running", "subtotal"),
  "result": ("result", "out", "res", "answer"),
  "x": ("x", "v", "item", "value"),
  "best": ("best", "top", "champion"),
  "i": ("i", "idx", "pos"),
  "ch": ("ch", "char", "letter"),
  "w": ("w", "token", "term"),
  "low": ("low", "lowest", "smallest"),
  "high": ("high", "highest", "biggest"),
  "items": ("items", "arr", "work"),
  "seen": ("seen", "visited", "met"),
  "stack": ("stack", "pending", "opened"),
  "groups": ("groups", "buckets", "by_key"),
  "window": ("window", "current_sum", "win"),
  "row": ("row", "line", "current"),
  "counts": ("counts", "freq", "tally"),
  "doubled": ("doubled", "twice", "pair_product"),
  "scaled": ("scaled", "base_f", "partial"),
}


def rename_locals(code: str, rng: random.Random) -> str:
  """`code` with some local variables renamed to synonyms (never onto an existing name)."""
  tree = ast.parse(code)
  used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
  params = {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
  used |= params | {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
  stored = sorted(
    {
      n.id
      for n in ast.walk(tree)  # parameters keep the names the prompt uses
      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    - params
  )
  renames = {}
  for name in stored:
    choice = rng.choice(_SYNONYMS.get(name, (name,)))
    if choice != name and choice not in used and choice not in renames.values():
      renames[name] = choice
  return apply_renames(code, renames)


def apply_renames(code: str, renames: dict[str, str]) -> str:
  """`code` with every name token in `renames` replaced (attribute names after `.` kept)."""
  if not renames:
    return code
  lines = code.splitlines(keepends=True)
  edits = []
  previous = None
  for tok in tokenize.generate_tokens(io.StringIO(code).readline):
    if tok.type == tokenize.NAME and tok.string in renames and previous != ".":
      edits.append((tok.start, tok.end, renames[tok.string]))
    if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
      previous = tok.string
  for (row, col), (_, end_col), new in reversed(edits):
    line = lines[row - 1]
    lines[row - 1] = line[:col] + new + line[end_col:]
  return "".join(lines)


# ---------------------------------------------------------------------------
# Input samplers
# ---------------------------------------------------------------------------


def _ints(lo: int = -9, hi: int = 9, min_len: int = 0, max_len: int = 8) -> Sampler:
  return lambda rng, kn: [[rng.randint(lo, hi) for _ in range(rng.randint(min_len, max_len))]]


def _int(lo: int, hi: int) -> Sampler:
  return lambda rng, kn: [rng.randint(lo, hi)]


def _word(rng: random.Random, lo: int = 0, hi: int = 8, alphabet: str = "abcdeiou") -> str:
  return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def _text(rng: random.Random) -> str:
  return " ".join(_word(rng, 1, 7, "abcdefghoiuAEB") for _ in range(rng.randint(0, 6)))


def _words(rng: random.Random) -> list[str]:
  return [_word(rng, 1, 6, "abcdeo") for _ in range(rng.randint(0, 7))]


_NUMS = ("nums", "values", "numbers", "items", "data", "xs")
_TEXT = ("text", "s", "word", "phrase")


# ---------------------------------------------------------------------------
# Easy: 3-12 lines, one obvious place for a bug
# ---------------------------------------------------------------------------

EASY = (
  Family(
    "count_above",
    ("count_above", "count_greater_than", "num_above"),
    "Return how many numbers in `$xs` are greater than $k.",
    """
def $fn($xs):
    count = 0
    for x in $xs:
        if x > $k:
            count += 1
    return count
""",
    _ints(-3, 9),
    {"xs": _NUMS, "k": (0, 2, 3, 5)},
    (([1, 2, 3, 4, 5, 6],), ([],)),
  ),
  Family(
    "sum_evens",
    ("sum_evens", "sum_of_even", "even_total"),
    "Return the sum of the even numbers in `$xs`.",
    """
def $fn($xs):
    total = 0
    for x in $xs:
        if x % 2 == 0:
            total += x
    return total
""",
    _ints(-9, 20),
    {"xs": _NUMS},
    (([1, 2, 3, 4],), ([5, 7],)),
  ),
  Family(
    "largest",
    ("largest", "max_value", "biggest"),
    "Return the largest number in the non-empty list `$xs` (without using max).",
    """
def $fn($xs):
    best = $xs[0]
    for x in $xs:
        if x > best:
            best = x
    return best
""",
    _ints(-20, 20, 1, 8),
    {"xs": _NUMS},
    (([3, 9, 2],), ([-5, -2, -9],)),
  ),
  Family(
    "smallest_index",
    ("smallest_index", "argmin", "index_of_min"),
    "Return the index of the smallest number in the non-empty list `$xs` (the first one "
    "if there are ties).",
    """
def $fn($xs):
    best = 0
    for i in range(1, len($xs)):
        if $xs[i] < $xs[best]:
            best = i
    return best
""",
    _ints(-20, 20, 1, 8),
    {"xs": _NUMS},
    (([4, 1, 1, 7],), ([2, 5, 0],)),
  ),
  Family(
    "reverse_text",
    ("reverse_text", "reversed_string", "backwards"),
    "Return the string `$s` reversed.",
    """
def $fn($s):
    result = ""
    for i in range(len($s) - 1, -1, -1):
        result += $s[i]
    return result
""",
    lambda rng, kn: [_word(rng)],
    {"s": _TEXT},
    (("abc",), ("",), ("hello",)),
  ),
  Family(
    "count_vowels",
    ("count_vowels", "vowel_count", "num_vowels"),
    "Return the number of vowels (a, e, i, o, u, lower or upper case) in `$s`.",
    """
def $fn($s):
    count = 0
    for ch in $s.lower():
        if ch in "aeiou":
            count += 1
    return count
""",
    lambda rng, kn: [_text(rng)],
    {"s": _TEXT},
    (("Education",), ("xyz",)),
  ),
  Family(
    "factorial",
    ("factorial", "fact", "product_up_to"),
    "Return n! (the product 1 * 2 * ... * n); 0! is 1.",
    """
def $fn(n):
    result = 1
    for i in range(2, n + 1):
        result *= i
    return result
""",
    _int(0, 10),
    {},
    ((0,), (1,), (5,)),
  ),
  Family(
    "sum_to",
    ("sum_to", "sum_up_to", "total_up_to"),
    "Return 1 + 2 + ... + n (0 when n is 0).",
    """
def $fn(n):
    total = 0
    for i in range(1, n + 1):
        total += i
    return total
""",
    _int(0, 30),
    {},
    ((0,), (1,), (4,)),
  ),
  Family(
    "is_sorted",
    ("is_sorted", "is_non_decreasing", "in_order"),
    "Return True if every number in `$xs` is at least the one before it.",
    """
def $fn($xs):
    for i in range(1, len($xs)):
        if $xs[i] < $xs[i - 1]:
            return False
    return True
""",
    lambda rng, kn: [
      sorted(_ints(0, 9)(rng, kn)[0]) if rng.random() < 0.5 else _ints(0, 9)(rng, kn)[0]
    ],
    {"xs": _NUMS},
    (([1, 2, 2, 5],), ([3, 1],), ([],), ([1, 3, 2],)),
  ),
  Family(
    "clamp",
    ("clamp", "limit", "bound_value"),
    "Return x limited to the range [$lo, $hi]: values below $lo become $lo and values "
    "above $hi become $hi.",
    """
def $fn(x):
    if x < $lo:
        return $lo
    if x > $hi:
        return $hi
    return x
""",
    _int(-20, 30),
    {"lo": (0, 1, 5), "hi": (10, 12, 20)},
    ((-5,), (50,), (7,)),
  ),
  Family(
    "fizz_word",
    ("fizz_word", "fizz_or_number", "say_fizz"),
    'Return "Fizz" if n is divisible by $k, otherwise n as a string.',
    """
def $fn(n):
    if n % $k == 0:
        return "Fizz"
    return str(n)
""",
    _int(0, 40),
    {"k": (3, 4, 5, 7)},
    ((3,), (4,), (5,), (7,), (10,), (1,)),
  ),
  Family(
    "floor_mean",
    ("floor_mean", "integer_average", "mean_floor"),
    "Return the average of the non-empty list `$xs`, rounded down to an integer.",
    """
def $fn($xs):
    total = 0
    for x in $xs:
        total += x
    return total // len($xs)
""",
    _ints(0, 30, 1, 7),
    {"xs": _NUMS},
    (([1, 2, 4],), ([10],), ([3, 3, 3, 5],)),
  ),
  Family(
    "count_char",
    ("count_char", "occurrences", "char_frequency"),
    "Return how many times the character `c` appears in `$s`.",
    """
def $fn($s, c):
    count = 0
    for ch in $s:
        if ch == c:
            count += 1
    return count
""",
    lambda rng, kn: [_word(rng, 0, 10, "abc"), rng.choice("abc")],
    {"s": _TEXT},
    (("banana", "a"), ("", "x")),
  ),
  Family(
    "all_positive",
    ("all_positive", "every_positive", "only_positives"),
    "Return True if every number in `$xs` is strictly positive (True for an empty list).",
    """
def $fn($xs):
    for x in $xs:
        if x <= 0:
            return False
    return True
""",
    _ints(-2, 9),
    {"xs": _NUMS},
    (([1, 2],), ([0, 3],), ([],), ([4, -1],)),
  ),
  Family(
    "first_negative",
    ("first_negative", "index_of_negative", "find_negative"),
    "Return the index of the first negative number in `$xs`, or -1 if there is none.",
    """
def $fn($xs):
    for i in range(len($xs)):
        if $xs[i] < 0:
            return i
    return -1
""",
    _ints(-3, 9),
    {"xs": _NUMS},
    (([3, 0, -2, -5],), ([1, 2],), ([-1],)),
  ),
  Family(
    "sum_squares",
    ("sum_squares", "square_total", "sum_of_squares"),
    "Return the sum of the squares of the numbers in `$xs`.",
    """
def $fn($xs):
    total = 0
    for x in $xs:
        total += x * x
    return total
""",
    _ints(-6, 6),
    {"xs": _NUMS},
    (([1, 2, 3],), ([],), ([-2],)),
  ),
  Family(
    "digit_sum",
    ("digit_sum", "sum_of_digits", "add_digits"),
    "Return the sum of the decimal digits of the non-negative integer n.",
    """
def $fn(n):
    total = 0
    while n > 0:
        total += n % 10
        n //= 10
    return total
""",
    _int(0, 99999),
    {},
    ((0,), (9,), (1234,), (505,)),
  ),
  Family(
    "count_long_words",
    ("count_long_words", "long_word_count", "words_longer_than"),
    "Return how many words in the sentence `$s` have more than $k letters.",
    """
def $fn($s):
    count = 0
    for w in $s.split():
        if len(w) > $k:
            count += 1
    return count
""",
    lambda rng, kn: [_text(rng)],
    {"s": _TEXT, "k": (2, 3, 4)},
    (("a bb ccc dddd eeeee",), ("",)),
  ),
  Family(
    "running_max",
    ("running_max", "prefix_maxima", "max_so_far"),
    "Return a list whose i-th item is the largest of the first i + 1 numbers of `$xs`.",
    """
def $fn($xs):
    result = []
    best = None
    for x in $xs:
        if best is None or x > best:
            best = x
        result.append(best)
    return result
""",
    _ints(-9, 9),
    {"xs": _NUMS},
    (([1, 3, 2, 5],), ([],), ([-1, -3],)),
  ),
  Family(
    "scale_all",
    ("scale_all", "multiply_each", "times_k"),
    "Return a new list with every number of `$xs` multiplied by $k.",
    """
def $fn($xs):
    result = []
    for x in $xs:
        result.append(x * $k)
    return result
""",
    _ints(-9, 9),
    {"xs": _NUMS, "k": (2, 3, 10)},
    (([1, 2],), ([],)),
  ),
  Family(
    "keep_below",
    ("keep_below", "filter_small", "values_under"),
    "Return the numbers of `$xs` that are smaller than $k, in their original order.",
    """
def $fn($xs):
    result = []
    for x in $xs:
        if x < $k:
            result.append(x)
    return result
""",
    _ints(-5, 15),
    {"xs": _NUMS, "k": (3, 5, 10)},
    (([1, 3, 5, 10, 11],), ([],)),
  ),
  Family(
    "spread",
    ("spread", "value_range", "max_minus_min"),
    "Return the difference between the largest and the smallest number of the non-empty "
    "list `$xs`.",
    """
def $fn($xs):
    low = $xs[0]
    high = $xs[0]
    for x in $xs:
        if x < low:
            low = x
        if x > high:
            high = x
    return high - low
""",
    _ints(-20, 20, 1, 8),
    {"xs": _NUMS},
    (([4, 1, 9],), ([5],), ([-3, -8, 2],)),
  ),
  Family(
    "product",
    ("product", "multiply_all", "list_product"),
    "Return the product of the numbers in `$xs` (1 for an empty list).",
    """
def $fn($xs):
    result = 1
    for x in $xs:
        result *= x
    return result
""",
    _ints(-4, 5, 0, 6),
    {"xs": _NUMS},
    (([2, 3, 4],), ([],), ([7],)),
  ),
  Family(
    "adjacent_equal",
    ("adjacent_equal", "count_repeats", "equal_neighbours"),
    "Return how many positions i have `$xs[i] == $xs[i + 1]`.",
    """
def $fn($xs):
    count = 0
    for i in range(len($xs) - 1):
        if $xs[i] == $xs[i + 1]:
            count += 1
    return count
""",
    _ints(0, 2, 0, 9),
    {"xs": _NUMS},
    (([1, 1, 2, 2, 2],), ([],), ([3],)),
  ),
  Family(
    "is_palindrome",
    ("is_palindrome", "reads_same_backwards", "mirror_word"),
    "Return True if the string `$s` reads the same forwards and backwards.",
    """
def $fn($s):
    n = len($s)
    for i in range(n // 2):
        if $s[i] != $s[n - 1 - i]:
            return False
    return True
""",
    lambda rng, kn: [
      (lambda w: w + w[::-1][rng.randint(0, 1) :])(_word(rng, 0, 4, "ab"))
      if rng.random() < 0.5
      else _word(rng, 0, 6, "ab")
    ],
    {"s": _TEXT},
    (("racecar",), ("ab",), ("",), ("abca",), ("abba",)),
  ),
  Family(
    "find_index",
    ("find_index", "position_of", "linear_search"),
    "Return the index of the first occurrence of `target` in `$xs`, or -1 if absent.",
    """
def $fn($xs, target):
    for i in range(len($xs)):
        if $xs[i] == target:
            return i
    return -1
""",
    lambda rng, kn: [_ints(0, 5)(rng, kn)[0], rng.randint(0, 5)],
    {"xs": _NUMS},
    (([4, 2, 2], 2), ([], 1), ([1, 2, 3], 3), ([5], 5)),
  ),
  Family(
    "count_between",
    ("count_between", "in_range_count", "count_within"),
    "Return how many numbers in `$xs` lie between $lo and $hi, both included.",
    """
def $fn($xs):
    count = 0
    for x in $xs:
        if $lo <= x <= $hi:
            count += 1
    return count
""",
    _ints(-2, 14),
    {"xs": _NUMS, "lo": (1, 2, 3), "hi": (7, 8, 10)},
    (([1, 2, 3, 7, 8, 10, 11],), ([],)),
  ),
  Family(
    "gcd",
    ("gcd", "greatest_common_divisor", "highest_common_factor"),
    "Return the greatest common divisor of the positive integers a and b.",
    """
def $fn(a, b):
    while b != 0:
        a, b = b, a % b
    return a
""",
    lambda rng, kn: [rng.randint(1, 60), rng.randint(1, 60)],
    {},
    ((12, 18), (7, 3), (5, 5)),
  ),
  Family(
    "power",
    ("power", "raise_to", "int_power"),
    "Return base raised to the non-negative integer exponent, by repeated multiplication.",
    """
def $fn(base, exponent):
    result = 1
    for _ in range(exponent):
        result *= base
    return result
""",
    lambda rng, kn: [rng.randint(-3, 5), rng.randint(0, 6)],
    {},
    ((2, 10), (3, 0), (5, 1)),
  ),
  Family(
    "triangle",
    ("triangle", "triangular_number", "tri_number"),
    "Return the n-th triangular number n * (n + 1) / 2 as an integer.",
    """
def $fn(n):
    doubled = n * (n + 1)
    return doubled // 2
""",
    _int(0, 100),
    {},
    ((0,), (1,), (4,)),
  ),
  Family(
    "to_fahrenheit",
    ("to_fahrenheit", "celsius_to_f", "c2f"),
    "Convert the Celsius temperature c to Fahrenheit (c * 9 / 5 + 32), rounded down.",
    """
def $fn(c):
    scaled = c * 9 // 5
    return scaled + 32
""",
    _int(-40, 100),
    {},
    ((0,), (100,), (-40,), (37,)),
  ),
  Family(
    "is_leap",
    ("is_leap", "leap_year", "has_feb_29"),
    "Return True if `year` is a leap year: divisible by 4, except century years, which "
    "must be divisible by 400.",
    """
def $fn(year):
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0
""",
    _int(1800, 2100),
    {},
    ((2000,), (1900,), (2024,), (2023,)),
  ),
  Family(
    "grade",
    ("grade", "letter_grade", "score_band"),
    'Return "A" for a score of at least $a, "B" for at least $b, otherwise "C".',
    """
def $fn(score):
    if score >= $a:
        return "A"
    if score >= $b:
        return "B"
    return "C"
""",
    _int(0, 100),
    {"a": (85, 90), "b": (70, 75, 80)},
    ((100,), (90,), (85,), (80,), (75,), (70,), (10,)),
  ),
  Family(
    "count_upper",
    ("count_upper", "capital_count", "num_capitals"),
    "Return how many upper-case letters the string `$s` contains.",
    """
def $fn($s):
    count = 0
    for ch in $s:
        if ch.isupper():
            count += 1
    return count
""",
    lambda rng, kn: [_text(rng)],
    {"s": _TEXT},
    (("Hello World",), ("abc",)),
  ),
  Family(
    "word_counts",
    ("word_counts", "word_frequencies", "tally_words"),
    "Return a dict mapping each word of `$s` (split on spaces) to how often it occurs.",
    """
def $fn($s):
    counts = {}
    for w in $s.split():
        counts[w] = counts.get(w, 0) + 1
    return counts
""",
    lambda rng, kn: [
      " ".join(rng.choice(["a", "b", "cat", "dog"]) for _ in range(rng.randint(0, 7)))
    ],
    {"s": _TEXT},
    (("a b a",), ("",)),
  ),
  Family(
    "above_total",
    ("above_total", "sum_large_values", "big_value_sum"),
    "Return the sum of the values of the dict `d` that are larger than $k.",
    """
def $fn(d):
    total = 0
    for key in d:
        if d[key] > $k:
            total += d[key]
    return total
""",
    lambda rng, kn: [{_word(rng, 1, 3): rng.randint(0, 12) for _ in range(rng.randint(0, 5))}],
    {"k": (3, 5, 6)},
    (({"a": 3, "b": 5, "c": 6, "d": 9},), ({},)),
  ),
  Family(
    "prefix_sums",
    ("prefix_sums", "cumulative_sums", "running_total"),
    "Return the list of running totals of `$xs` (the i-th item is the sum of the first "
    "i + 1 numbers).",
    """
def $fn($xs):
    result = []
    total = 0
    for x in $xs:
        total += x
        result.append(total)
    return result
""",
    _ints(-5, 9),
    {"xs": _NUMS},
    (([1, 2, 3],), ([],)),
  ),
  Family(
    "count_multiples",
    ("count_multiples", "divisible_count", "multiples_of_k"),
    "Return how many numbers in `$xs` are divisible by $k.",
    """
def $fn($xs):
    count = 0
    for x in $xs:
        if x % $k == 0:
            count += 1
    return count
""",
    _ints(0, 30),
    {"xs": _NUMS, "k": (3, 4, 5)},
    (([3, 4, 5, 6, 10, 12, 15],), ([],)),
  ),
  Family(
    "every_other",
    ("every_other", "alternate_items", "even_positions"),
    "Return the items of `$xs` at positions 0, 2, 4, ... in order.",
    """
def $fn($xs):
    result = []
    for i in range(0, len($xs), 2):
        result.append($xs[i])
    return result
""",
    _ints(0, 9),
    {"xs": _NUMS},
    (([1, 2, 3, 4, 5],), ([],), ([7],)),
  ),
  Family(
    "count_positive_pairs",
    ("count_increases", "rising_steps", "num_increases"),
    "Return how many times a number in `$xs` is larger than the number before it.",
    """
def $fn($xs):
    count = 0
    for i in range(1, len($xs)):
        if $xs[i] > $xs[i - 1]:
            count += 1
    return count
""",
    _ints(0, 9),
    {"xs": _NUMS},
    (([1, 2, 2, 3, 1],), ([],), ([4],)),
  ),
  Family(
    "last_index",
    ("last_index", "rightmost_index", "last_position"),
    "Return the index of the last occurrence of `target` in `$xs`, or -1 if absent.",
    """
def $fn($xs, target):
    for i in range(len($xs) - 1, -1, -1):
        if $xs[i] == target:
            return i
    return -1
""",
    lambda rng, kn: [_ints(0, 4)(rng, kn)[0], rng.randint(0, 4)],
    {"xs": _NUMS},
    (([2, 1, 2, 3], 2), ([], 1), ([5, 6], 5), ([1, 2], 2)),
  ),
)


# ---------------------------------------------------------------------------
# Medium: 8-30 lines, more control flow and data structures
# ---------------------------------------------------------------------------

MEDIUM = (
  Family(
    "run_length",
    ("run_length_encode", "rle", "compress_runs"),
    "Return the run-length encoding of `$s` as a list of [character, count] pairs.",
    """
def $fn($s):
    result = []
    i = 0
    while i < len($s):
        j = i
        while j < len($s) and $s[j] == $s[i]:
            j += 1
        result.append([$s[i], j - i])
        i = j
    return result
""",
    lambda rng, kn: [_word(rng, 0, 10, "aab")],
    {"s": _TEXT},
    (("aaabcc",), ("",), ("a",)),
  ),
  Family(
    "bubble_sort",
    ("bubble_sort", "sort_in_place", "exchange_sort"),
    "Return the numbers of `$xs` sorted in ascending order, using bubble sort.",
    """
def $fn($xs):
    items = list($xs)
    n = len(items)
    for i in range(n):
        swapped = False
        for j in range(n - 1 - i):
            if items[j] > items[j + 1]:
                items[j], items[j + 1] = items[j + 1], items[j]
                swapped = True
        if not swapped:
            break
    return items
""",
    _ints(-9, 9, 0, 8),
    {"xs": _NUMS},
    (([3, 1, 2],), ([],), ([5, 4, 3, 2, 1],)),
  ),
  Family(
    "binary_search",
    ("binary_search", "bisect_find", "sorted_index_of"),
    "Return the index of `target` in the sorted list `$xs`, or -1 if it is absent, using "
    "binary search.",
    """
def $fn($xs, target):
    lo = 0
    hi = len($xs) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if $xs[mid] == target:
            return mid
        if $xs[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
""",
    lambda rng, kn: [sorted(set(rng.sample(range(30), rng.randint(0, 9)))), rng.randint(0, 29)],
    {"xs": _NUMS},
    (([1, 3, 5, 7, 9], 9), ([1, 3, 5, 7, 9], 1), ([], 4), ([2, 4], 3)),
  ),
  Family(
    "two_sum",
    ("two_sum", "pair_with_sum", "find_pair"),
    "Return indices [i, j] with i < j such that `$xs[i] + $xs[j] == target` (the pair "
    "with the smallest j, then the smallest i), or [] if there is none.",
    """
def $fn($xs, target):
    seen = {}
    for j in range(len($xs)):
        need = target - $xs[j]
        if need in seen:
            return [seen[need], j]
        if $xs[j] not in seen:
            seen[$xs[j]] = j
    return []
""",
    lambda rng, kn: [_ints(0, 9, 0, 8)(rng, kn)[0], rng.randint(0, 18)],
    {"xs": _NUMS},
    (([2, 7, 11, 15], 9), ([3, 3], 6), ([1, 2], 10)),
  ),
  Family(
    "longest_run",
    ("longest_increasing_run", "longest_ascent", "max_rising_streak"),
    "Return the length of the longest run of strictly increasing consecutive numbers in "
    "`$xs` (0 for an empty list).",
    """
def $fn($xs):
    if not $xs:
        return 0
    best = 1
    current = 1
    for i in range(1, len($xs)):
        if $xs[i] > $xs[i - 1]:
            current += 1
            best = max(best, current)
        else:
            current = 1
    return best
""",
    _ints(0, 9, 0, 9),
    {"xs": _NUMS},
    (([1, 2, 3, 1, 2],), ([],), ([5, 4],), ([1, 2, 3, 4],)),
  ),
  Family(
    "group_by_length",
    ("group_by_length", "bucket_words", "words_by_size"),
    "Return a dict mapping each word length (as a string) to the list of words of `words` "
    "with that length, in their original order.",
    """
def $fn(words):
    groups = {}
    for w in words:
        key = str(len(w))
        if key not in groups:
            groups[key] = []
        groups[key].append(w)
    return groups
""",
    lambda rng, kn: [_words(rng)],
    {},
    ((["a", "bb", "c"],), ([],)),
  ),
  Family(
    "transpose",
    ("transpose", "flip_matrix", "swap_rows_columns"),
    "Return the transpose of the rectangular matrix `grid` (a list of equal-length rows).",
    """
def $fn(grid):
    if not grid:
        return []
    rows = len(grid)
    cols = len(grid[0])
    result = []
    for c in range(cols):
        row = []
        for r in range(rows):
            row.append(grid[r][c])
        result.append(row)
    return result
""",
    lambda rng, kn: [
      (lambda r, c: [[rng.randint(0, 9) for _ in range(c)] for _ in range(r)])(
        rng.randint(1, 4), rng.randint(1, 4)
      )
    ],
    {},
    (([[1, 2, 3], [4, 5, 6]],), ([],), ([[7]],)),
  ),
  Family(
    "roman",
    ("roman_to_int", "parse_roman", "from_roman"),
    "Return the integer value of the Roman numeral `$s` (I, V, X, L, C, D, M; a smaller "
    "symbol before a larger one is subtracted).",
    """
def $fn($s):
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i in range(len($s)):
        v = values[$s[i]]
        if i + 1 < len($s) and values[$s[i + 1]] > v:
            total -= v
        else:
            total += v
    return total
""",
    lambda rng, kn: [
      rng.choice(
        ["III", "IV", "IX", "LVIII", "MCMXCIV", "XL", "XC", "CD", "MMXXIV", "VI", "XIV", "CM"]
      )
    ],
    {"s": _TEXT},
    (("IV",), ("MCMXCIV",), ("III",), ("XL",)),
  ),
  Family(
    "caesar",
    ("caesar", "shift_letters", "rotate_text"),
    "Shift every lower-case letter of `$s` forward by $k places in the alphabet, wrapping "
    "around after z; other characters stay as they are.",
    """
def $fn($s):
    result = []
    for ch in $s:
        if "a" <= ch <= "z":
            offset = (ord(ch) - ord("a") + $k) % 26
            result.append(chr(ord("a") + offset))
        else:
            result.append(ch)
    return "".join(result)
""",
    lambda rng, kn: [_word(rng, 0, 10, "abxyz -")],
    {"s": _TEXT, "k": (1, 3, 13)},
    (("xyz",), ("a b",), ("",)),
  ),
  Family(
    "unique_in_order",
    ("unique_in_order", "dedupe", "first_occurrences"),
    "Return the items of `$xs` without repeats, keeping the first occurrence of each, in order.",
    """
def $fn($xs):
    seen = set()
    result = []
    for x in $xs:
        if x not in seen:
            seen.add(x)
            result.append(x)
    return result
""",
    _ints(0, 5, 0, 10),
    {"xs": _NUMS},
    (([1, 2, 1, 3, 2],), ([],)),
  ),
  Family(
    "merge_sorted",
    ("merge_sorted", "merge_lists", "combine_sorted"),
    "Merge the two sorted lists `a` and `b` into one sorted list.",
    """
def $fn(a, b):
    result = []
    i = 0
    j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            result.append(a[i])
            i += 1
        else:
            result.append(b[j])
            j += 1
    result.extend(a[i:])
    result.extend(b[j:])
    return result
""",
    lambda rng, kn: [sorted(_ints(0, 9)(rng, kn)[0]), sorted(_ints(0, 9)(rng, kn)[0])],
    {},
    (([1, 3, 5], [2, 4]), ([], [1]), ([2], [])),
  ),
  Family(
    "max_subarray",
    ("max_subarray_sum", "best_slice_sum", "kadane"),
    "Return the largest sum of a non-empty contiguous slice of the non-empty list `$xs`.",
    """
def $fn($xs):
    best = $xs[0]
    current = 0
    for x in $xs:
        current += x
        if current > best:
            best = current
        if current < 0:
            current = 0
    return best
""",
    _ints(-9, 9, 1, 9),
    {"xs": _NUMS},
    (([-2, 1, -3, 4, -1, 2, 1, -5, 4],), ([-3, -1],), ([5],)),
  ),
  Family(
    "balanced",
    ("balanced_brackets", "brackets_match", "is_balanced"),
    "Return True if the brackets ()[]{} in `$s` are balanced and properly nested.",
    """
def $fn($s):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in $s:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack[-1] != pairs[ch]:
                return False
            stack.pop()
    return len(stack) == 0
""",
    lambda rng, kn: [_word(rng, 0, 8, "()[]{}")],
    {"s": _TEXT},
    (("([]{})",), ("(]",), ("((",), ("",), ("a(b)c",)),
  ),
  Family(
    "primes_up_to",
    ("primes_up_to", "sieve", "list_primes"),
    "Return the list of prime numbers less than or equal to n, in increasing order.",
    """
def $fn(n):
    if n < 2:
        return []
    is_prime = [True] * (n + 1)
    is_prime[0] = False
    is_prime[1] = False
    for i in range(2, int(n ** 0.5) + 1):
        if is_prime[i]:
            for j in range(i * i, n + 1, i):
                is_prime[j] = False
    return [i for i in range(n + 1) if is_prime[i]]
""",
    _int(0, 60),
    {},
    ((1,), (2,), (30,), (49,)),
  ),
  Family(
    "summarize_ranges",
    ("summarize_ranges", "compress_ranges", "collapse_runs"),
    "Given a sorted list of distinct integers `$xs`, return strings describing its runs "
    'of consecutive numbers: "a-b" for a run from a to b, or "a" for a single number.',
    """
def $fn($xs):
    result = []
    i = 0
    while i < len($xs):
        j = i
        while j + 1 < len($xs) and $xs[j + 1] == $xs[j] + 1:
            j += 1
        if i == j:
            result.append(str($xs[i]))
        else:
            result.append(str($xs[i]) + "-" + str($xs[j]))
        i = j + 1
    return result
""",
    lambda rng, kn: [sorted(set(rng.sample(range(15), rng.randint(0, 9))))],
    {"xs": _NUMS},
    (([0, 1, 2, 4, 5, 7],), ([],), ([3],)),
  ),
  Family(
    "pascal_row",
    ("pascal_row", "binomial_row", "triangle_row"),
    "Return row n of Pascal's triangle (row 0 is [1]).",
    """
def $fn(n):
    row = [1]
    for _ in range(n):
        nxt = [1]
        for i in range(1, len(row)):
            nxt.append(row[i - 1] + row[i])
        nxt.append(1)
        row = nxt
    return row
""",
    _int(0, 10),
    {},
    ((0,), (1,), (4,)),
  ),
  Family(
    "anagram_groups",
    ("anagram_groups", "group_anagrams", "cluster_anagrams"),
    "Group the words of `words` that are anagrams of each other; return the groups in "
    "order of first appearance, each group in input order.",
    """
def $fn(words):
    groups = {}
    order = []
    for w in words:
        key = "".join(sorted(w))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(w)
    return [groups[k] for k in order]
""",
    lambda rng, kn: [
      [rng.choice(["ab", "ba", "abc", "cab", "bca", "a", "cc"]) for _ in range(rng.randint(0, 6))]
    ],
    {},
    ((["ab", "ba", "c"],), ([],)),
  ),
  Family(
    "histogram",
    ("histogram", "bucket_counts", "bin_values"),
    "Count the numbers of `$xs` (all between 0 and 99) per bucket of width $k: return a "
    "list whose i-th item counts the values v with i * $k <= v < (i + 1) * $k, up to the "
    "last non-empty bucket.",
    """
def $fn($xs):
    counts = []
    for x in $xs:
        bucket = x // $k
        while len(counts) <= bucket:
            counts.append(0)
        counts[bucket] += 1
    return counts
""",
    _ints(0, 40, 0, 9),
    {"xs": _NUMS, "k": (5, 10)},
    (([0, 4, 5, 9, 10, 25],), ([],)),
  ),
  Family(
    "second_largest",
    ("second_largest", "runner_up", "next_biggest"),
    "Return the second largest distinct number in `$xs`, or None if there are fewer than "
    "two distinct numbers.",
    """
def $fn($xs):
    first = None
    second = None
    for x in $xs:
        if first is None or x > first:
            if first is not None:
                second = first
            first = x
        elif x != first and (second is None or x > second):
            second = x
    return second
""",
    _ints(0, 9, 0, 8),
    {"xs": _NUMS},
    (([3, 5, 5, 1],), ([2, 2],), ([],), ([1, 9, 4],)),
  ),
  Family(
    "matrix_diagonal",
    ("diagonal_sum", "trace_both", "cross_sum"),
    "Return the sum of both diagonals of the square matrix `grid`, counting the centre "
    "cell once when the size is odd.",
    """
def $fn(grid):
    n = len(grid)
    total = 0
    for i in range(n):
        total += grid[i][i]
        if i != n - 1 - i:
            total += grid[i][n - 1 - i]
    return total
""",
    lambda rng, kn: [
      (lambda n: [[rng.randint(0, 9) for _ in range(n)] for _ in range(n)])(rng.randint(1, 4))
    ],
    {},
    (([[1, 2], [3, 4]],), ([[1, 2, 3], [4, 5, 6], [7, 8, 9]],)),
  ),
  Family(
    "title_case",
    ("title_case", "capitalize_words", "headline"),
    "Capitalise the first letter of every word of `$s` and lower-case the rest; words are "
    "separated by single spaces.",
    """
def $fn($s):
    words = $s.split(" ")
    result = []
    for w in words:
        if w:
            result.append(w[0].upper() + w[1:].lower())
        else:
            result.append(w)
    return " ".join(result)
""",
    lambda rng, kn: [_text(rng)],
    {"s": _TEXT},
    (("hello WORLD",), ("",), ("a",)),
  ),
  Family(
    "moving_average",
    ("moving_sums", "window_sums", "sliding_totals"),
    "Return the sums of every window of $k consecutive numbers of `$xs`, left to right.",
    """
def $fn($xs):
    if len($xs) < $k:
        return []
    window = sum($xs[:$k])
    result = [window]
    for i in range($k, len($xs)):
        window += $xs[i] - $xs[i - $k]
        result.append(window)
    return result
""",
    _ints(0, 9, 0, 9),
    {"xs": _NUMS, "k": (2, 3)},
    (([1, 2, 3, 4, 5],), ([1],), ([],)),
  ),
  Family(
    "count_islands",
    ("count_islands", "connected_regions", "blob_count"),
    "Count the groups of 1s in the grid `grid` that touch horizontally or vertically.",
    """
def $fn(grid):
    rows = len(grid)
    cols = len(grid[0]) if rows else 0
    seen = set()
    count = 0
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == 1 and (r, c) not in seen:
                count += 1
                stack = [(r, c)]
                seen.add((r, c))
                while stack:
                    y, x = stack.pop()
                    for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                        ny, nx = y + dy, x + dx
                        if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == 1 \\
                                and (ny, nx) not in seen:
                            seen.add((ny, nx))
                            stack.append((ny, nx))
    return count
""",
    lambda rng, kn: [[[rng.randint(0, 1) for _ in range(4)] for _ in range(rng.randint(1, 4))]],
    {},
    (([[1, 1, 0], [0, 0, 1], [1, 0, 1]],), ([[0]],), ([[1, 0, 1, 0]],)),
  ),
)


def families(tier: str, split: str) -> tuple[Family, ...]:
  """The families of a tier ("easy" or "medium") that belong to `split`."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
  pool = {"easy": EASY, "medium": MEDIUM}.get(tier)
  if pool is None:
    raise ValueError(f"unknown family tier {tier!r}; expected 'easy' or 'medium'")
  return tuple(f for i, f in enumerate(pool) if _DEAL[i % len(_DEAL)] == split)
