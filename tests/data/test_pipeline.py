"""The grain input pipeline: checkpointable state, shards, epochs, file sources (TFDS sets:
test_tfds_builder.py)."""

import pytest

from precisecoder.data import generator, pipeline
from precisecoder.tasks import task_to_record, write_tasks


@pytest.fixture(scope="module")
def tasks():
  return generator.make_tasks("train", "easy", 12, seed=0)


def _ids(batch):
  return [t.task_id for t in batch]


def test_restored_state_continues_with_the_next_batch(tasks):
  it = pipeline.make_iterator(tasks, batch_size=5, seed=7)
  for _ in range(3):
    next(it)
  state = it.get_state()
  expected = [_ids(next(it)) for _ in range(4)]
  fresh = pipeline.make_iterator(tasks, batch_size=5, seed=7)
  fresh.set_state(state)
  assert [_ids(next(fresh)) for _ in range(4)] == expected


def test_epochs_cover_every_task_and_reshuffle(tasks):
  it = pipeline.make_iterator(tasks, batch_size=4, seed=0)
  epoch1 = [i for _ in range(3) for i in _ids(next(it))]
  epoch2 = [i for _ in range(3) for i in _ids(next(it))]
  assert sorted(epoch1) == sorted(epoch2) == sorted(t.task_id for t in tasks)
  assert epoch1 != epoch2


def test_shards_are_disjoint_and_equal(tasks):
  seen = []
  for shard in range(3):
    it = pipeline.make_iterator(
      tasks, batch_size=4, seed=0, shuffle=False, repeat=False, shard_index=shard, shard_count=3
    )
    shard_ids = [i for batch in it for i in _ids(batch)]
    assert len(shard_ids) == 4
    seen += shard_ids
  assert sorted(seen) == sorted(t.task_id for t in tasks)
  with pytest.raises(ValueError, match="shard_index"):
    pipeline.make_iterator(tasks, 4, 0, shard_index=3, shard_count=3)


def test_jsonl_and_gz_files_give_identical_records(tasks, tmp_path):
  for name in ("t.jsonl", "t.jsonl.gz"):
    write_tasks(tmp_path / name, tasks)
    from_file = pipeline.make_iterator(tmp_path / name, 12, seed=1, repeat=False)
    from_list = pipeline.make_iterator(tasks, 12, seed=1, repeat=False)
    assert [task_to_record(t) for t in next(from_file)] == [
      task_to_record(t) for t in next(from_list)
    ]
