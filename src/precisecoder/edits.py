"""Line diffs, edit blocks and the alignment of predicted to reference blocks.

All of it follows PDB's evaluator (PAPER.md "How PDB scores a prediction") so
that scores agree with the released numbers:

* A diff is PDB's `gt_diff` format: an ordered dict from a buggy-line key
  ("7", or "7 ", "7  " for further inserts before line 7) to an edit
  `{"type": "Modify" | "Add" | "Delete", "original": str, "modified": str}`.
  An Add at key N inserts before buggy line N.
* A block is a maximal run of edits on consecutive buggy lines; inserted lines
  belong to the line they precede.
* Alignment runs four passes: exact, wrap, near, distant-identical.

Diff entry order matters when a diff is applied (PDB applies entries bottom-up
in dict order), so diffs stay plain ordered dicts with PDB's string keys.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Iterable, Mapping, Sequence

Edit = dict[str, str]
Diff = dict[str, Edit]

EDIT_TYPES = ("Add", "Delete", "Modify")
_KEY_RE = re.compile(r"^[1-9][0-9]* *$")


def rstrip_lines(code: str) -> str:
  """The program with trailing white space removed from every line."""
  return "\n".join(line.rstrip() for line in code.splitlines())


def _is_blank_only(edit: Edit) -> bool:
  return edit["original"].strip() == "" and edit["modified"].strip() == ""


def line_diff(before: str, after: str) -> Diff:
  """PDB's cleaned line diff of `before` -> `after`, in `before`'s coordinates.

  Lines are right-stripped, compared with `difflib.ndiff`; a deletion and an
  insertion at the same place become one Modify; edits that only add or remove
  blank lines are dropped.
  """
  old = [line.rstrip() for line in before.splitlines()]
  new = [line.rstrip() for line in after.splitlines()]
  deleted, added = _ndiff_changes(old, new)
  diff: Diff = {}
  taken: dict[int, int] = {}  # line -> keys already used for it ("N", "N ", ...)
  d = a = 0
  while d < len(deleted) or a < len(added):
    shift = a - d  # lines inserted minus lines removed so far
    if a >= len(added) or (d < len(deleted) and deleted[d][0] + shift < added[a][0]):
      line_no, edit = deleted[d][0], {"type": "Delete", "original": deleted[d][1], "modified": ""}
      d += 1
    elif d >= len(deleted) or deleted[d][0] + shift > added[a][0]:
      line_no, edit = added[a][0] - shift, {"type": "Add", "original": "", "modified": added[a][1]}
      a += 1
    else:
      line_no = deleted[d][0]
      edit = {"type": "Modify", "original": deleted[d][1], "modified": added[a][1]}
      d += 1
      a += 1
    # Several edits at one line: "N", "N ", "N  ", ... (a count, not a search: linear time).
    count = taken.get(line_no, 0)
    taken[line_no] = count + 1
    diff[str(line_no) + " " * count] = edit

  kept = [(k, e) for k, e in diff.items() if not _is_blank_only(e)]
  kept.sort(key=lambda item: (int(item[0]), item[1]["type"]))  # stable: "N" before "N "
  return dict(kept)


def _ndiff_changes(
  old: list[str], new: list[str]
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
  """The lines `difflib.ndiff(old, new)` marks "-" and "+", as (1-based line number, text).

  ndiff refines each "replace" block of its line matcher with a similarity
  search that costs most of its time; that search can only turn lines into
  " " (unchanged) where the block holds a line identical on both sides. Every
  other block's lines are all "-" and "+", whatever it would pair up, so only
  a diff with such a block pays for ndiff itself.
  """
  opcodes = difflib.SequenceMatcher(None, old, new).get_opcodes()
  if any(
    tag == "replace" and not set(old[i1:i2]).isdisjoint(new[j1:j2])
    for tag, i1, i2, j1, j2 in opcodes
  ):
    return _ndiff_changes_slow(old, new)
  deleted = [
    (i + 1, old[i])
    for tag, i1, i2, _, _ in opcodes
    if tag in ("replace", "delete")
    for i in range(i1, i2)
  ]
  added = [
    (j + 1, new[j])
    for tag, _, _, j1, j2 in opcodes
    if tag in ("replace", "insert")
    for j in range(j1, j2)
  ]
  return deleted, added


def _ndiff_changes_slow(
  old: list[str], new: list[str]
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
  """`_ndiff_changes` by running ndiff itself."""
  deleted: list[tuple[int, str]] = []
  added: list[tuple[int, str]] = []
  old_no = new_no = 0
  for entry in difflib.ndiff(old, new):
    tag, text = entry[0], entry[2:]
    if tag == " ":
      old_no += 1
      new_no += 1
    elif tag == "-":
      old_no += 1
      deleted.append((old_no, text))
    elif tag == "+":
      new_no += 1
      added.append((new_no, text))
  return deleted, added


def apply_diff(code: str, diff: Mapping[str, Edit]) -> str:
  """Applies `diff` (entries in dict order) to `code`, bottom-up like PDB.

  Out-of-range edits are ignored, as in PDB. The result has right-stripped
  lines joined by newlines.
  """
  lines = code.splitlines()
  for key, edit in reversed(list(diff.items())):
    index = int(key) - 1
    kind = edit["type"]
    if kind == "Modify":
      if 0 <= index < len(lines):
        lines[index] = edit["modified"]
    elif kind == "Add":
      if 0 <= index <= len(lines):
        lines.insert(index, edit["modified"])
    elif kind == "Delete":
      if 0 <= index < len(lines):
        del lines[index]
    else:
      raise ValueError(f"unknown edit type {kind!r} at line {key!r}")
  return "\n".join(line.rstrip() for line in lines)


def validate_diff(diff: object, where: str) -> Diff:
  """Checks a diff's shape; returns it as a `Diff` (entries in the given order)."""
  if not isinstance(diff, Mapping):
    raise ValueError(f"{where}: expected an object of line edits, got {type(diff).__name__}")
  out: Diff = {}
  for key, edit in diff.items():
    if not isinstance(key, str) or not _KEY_RE.match(key):
      raise ValueError(f"{where}: bad line key {key!r} (want a line number, e.g. '7' or '7 ')")
    if not isinstance(edit, Mapping):
      raise ValueError(f"{where}[{key!r}]: expected an object, got {type(edit).__name__}")
    kind = edit.get("type")
    if kind not in EDIT_TYPES:
      raise ValueError(f"{where}[{key!r}].type: {kind!r} is not one of {EDIT_TYPES}")
    fields = {}
    for field in ("original", "modified"):
      value = edit.get(field, "")
      if not isinstance(value, str):
        raise ValueError(f"{where}[{key!r}].{field}: expected a string, got {type(value).__name__}")
      fields[field] = value
    out[key] = {"type": kind, **fields}
  return out


def edits_equal(a: Edit, b: Edit) -> bool:
  """PDB's edit equality: same original and modified text (type not compared)."""
  return a["original"] == b["original"] and a["modified"] == b["modified"]


@dataclasses.dataclass(frozen=True)
class Block:
  """A maximal run of edits on consecutive buggy lines."""

  start: int  # first buggy line (for an Add: the line it precedes)
  end: int
  edits: Diff
  index: int = 0  # position among the diff's blocks
  gap_before: int = 0  # PDB's stride_before: unchanged lines to the previous block
  gap_after: int | None = None  # PDB's stride_after; None for the last block

  def __len__(self) -> int:
    return len(self.edits)

  @property
  def first_type(self) -> str:
    return next(iter(self.edits.values()))["type"]


def _continues(key: str, edit: Edit, next_line: int) -> bool:
  """Whether the edit at `key` joins the block of the edit at `next_line`."""
  line = int(key)
  if edit["type"] == "Add":
    return line == next_line  # an insert belongs to the line it precedes
  return line == next_line - 1


def parse_blocks(diff: Mapping[str, Edit]) -> list[Block]:
  """Splits a (sorted) diff into blocks, top to bottom, with PDB's gaps."""
  runs: list[list[tuple[str, Edit]]] = []  # built bottom-up, each run bottom-up; reversed below
  for key, edit in reversed(list(diff.items())):  # bottom-up, like PDB: inserts attach downwards
    if runs and _continues(key, edit, int(runs[-1][-1][0])):
      runs[-1].append((key, edit))
    else:
      runs.append([(key, edit)])
  runs = [run[::-1] for run in reversed(runs)]
  spans = [(int(run[0][0]), int(run[-1][0]), dict(run)) for run in runs]
  blocks = []
  for i, (start, end, edits) in enumerate(spans):
    if i == 0:
      gap_before = start - 1
    else:
      prev_start, prev_end, prev_edits = spans[i - 1]
      prev_is_add = next(iter(prev_edits.values()))["type"] == "Add"
      gap_before = start - prev_end - (0 if prev_is_add else 1)
    if i == len(spans) - 1:
      gap_after = None
    else:
      is_add = next(iter(edits.values()))["type"] == "Add"
      gap_after = spans[i + 1][0] - end - (0 if is_add else 1)
    blocks.append(Block(start, end, edits, i, gap_before, gap_after))
  return blocks


def merge_blocks(blocks: Iterable[Block]) -> Diff:
  """One diff from blocks ordered by start line; later blocks win on shared keys."""
  merged: Diff = {}
  for block in sorted(blocks, key=lambda b: b.start):
    merged.update(block.edits)
  return merged


def sub_block(block: Block, offset: int, size: int) -> Block:
  """The contiguous run of `size` edits of `block` starting at its `offset`-th edit."""
  items = list(block.edits.items())[offset : offset + size]
  lines = [int(k) for k, _ in items]
  return Block(min(lines), max(lines), dict(items), block.index)


# ---------------------------------------------------------------------------
# Alignment
# ---------------------------------------------------------------------------

EXACT, WRAP, NEAR, IDENTICAL = "exact", "wrap", "near", "identical"


@dataclasses.dataclass(frozen=True)
class Match:
  """A predicted block aligned to one or more reference blocks."""

  kind: str  # EXACT needs no test run; the others are verified counterfactually
  pred: Block
  refs: tuple[Block, ...]

  @property
  def ref_lines(self) -> int:
    return sum(len(ref) for ref in self.refs)


@dataclasses.dataclass(frozen=True)
class Alignment:
  matches: tuple[Match, ...]
  unmatched_pred: tuple[Block, ...]
  unmatched_refs: tuple[Block, ...]


def _same_block(pred: Block, ref: Block) -> bool:
  return (
    pred.start == ref.start
    and pred.end == ref.end
    and len(pred) == len(ref)
    and all(k in ref.edits and edits_equal(e, ref.edits[k]) for k, e in pred.edits.items())
  )


def _contexts_overlap(pred_lines: set[str], ref_lines: set[str], edge_line: str) -> bool:
  """PDB's near-match test for one side; blank lines never count as shared context."""
  pred_lines = {line for line in pred_lines if line.strip()}
  ref_lines = {line for line in ref_lines if line.strip()}
  if pred_lines & ref_lines or (not pred_lines and not ref_lines):
    return True
  if not ref_lines:
    return edge_line in pred_lines
  if not pred_lines:
    return edge_line in ref_lines
  return False


def _pred_context(
  lines: Sequence[str], blocks: Sequence[Block], i: int
) -> tuple[set[str], set[str]]:
  """Unchanged buggy lines between predicted block i and its neighbours.

  `blocks` is bottom-up, as PDB walks them. Index arithmetic mirrors PDB's:
  with no block above, the window starts at index 0, which (through Python's
  negative indexing) also takes the file's last line.
  """
  block = blocks[i]
  lo = blocks[i + 1].end + 1 if i + 1 < len(blocks) else 0
  before = {lines[n - 1] for n in range(lo, block.start)}
  hi = blocks[i - 1].start if i > 0 else len(lines)
  after = {lines[n - 1] for n in range(block.end + 1, hi)}
  return before, after


def _ref_context(lines: Sequence[str], ref: Block) -> tuple[set[str], set[str]]:
  """Unchanged lines around a reference block, measured from its start (as PDB does)."""
  after_span = ref.gap_after if ref.gap_after else len(lines) - ref.start
  before = {lines[ref.start - n - 1] for n in range(1, ref.gap_before) if ref.start - n > 0}
  after = {lines[ref.start + n - 1] for n in range(1, after_span) if ref.start + n <= len(lines)}
  return before, after


def align(buggy: str, pred_diff: Mapping[str, Edit], ref_diff: Mapping[str, Edit]) -> Alignment:
  """Aligns predicted to reference blocks with PDB's four passes.

  Matches of kind wrap, near and identical are candidates: the caller verifies
  each with its counterfactual test run.
  """
  refs = parse_blocks(ref_diff)
  remaining_refs = refs[::-1]  # PDB walks blocks bottom-up
  matches: list[Match] = []

  # Pass 1: exact (same range, same content).
  remaining_pred: list[Block] = []
  for pred in parse_blocks(pred_diff)[::-1]:
    ref = next((r for r in remaining_refs if _same_block(pred, r)), None)
    if ref is None:
      remaining_pred.append(pred)
    else:
      matches.append(Match(EXACT, pred, (ref,)))
      remaining_refs = [r for r in remaining_refs if r is not ref]

  # Passes 2-4 on what is left, bottom-up.
  lines = rstrip_lines(buggy).splitlines()
  unmatched_pred = []
  for i, pred in enumerate(remaining_pred):
    kind = WRAP
    found = [r for r in remaining_refs if pred.start <= r.start <= pred.end]
    if not found and lines:
      kind = NEAR
      pred_before, pred_after = _pred_context(lines, remaining_pred, i)
      for ref in remaining_refs:
        ref_before, ref_after = _ref_context(lines, ref)
        if _contexts_overlap(pred_before, ref_before, lines[0]) and _contexts_overlap(
          pred_after, ref_after, lines[-1]
        ):
          found = [ref]
          break
    if not found:
      kind = IDENTICAL
      pred_edits = list(pred.edits.values())
      for ref in remaining_refs:
        ref_edits = list(ref.edits.values())
        if len(pred_edits) == len(ref_edits) and all(map(edits_equal, pred_edits, ref_edits)):
          found = [ref]
          break
    if found:
      matches.append(Match(kind, pred, tuple(found)))
      remaining_refs = [r for r in remaining_refs if all(r is not f for f in found)]
    else:
      unmatched_pred.append(pred)

  return Alignment(tuple(matches), tuple(unmatched_pred), tuple(remaining_refs[::-1]))


def counterfactual_diff(
  ref_blocks: Sequence[Block], excluded: Iterable[Block], pred: Block
) -> Diff:
  """Δ* − {excluded reference blocks} ∪ {pred}: the diff a counterfactual run applies."""
  excluded_ids = {b.index for b in excluded}
  return merge_blocks([b for b in ref_blocks if b.index not in excluded_ids] + [pred])


def line_levenshtein(before: str, after: str) -> int:
  """Edit distance between the two programs' (right-stripped) line sequences."""
  a = [line.rstrip() for line in before.splitlines()]
  b = [line.rstrip() for line in after.splitlines()]
  # Trim the common prefix and suffix first: typical edits are small.
  lo = 0
  while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
    lo += 1
  hi_a, hi_b = len(a), len(b)
  while hi_a > lo and hi_b > lo and a[hi_a - 1] == b[hi_b - 1]:
    hi_a -= 1
    hi_b -= 1
  return _levenshtein(a[lo:hi_a], b[lo:hi_b])


def _levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
  """Unit-cost edit distance of two sequences, by Myers' bit-parallel algorithm (in Hyyro's
  formulation): one column of the dynamic programme per item of `b`, held as the bit vectors of
  its vertical differences (+1, -1) over `a`, in one Python int of len(a) bits. The same value
  as the quadratic table, in len(b) steps of a few int operations."""
  if not a:
    return len(b)
  matches: dict[str, int] = {}  # item -> bits of the positions in `a` that hold it
  for i, item in enumerate(a):
    matches[item] = matches.get(item, 0) | (1 << i)
  ones = (1 << len(a)) - 1
  last = 1 << (len(a) - 1)
  plus, minus = ones, 0  # vertical differences +1 and -1 of the current column
  distance = len(a)
  for item in b:
    eq = matches.get(item, 0)
    x = eq | minus
    diagonal = (((x & plus) + plus) ^ plus) | x  # where the column's diagonal step is free
    h_plus = minus | (ones & ~(diagonal | plus))
    h_minus = diagonal & plus
    if h_plus & last:
      distance += 1
    elif h_minus & last:
      distance -= 1
    h_plus = ((h_plus << 1) | 1) & ones
    h_minus = (h_minus << 1) & ones
    plus = h_minus | (ones & ~(diagonal | h_plus))
    minus = h_plus & diagonal
  return distance
