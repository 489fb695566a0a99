"""Repository-level style tasks: a module of several functions, exactly one of them buggy.

Each task is a file of 3-5 generated functions from distinct families of one split (easy and
medium families pooled, so splits still share no function). One function carries one bug: a
single-line bug from any operator or, for `MULTI_LINE_SHARE` of the tasks, an atomic 2-4-line
bug (the generator's `medium` / `multi` tiers). The tests are `assert` checks over every
function of the module, expected values computed from the correct code, so a fix that breaks a
neighbour fails too; the prompt describes every function. This mirrors PDB-Wild's
repository-level setting in miniature: the model must find the one function to edit and leave
the rest alone. Output is deterministic for (split, n, seed); `precisecoder data build
repository` re-verifies every task in the sandboxed pool.
"""

from __future__ import annotations

import ast
import random
import sys
from typing import Any

import tqdm

from precisecoder.data import families as families_lib
from precisecoder.data import generator, injection, mutation
from precisecoder.data.checking import TrustedCallChecker, call_trusted, load_trusted
from precisecoder.data.families import Family
from precisecoder.tasks import Task, derive_gt_diff

FUNCTIONS = (3, 5)  # functions per module, inclusive
MULTI_LINE_SHARE = 0.3
CASES_PER_NEIGHBOUR = 4  # the edited function keeps all its generator cases
_MAX_ATTEMPTS_PER_TASK = 50


def _pool(split: str) -> tuple[Family, ...]:
  return families_lib.families("easy", split) + families_lib.families("medium", split)


def _assert_lines(fn: str, code: str, cases: list[dict[str, Any]]) -> list[str]:
  """`assert fn(args) == value` per case, the value computed from the correct `code`; cases
  whose value has no exact literal form are left out."""
  target = load_trusted(code, fn)
  lines = []
  for case in cases:
    value = call_trusted(target, case["args"])
    literal = repr(value)
    try:
      if ast.literal_eval(literal) != value or type(ast.literal_eval(literal)) is not type(value):
        continue
    except (ValueError, SyntaxError):
      continue
    lines.append(f"assert {fn}({', '.join(repr(a) for a in case['args'])}) == {literal}")
  return lines


def _draw(
  pool: tuple[Family, ...], split: str, rng: random.Random, checker: TrustedCallChecker, buggy: bool
):
  """One attempt: ([(fn, prompt, code)], target index, bugs, assert lines) or None when the
  draw has no usable bug or two functions share a name."""
  k = min(rng.randint(*FUNCTIONS), len(pool))
  chosen = rng.sample(pool, k)
  target = rng.randrange(k)
  bugs: list = []
  functions, asserts = [], []
  for i, family in enumerate(chosen):
    if buggy and i == target:
      tier = "multi" if rng.random() < MULTI_LINE_SHARE else "medium"
      drawn = generator.draw_buggy_function(family, tier, split, rng, checker)
      if drawn is None:
        return None
      fn, prompt, code, tests, bugs = drawn
      cases = tests["cases"]
    else:
      fn, description, code, knobs = family.render(rng)
      prompt = generator.function_prompt(code, description)
      cases = generator.make_tests(family, fn, code, knobs, rng)["cases"][:CASES_PER_NEIGHBOUR]
    functions.append((fn, prompt, code))
    asserts += _assert_lines(fn, code, cases)
  if len({fn for fn, _, _ in functions}) < len(functions):
    return None
  return functions, target, bugs, asserts


def make_tasks(
  split: str, n: int, seed: int = 0, *, buggy: bool = True, progress: bool = False
) -> list[Task]:
  """`n` module tasks of `split`: one function buggy (or, with `buggy=False`, none)."""
  pool = _pool(split)
  kind = "buggy" if buggy else "clean"
  rng = random.Random(f"precisecoder-repository:{split}:{kind}:{seed}")
  checker = TrustedCallChecker()
  tasks: list[Task] = []
  seen: set[str] = set()
  attempts = 0
  bar = tqdm.tqdm(
    total=n, desc=f"repository {kind}/{split}", unit="task", disable=not progress, file=sys.stderr
  )
  while len(tasks) < n:
    attempts += 1
    if attempts > _MAX_ATTEMPTS_PER_TASK * max(n, 1):
      raise generator.GeneratorError(
        f"only {len(tasks)} of {n} repository {kind}/{split} tasks after {attempts} tries"
      )
    drawn = _draw(pool, split, rng, checker, buggy)
    if drawn is None:
      continue
    functions, target, bugs, asserts = drawn
    correct = "\n\n".join(code for _, _, code in functions)
    if buggy:
      buggy_fn, _ = injection.buggy_program(functions[target][2], bugs)
      program = "\n\n".join(
        buggy_fn if i == target else code for i, (_, _, code) in enumerate(functions)
      )
    else:
      program = correct
    if program in seen:
      continue
    seen.add(program)
    try:
      gt_diff = derive_gt_diff(program, correct) if buggy else {}
    except ValueError:
      continue
    extra: dict[str, Any] = {
      "split": split,
      "functions": [fn for fn, _, _ in functions],
      "editable_lines": len(mutation.editable_lines(correct)),
    }
    if buggy:
      extra.update(
        edited_function=functions[target][0],
        bug_type=[m.category for m in bugs],
        bug_subtype=[m.operator for m in bugs],
        multi_line=any(m.size > 1 for m in bugs),
      )
    tasks.append(
      Task(
        task_id=f"repo-{kind}-{split}-{seed}-{len(tasks):06d}",
        buggy_code=program,
        gt_solution=correct,
        gt_diff=gt_diff,
        tests={"kind": "assert", "code": "\n".join(asserts)},
        prompt=_module_prompt([prompt for _, prompt, _ in functions]),
        timeout_s=6.0,
        is_buggy=buggy,
        bug_count=1 if buggy else 0,
        source_dataset="repository",
        extra=extra,
      )
    )
    bar.update()
  bar.close()
  return tasks


def _module_prompt(prompts: list[str]) -> str:
  return "A module of several functions; each must do what its description says.\n" + "\n".join(
    f"- {p}" for p in prompts
  )
