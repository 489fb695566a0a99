"""SFT targets that model what the paper diagnoses in real models: a configurable mixture.

A base policy trained only on reference fixes would edit as little as the references do, and
RL would have nothing to correct. Real models over-edit, return broken "fixes" and sometimes
give the code back unchanged (PAPER.md, "The problem"); the small policy's base is trained on
answers of each kind, in proportions its config sets (`base.mixture`):
- `reference`: the reference fix;
- `extra_edits`: the reference fix with edits of lines that needed none, each keeping the
  tests passing (data/rewrites.py): a local renamed with probability `rename_rate`, and every
  line that has a rewrite (reformatting, an equivalent expression, a redundant statement)
  rewritten with probability `extra_rate`, always in the same style; passes, with lower
  precision;
- `wrong_edit`: the buggy program with one bug-like edit (mutation operators), on the buggy
  line or another, kept only if the tests still fail;
- `noop`: the buggy program unchanged.

Each task gets `draws` targets drawn independently from the mixture (trained as one group of
rows sharing the task's prompt). A kind that cannot be made for a task (no verified rewrite or
wrong edit) falls back to the reference fix and is counted as such.

`with_fresh_names` renames a task's own identifiers (function, parameters, locals) to made-up
ones, the same way in its description, buggy program and every target. The generator's families
reuse a few names each, so a small model trained on them can predict a program from its first
tokens and never learns to read the one in its prompt; under names it cannot have memorised, the
only way to predict an answer is to copy the prompt, which is what a fix of an unseen program
needs.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import keyword
import random
import re
from collections.abc import Mapping, Sequence

from precisecoder.data import families, mutation, rewrites
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import Task, derive_gt_diff

KINDS = ("reference", "extra_edits", "wrong_edit", "noop")
_WRONG_TRIES = 8


@dataclasses.dataclass(frozen=True)
class Target:
  kind: str
  program: str


def check_weights(weights: Mapping[str, float]) -> None:
  """Raises ValueError naming a weight that is unknown or negative, or a mixture of zero."""
  unknown = sorted(set(weights) - set(KINDS))
  if unknown:
    raise ValueError(f"unknown SFT target kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
  if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
    raise ValueError(f"SFT mixture weights must be >= 0 with a positive sum, got {dict(weights)}")


def _wrong_edit(task: Task, rng: random.Random, checker: TrustedCallChecker) -> str | None:
  buggy = task.buggy_code
  candidates = mutation.single_line_mutations(buggy, mutation.editable_lines(buggy))
  rng.shuffle(candidates)
  for m in candidates[:_WRONG_TRIES]:
    program = mutation.apply_mutations(buggy, [m])
    if program != task.gt_solution and not checker.passes_one(program, task.tests):
      return program
  return None


def make_target(
  task: Task,
  kind: str,
  rng: random.Random,
  *,
  extra_rate: float = 0.9,
  rename_rate: float = 0.3,
  checker: TrustedCallChecker | None = None,
) -> Target:
  """One target of `kind` for a buggy task (the reference fix when `kind` cannot be made)."""
  checker = checker or TrustedCallChecker()
  if kind == "noop":
    return Target("noop", task.buggy_code)
  if kind == "extra_edits":
    program, applied = rewrites.rewrite(
      task.gt_solution,
      task.tests,
      rng,
      rate=extra_rate,
      rename_rate=rename_rate,
      avoid_like=task.buggy_code,
      checker=checker,
    )
    if applied:
      return Target("extra_edits", program)
  elif kind == "wrong_edit":
    program = _wrong_edit(task, rng, checker)
    if program is not None:
      return Target("wrong_edit", program)
  elif kind != "reference":
    raise ValueError(f"unknown SFT target kind {kind!r}; known: {', '.join(KINDS)}")
  return Target("reference", task.gt_solution)


def draw_targets(
  tasks: Sequence[Task],
  weights: Mapping[str, float],
  *,
  draws: int,
  seed: int,
  extra_rate: float = 0.9,
  rename_rate: float = 0.3,
  first_index: int = 0,
) -> list[list[Target]]:
  """`draws` targets per task, kinds drawn from `weights`; deterministic for (tasks, seed).
  Task i draws from its own generator (seed, first_index + i, task id), so a list can be cut
  into parts drawn apart (in parallel) with the same result."""
  check_weights(weights)
  kinds = [k for k in KINDS if weights.get(k, 0) > 0]
  checker = TrustedCallChecker()
  out = []
  for i, task in enumerate(tasks, start=first_index):
    rng = random.Random(f"precisecoder-sft-mixture:{seed}:{i}:{task.task_id}")
    drawn = rng.choices(kinds, [weights[k] for k in kinds], k=draws)
    out.append(
      [
        make_target(
          task, kind, rng, extra_rate=extra_rate, rename_rate=rename_rate, checker=checker
        )
        for kind in drawn
      ]
    )
  return out


_ONSETS = "b c d f g h j k l m n p r s t v w z br dr gr kl pl st tr sh ch".split()
_VOWELS = "a e i o u ai ou".split()
_RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins))


def fresh_name(rng: random.Random, taken: set[str]) -> str:
  """A made-up identifier of one or two pronounceable words (`kobu`, `tra_lise`), not in
  `taken`, not a keyword or builtin."""
  while True:
    words = [
      "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(1, 3)))
      for _ in range(rng.choice((1, 1, 2)))
    ]
    name = "_".join(words)
    if name not in taken and name not in _RESERVED:
      return name


def own_names(code: str) -> list[str]:
  """The identifiers `code` defines itself: functions, their parameters, stored names (not
  builtins, imports or attributes), in order of first definition."""
  names: dict[str, None] = {}
  for node in ast.walk(ast.parse(code)):
    if isinstance(node, ast.FunctionDef):
      names[node.name] = None
    elif isinstance(node, ast.arg):
      names[node.arg] = None
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
      names[node.id] = None
  return [n for n in names if n not in _RESERVED]


def with_fresh_names(
  task: Task, programs: Sequence[str], rng: random.Random
) -> tuple[Task, list[str]]:
  """`task` and its target `programs` with the buggy program's own identifiers renamed to
  fresh ones, consistently (an alpha-renaming: every program keeps its behaviour; a name only
  a target introduces keeps its spelling). Names in the description's `code` spans follow; the
  tests do not (the variant is an SFT example, never run)."""
  names = own_names(task.buggy_code)
  taken = {
    n.id
    for p in (task.buggy_code, *programs)
    for n in ast.walk(ast.parse(p))
    if isinstance(n, ast.Name)
  } | set(names)
  renames = {}
  for name in names:
    renames[name] = fresh_name(rng, taken)
    taken.add(renames[name])
  prompt = re.sub(
    r"`[^`]*`",
    lambda code: re.sub(r"\w+", lambda word: renames.get(word.group(), word.group()), code.group()),
    task.prompt,
  )
  buggy = families.apply_renames(task.buggy_code, renames)
  fixed = families.apply_renames(task.gt_solution, renames)
  renamed = dataclasses.replace(
    task, prompt=prompt, buggy_code=buggy, gt_solution=fixed, gt_diff=derive_gt_diff(buggy, fixed)
  )
  return renamed, [families.apply_renames(p, renames) for p in programs]
