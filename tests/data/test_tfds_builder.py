"""The TFDS task sets (data/tfds_builder.py): a set built from JSONL and gzipped JSONL splits
reads back the same records, directly and through the grain pipeline."""

from precisecoder.data import generator, pipeline
from precisecoder.tasks import task_to_record, write_tasks


def test_tfds_array_record_set_reads_back_identical_records(tmp_path):
  from precisecoder.data import tfds_builder  # imports tensorflow_datasets: only when used

  tasks = generator.make_tasks("train", "easy", 12, seed=0)
  clean = generator.make_clean_tasks("validation", 5, seed=0)
  write_tasks(tmp_path / "train.jsonl", tasks)
  write_tasks(tmp_path / "validation.jsonl.gz", clean)
  builder_dir = tfds_builder.build_tfds(
    {"train": tmp_path / "train.jsonl", "validation": tmp_path / "validation.jsonl.gz"},
    tmp_path / "tfds",
    config="fixture",
  )
  assert list(builder_dir.glob("*.array_record*"))
  for split, expected in (("train", tasks), ("validation", clean)):
    source = tfds_builder.tfds_source(builder_dir, split)
    assert [task_to_record(source[i]) for i in range(len(source))] == [
      task_to_record(t) for t in expected
    ]
  via_grain = pipeline.make_iterator(tmp_path / "tfds", 12, seed=1, repeat=False)
  direct = pipeline.make_iterator(tmp_path / "train.jsonl", 12, seed=1, repeat=False)
  assert [task_to_record(t) for t in next(via_grain)] == [task_to_record(t) for t in next(direct)]
