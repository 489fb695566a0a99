"""Choosing a correct function's bugs for a task tier, each verified to fail its tests: what
the template tiers (generator.py) and the program space (program_tasks.py) share."""

from __future__ import annotations

import random

from precisecoder.data import injection
from precisecoder.data.checking import TrustedCallChecker
from precisecoder.data.mutation import Mutation

EASY_OPERATORS = (
  "boundary_shift",
  "comparison_swap",
  "arithmetic_swap",
  "constant_off_by_one",
  "wrong_constant",
  "range_bound",
  "boolean_flip",
  "augassign_swap",
)


class GeneratorError(RuntimeError):
  """A family template is broken (its correct code fails on its own inputs)."""


def signature(code: str) -> str:
  """`name(args)` of a generated function's source."""
  return code.splitlines()[0].removeprefix("def ").rstrip(":")


def function_prompt(code: str, description: str) -> str:
  """The task description of one generated function."""
  return f"Implement `{signature(code)}`. {description}"


def _bug_plan(tier: str, rng: random.Random) -> tuple[int, bool]:
  """(number of bugs, whether one of them is a 2-4-line block) for a task of `tier`."""
  if tier == "multi":
    return 1, True
  if tier != "hard":
    return 1, False
  if rng.random() < 0.3:
    return rng.choice((1, 1, 2)), True
  return rng.choice((2, 2, 3, 4)), False


def choose_bugs(
  source: injection.Source, tier: str, rng: random.Random, checker: TrustedCallChecker
) -> list[Mutation] | None:
  """`tier`'s bugs for `source`, each verified to fail its tests, or None if this program
  has none that fit."""
  k, multi = _bug_plan(tier, rng)
  operators = EASY_OPERATORS if tier == "easy" else None
  singles = injection.balanced_order(injection.candidates(source, operators=operators), rng)
  need = k - int(multi)
  verified_singles = []
  if need:
    # Verify lazily, in shuffled order: a few spares when bugs must be spaced out.
    enough = need * 3 if (multi or need > 1) else 1
    for m in singles:
      if injection.verify([source], [[m]], checker)[0]:
        verified_singles.append(m)
      if len(verified_singles) >= enough:
        break
  chosen: list[Mutation] = []
  if multi:
    blocks = injection.balanced_order(injection.candidates(source, multi_line=True), rng)
    for block in blocks:
      if injection.verify([source], [[block]], checker)[0]:
        chosen = [block]
        break
    if not chosen:
      return None
  if need:
    rest = [m for m in verified_singles if injection.well_separated(chosen + [m])]
    picked = injection.compose(rest, need, rng)
    if picked is None or not injection.well_separated(chosen + picked):
      return None
    chosen = sorted(chosen + picked, key=lambda m: m.span)
  return chosen
