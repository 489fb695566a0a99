"""A run's task sets: training and validation tasks from files or the generator, clean
programs after the buggy ones, resumable batches, and batches turned back into Tasks."""

import ml_collections
import pytest

from precisecoder import tasks as tasks_lib
from precisecoder.data import families, generator
from precisecoder.train import tasksets


def _cfg(**data):
  fields = dict(
    task_file="",
    validation_file="",
    clean_file="",
    tier="easy",
    num_train=6,
    num_validation=3,
    num_clean=2,
    num_multi=1,
    seed=5,
  )
  return ml_collections.ConfigDict(dict(seed=9, data={**fields, **data}))


def test_generated_sets_follow_the_config_and_data_seed(tmp_path, monkeypatch):
  """The generator's sets for data.seed (the run's seed plays no part), the same from the
  on-disk cache as when first generated."""
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  for _ in range(2):  # generated and cached, then read back from the cache
    train = tasksets.train_tasks(_cfg())
    assert train == generator.make_tasks("train", "easy", 6, 5)
    evaluation = tasksets.eval_tasks(_cfg())
    assert [t.is_buggy for t in evaluation] == [True] * 3 + [False] * 2  # buggy, then clean
    assert not {t.task_id for t in evaluation} & {t.task_id for t in train}
    assert tasksets.multi_tasks(_cfg()) == generator.make_tasks("validation", "multi", 1, 5)
  assert len(list((tmp_path / "tasks").glob("*.jsonl.gz"))) == 4


def test_held_in_tasks_are_new_instances_of_the_training_families(tmp_path, monkeypatch):
  """Held-in tasks: training families (the generator's train split, at data seed + 1), not one
  buggy program the run trains on; then correct programs of those families, none of them a
  fix the run's tasks hold (what it learnt to write)."""
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  cfg = _cfg(num_train=40, num_heldin=12, num_heldin_clean=6)
  cfg.model = ml_collections.ConfigDict(dict(checkpoint=""))
  heldin = tasksets.heldin_tasks(cfg)
  train = tasksets.train_tasks(cfg)
  assert [t.is_buggy for t in heldin] == [True] * 12 + [False] * 6
  assert {t.extra["family"] for t in heldin} <= {f.key for f in families.families("easy", "train")}
  assert not {t.buggy_code for t in heldin} & {t.buggy_code for t in train}
  clean = heldin[12:]
  assert all(t.buggy_code == t.gt_solution for t in clean)
  assert not {t.buggy_code for t in clean} & {t.gt_solution for t in train}
  cfg.data.num_heldin = 0
  assert tasksets.heldin_tasks(cfg) == clean
  cfg.data.num_heldin_clean = 0
  assert tasksets.heldin_tasks(cfg) == []


def test_the_wider_measurement_draws_tasks_the_evaluation_does_not_have(tmp_path, monkeypatch):
  """`n` buggy tasks then `n` correct programs of the validation split at data seed + 1: none of
  the evaluation's programs; evaluation files leave nothing to draw from, so they are refused."""
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  cfg = _cfg(num_validation=6, num_clean=6)
  wide = tasksets.wide_tasks(cfg, 6)
  assert [t.is_buggy for t in wide] == [True] * 6 + [False] * 6
  assert not {t.buggy_code for t in wide} & {t.buggy_code for t in tasksets.eval_tasks(cfg)}
  assert {t.extra["family"] for t in wide} <= {
    f.key for f in families.families("easy", "validation")
  }
  with pytest.raises(ValueError, match="evaluates on files"):
    tasksets.wide_tasks(_cfg(clean_file="clean.jsonl"), 6)


def test_the_wider_held_in_measurement_leaves_out_what_the_run_saw_and_its_evaluation_has(
  tmp_path, monkeypatch
):
  """`n` buggy then `n` correct programs of the training families at data seed + 2, none a
  program of the run's training tasks, of its base's corpus (`seen`) or of its held-in split:
  correct programs recur across seeds, so drawn plainly some would be."""
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  cfg = _cfg(num_train=40, num_heldin=12, num_heldin_clean=32)
  seen = tasksets.generated("train", "easy", 32, 7, clean=True)  # a base's corpus
  wide = tasksets.wide_heldin_tasks(cfg, 32, seen)
  assert [t.is_buggy for t in wide] == [True] * 32 + [False] * 32
  assert {t.extra["family"] for t in wide} <= {f.key for f in families.families("easy", "train")}
  known = [*tasksets.train_tasks(cfg), *seen, *tasksets.heldin_tasks(cfg, seen)]
  known = {t.buggy_code for t in known} | {t.gt_solution for t in known}
  assert not {t.buggy_code for t in wide} & known
  plain = tasksets.generated("train", "easy", 32, cfg.data.seed + 2, clean=True)
  assert {t.buggy_code for t in plain} & known


def test_cached_correct_programs_are_those_of_the_tier_asked_for(tmp_path, monkeypatch):
  monkeypatch.setenv("PRECISECODER_CACHE", str(tmp_path))
  programs = tasksets.generated("train", "programs", 4, 1, clean=True)
  easy = tasksets.generated("train", "easy", 4, 1, clean=True)  # after the other is cached
  assert easy == generator.make_clean_tasks("train", 4, 1, tier="easy")
  assert programs == generator.make_clean_tasks("train", 4, 1, tier="programs")
  assert {t.task_id for t in easy}.isdisjoint(t.task_id for t in programs)


def test_files_replace_the_generator(tmp_path):
  buggy = generator.make_tasks("validation", "medium", 4, 1)
  clean = generator.make_clean_tasks("validation", 1, 1)
  for name, items in (("train.jsonl", buggy[:2]), ("val.jsonl", buggy[2:]), ("clean.jsonl", clean)):
    tasks_lib.write_tasks(tmp_path / name, items)
  cfg = _cfg(
    task_file=str(tmp_path / "train.jsonl"),
    validation_file=str(tmp_path / "val.jsonl"),
    clean_file=str(tmp_path / "clean.jsonl"),
  )
  assert tasksets.train_tasks(cfg) == buggy[:2]
  assert tasksets.eval_tasks(cfg) == buggy[2:] + clean


def test_batches_resume_where_the_state_was_saved():
  train = generator.make_tasks("train", "easy", 5, 0)
  iterator = tasksets.task_iterator(train, 2, seed=3)
  next(iterator)
  state = iterator.get_state()
  expected = [[t.task_id for t in tasksets.as_tasks(next(iterator), "b")] for _ in range(4)]
  resumed = tasksets.task_iterator(train, 2, seed=3)
  resumed.set_state(state)
  assert [[t.task_id for t in tasksets.as_tasks(next(resumed), "b")] for _ in range(4)] == expected
  assert all(len(batch) == 2 for batch in expected)
  seen = {task_id for batch in expected for task_id in batch}
  assert seen <= {t.task_id for t in train}


def test_batches_of_records_become_tasks_and_bad_ones_are_named():
  task = generator.make_tasks("train", "easy", 1, 0)[0]
  record = tasks_lib.task_to_record(task)
  assert tasksets.as_tasks([task, record], "batch 1") == [task, task]
  assert tasksets.as_tasks({"tasks": [record]}, "batch 1") == [task]
  with pytest.raises(tasks_lib.TaskError, match=r"batch 7\[1\].*buggy_code"):
    tasksets.as_tasks([record, {**record, "buggy_code": 3}], "batch 7")
