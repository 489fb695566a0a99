"""The training input pipeline: tasks -> shuffled, repeated, sharded batches (grain).

`make_iterator` returns a grain iterator of `list[Task]` batches whose
`get_state()` / `set_state()` go into the training checkpoint, so a resumed
run continues with the next unseen batch instead of replaying the epoch.

Sources: a list of `Task`s, a contract JSON Lines file (.jsonl, .jsonl.gz), or
ArrayRecord files written by the TFDS builder (a TFDS dataset folder, or
`*.array_record*` files). Each host reads its own shard
(`shard_index::shard_count`) of the records; the shuffle is a fresh
permutation every epoch, fixed by `seed`.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Sequence

import grain

from precisecoder.data import files
from precisecoder.tasks import Task, parse_task

TaskSource = Sequence[Task] | str | os.PathLike[str]


class _ArrayRecordTasks:
  """Random access to task records stored as JSON bytes in ArrayRecord files."""

  def __init__(self, files: Sequence[pathlib.Path]):
    self._files = [str(f) for f in files]
    self._source = grain.sources.ArrayRecordDataSource(self._files)

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index: int) -> Task:
    record = json.loads(self._source[index])
    return parse_task(record, f"{self._files[0]}... record {index}")


def array_record_files(path: pathlib.Path, split: str = "train") -> list[pathlib.Path]:
  """The ArrayRecord shards of a TFDS dataset folder (or one file), in order."""
  if path.is_file():
    return [path]
  files = sorted(path.rglob(f"*-{split}.array_record*"))
  if not files:
    files = sorted(path.rglob("*.array_record*"))
  if not files:
    raise FileNotFoundError(f"{path}: no ArrayRecord files (expected a TFDS dataset folder)")
  return files


def _source(tasks: TaskSource, split: str) -> Any:
  if not isinstance(tasks, (str, os.PathLike)):
    return list(tasks)
  path = pathlib.Path(tasks)
  if path.is_dir() or ".array_record" in path.name:
    return _ArrayRecordTasks(array_record_files(path, split))
  return files.read_tasks(path)


def make_dataset(tasks: TaskSource, batch_size: int, seed: int, *, shuffle: bool = True,
                 repeat: bool = True, shard_index: int = 0, shard_count: int = 1,
                 drop_remainder: bool | None = None, split: str = "train") -> grain.MapDataset:
  """The batched `MapDataset` behind `make_iterator`."""
  if batch_size < 1:
    raise ValueError(f"batch_size must be positive, got {batch_size}")
  if not 0 <= shard_index < shard_count:
    raise ValueError(f"shard_index {shard_index} is not in [0, {shard_count})")
  ds = grain.MapDataset.source(_source(tasks, split))
  if len(ds) < shard_count:
    raise ValueError(f"{len(ds)} tasks cannot be split into {shard_count} shards")
  if shard_count > 1:
    # Strided, equal shards: every host must take the same number of steps.
    per_shard = len(ds) // shard_count
    ds = ds[shard_index:per_shard * shard_count:shard_count]
  if shuffle:
    ds = ds.shuffle(seed=seed)
  if repeat:
    ds = ds.repeat(None)
  if drop_remainder is None:
    drop_remainder = repeat
  return ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=list)


def make_iterator(tasks: TaskSource, batch_size: int, seed: int, shuffle: bool = True,
                  repeat: bool = True, shard_index: int = 0, shard_count: int = 1,
                  **kwargs: Any) -> grain.DatasetIterator:
  """An iterator of `list[Task]` batches with checkpointable `get_state()`/`set_state()`."""
  return iter(make_dataset(tasks, batch_size, seed, shuffle=shuffle, repeat=repeat,
                           shard_index=shard_index, shard_count=shard_count, **kwargs))
