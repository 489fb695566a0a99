"""Task sets of a run: training tasks, held-in validation tasks and clean programs."""

from __future__ import annotations

from typing import Any

import jax
import ml_collections

from precisecoder import tasks as tasks_lib
from precisecoder.tasks import Task


def train_tasks(cfg: ml_collections.ConfigDict) -> list[Task]:
  if cfg.data.task_file:
    return tasks_lib.load_tasks(cfg.data.task_file)
  from precisecoder.data import generator
  return generator.make_tasks("train", cfg.data.tier, cfg.data.num_train, cfg.seed)


def eval_tasks(cfg: ml_collections.ConfigDict) -> list[Task]:
  """Validation (buggy) tasks followed by clean programs, for `evaluate`."""
  from precisecoder.data import generator
  if cfg.data.validation_file:
    buggy = tasks_lib.load_tasks(cfg.data.validation_file)
  else:
    buggy = generator.make_tasks("validation", cfg.data.tier, cfg.data.num_validation, cfg.seed)
  if cfg.data.clean_file:
    clean = tasks_lib.load_tasks(cfg.data.clean_file)
  else:
    clean = generator.make_clean_tasks("validation", cfg.data.num_clean, cfg.seed)
  return list(buggy) + list(clean)


def task_iterator(tasks: list[Task], batch_size: int, seed: int):
  """A checkpointable iterator of this host's part of each global batch of `batch_size`
  tasks (all of it on one host)."""
  from precisecoder.data import pipeline
  hosts = jax.process_count()
  if batch_size % hosts:
    raise ValueError(f"{batch_size} tasks per step cannot be dealt equally to {hosts} hosts")
  return pipeline.make_iterator(tasks, batch_size // hosts, seed, shuffle=True, repeat=True,
                                shard_index=jax.process_index(), shard_count=hosts)


def as_tasks(batch: Any, where: str) -> list[Task]:
  """The iterator's batch as Task objects (it may yield Tasks or contract records)."""
  items = list(batch.values())[0] if isinstance(batch, dict) and "task_id" not in batch else batch
  out = []
  for i, item in enumerate(items):
    out.append(item if isinstance(item, Task) else tasks_lib.parse_task(item, f"{where}[{i}]"))
  return out
