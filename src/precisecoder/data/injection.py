"""Verified bug injection, PDB's way: candidate bugs -> verified bugs -> composed tasks.

1. Candidates come from `mutation` (editable lines only).
2. A single-line bug is kept only if its program fails the tests; a 2-4-line
   bug only if, in addition, no partial revert (any proper subset of its
   `gt_diff` entries applied) passes, so the block is atomic.
3. k verified bugs are composed with at least `stride` untouched lines between
   them (2, or 4 when a multi-line bug is involved). With the others fixed,
   each bug alone is a verified failure, so every bug is necessary.
4. The composed `gt_diff` must round-trip: it has exactly k blocks and turns
   the buggy program back into the correct one.

Verification runs through a `Checker` in batches (the pool runs a batch in
parallel); candidate order is shuffled by a seeded RNG, so results are
deterministic for a seed.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import random
from typing import Any, Callable, Iterable, Mapping, Sequence

from precisecoder import edits
from precisecoder.data import mutation
from precisecoder.data.checking import Checker
from precisecoder.data.mutation import Mutation
from precisecoder.tasks import apply_gt_diff, derive_gt_diff

SINGLE_STRIDE = 2
MULTI_STRIDE = 4


@dataclasses.dataclass(frozen=True)
class Source:
  """A correct program to inject bugs into."""

  key: str
  code: str
  tests: Mapping[str, Any]
  first_editable: int = 1  # lines before it are starter code (frozen)


@dataclasses.dataclass
class Yield:
  """Attempted / kept counts per operator and per category."""

  attempted: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  kept: collections.Counter = dataclasses.field(default_factory=collections.Counter)

  def add(self, m: Mutation, kept: bool) -> None:
    for key in (("operator", m.operator), ("category", m.category)):
      self.attempted[key] += 1
      self.kept[key] += int(kept)

  def merge(self, other: "Yield") -> None:
    self.attempted.update(other.attempted)
    self.kept.update(other.kept)

  def table(self) -> dict[str, dict[str, dict[str, int]]]:
    """{"operator": {op: {attempted, kept}}, "category": {cat: {attempted, kept}}}."""
    out: dict[str, dict[str, dict[str, int]]] = {"operator": {}, "category": {}}
    for (kind, name), n in sorted(self.attempted.items()):
      out[kind][name] = {"attempted": n, "kept": self.kept[(kind, name)]}
    return out


def bug_diff(code: str, m: Mutation) -> dict[str, dict[str, str]]:
  """The buggy->correct `gt_diff` of one bug."""
  return derive_gt_diff(mutation.apply_mutations(code, [m]), code)


def partial_reverts(buggy: str, diff: Mapping[str, Mapping[str, str]]) -> list[str]:
  """`buggy` with every non-empty proper subset of the fix's entries applied."""
  keys = list(diff)
  out = []
  for size in range(1, len(keys)):
    for subset in itertools.combinations(keys, size):
      out.append(edits.apply_diff(buggy, {k: diff[k] for k in subset}))
  return out


def candidates(
  source: Source, *, operators: Iterable[str] | None = None, multi_line: bool = False
) -> list[Mutation]:
  """Every candidate bug of a source (single-line, or 2-4-line when `multi_line`)."""
  editable = mutation.editable_lines(source.code, source.first_editable)
  singles = mutation.single_line_mutations(source.code, editable)
  pool = mutation.multi_line_mutations(source.code, editable, singles) if multi_line else singles
  if operators is not None:
    allowed = set(operators)
    pool = [m for m in pool if m.operator in allowed]
  return pool


def balanced_order(muts: Sequence[Mutation], rng: random.Random) -> list[Mutation]:
  """Candidates shuffled so that operators take turns (no operator crowds out the rest)."""
  groups: dict[str, list[Mutation]] = collections.defaultdict(list)
  for m in muts:
    groups[m.operator].append(m)
  queues = []
  for op in sorted(groups):
    group = list(groups[op])
    rng.shuffle(group)
    queues.append(group)
  rng.shuffle(queues)
  out = []
  while queues:
    for q in queues:
      out.append(q.pop())
    queues = [q for q in queues if q]
  return out


def verify(
  sources: Sequence[Source],
  proposals: Sequence[Sequence[Mutation]],
  checker: Checker,
  *,
  batch_size: int = 512,
  progress: Callable[[int], None] | None = None,
  stats: Yield | None = None,
) -> list[list[Mutation]]:
  """The proposals (per source) that are verified bugs; multi-line ones must be atomic."""
  plan = []  # (source index, mutation, programs to run: [buggy, *partial reverts])
  for i, (source, muts) in enumerate(zip(sources, proposals)):
    for m in muts:
      buggy = mutation.apply_mutations(source.code, [m])
      programs = [buggy]
      diff = bug_diff(source.code, m)
      if not diff:
        continue
      if m.size > 1:
        programs += partial_reverts(buggy, diff)
      plan.append((i, m, programs))
  kept: list[list[Mutation]] = [[] for _ in sources]
  for start in range(0, len(plan), batch_size):
    chunk = plan[start : start + batch_size]
    items = [(p, sources[i].tests) for i, _, programs in chunk for p in programs]
    verdicts = iter(checker.passes(items))
    for i, m, programs in chunk:
      passed = [next(verdicts) for _ in programs]
      ok = not any(passed)  # the bug fails, and no partial revert passes
      if ok:
        kept[i].append(m)
      if stats is not None:
        stats.add(m, ok)
    if progress is not None:
      progress(len(chunk))
  return kept


def gap(a: Mutation, b: Mutation) -> int:
  """Untouched correct-program lines between bug `a` and the later bug `b`."""
  return b.span[0] - a.span[1] - 1


def well_separated(bugs: Sequence[Mutation]) -> bool:
  """Whether bugs keep PDB's minimum stride (2 lines, 4 next to a multi-line bug)."""
  ordered = sorted(bugs, key=lambda m: m.span)
  return all(
    gap(a, b) >= (MULTI_STRIDE if max(a.size, b.size) > 1 else SINGLE_STRIDE)
    for a, b in zip(ordered, ordered[1:])
  )


def compose(
  bugs: Sequence[Mutation], k: int, rng: random.Random, tries: int = 16
) -> list[Mutation] | None:
  """k of `bugs` on well-separated lines (PDB's minimum stride), or None.

  Bugs are taken in operator-balanced order, so an operator with many sites
  (a wrong variable name fits almost anywhere) does not crowd out the rest.
  """
  if len(bugs) < k or k < 1:
    return None
  for _ in range(tries):
    chosen: list[Mutation] = []
    for bug in balanced_order(bugs, rng):
      if well_separated(chosen + [bug]):
        chosen.append(bug)
        if len(chosen) == k:
          return sorted(chosen, key=lambda m: m.span)
  return None


def buggy_program(code: str, bugs: Sequence[Mutation]) -> tuple[str, dict[str, dict[str, str]]]:
  """(buggy program, gt_diff) of composed bugs.

  Raises ValueError if the diff does not round-trip.
  """
  buggy = mutation.apply_mutations(code, bugs)
  diff = derive_gt_diff(buggy, code)
  blocks = edits.parse_blocks(diff)
  if len(blocks) != len(bugs):
    raise ValueError(f"{len(bugs)} bugs gave {len(blocks)} diff blocks")
  if edits.rstrip_lines(apply_gt_diff(buggy, diff)).strip("\n") != edits.rstrip_lines(code).strip(
    "\n"
  ):
    raise ValueError("gt_diff does not turn the buggy program back into the correct one")
  return buggy, diff
