"""A `tensorflow-datasets` builder for any task JSON Lines set (ArrayRecord, no TensorFlow).

Each example holds the task's contract JSON record (`record`) plus a few typed
columns for filtering (`task_id`, `source_dataset`, `is_buggy`, `bug_count`).
Example order is kept (no TFDS shuffling), so reading a split back gives the
file's records in the file's order; the training pipeline shuffles.

    builder_dir = build_tfds({"train": "train.jsonl", "validation": "val.jsonl"},
                             data_dir="~/tensorflow_datasets", config="generator_easy")
    source = tfds_source(builder_dir, "train")   # random access: source[i] -> Task
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any, Mapping

import numpy as np
import tensorflow_datasets as tfds

from precisecoder.tasks import Task, load_tasks, parse_task, task_to_record


@dataclasses.dataclass
class TaskSetConfig(tfds.core.BuilderConfig):
  """Which task file feeds which split."""

  split_files: Mapping[str, str] = dataclasses.field(default_factory=dict)


class PreciseCoderTasks(tfds.core.GeneratorBasedBuilder):
  """PreciseCoder debugging tasks (contract records) from local task files."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Contract task records with typed filter columns."}

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          "task_id": tfds.features.Text(),
          "source_dataset": tfds.features.Text(),
          "is_buggy": tfds.features.Scalar(dtype=np.bool_),
          "bug_count": tfds.features.Scalar(dtype=np.int32),
          "record": tfds.features.Text(),  # the contract JSON of the task
        }
      ),
      disable_shuffling=True,
      description="Debugging tasks in PreciseCoder's task-file contract (DESIGN.md).",
    )

  def _split_generators(self, dl_manager: Any) -> dict[str, Any]:
    del dl_manager  # everything is local
    return {
      split: self._generate_examples(path)
      for split, path in self.builder_config.split_files.items()
    }

  def _generate_examples(self, path: str):
    for index, task in enumerate(load_tasks(path)):
      yield (
        f"{index:09d}",
        {
          "task_id": task.task_id,
          "source_dataset": task.source_dataset,
          "is_buggy": task.is_buggy,
          "bug_count": task.bug_count,
          "record": json.dumps(task_to_record(task), ensure_ascii=False),
        },
      )


def build_tfds(
  split_files: Mapping[str, str | os.PathLike[str]],
  data_dir: str | os.PathLike[str],
  config: str = "default",
) -> pathlib.Path:
  """Writes the splits as ArrayRecord TFDS data; returns the builder's version folder."""
  for split, path in split_files.items():
    if not pathlib.Path(path).is_file():
      raise FileNotFoundError(f"split {split!r}: task file {path} not found")
  builder_config = TaskSetConfig(
    name=config, split_files={k: str(pathlib.Path(v).resolve()) for k, v in split_files.items()}
  )
  builder = PreciseCoderTasks(
    config=builder_config, data_dir=os.fspath(data_dir), file_format="array_record"
  )
  builder.download_and_prepare()
  return pathlib.Path(builder.data_dir)


def is_tfds_dir(path: str | os.PathLike[str]) -> bool:
  return (pathlib.Path(path) / "dataset_info.json").is_file()


class TfdsTaskSource:
  """Random access to the tasks of one split of a built TFDS task set."""

  def __init__(self, builder_dir: str | os.PathLike[str], split: str):
    self._where = f"{builder_dir} ({split})"
    builder = tfds.builder_from_directory(os.fspath(builder_dir))
    if split not in builder.info.splits:
      raise KeyError(f"{builder_dir}: no split {split!r}; has {sorted(builder.info.splits)}")
    self._source = builder.as_data_source(split=split)

  def __len__(self) -> int:
    return len(self._source)

  def __getitem__(self, index: int) -> Task:
    record = self._source[index]["record"]
    text = record.decode("utf-8") if isinstance(record, bytes) else str(record)
    return parse_task(json.loads(text), f"{self._where} example {index}")


def tfds_source(builder_dir: str | os.PathLike[str], split: str) -> TfdsTaskSource:
  return TfdsTaskSource(builder_dir, split)
