"""Task sets of a run: training tasks, validation tasks (families held out of training), clean
programs, held-in tasks (new instances of the training families) and the multi-line split.

Generated sets come from the bug generator with `data.seed` (not the run's `seed`: runs that
differ only in their seed train and are evaluated on the same tasks). They are cached on disk
(`cache_root()/tasks`), keyed by what was asked for and a hash of the generator's source, so the
arms and seeds of a comparison generate each set once.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Sequence
from typing import Any

import jax
import ml_collections

from precisecoder import tasks as tasks_lib
from precisecoder.tasks import Task


def cache_root() -> pathlib.Path:
  """Where built things are cached: `PRECISECODER_CACHE`, else ~/.cache/precisecoder."""
  return pathlib.Path(
    os.environ.get("PRECISECODER_CACHE") or pathlib.Path.home() / ".cache" / "precisecoder"
  )


def _generator_digest() -> str:
  from precisecoder.data import families, generator, injection, mutation, program_tasks, programs

  digest = hashlib.sha256()
  for module in (generator, families, injection, mutation, programs, program_tasks):
    digest.update(pathlib.Path(module.__file__).read_bytes())
  return digest.hexdigest()[:12]


def generated(split: str, tier: str, n: int, seed: int, *, clean: bool = False) -> list[Task]:
  """`generator.make_tasks` (or `make_clean_tasks`), through the on-disk cache."""
  from precisecoder.data import generator

  if n == 0:
    return []
  kind = f"clean-{tier}" if clean else tier  # correct programs differ by tier as buggy ones do
  path = cache_root() / "tasks" / f"{split}-{kind}-{n}-{seed}-{_generator_digest()}.jsonl.gz"
  if path.exists():
    return tasks_lib.load_tasks(path)
  made = (
    generator.make_clean_tasks(split, n, seed, tier=tier)
    if clean
    else generator.make_tasks(split, tier, n, seed)
  )
  if jax.process_index() == 0:  # hosts generate alike; one writes, atomically
    part = path.with_name(f".{os.getpid()}-{path.name}")  # processes may race to write it
    tasks_lib.write_tasks(part, made)
    os.replace(part, path)
  return made


def train_tasks(cfg: ml_collections.ConfigDict) -> list[Task]:
  if cfg.data.task_file:
    return tasks_lib.load_tasks(cfg.data.task_file)
  return generated("train", cfg.data.tier, cfg.data.num_train, cfg.data.seed)


def eval_tasks(cfg: ml_collections.ConfigDict) -> list[Task]:
  """Validation (buggy) tasks followed by clean programs, for the greedy evaluation."""
  from precisecoder.data import generator

  if cfg.data.validation_file:
    buggy = tasks_lib.load_tasks(cfg.data.validation_file)
  else:
    buggy = generated("validation", cfg.data.tier, cfg.data.num_validation, cfg.data.seed)
  if cfg.data.clean_file:
    clean = tasks_lib.load_tasks(cfg.data.clean_file)
  else:
    clean = generated(
      "validation",
      generator.clean_tier(cfg.data.tier),
      cfg.data.num_clean,
      cfg.data.seed,
      clean=True,
    )
  return list(buggy) + list(clean)


def wide_tasks(cfg: ml_collections.ConfigDict, n: int) -> list[Task]:
  """`n` validation tasks and `n` clean programs drawn apart from `eval_tasks`' (data seed + 1):
  the wider measurement of a finished comparison (experiments/remeasure.py)."""
  from precisecoder.data import generator

  if cfg.data.validation_file or cfg.data.clean_file:
    raise ValueError(
      "a wider measurement draws fresh generated tasks; this config evaluates on files "
      "(config.data.validation_file / clean_file)"
    )
  seed, tier = cfg.data.seed + 1, cfg.data.tier
  return generated("validation", tier, n, seed) + generated(
    "validation", generator.clean_tier(tier), n, seed, clean=True
  )


def wide_heldin_tasks(
  cfg: ml_collections.ConfigDict, n: int, seen: Sequence[Task] = ()
) -> list[Task]:
  """`n` held-in tasks and `n` held-in correct programs (data seed + 2) that neither the run,
  its base (`seen`) nor the evaluation's held-in split (`heldin_tasks`) holds: the wider
  measurement of what the policy practised. Families have few members: fewer may come back."""
  seen = train_tasks(cfg) + list(seen) + heldin_tasks(cfg, seen)
  return unseen_instances(cfg.data.tier, n, n, cfg.data.seed + 2, seen)


def multi_tasks(cfg: ml_collections.ConfigDict) -> list[Task]:
  """The multi-line split (held-out families, one atomic 2-4-line bug each): how far a policy
  trained on single-line bugs generalises; evaluated beside the validation tasks."""
  from precisecoder.data import generator

  return generated(
    "validation", generator.multi_tier(cfg.data.tier), cfg.data.num_multi, cfg.data.seed
  )


def task_iterator(tasks: list[Task], batch_size: int, seed: int):
  """A checkpointable iterator of this host's part of each global batch of `batch_size`
  tasks (all of it on one host)."""
  from precisecoder.data import pipeline

  hosts = jax.process_count()
  if batch_size % hosts:
    raise ValueError(f"{batch_size} tasks per step cannot be dealt equally to {hosts} hosts")
  return pipeline.make_iterator(
    tasks,
    batch_size // hosts,
    seed,
    shuffle=True,
    repeat=True,
    shard_index=jax.process_index(),
    shard_count=hosts,
  )


def as_tasks(batch: Any, where: str) -> list[Task]:
  """The iterator's batch as Task objects (it may yield Tasks or contract records)."""
  items = list(batch.values())[0] if isinstance(batch, dict) and "task_id" not in batch else batch
  out = []
  for i, item in enumerate(items):
    out.append(item if isinstance(item, Task) else tasks_lib.parse_task(item, f"{where}[{i}]"))
  return out


def heldin_tasks(cfg: ml_collections.ConfigDict, seen: Sequence[Task] = ()) -> list[Task]:
  """`data.num_heldin` new instances of the training families (data seed + 1), none of whose
  buggy programs the run trains on (nor `seen`: its base's SFT corpus), then `data.num_heldin_clean`
  correct programs of those families, none of which it was trained to write: does the policy get
  better at what it practised, on programs it has not seen, and does it leave correct ones
  alone? Validation tasks ask whether that transfers to families it never saw."""
  buggy_count, clean_count = int(cfg.data.num_heldin), int(cfg.data.num_heldin_clean)
  if not buggy_count and not clean_count:
    return []
  seen = train_tasks(cfg) + list(seen)
  return unseen_instances(cfg.data.tier, buggy_count, clean_count, cfg.data.seed + 1, seen)


def unseen_instances(
  tier: str, buggy_count: int, clean_count: int, seed: int, seen: Sequence[Task]
) -> list[Task]:
  """`buggy_count` buggy tasks of the training families of `tier` (generated at `seed`) whose
  buggy program none of `seen` holds, then `clean_count` correct programs of them that none of
  `seen` has as its fix (what a policy trained on `seen` learnt to write is not unseen)."""
  buggy_seen = {t.buggy_code for t in seen}
  fixed_seen = {t.gt_solution for t in seen}
  return _unseen(lambda n: generated("train", tier, n, seed), buggy_count, buggy_seen) + _unseen(
    lambda n: generated("train", tier, n, seed, clean=True), clean_count, fixed_seen
  )


def _unseen(make, count: int, seen: set[str]) -> list[Task]:
  """The first `count` tasks of `make(n)` whose program is not in `seen`."""
  pool, n = [], count
  while len(pool) < count and n <= 64 * count:  # families have few members: ask for more
    n *= 2
    pool = [t for t in make(n) if t.buggy_code not in seen]
  return pool[:count]
