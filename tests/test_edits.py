"""Line diff, blocks and alignment passes (PDB's evaluator semantics)."""

import difflib
import random

from hypothesis import given, settings, strategies as st

from precisecoder import edits

BUGGY = "def f(x):\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n    e = 5\n    return a\n"


def test_modify_add_delete_and_blank_lines():
  after = "def f(x):\n    a = 10\n    b = 2\n    new = 0\n    c = 3\n\n    e = 5\n    return a\n"
  diff = edits.line_diff(BUGGY, after)
  # A line replaced by a blank line stays a Modify: only blank -> blank changes are dropped.
  assert diff == {
    "2": {"type": "Modify", "original": "    a = 1", "modified": "    a = 10"},
    "4": {"type": "Add", "original": "", "modified": "    new = 0"},
    "5": {"type": "Modify", "original": "    d = 4", "modified": ""},
  }
  assert edits.line_diff(BUGGY, BUGGY.replace("    d = 4\n", "")) == {
    "5": {"type": "Delete", "original": "    d = 4", "modified": ""}
  }
  assert edits.apply_diff(BUGGY, diff).replace("\n\n", "\n") == after.rstrip("\n").replace(
    "\n\n", "\n"
  )


def test_trailing_space_and_blank_only_changes_vanish():
  assert edits.line_diff(BUGGY, BUGGY.replace("\n", "  \n") + "\n\n") == {}
  assert edits.line_diff(BUGGY, BUGGY.replace("    b = 2\n", "    b = 2\n\n")) == {}


def test_indentation_change_is_an_edit():
  diff = edits.line_diff(BUGGY, BUGGY.replace("    b = 2", "  b = 2"))
  assert list(diff) == ["3"] and diff["3"]["type"] == "Modify"


def test_blocks_and_gaps():
  diff = {
    "2": {"type": "Modify", "original": "a", "modified": "b"},
    "3": {"type": "Modify", "original": "a", "modified": "b"},
    "7": {"type": "Add", "original": "", "modified": "x"},
    "7 ": {"type": "Add", "original": "", "modified": "y"},
    "7  ": {"type": "Delete", "original": "z", "modified": ""},
  }
  blocks = edits.parse_blocks(diff)
  assert [(b.start, b.end, len(b)) for b in blocks] == [(2, 3, 2), (7, 7, 3)]
  assert (blocks[0].gap_before, blocks[0].gap_after) == (1, 3)
  assert (blocks[1].gap_before, blocks[1].gap_after) == (3, None)
  # An insert before line 5 belongs to line 5, so a change on line 6 starts a new block;
  # an insert before line 6 does join a change on line 5.
  split = edits.parse_blocks(
    {
      "5": {"type": "Add", "original": "", "modified": "x"},
      "6": {"type": "Modify", "original": "a", "modified": "b"},
    }
  )
  assert [(b.start, b.end) for b in split] == [(5, 5), (6, 6)]
  joined = edits.parse_blocks(
    {
      "5": {"type": "Modify", "original": "a", "modified": "b"},
      "6": {"type": "Add", "original": "", "modified": "x"},
    }
  )
  assert [(b.start, b.end) for b in joined] == [(5, 6)]


def _modify(line, new):
  original = BUGGY.splitlines()[line - 1]
  return {str(line): {"type": "Modify", "original": original, "modified": new}}


def test_alignment_passes():
  ref = _modify(3, "    b = 20")
  exact = edits.align(BUGGY, ref, ref)
  assert [m.kind for m in exact.matches] == ["exact"]
  wrap = edits.align(BUGGY, {**_modify(3, "    b = 20"), **_modify(4, "    c = 30")}, ref)
  assert [m.kind for m in wrap.matches] == ["wrap"]
  near = edits.align(BUGGY, _modify(4, "    c = 30"), ref)
  assert [m.kind for m in near.matches] == ["near"]
  far_ref = _modify(6, "    e = 50")
  # A change at line 2 shares no context with a reference at line 6: unmatched...
  unmatched = edits.align(BUGGY, _modify(2, "    a = 7"), far_ref)
  assert not unmatched.matches and len(unmatched.unmatched_refs) == 1
  # ...but the same content moved far away is a distant-identical candidate.
  moved = {"2": {"type": "Modify", "original": "    e = 5", "modified": "    e = 50"}}
  assert [m.kind for m in edits.align(BUGGY, moved, far_ref).matches] == ["identical"]


def test_counterfactual_replaces_only_the_matched_block():
  ref = {**_modify(2, "    a = 10"), **_modify(6, "    e = 50")}
  refs = edits.parse_blocks(ref)
  pred = edits.parse_blocks(_modify(6, "    e = 51"))[0]
  program = edits.apply_diff(BUGGY, edits.counterfactual_diff(refs, [refs[1]], pred))
  assert "    a = 10" in program and "    e = 51" in program and "e = 50" not in program


def test_line_levenshtein():
  assert edits.line_levenshtein(BUGGY, BUGGY) == 0
  assert edits.line_levenshtein(BUGGY, BUGGY.replace("b = 2", "b = 3")) == 1
  assert edits.line_levenshtein(BUGGY, "def f(x):\n    return 1\n") == 6


def _table_levenshtein(a, b):
  """The quadratic dynamic programme, the reference for the bit-parallel one."""
  previous = list(range(len(b) + 1))
  for i, item_a in enumerate(a, 1):
    current = [i] + [0] * len(b)
    for j, item_b in enumerate(b, 1):
      current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (item_a != item_b))
    previous = current
  return previous[-1]


def test_levenshtein_equals_the_table_on_random_sequences():
  rng = random.Random(7)
  for _ in range(600):  # lengths across the 64-bit word boundary; few or many distinct lines
    alphabet = rng.choice([1, 2, 3, 5, 12])
    a = [f"x{rng.randrange(alphabet)}" for _ in range(rng.randrange(0, 140))]
    b = [f"x{rng.randrange(alphabet)}" for _ in range(rng.randrange(0, 140))]
    assert edits._levenshtein(a, b) == _table_levenshtein(a, b), (a, b)  # pylint: disable=protected-access
  program = "\n".join(f"line {i}" for i in range(200)) + "\n"
  edited = program.replace("line 7\n", "").replace("line 150", "line 150!") + "tail\n"
  assert edits.line_levenshtein(program, edited) == 3


lines = st.lists(
  st.sampled_from(["a = 1", "b = 2", "  c = 3", "", "return a", "x += 1"]), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(lines, lines)
def test_apply_of_line_diff_reproduces_the_target(before, after):
  before, after = "\n".join(before), "\n".join(after)
  got = edits.apply_diff(before, edits.line_diff(before, after))
  assert [l for l in got.splitlines() if l.strip()] == [l for l in after.splitlines() if l.strip()]


# Lines that are near each other (ndiff pairs them) and repeat (replace blocks hold identical
# lines).
similar_lines = st.lists(
  st.sampled_from(
    ["a = 1", "a = 2", "b = 2", "  a = 1", "", "return a", "return b", "x += 1", "x -= 1"]
  ),
  max_size=14,
)


@settings(max_examples=400, deadline=None)
@given(similar_lines, similar_lines)
def test_fast_changes_match_ndiff(old, new):
  # The fast path must mark exactly the lines ndiff marks; force both paths on every example.
  assert edits._ndiff_changes(old, new) == edits._ndiff_changes_slow(old, new)  # pylint: disable=protected-access


def test_changes_on_long_programs_with_junk_lines_match_ndiff():
  # From 200 lines on, difflib treats popular lines ("pass") as junk, so a replace block can
  # hold a line identical on both sides: the case the fast path hands to ndiff itself.
  rng = random.Random(0)
  slow_path = 0
  for _ in range(60):
    old = [f"v{i} = {i}" if rng.random() < 0.7 else "pass" for i in range(260)]
    new = list(old)
    for _ in range(8):
      j = rng.randrange(len(new))
      new[j] = rng.choice(["pass", new[j] + " + 1", "y = 2"])
    opcodes = difflib.SequenceMatcher(None, old, new).get_opcodes()
    slow_path += any(
      tag == "replace" and not set(old[i1:i2]).isdisjoint(new[j1:j2])
      for tag, i1, i2, j1, j2 in opcodes
    )
    assert edits._ndiff_changes(old, new) == edits._ndiff_changes_slow(old, new)  # pylint: disable=protected-access
  assert slow_path > 0


def test_many_inserts_before_one_line():
  # A completion that appends thousands of lines: keys "N", "N ", ... in order, built in linear
  # time (the old search for a free key made 4,000 lines take seconds).
  buggy = "def f(x):\n    return x + 1\n"
  after = buggy + "".join(f"v{i} = {i}\n" for i in range(3000))
  diff = edits.line_diff(buggy, after)
  assert list(diff) == ["3" + " " * i for i in range(3000)]
  assert [e["modified"] for e in diff.values()] == [f"v{i} = {i}" for i in range(3000)]
  blocks = edits.parse_blocks(diff)
  assert len(blocks) == 1 and len(blocks[0]) == 3000 and list(blocks[0].edits) == list(diff)
  # Inserts before several lines, after a Modify at the same line: each line counts its own.
  assert list(edits.line_diff("a\nb\nc\n", "x\ny\nb\nz\nw\nc\nq\nr\n")) == [
    "1",
    "2",
    "3",
    "3 ",
    "4",
    "4 ",
  ]


@settings(max_examples=200, deadline=None)
@given(similar_lines, similar_lines)
def test_blocks_partition_the_diff_in_order(old, new):
  diff = edits.line_diff("\n".join(old), "\n".join(new))
  blocks = edits.parse_blocks(diff)
  assert [k for b in blocks for k in b.edits] == list(diff)
  assert [b.index for b in blocks] == list(range(len(blocks)))
  assert (
    all(
      a.end < b.start or (a.end == b.start and b.first_type == "Add")
      for a, b in zip(blocks, blocks[1:])
    )
    or not blocks
  )
