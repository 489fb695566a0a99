"""A program space: small Python functions composed from a typed grammar, too many to memorise.

The generator's families (`families.py`) are ~80 templates; a small policy trained on them
recalls its family's program from the first tokens instead of reading the one in its prompt.
Here each program is composed afresh: a signature over typed parameters (a list of ints, a
string, a list of words, an int), one to three blocks (loops over a collection or an index
range, while loops, derived values, guarded updates and early returns) whose statements and
expressions are drawn from a grammar over the variables in scope and their types, and a
return of what the blocks computed. Identifiers are made up or drawn from role words, so no
two programs share much beyond their shape. The description narrates the structure, statement
by statement.

A drawn program is kept only if it is correct and testable: it runs on its sampled inputs
without error, every line runs on some test, and the tests see at least three distinct outputs.
Tests are `call` cases whose expected values come from running the program (in-process: it is
our own code; `precisecoder data build` re-verifies every task in the sandboxed pool).

Splits are disjoint by structure: `skeleton(code)` is the program's AST with identifiers
renamed canonically (by first use), constants replaced by their type and operators by their
class (comparison, arithmetic, boolean); its hash deals the program to train, validation or
test (6:1:1), so a held-out program has no training program of the same shape under other
names, constants or operators. `nearest_distance` measures how far each held-out program is
from its nearest training program (normalised token edit distance).

Deterministic: program i of a split at a seed depends on (split, seed, i) and the stream's name
only (buggy tasks, clean programs and the multi-line split draw from streams of their own).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import hashlib
import io
import json
import keyword
import random
import re
import sys
import time
import tokenize
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from precisecoder.data.checking import MAX_CPU_S, load_trusted
from precisecoder.data.sft_mixture import fresh_name

SPLITS = ("train", "validation", "test")
_DEAL = ("train",) * 6 + ("validation", "test")
NUM_CASES = 8
MAX_LINES = 12
_MIN_DISTINCT_OUTPUTS = 3
_MAX_DRAWS = 400  # draws for one program of a split before giving up (train keeps 3 in 4)

INT, INTS, STR, WORDS, COUNTS = "int", "ints", "str", "words", "counts"  # COUNTS: dict[str, int]
_DESCRIBE = {
  INT: "an integer",
  INTS: "a list of integers",
  STR: "a string",
  WORDS: "a list of words",
  COUNTS: "a dict of counts",
}
_SIGNATURES = (
  (INTS,),
  (INTS,),
  (INTS, INT),
  (STR,),
  (STR,),
  (STR, INT),
  (WORDS,),
  (WORDS, INT),
  (INTS, INTS),
  (INT,),
)
_ROLES = {
  INT: (
    "total",
    "count",
    "acc",
    "score",
    "best",
    "n",
    "steps",
    "result",
    "size",
    "tally",
    "level",
    "worst",
    "gap",
    "limit",
    "k",
    "m",
    "amount",
    "weight",
  ),
  INTS: (
    "nums",
    "values",
    "items",
    "data",
    "xs",
    "scores",
    "heights",
    "readings",
    "out",
    "picked",
    "kept",
    "result",
    "prices",
    "marks",
  ),
  STR: ("s", "text", "word", "phrase", "line", "label", "out", "name", "code", "message"),
  WORDS: ("words", "names", "tokens", "tags", "keys", "labels", "parts", "terms"),
  COUNTS: ("counts", "freq", "seen", "tally", "by_key", "histogram"),
}
_ELEMENT_ROLES = {
  INTS: ("x", "v", "item", "value", "num", "n", "cur", "amount"),
  STR: ("ch", "c", "letter", "char", "symbol"),
  WORDS: ("w", "word", "token", "name", "term", "part"),
}
_CHARS = "abcdexyzABDE 019"
_BUILTIN_NAMES = frozenset(dir(builtins))


class ProgramError(RuntimeError):
  """The program space cannot give what was asked (too few programs of a split)."""


@dataclasses.dataclass(frozen=True)
class Program:
  """One correct function of the space."""

  fn: str
  code: str
  description: str
  tests: dict[str, Any]
  skeleton: str  # hash of its structure (identifiers, constants and operators abstracted)


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


def _sample(rng: random.Random, kind: str) -> Any:
  if kind == INT:
    return rng.randint(-3, 12)
  if kind == INTS:
    return [rng.randint(-9, 9) for _ in range(rng.randint(0, 8))]
  if kind == STR:
    return "".join(rng.choice(_CHARS) for _ in range(rng.randint(0, 10)))
  if kind == WORDS:
    return [
      "".join(rng.choice("abcdeo") for _ in range(rng.randint(1, 5)))
      for _ in range(rng.randint(0, 6))
    ]
  raise ValueError(f"no sampler for {kind!r}")


def _edge(kind: str) -> Any:
  return {INT: 0, INTS: [], STR: "", WORDS: []}[kind]


# ---------------------------------------------------------------------------
# The grammar
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Var:
  name: str
  kind: str
  used: bool = False  # read by a later statement or the return


class _Builder:
  """Lines, description and the typed variables in scope of one program being composed."""

  def __init__(self, rng: random.Random):
    self.rng = rng
    self.lines: list[str] = []
    self.sentences: list[str] = []
    self.taken: set[str] = set()
    self.params: list[_Var] = []
    self.locals: list[_Var] = []

  def name(self, kind: str, element: bool = False) -> str:
    roles = (_ELEMENT_ROLES if element else _ROLES)[kind]
    for _ in range(20):
      if self.rng.random() < 0.5:
        name = fresh_name(self.rng, self.taken)
      else:
        name = self.rng.choice(roles)
        if self.rng.random() < 0.3:
          name = f"{name}_{self.rng.choice(('a', 'b', 'all', 'new', 'cur', 'acc', 'tmp', '2'))}"
      if name not in self.taken and not keyword.iskeyword(name) and name not in _BUILTIN_NAMES:
        self.taken.add(name)
        return name
    return fresh_name(self.rng, self.taken)

  def index_name(self) -> str:
    """A loop index: `i`, `j`, `idx` or `pos` if free, else a made-up name."""
    free = [n for n in ("i", "j", "idx", "pos") if n not in self.taken]
    name = self.rng.choice(free) if free else fresh_name(self.rng, self.taken)
    self.taken.add(name)
    return name

  def emit(self, depth: int, text: str) -> None:
    self.lines.append("    " * (depth + 1) + text)

  def say(self, sentence: str) -> None:
    self.sentences.append(sentence)

  def of(self, *kinds: str, params: bool = True) -> list[_Var]:
    pool = (self.params if params else []) + self.locals
    return [v for v in pool if v.kind in kinds]

  def pick(self, *kinds: str) -> _Var | None:
    """A variable of one of `kinds` in scope, preferably a parameter nothing has read yet."""
    pool = self.of(*kinds)
    unread = [v for v in self.params if v.kind in kinds and not v.used]
    if unread and self.rng.random() < 0.8:
      pool = unread
    return self.rng.choice(pool) if pool else None

  def new_local(self, kind: str) -> _Var:
    var = _Var(self.name(kind), kind)
    self.locals.append(var)
    return var


def _const(rng: random.Random, lo: int = 0, hi: int = 9) -> str:
  value = rng.randint(lo, hi)
  return str(value)


def _char_set(rng: random.Random) -> str:
  return json.dumps("".join(sorted(rng.sample("abcdexyzABDE019", rng.randint(2, 5)))))


_CMP = ("<", "<=", ">", ">=", "==", "!=")


def _int_cond(b: _Builder, e: str) -> str:
  """A condition on the int expression `e`."""
  rng = b.rng
  choice = rng.randrange(5)
  if choice == 0:
    other = b.pick(INT)
    if other is not None and other.name != e:
      other.used = True
      return f"{e} {rng.choice(_CMP[:4])} {other.name}"
  if choice == 1:
    mod = rng.randint(2, 4)
    return f"{e} % {mod} {rng.choice(('==', '!='))} {rng.randrange(mod)}"
  if choice == 2:
    lo = rng.randint(-6, 3)
    return f"{lo} <= {e} <= {lo + rng.randint(2, 8)}"
  return f"{e} {rng.choice(_CMP)} {_const(rng, -4, 6)}"


def _char_cond(b: _Builder, e: str) -> str:
  rng = b.rng
  choice = rng.randrange(4)
  if choice == 0:
    return f"{e} {rng.choice(('in', 'not in'))} {_char_set(rng)}"
  if choice == 1:
    return f"{e}.{rng.choice(('isupper', 'islower', 'isalpha', 'isdigit', 'isspace'))}()"
  if choice == 2:
    return f"{e} {rng.choice(('==', '!='))} {json.dumps(rng.choice('abexAE 0'))}"
  return f"not {e}.{rng.choice(('isalpha', 'islower'))}()"


def _word_cond(b: _Builder, e: str) -> str:
  rng = b.rng
  choice = rng.randrange(4)
  if choice == 0:
    return f"len({e}) {rng.choice(_CMP)} {_const(rng, 1, 4)}"
  if choice == 1:
    return f"{e}.{rng.choice(('startswith', 'endswith'))}({json.dumps(rng.choice('abcdeo'))})"
  if choice == 2:
    return f"{json.dumps(rng.choice('abcdeo'))} {rng.choice(('in', 'not in'))} {e}"
  seen = [v for v in b.of(WORDS, params=False)]
  if seen:
    v = rng.choice(seen)
    v.used = True
    return f"{e} {rng.choice(('in', 'not in'))} {v.name}"
  return f"{e} {rng.choice(('<', '>'))} {json.dumps(rng.choice('bcd'))}"


def _cond(b: _Builder, e: str, kind: str) -> str:
  """A condition on the element `e` of a collection of `kind` (INT: an int)."""
  make = {INT: _int_cond, INTS: _int_cond, STR: _char_cond, WORDS: _word_cond}[kind]
  cond = make(b, e)
  roll = b.rng.random()
  if roll < 0.12:
    return f"{cond} and {make(b, e)}"
  if roll < 0.2:
    return f"{cond} or {make(b, e)}"
  return cond


def _int_of(b: _Builder, e: str, kind: str) -> str:
  """An int expression of the element `e` (of a collection of `kind`)."""
  rng = b.rng
  if kind in (INT, INTS):
    k = b.pick(INT)
    forms = [
      e,
      e,
      f"{e} * {_const(rng, 2, 4)}",
      f"{e} + {_const(rng, 1, 5)}",
      f"abs({e})",
      f"{e} % {_const(rng, 2, 5)}",
      f"{e} // {_const(rng, 2, 3)}",
      f"{e} * {e}",
      f"-{e}",
    ]
    if k is not None and k.name != e:
      forms.append(f"{e} - {k.name}")
    expr = rng.choice(forms)
    if k is not None and k.name in expr:
      k.used = True
    return expr
  if kind == STR:
    return rng.choice(("1", "2", f"ord({e}) % {_const(rng, 3, 9)}", f"int({e}.isupper())"))
  return rng.choice(
    (
      f"len({e})",
      "1",
      f"{e}.count({json.dumps(rng.choice('abeo'))})",
      f"len({e}) * {_const(rng, 2, 3)}",
    )
  )


def _update(b: _Builder, acc: _Var, e: str, kind: str) -> tuple[str, str]:
  """One statement folding the element `e` into the accumulator `acc`: (code, sentence)."""
  rng = b.rng
  a = acc.name
  if acc.kind == INT:
    x = _int_of(b, e, kind)
    choice = rng.randrange(5)
    if choice == 0:
      return f"{a} += {x}", f"add `{x}` to `{a}`"
    if choice == 1:
      return f"{a} -= {x}", f"subtract `{x}` from `{a}`"
    if choice == 2:
      f = rng.choice(("max", "min"))
      return (
        f"{a} = {f}({a}, {x})",
        f"set `{a}` to the {'larger' if f == 'max' else 'smaller'} of itself and `{x}`",
      )
    if choice == 3:
      return f"{a} += 1", f"add 1 to `{a}`"
    c = _const(rng, 2, 3)
    return f"{a} = {a} * {c} + {x}", f"multiply `{a}` by {c} and add `{x}`"
  if acc.kind == INTS:
    x = _int_of(b, e, kind)
    if rng.random() < 0.2:
      return f"{a}.insert(0, {x})", f"put `{x}` at the front of `{a}`"
    return f"{a}.append({x})", f"append `{x}` to `{a}`"
  if acc.kind == STR:
    if kind in (INT, INTS):
      return f"{a} += str({e})", f"append the digits of `{e}` to `{a}`"
    x = rng.choice(
      (e, e, f"{e}.upper()", f"{e}.lower()", f"{e} * 2")
      + ((f"{e}[0]", f"{e}[::-1]") if kind == WORDS else ())
    )
    if rng.random() < 0.25:
      return f"{a} = {x} + {a}", f"put `{x}` in front of `{a}`"
    return f"{a} += {x}", f"append `{x}` to `{a}`"
  if acc.kind == WORDS:
    x = rng.choice(
      {WORDS: (e, e, f"{e}.upper()", f"{e}[::-1]"), STR: (e, f"{e} * 2", f"{e}.upper()")}.get(
        kind, (f"str({e})",)
      )
    )
    return f"{a}.append({x})", f"append `{x}` to `{a}`"
  # COUNTS
  key = e if kind in (STR, WORDS) else f"str({e} % {_const(rng, 2, 4)})"
  x = rng.choice(("1", "1", _int_of(b, e, kind)))
  return (f"{a}[{key}] = {a}.get({key}, 0) + {x}", f"add `{x}` to the count of `{key}` in `{a}`")


def _init(b: _Builder, depth: int, kind: str) -> _Var:
  acc = b.new_local(kind)
  if kind == INT:
    value = b.rng.choice(("0", "0", "1", _const(b.rng, -3, 5)))
    src = b.pick(INTS)
    if src is not None and b.rng.random() < 0.2:
      value = f"len({src.name})"
      src.used = True
  else:
    value = {INTS: "[]", STR: '""', WORDS: "[]", COUNTS: "{}"}[kind]
  b.emit(depth, f"{acc.name} = {value}")
  b.say(f"Set `{acc.name}` to `{value}`.")
  return acc


def _acc_kinds(kind: str) -> tuple[str, ...]:
  if kind == INTS:
    return (INT, INT, INT, INTS, INTS, STR, COUNTS)
  if kind == STR:
    return (INT, INT, STR, STR, COUNTS, WORDS)
  return (INT, INT, WORDS, WORDS, STR, COUNTS)


def _body(b: _Builder, depth: int, e: str, kind: str, accs: Sequence[_Var]) -> None:
  """The statements of a loop over elements `e`: each accumulator updated, maybe guarded."""
  rng = b.rng
  guard_all = rng.random() < 0.35 and len(accs) > 1
  if guard_all:
    cond = _cond(b, e, kind)
    b.emit(depth, f"if {cond}:")
    b.say(f"If `{cond}`:")
    depth += 1
  for acc in accs:
    code, sentence = _update(b, acc, e, kind)
    roll = rng.random()
    if not guard_all and roll < 0.55:
      cond = _cond(b, e, kind)
      b.emit(depth, f"if {cond}:")
      b.emit(depth + 1, code)
      if roll < 0.15:
        other, other_sentence = _update(b, acc, e, kind)
        if other != code:
          b.emit(depth, "else:")
          b.emit(depth + 1, other)
          b.say(f"If `{cond}`, {sentence}; otherwise {other_sentence}.")
          continue
      b.say(f"If `{cond}`, {sentence}.")
    else:
      b.emit(depth, code)
      b.say(sentence[0].upper() + sentence[1:] + ".")


def _loop_block(b: _Builder) -> bool:
  """Accumulators, then a loop over a collection (elements or indices) that updates them."""
  rng = b.rng
  coll = b.pick(INTS, STR, WORDS)
  if coll is None:
    return False
  coll.used = True
  accs = [_init(b, 0, k) for k in rng.sample(_acc_kinds(coll.kind), rng.choice((1, 1, 1, 2)))]
  shape = rng.randrange(6)
  if shape <= 3:
    e = b.name(coll.kind, element=True)
    b.emit(0, f"for {e} in {coll.name}:")
    b.say(f"For each `{e}` in `{coll.name}`:")
    _body(b, 1, e, coll.kind, accs)
  elif shape == 4:
    i = b.index_name()
    b.emit(0, f"for {i} in range(len({coll.name})):")
    b.say(f"For each index `{i}` of `{coll.name}`:")
    e = f"{coll.name}[{i}]" if rng.random() < 0.7 else i
    _body(b, 1, e, coll.kind if e != i else INT, accs)
  else:
    i = b.index_name()
    b.emit(0, f"for {i} in range(1, len({coll.name})):")
    b.say(f"For each index `{i}` of `{coll.name}` from 1:")
    if coll.kind == INTS:
      cond = f"{coll.name}[{i}] {rng.choice(_CMP)} {coll.name}[{i} - 1]"
    else:
      cond = f"{coll.name}[{i}] {rng.choice(('==', '!='))} {coll.name}[{i} - 1]"
    b.emit(1, f"if {cond}:")
    for acc in accs:
      code, sentence = _update(b, acc, f"{coll.name}[{i}]", coll.kind)
      b.emit(2, code)
      b.say(f"If `{cond}`, {sentence}.")
  return True


def _while_block(b: _Builder) -> bool:
  """A while loop: a prefix scan of a collection, or the digits of an int."""
  rng = b.rng
  n = b.pick(INT)
  coll = b.pick(INTS, STR, WORDS)
  if n is not None and n in b.params and (coll is None or rng.random() < 0.5):
    n.used = True
    acc = _init(b, 0, INT)
    base = rng.choice(("10", "2", "3"))
    b.emit(0, f"while {n.name} > 0:")
    x = rng.choice((f"{n.name} % {base}", "1"))
    b.emit(1, f"{acc.name} += {x}")
    b.emit(1, f"{n.name} //= {base}")
    b.say(f"While `{n.name}` > 0, add `{x}` to `{acc.name}` and floor-divide `{n.name}` by {base}.")
    return True
  if coll is None:
    return False
  coll.used = True
  i = b.new_local(INT)
  b.emit(0, f"{i.name} = 0")
  e = f"{coll.name}[{i.name}]"
  cond = _cond(b, e, coll.kind)
  b.emit(0, f"while {i.name} < len({coll.name}) and {cond}:")
  b.emit(1, f"{i.name} += 1")
  b.say(f"Set `{i.name}` to 0 and advance it along `{coll.name}` while `{cond}`.")
  return True


def _derive_block(b: _Builder) -> bool:
  """A new variable computed from one in scope."""
  rng = b.rng
  src = b.pick(INTS, STR, WORDS)
  if src is None:
    return False
  s = src.name
  src.used = True
  if src.kind == INTS:
    e = b.name(INTS, element=True)
    forms = [
      (INTS, f"sorted({s})", f"`{s}` sorted"),
      (INTS, f"{s}[::-1]", f"`{s}` reversed"),
      (INT, f"sum({s})", f"the sum of `{s}`"),
      (INT, f"max({s}, default={_const(rng, -1, 3)})", "the largest element or a default"),
      (INT, f"min({s}, default={_const(rng, -1, 3)})", "the smallest element or a default"),
    ]
    e_int = _int_of(b, e, INTS)
    cond = _int_cond(b, e)
    forms.append(
      (
        INTS,
        f"[{e_int} for {e} in {s} if {cond}]",
        f"`{e_int}` for each `{e}` of `{s}` with `{cond}`",
      )
    )
    forms.append(
      (INT, f"len([{e} for {e} in {s} if {cond}])", f"how many `{e}` of `{s}` have `{cond}`")
    )
  elif src.kind == STR:
    forms = [
      (STR, f"{s}.lower()", f"`{s}` in lower case"),
      (STR, f"{s}.upper()", f"`{s}` in upper case"),
      (STR, f"{s}.strip()", f"`{s}` without surrounding spaces"),
      (STR, f"{s}[::-1]", f"`{s}` reversed"),
      (WORDS, f"{s}.split()", f"the words of `{s}`"),
      (INT, f"{s}.count({json.dumps(rng.choice('abeA 0'))})", "a count of one character"),
    ]
  else:
    forms = [
      (WORDS, f"sorted({s})", f"`{s}` sorted"),
      (
        STR,
        f"{json.dumps(rng.choice(('', ' ', '-', ',')))}.join({s})",
        f"the words of `{s}` joined",
      ),
      (INT, f"len({s})", f"the number of words in `{s}`"),
      (
        WORDS,
        f"[w.upper() for w in {s} if len(w) > {_const(rng, 1, 3)}]",
        f"the longer words of `{s}` in upper case",
      ),
    ]
  kind, expr, what = rng.choice(forms)
  var = b.new_local(kind)
  b.emit(0, f"{var.name} = {expr}")
  b.say(f"Let `{var.name}` be {what}: `{expr}`.")
  return True


def _guard_block(b: _Builder) -> bool:
  """An early return, or a guarded change of an int in scope."""
  rng = b.rng
  coll = b.pick(INTS, STR, WORDS)
  if coll is not None and not b.locals and rng.random() < 0.6:
    coll.used = True
    cond = rng.choice((f"not {coll.name}", f"len({coll.name}) < {_const(rng, 1, 3)}"))
    value = {
      INTS: rng.choice(("[]", "0", "-1")),
      STR: rng.choice(('""', "0")),
      WORDS: rng.choice(("[]", "0", '""')),
    }[coll.kind]
    b.emit(0, f"if {cond}:")
    b.emit(1, f"return {value}")
    b.say(f"If `{cond}`, return `{value}`.")
    return True
  acc = next((v for v in reversed(b.locals) if v.kind == INT), None)
  if acc is None:
    return False
  cond = _int_cond(b, acc.name)
  a, c = acc.name, _const(rng, 1, 5)
  code, sentence = rng.choice(
    (
      (f"{a} = -{a}", f"negate `{a}`"),
      (f"{a} += {c}", f"add {c} to `{a}`"),
      (f"{a} //= {int(c) + 1}", f"divide `{a}` by {int(c) + 1}"),
      (f"{a} = {c}", f"set `{a}` to {c}"),
    )
  )
  b.emit(0, f"if {cond}:")
  b.emit(1, code)
  b.say(f"If `{cond}`, {sentence}.")
  return True


_BLOCKS: tuple[tuple[Callable[[_Builder], bool], int], ...] = (
  (_loop_block, 6),
  (_derive_block, 3),
  (_while_block, 1),
  (_guard_block, 2),
)


def _return(b: _Builder) -> None:
  rng = b.rng
  live = [v for v in b.locals if not v.used] or b.locals[-1:]
  if not live:
    raise _Reject("nothing to return")
  if len(live) > 2:
    raise _Reject("too many results")
  if len(live) == 2:
    a, c = live
    if a.kind == c.kind == INT and rng.random() < 0.5:
      op = rng.choice(("+", "-", "*"))
      expr = f"{a.name} {op} {c.name}"
    else:
      expr = f"[{a.name}, {c.name}]"
  else:
    v = live[0]
    forms = [v.name] * 3
    if v.kind in (INTS, WORDS):
      forms += [f"sorted({v.name})", f"len({v.name})", f"{v.name}[:{_const(rng, 1, 3)}]"]
    elif v.kind == INT:
      forms += [f"{v.name} * {_const(rng, 2, 3)}", f"{v.name} > {_const(rng, 0, 3)}"]
    elif v.kind == STR:
      forms += [f"{v.name}.upper()", f"len({v.name})"]
    expr = rng.choice(forms)
  b.emit(0, f"return {expr}")
  b.say(f"Return `{expr}`.")


class _Reject(Exception):
  """This draw is not a usable program; draw again."""


def _compose(rng: random.Random) -> tuple[str, str, list[str]]:
  """(function name, code, description) of one drawn program (unchecked)."""
  b = _Builder(rng)
  kinds = rng.choice(_SIGNATURES)
  b.params = [_Var(b.name(k), k) for k in kinds]
  fn = (
    b.name(INT)
    if rng.random() < 0.5
    else "_".join(
      (
        rng.choice(
          (
            "count",
            "sum",
            "scan",
            "fold",
            "pick",
            "build",
            "tally",
            "mix",
            "walk",
            "score",
            "collect",
            "measure",
          )
        ),
        fresh_name(rng, b.taken),
      )
    )
  )
  b.taken.add(fn)
  blocks = rng.choice((1, 1, 2, 2, 2, 3))
  funcs = [f for f, _ in _BLOCKS]
  weights = [w for _, w in _BLOCKS]
  done = 0
  for _ in range(blocks * 4):
    if done == blocks:
      break
    done += bool(rng.choices(funcs, weights)[0](b))
  if not b.locals:
    raise _Reject("no computation")
  _return(b)
  params = ", ".join(v.name for v in b.params)
  code = f"def {fn}({params}):\n" + "\n".join(b.lines) + "\n"
  given = "; ".join(f"`{v.name}` is {_DESCRIBE[v.kind]}" for v in b.params)
  description = f"Given that {given}: " + " ".join(b.sentences)
  return fn, code, [description, ",".join(v.kind for v in b.params)]


# ---------------------------------------------------------------------------
# Checking a draw: it runs, every line runs, its outputs vary
# ---------------------------------------------------------------------------


class _Budget(BaseException):  # not an Exception: the program's own `except` cannot catch it
  """The program ran more lines than any of ours should (a loop that does not end)."""


def _covered_lines(target: Any, args: list[Any], lines: set[int], max_lines: int = 20_000) -> Any:
  """`target(*args)` on JSON copies of the arguments, adding the lines it runs to `lines`."""
  code = target.__code__
  budget = [max_lines]
  deadline = time.process_time() + MAX_CPU_S

  def tracer(frame, event, arg):  # pylint: disable=unused-argument
    if event == "line":
      budget[0] -= 1
      if budget[0] < 0 or time.process_time() > deadline:
        raise _Budget()
      if frame.f_code is code:
        lines.add(frame.f_lineno)
    return tracer

  previous = sys.gettrace()
  sys.settrace(tracer)
  try:
    return target(*json.loads(json.dumps(args)))
  finally:
    sys.settrace(previous)


def _statement_lines(code: str) -> set[int]:
  """Lines that start a statement other than `def` (what a test must run)."""
  tree = ast.parse(code)
  fn = tree.body[0]
  return {node.lineno for node in ast.walk(fn) if isinstance(node, ast.stmt) and node is not fn}


def _params_read(code: str) -> bool:
  fn = ast.parse(code).body[0]
  read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
  return all(a.arg in read for a in fn.args.args)


def make_tests(fn: str, code: str, kinds: Sequence[str], rng: random.Random) -> dict[str, Any]:
  """NUM_CASES distinct call cases (the empty/zero inputs first) with expected values from
  `code`; raises _Reject if the program fails on one, leaves a line unrun or hardly varies."""
  target = load_trusted(code, fn)
  pending = [[_edge(k) for k in kinds]]
  cases, seen, covered = [], set(), set()
  for _ in range(20 * NUM_CASES):
    if len(cases) >= NUM_CASES:
      break
    args = pending.pop() if pending else [_sample(rng, k) for k in kinds]
    key = json.dumps(args)
    if key in seen:
      continue
    seen.add(key)
    try:
      expected = _covered_lines(target, args, covered)
      expected = json.loads(json.dumps(expected))
    except BaseException as e:  # pylint: disable=broad-except  # any failure: not this program
      raise _Reject(f"fails on {args!r}: {e!r}") from None
    cases.append({"args": json.loads(key), "expected": expected})
  if len(cases) < NUM_CASES:
    raise _Reject("too few distinct inputs")
  if not _params_read(code):
    raise _Reject("a parameter is never read")
  if not _statement_lines(code) <= covered:
    raise _Reject("a line no test runs")
  if len({json.dumps(c["expected"], sort_keys=True) for c in cases}) < _MIN_DISTINCT_OUTPUTS:
    raise _Reject("outputs hardly vary")
  return {"kind": "call", "entry_point": fn, "cases": cases}


# ---------------------------------------------------------------------------
# Structure: skeletons and splits
# ---------------------------------------------------------------------------

_OP_CLASS = {
  **{op: "Cmp" for op in (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)},
  **{op: "Member" for op in (ast.In, ast.NotIn)},
  **{op: "Arith" for op in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Div, ast.Pow)},
  ast.And: "Bool",
  ast.Or: "Bool",
  ast.USub: "Unary",
  ast.Not: "Unary",
}


def skeleton_text(code: str) -> str:
  """The program's AST dump with identifiers renamed by first use (`v0`, `v1`...), constants
  replaced by their type and operators by their class: what a renaming, new constants or a
  flipped operator leave unchanged."""
  tree = ast.parse(code)
  names: dict[str, str] = {}

  def canon(name: str) -> str:
    return names.setdefault(name, f"v{len(names)}")

  for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef):
      node.name = canon(node.name)
      for a in node.args.args:
        a.arg = canon(a.arg)
    elif isinstance(node, ast.Name) and node.id not in _BUILTIN_NAMES:
      node.id = canon(node.id)
  return _abstract(ast.dump(tree, annotate_fields=False, include_attributes=False))


def _abstract(dump: str) -> str:
  dump = re.sub(
    r"Constant\((?:'[^']*'|\"[^\"]*\"|-?\d+|True|False|None)\)",
    lambda m: "Constant(str)" if m.group()[9] in "'\"" else "Constant(num)",
    dump,
  )
  for op, cls in _OP_CLASS.items():
    dump = dump.replace(f"{op.__name__}()", f"{cls}()")
  return dump


def skeleton(code: str) -> str:
  """A short hash of `skeleton_text(code)`."""
  return hashlib.sha256(skeleton_text(code).encode()).hexdigest()[:16]


def split_of(skeleton_hash: str) -> str:
  """The split a skeleton belongs to (6:1:1 train:validation:test, fixed by the hash)."""
  return _DEAL[int(skeleton_hash, 16) % len(_DEAL)]


# ---------------------------------------------------------------------------
# The stream of programs of a split
# ---------------------------------------------------------------------------


def draw(split: str, seed: int, index: int, stream_name: str = "buggy") -> Program:
  """Program `index` of `split` at `seed` in the stream `stream_name` (depends on these four
  only; streams of one split are drawn independently: buggy tasks, clean programs...)."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
  rng = random.Random(f"precisecoder-programs:{stream_name}:{split}:{seed}:{index}")
  for _ in range(_MAX_DRAWS):
    try:
      fn, code, (description, kinds) = _compose(rng)
      if len(code.splitlines()) > MAX_LINES:
        continue
      shape = skeleton(code)
      if split_of(shape) != split:
        continue
      tests = make_tests(fn, code, kinds.split(","), rng)
    except _Reject:
      continue
    return Program(fn=fn, code=code, description=description, tests=tests, skeleton=shape)
  raise ProgramError(f"no {split} program in {_MAX_DRAWS} draws (seed {seed}, index {index})")


def stream(
  split: str, seed: int, stream_name: str = "buggy", start: int = 0
) -> Iterator[tuple[int, Program]]:
  """(index, program) of `split` at `seed` in `stream_name`, from `start` on."""
  index = start
  while True:
    yield index, draw(split, seed, index, stream_name)
    index += 1


# ---------------------------------------------------------------------------
# Distance to the nearest training program
# ---------------------------------------------------------------------------


def code_tokens(code: str, abstract: bool = False) -> list[str]:
  """The program's Python tokens (layout as NEWLINE/INDENT/DEDENT). `abstract`: identifiers
  renamed by first use (builtins and keywords kept), numbers and strings by their kind."""
  out: list[str] = []
  names: dict[str, str] = {}
  for tok in tokenize.generate_tokens(io.StringIO(code).readline):
    if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
      continue
    text = tok.string
    if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE):
      text = tokenize.tok_name[tok.type]
    elif abstract and tok.type == tokenize.NUMBER:
      text = "<num>"
    elif abstract and tok.type == tokenize.STRING:
      text = "<str>"
    elif (
      abstract
      and tok.type == tokenize.NAME
      and not keyword.iskeyword(text)
      and text not in _BUILTIN_NAMES
      and (not out or out[-1] != ".")
    ):
      text = names.setdefault(text, f"<v{len(names)}>")
    out.append(text)
  return out


def levenshtein(a: Sequence[Any], b: Sequence[Any]) -> int:
  """Edit distance of two sequences (Myers/Hyyro bit-parallel: O(len(b)) big-int steps)."""
  if not a:
    return len(b)
  if not b:
    return len(a)
  peq: dict[Any, int] = {}
  for i, item in enumerate(a):
    peq[item] = peq.get(item, 0) | (1 << i)
  mask = (1 << len(a)) - 1
  high = 1 << (len(a) - 1)
  pv, mv, score = mask, 0, len(a)
  for item in b:
    eq = peq.get(item, 0)
    xv = eq | mv
    xh = ((((eq & pv) + pv) & mask) ^ pv) | eq
    ph = (mv | ~(xh | pv)) & mask
    mh = pv & xh
    if ph & high:
      score += 1
    elif mh & high:
      score -= 1
    ph = ((ph << 1) | 1) & mask
    mh = (mh << 1) & mask
    pv = (mh | ~(xv | ph)) & mask
    mv = ph & xv
  return score


def _shingles(tokens: Sequence[str], n: int = 3) -> set[tuple[str, ...]]:
  return {tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1))}


class NearestIndex:
  """Nearest training program by normalised token edit distance (distance / longer length).

  Exact distances are computed only to candidates: the `candidates` training programs that
  share the most token 3-grams with the query (a cheap sketch through an inverted index; 3-grams
  in over a quarter of the programs say nothing and are left out of it).
  `abstract`: compare `code_tokens(..., abstract=True)` (structure, not names or constants).
  """

  def __init__(self, programs: Sequence[str], candidates: int = 32, abstract: bool = False):
    if not programs:
      raise ValueError("no training programs to compare with")
    self._abstract = abstract
    self._tokens = [code_tokens(p, abstract) for p in programs]
    self._candidates = candidates
    index: dict[tuple[str, ...], list[int]] = {}
    for i, toks in enumerate(self._tokens):
      for shingle in _shingles(toks):
        index.setdefault(shingle, []).append(i)
    common = max(8, len(programs) // 4)
    self._index = {k: v for k, v in index.items() if len(v) <= common}

  def nearest(self, code: str) -> tuple[float, int]:
    """(normalised distance, index of the nearest training program)."""
    toks = code_tokens(code, self._abstract)
    overlap: dict[int, int] = {}
    for shingle in _shingles(toks):
      for i in self._index.get(shingle, ()):
        overlap[i] = overlap.get(i, 0) + 1
    pool = sorted(overlap, key=lambda i: (-overlap[i], i))[: self._candidates] or [0]
    best = min(
      (levenshtein(toks, self._tokens[i]) / max(len(toks), len(self._tokens[i])), i) for i in pool
    )
    return round(best[0], 4), best[1]


def nearest_distances(
  programs: Sequence[str], training: Sequence[str], candidates: int = 32, abstract: bool = False
) -> list[float]:
  """Each program's normalised token edit distance to its nearest of `training`."""
  index = NearestIndex(training, candidates, abstract)
  return [index.nearest(p)[0] for p in programs]
