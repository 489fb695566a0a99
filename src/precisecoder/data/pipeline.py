"""The training input pipeline: tasks -> shuffled, repeated, sharded batches (grain).

`make_iterator` returns a grain iterator of `list[Task]` batches whose
`get_state()` / `set_state()` go into the training checkpoint, so a resumed
run continues with the next unseen batch instead of replaying the epoch.

Sources: a list of `Task`s, a contract JSON Lines file (.jsonl, .jsonl.gz), or
a task set built by `tfds_builder` (its folder; `split` picks the split).
`batch_size` is per host: with `shard_count` hosts, host `shard_index` takes every
`shard_count`-th batch of one stream that every host shuffles alike, so a step's global
batch (the hosts' batches in process order) does not depend on the number of hosts. The
shuffle is a fresh permutation every epoch, fixed by `seed`.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Sequence

import grain

from precisecoder.tasks import Task, load_tasks

TaskSource = Sequence[Task] | str | os.PathLike[str]


def _source(tasks: TaskSource, split: str) -> Any:
  if not isinstance(tasks, (str, os.PathLike)):
    return list(tasks)
  path = pathlib.Path(tasks)
  if path.is_dir():
    from precisecoder.data import tfds_builder  # pylint: disable=import-outside-toplevel  # slow

    found = (
      [path]
      if tfds_builder.is_tfds_dir(path)
      else sorted(p.parent for p in path.rglob("dataset_info.json"))
    )
    if len(found) != 1:
      raise FileNotFoundError(f"{path}: expected one built TFDS task set, found {len(found)}")
    return tfds_builder.tfds_source(found[0], split)
  return load_tasks(path)


def make_dataset(
  tasks: TaskSource,
  batch_size: int,
  seed: int,
  *,
  shuffle: bool = True,
  repeat: bool = True,
  shard_index: int = 0,
  shard_count: int = 1,
  drop_remainder: bool | None = None,
  split: str = "train",
) -> grain.MapDataset:
  """The batched `MapDataset` behind `make_iterator`."""
  if batch_size < 1:
    raise ValueError(f"batch_size must be positive, got {batch_size}")
  if not 0 <= shard_index < shard_count:
    raise ValueError(f"shard_index {shard_index} is not in [0, {shard_count})")
  ds = grain.MapDataset.source(_source(tasks, split))
  if len(ds) < shard_count:
    raise ValueError(f"{len(ds)} tasks cannot be split into {shard_count} shards")
  if shuffle:
    ds = ds.shuffle(seed=seed)
  if repeat:
    ds = ds.repeat(None)
  if drop_remainder is None:
    drop_remainder = repeat
  ds = ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=list)
  if shard_count > 1:
    # Host i takes batches i, i + n, i + 2n, ... of one stream shuffled alike on every host:
    # step k's global batch is the same contiguous run of the stream for any number of hosts,
    # and every host takes the same number of steps.
    ds = ds[: len(ds) // shard_count * shard_count][shard_index::shard_count]
  return ds


def make_iterator(
  tasks: TaskSource,
  batch_size: int,
  seed: int,
  shuffle: bool = True,
  repeat: bool = True,
  shard_index: int = 0,
  shard_count: int = 1,
  **kwargs: Any,
) -> grain.DatasetIterator:
  """An iterator of `list[Task]` batches with checkpointable `get_state()`/`set_state()`."""
  return iter(
    make_dataset(
      tasks,
      batch_size,
      seed,
      shuffle=shuffle,
      repeat=repeat,
      shard_index=shard_index,
      shard_count=shard_count,
      **kwargs,
    )
  )
