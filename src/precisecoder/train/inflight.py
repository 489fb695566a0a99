"""Rollouts in flight: with `rl.max_staleness` = k >= 1, the rollouts of the next k steps are
sampled before the current step learns, and scored (by the execution pool, in other processes)
while it does.

The schedule is fixed, so a run is reproducible and resumable: step t's rollouts are sampled
with the rng of step t and the parameters after update max(0, t - 1 - k) (k = 0: those the
step starts from, today's synchronous loop). They are sampled at the start of step t - k, when
those are the loop's parameters: the sampler reads the learner's own device arrays before the
update donates them, so no weights move between them. A step's staleness, the updates between
the parameters that sampled its rollouts and those it starts from, is min(k, t - 1).

Those parameters are gone by the time a checkpoint is written, so a checkpoint of step s holds
the rollouts of steps s + 1 .. s + k themselves, scored, as data (`to_arrays`): what the learner
needs of them (the arrays, the reward terms, the sampling metrics). The data iterator's state
saved beside them is past their tasks, so a resumed run draws exactly what the uninterrupted
one drew next, and trains every prompt once.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from precisecoder.train import rollout as rollout_lib

# The learner's part of a rollout (the texts, programs and tasks were the scorer's).
_ARRAYS = ("prompt_ids", "prompt_mask", "tokens", "logprobs", "lengths", "model_mask")

Collected = tuple[rollout_lib.Rollout, dict[str, np.ndarray], dict[str, float]]


class Pending(Protocol):
  def result(self) -> Collected:
    """(rollout, reward terms, metrics of its sampling), once scored (waits for that)."""


@dataclasses.dataclass
class Ready:
  """A step's rollouts already scored (restored from a checkpoint, dynamic sampling's)."""

  collected: Collected

  def result(self) -> Collected:
    return self.collected


@dataclasses.dataclass
class OnThread:
  """A step's rollouts being sampled on the sampler's thread (rl.sampler_devices >= 1): a
  future of their Pending."""

  future: concurrent.futures.Future

  def result(self) -> Collected:
    return self.future.result().result()


@dataclasses.dataclass
class InFlight:
  step: int  # the step that learns from them
  version: int  # the update whose parameters sampled them (0: the run's initial ones)
  pending: Pending


def to_arrays(items: list[InFlight]) -> dict[str, np.ndarray]:
  """The rollouts of `items`, waited for and scored, as one flat dict of arrays (this host's
  rows) for the checkpoint; `from_arrays` reads it back."""
  out: dict[str, np.ndarray] = {"steps": np.array([(x.step, x.version) for x in items], np.int64)}
  for i, item in enumerate(items):
    rollout, terms, timing = item.pending.result()
    for name in _ARRAYS:
      value = getattr(rollout, name)
      if value is not None:
        out[f"{i}/rollout/{name}"] = value
    out.update({f"{i}/terms/{k}": v for k, v in terms.items()})
    out.update({f"{i}/timing/{k}": np.float64(v) for k, v in timing.items()})
  return out


def from_arrays(arrays: dict[str, np.ndarray]) -> list[InFlight]:
  """The in-flight rollouts a checkpoint holds (`to_arrays`'s), as Ready ones. A restored
  rollout has the learner's arrays; its texts and tasks, which only scoring read, are empty."""
  items = []
  for i, (step, version) in enumerate(np.asarray(arrays["steps"]).reshape(-1, 2)):
    part = {
      kind: {
        k.split("/", 2)[2]: np.asarray(v) for k, v in arrays.items() if k.startswith(f"{i}/{kind}/")
      }
      for kind in ("rollout", "terms", "timing")
    }
    rollout = rollout_lib.Rollout(
      tasks=[],
      completions=[],
      programs=[],
      **{name: part["rollout"].get(name) for name in _ARRAYS},
    )
    timing = {k: float(v) for k, v in part["timing"].items()}
    items.append(InFlight(int(step), int(version), Ready((rollout, part["terms"], timing))))
  return items


def restore(arrays: dict[str, np.ndarray] | None, step: int) -> collections.deque[InFlight]:
  """The rollouts in flight after `step`, from its checkpoint's arrays (None: none)."""
  items = from_arrays(arrays) if arrays is not None else []
  if [x.step for x in items] != list(range(step + 1, step + 1 + len(items))):
    raise ValueError(
      f"the checkpoint of step {step} holds rollouts in flight for steps "
      f"{[x.step for x in items]}, not the steps after it"
    )
  return collections.deque(items)


def save_state(items: Iterable[InFlight]) -> dict[str, np.ndarray] | None:
  """What a checkpoint keeps of the rollouts in flight (None when there are none)."""
  items = list(items)
  return to_arrays(items) if items else None
