"""Debugging tasks from the program space (`programs.py`): the generator's `programs` tiers.

* `programs`: one verified single-line bug (any of PDB's single-line operators) per program;
* `programs-multi`: one verified atomic 2-4-line bug per program (the multi-line split);
* clean programs: correct programs of a split, drawn from their own stream.

Bugs are chosen and verified as for the template tiers (`bug_choice.choose_bugs`). Every task
carries its program's `skeleton`; a validation or test task also carries how far its program is
from the nearest training program (`train_distance`: normalised token edit distance;
`train_shape_distance`: the same with identifiers and constants abstracted), measured against
the first REFERENCE_PROGRAMS programs of the training split's buggy stream at the same seed
(a training set of that many tasks or more is drawn from them). `data card` reports both.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import sys

import tqdm

from precisecoder.data import bug_choice, injection, mutation, programs
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.tasks import Task

TIERS = ("programs", "programs-multi")
REFERENCE_PROGRAMS = 2000
_MAX_PROGRAMS_PER_TASK = 50


def _bug_tier(tier: str) -> str:
  """The template tier whose bug plan a program tier follows."""
  return "multi" if tier == "programs-multi" else "medium"


def _extra(program: programs.Program, split: str, tier: str) -> dict:
  return {
    "family": "programs",
    "skeleton": program.skeleton,
    "split": split,
    "tier": tier,
    "editable_lines": len(mutation.editable_lines(program.code)),
  }


def make_tasks(
  split: str, tier: str, n: int, seed: int = 0, *, progress: bool = False
) -> list[Task]:
  """`n` verified buggy tasks of a program tier from the programs of `split`."""
  if tier not in TIERS:
    raise ValueError(f"unknown program tier {tier!r}; expected one of {TIERS}")
  rng = random.Random(f"precisecoder-program-tasks:{split}:{tier}:{seed}")
  checker = TrustedCallChecker()
  tasks: list[Task] = []
  bar = tqdm.tqdm(
    total=n, desc=f"generate {tier}/{split}", unit="task", disable=not progress, file=sys.stderr
  )
  stream_name = "multi" if tier == "programs-multi" else "buggy"
  for index, program in programs.stream(split, seed, stream_name):
    if len(tasks) >= n:
      break
    if index >= _MAX_PROGRAMS_PER_TASK * max(n, 1):
      raise bug_choice.GeneratorError(
        f"only {len(tasks)} of {n} {tier}/{split} tasks from {index} programs"
      )
    source = injection.Source(key=program.skeleton, code=program.code, tests=program.tests)
    bugs = bug_choice.choose_bugs(source, _bug_tier(tier), rng, checker)
    if bugs is None:
      continue
    try:
      buggy, gt_diff = injection.buggy_program(program.code, bugs)
    except ValueError:  # a diff that does not round-trip: next program
      continue
    tasks.append(
      Task(
        task_id=f"gen-{tier}-{split}-{seed}-{len(tasks):06d}",
        buggy_code=buggy,
        gt_solution=program.code,
        gt_diff=gt_diff,
        tests=program.tests,
        prompt=bug_choice.function_prompt(program.code, program.description),
        timeout_s=6.0,
        is_buggy=True,
        bug_count=len(bugs),
        source_dataset="generator",
        extra={
          **_extra(program, split, tier),
          "bug_type": [m.category for m in bugs],
          "bug_subtype": [m.operator for m in bugs],
          "multi_line": any(m.size > 1 for m in bugs),
        },
      )
    )
    bar.update()
  bar.close()
  return with_distances(tasks, seed)


def make_clean_tasks(split: str, n: int, seed: int = 0) -> list[Task]:
  """`n` correct programs (is_buggy false) of `split`, none a buggy task's program."""
  tasks = []
  for _, program in programs.stream(split, seed, "clean"):
    if len(tasks) >= n:
      break
    tasks.append(
      Task(
        task_id=f"gen-clean-programs-{split}-{seed}-{len(tasks):06d}",
        buggy_code=program.code,
        gt_solution=program.code,
        gt_diff={},
        tests=program.tests,
        prompt=bug_choice.function_prompt(program.code, program.description),
        is_buggy=False,
        bug_count=0,
        source_dataset="generator",
        extra=_extra(program, split, "programs"),
      )
    )
  return with_distances(tasks, seed)


@functools.lru_cache(maxsize=2)
def _reference(seed: int, count: int) -> tuple[programs.NearestIndex, programs.NearestIndex]:
  codes = [programs.draw("train", seed, i).code for i in range(count)]
  return programs.NearestIndex(codes), programs.NearestIndex(codes, abstract=True)


def with_distances(tasks: list[Task], seed: int) -> list[Task]:
  """Held-out tasks with their programs' distances to the nearest training program."""
  if not tasks or tasks[0].extra["split"] == "train":
    return tasks
  raw, shape = _reference(seed, REFERENCE_PROGRAMS)
  return [
    dataclasses.replace(
      t,
      extra={
        **t.extra,
        "train_distance": raw.nearest(t.gt_solution)[0],
        "train_shape_distance": shape.nearest(t.gt_solution)[0],
      },
    )
    for t in tasks
  ]
