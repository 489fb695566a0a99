"""Seeded generator of small debugging tasks (self-contained functions with call tests).

Tiers:
* `easy`: 3-12-line functions with one bug a small model can see (a flipped
  comparison or operator, an off-by-one, a wrong constant);
* `medium`: 8-30-line functions with one bug from any single-line operator;
* `hard`: medium functions with 2-4 bugs, or a 2-4-line (atomic) bug;
* `multi`: medium functions with exactly one 2-4-line (atomic) bug: the multi-line
  generalisation split for a policy trained on single-line bugs;
* `programs`, `programs-multi`: programs composed from a grammar instead of templates, with one
  single-line or one 2-4-line bug (data/program_tasks.py, data/programs.py).

Tests are `call` cases whose expected values come from the correct function,
so verdicts are computed outside the program. Every bug is verified to fail
them (in-process: the programs are our own templates; `precisecoder data build`
re-verifies every task in the sandboxed pool). Output is deterministic for
(split, tier, n, seed); splits share no function (see `families`).
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any, Sequence

import tqdm

from precisecoder.data import families as families_lib
from precisecoder.data import injection, mutation
from precisecoder.data.bug_choice import GeneratorError, choose_bugs, function_prompt
from precisecoder.data.checking import TrustedCallChecker, call_trusted, load_trusted
from precisecoder.data.families import Family
from precisecoder.data.mutation import Mutation
from precisecoder.tasks import Task

TIERS = ("easy", "medium", "hard", "multi", "programs", "programs-multi")
PROGRAM_TIERS = ("programs", "programs-multi")  # data/program_tasks.py: the program space
NUM_CASES = 8
_MAX_ATTEMPTS_PER_TASK = 50


def make_tests(
  family: Family, fn: str, code: str, knobs: dict[str, Any], rng: random.Random
) -> dict[str, Any]:
  """NUM_CASES distinct call cases (edge cases first) with expected values from `code`."""
  target = load_trusted(code, fn)
  cases, seen = [], set()
  pending = [list(args) for args in family.edge]
  for _ in range(20 * NUM_CASES):
    if len(cases) >= NUM_CASES:
      break
    args = pending.pop(0) if pending else family.sample(rng, knobs)
    key = json.dumps(args, sort_keys=True)
    if key in seen:
      continue
    seen.add(key)
    try:
      expected = call_trusted(target, args)
    except Exception as e:  # pylint: disable=broad-except
      raise GeneratorError(f"family {family.key!r}: correct code fails on {args!r}: {e!r}") from e
    cases.append({"args": json.loads(key), "expected": json.loads(json.dumps(expected))})
  return {"kind": "call", "entry_point": fn, "cases": cases}


def _family_pool(tier: str, split: str) -> tuple[Family, ...]:
  return families_lib.families("easy" if tier == "easy" else "medium", split)


def draw_buggy_function(
  family: Family, tier: str, split: str, rng: random.Random, checker: TrustedCallChecker
) -> tuple[str, str, str, dict, list[Mutation]] | None:
  """One attempt at a member of `family` with `tier`'s bugs, each verified to fail the tests:
  (fn, prompt, code, tests, bugs), or None if this draw has no usable bug."""
  fn, description, code, knobs = family.render(rng)
  tests = make_tests(family, fn, code, knobs, rng)
  source = injection.Source(key=family.key, code=code, tests=tests)
  chosen = choose_bugs(source, tier, rng, checker)
  if chosen is None:
    return None
  return fn, function_prompt(code, description), code, tests, chosen


def _task(
  task_id: str,
  tier: str,
  split: str,
  family: Family,
  prompt: str,
  code: str,
  tests: dict,
  bugs: Sequence[Mutation],
) -> Task:
  buggy, gt_diff = injection.buggy_program(code, bugs)
  return Task(
    task_id=task_id,
    buggy_code=buggy,
    gt_solution=code,
    gt_diff=gt_diff,
    tests=tests,
    prompt=prompt,
    timeout_s=6.0,
    is_buggy=True,
    bug_count=len(bugs),
    source_dataset="generator",
    extra={
      "family": family.key,
      "split": split,
      "tier": tier,
      "bug_type": [m.category for m in bugs],
      "bug_subtype": [m.operator for m in bugs],
      "multi_line": any(m.size > 1 for m in bugs),
      "editable_lines": len(mutation.editable_lines(code)),
    },
  )


def clean_tier(tier: str) -> str:
  """The tier whose clean programs go with `tier`'s tasks (the easy families', or the program
  space's)."""
  return "programs" if tier in PROGRAM_TIERS else "easy"


def multi_tier(tier: str) -> str:
  """The multi-line split that goes with `tier`'s tasks."""
  return "programs-multi" if tier in PROGRAM_TIERS else "multi"


def make_tasks(
  split: str, tier: str, n: int, seed: int = 0, *, progress: bool = False
) -> list[Task]:
  """`n` verified buggy tasks of `tier` from the families (or programs) of `split`."""
  if tier not in TIERS:
    raise ValueError(f"unknown tier {tier!r}; expected one of {TIERS}")
  if tier in PROGRAM_TIERS:
    from precisecoder.data import program_tasks  # pylint: disable=import-outside-toplevel

    return program_tasks.make_tasks(split, tier, n, seed, progress=progress)
  pool = _family_pool(tier, split)
  rng = random.Random(f"precisecoder-generator:{split}:{tier}:{seed}")
  checker = TrustedCallChecker()
  tasks: list[Task] = []
  seen: set[str] = set()
  attempts = 0
  order: list[Family] = []
  bar = tqdm.tqdm(
    total=n, desc=f"generate {tier}/{split}", unit="task", disable=not progress, file=sys.stderr
  )
  while len(tasks) < n:
    attempts += 1
    if attempts > _MAX_ATTEMPTS_PER_TASK * max(n, 1):
      raise GeneratorError(f"only {len(tasks)} of {n} {tier}/{split} tasks after {attempts} tries")
    if not order:  # deal families evenly, in a seeded order
      order = list(pool)
      rng.shuffle(order)
    family = order.pop()
    drawn = draw_buggy_function(family, tier, split, rng, checker)
    if drawn is None:
      continue
    fn, prompt, code, tests, bugs = drawn
    try:
      task = _task(
        f"gen-{tier}-{split}-{seed}-{len(tasks):06d}",
        tier,
        split,
        family,
        prompt,
        code,
        tests,
        bugs,
      )
    except ValueError:  # a composed diff that does not round-trip: draw again
      continue
    if task.buggy_code in seen:
      continue
    seen.add(task.buggy_code)
    tasks.append(task)
    bar.update()
  bar.close()
  return tasks


def make_clean_tasks(split: str, n: int, seed: int = 0, tier: str = "easy") -> list[Task]:
  """`n` already-correct programs (is_buggy false) from the families (or programs) of
  `split`."""
  if tier in PROGRAM_TIERS:
    from precisecoder.data import program_tasks  # pylint: disable=import-outside-toplevel

    return program_tasks.make_clean_tasks(split, n, seed)
  pool = _family_pool(tier, split)
  rng = random.Random(f"precisecoder-generator-clean:{split}:{tier}:{seed}")
  tasks: list[Task] = []
  seen: set[str] = set()
  attempts = 0
  while len(tasks) < n:
    attempts += 1
    if attempts > _MAX_ATTEMPTS_PER_TASK * max(n, 1):
      raise GeneratorError(
        f"only {len(tasks)} of {n} clean {split} programs after {attempts} "
        "tries (too few distinct family members)"
      )
    family = pool[(attempts - 1) % len(pool)]
    fn, description, code, knobs = family.render(rng)
    if code in seen:
      continue
    seen.add(code)
    tests = make_tests(family, fn, code, knobs, rng)
    tasks.append(
      Task(
        task_id=f"gen-clean-{split}-{seed}-{len(tasks):06d}",
        buggy_code=code,
        gt_solution=code,
        gt_diff={},
        tests=tests,
        prompt=function_prompt(code, description),
        is_buggy=False,
        bug_count=0,
        source_dataset="generator",
        extra={
          "family": family.key,
          "split": split,
          "tier": tier,
          "editable_lines": len(mutation.editable_lines(code)),
        },
      )
    )
  return tasks
