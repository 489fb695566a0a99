"""What every trainer shares (`Run`): the workdir held by one run at a time, resume from its
latest checkpoint, only with the config that made it; the step schedule; sampling seeds (whole
trainers on top of it: test_rl.py, test_sft.py, test_dpo.py)."""

import jax
import numpy as np
import pytest

from precisecoder.train import config as config_lib
from precisecoder.train import run as run_lib
from precisecoder.train.lock import WorkdirError


def _config(**train):
  cfg = config_lib.default("tiny")
  cfg.train.update(eval_every=0, report=False, **train)
  return cfg


def test_sampling_seeds_differ_per_step_and_chunk_and_repeat_per_run():
  seeds = {run_lib.sample_seed(7, step, part) for step in range(50) for part in range(4)}
  assert len(seeds) == 200
  seed = run_lib.sample_seed
  assert seed(7, 3, 1) == seed(7, 3, 1) != seed(8, 3, 1)
  assert all(0 <= s < 2**31 - 1 for s in seeds)


class _Iterator:
  """A data iterator's checkpointed side: the state it was set to."""

  state = None

  def set_state(self, state):
    self.state = state


def test_a_run_holds_its_workdir_and_resumes_its_latest_checkpoint(tmp_path):
  workdir = str(tmp_path / "run")
  with run_lib.Run(_config(), workdir, total_steps=4) as run:
    step, params, opt_state = run.begin(_Iterator())
    assert step == 0 and run.steps_left(step) and run.start is None  # the loop's from here
    with pytest.raises(WorkdirError):
      run_lib.Run(_config(), workdir, total_steps=4)  # held: a second run may not start
    run.save(3, params, opt_state, {"position": 5})
    saved = [np.asarray(x) for x in jax.tree.leaves((params, opt_state))]
  with run_lib.Run(_config(), workdir, total_steps=4) as resumed:  # released on close
    iterator = _Iterator()
    step, params, opt_state = resumed.begin(iterator)
    assert step == 3 and iterator.state == {"position": 5}
    for a, b in zip(saved, jax.tree.leaves((params, opt_state)), strict=True):
      np.testing.assert_array_equal(a, np.asarray(b))
    assert resumed.steps_left(3) and not resumed.steps_left(4)


def test_a_checkpoint_written_with_an_rng_key_resumes(tmp_path):
  """Checkpoints from before the trainers owned their state hold an unused RNG key in their
  metadata (`meta["rng"]`): they resume as before, the key left unread."""
  workdir = tmp_path / "run"
  with run_lib.Run(_config(), str(workdir), total_steps=4) as run:
    params, opt_state = run.start.params, run.start.opt_state
    meta = {"step": 2, "rng": [0, 7], "model": {}, "time": 0.0}  # the old writer's fields
    run.checkpointer.save(2, params, opt_state, meta, {"position": 9})
    saved = [np.asarray(x) for x in jax.tree.leaves((params, opt_state))]
  with run_lib.Run(_config(), str(workdir), total_steps=4) as resumed:
    iterator = _Iterator()
    step, params, opt_state = resumed.begin(iterator)
    assert step == 2 and iterator.state == {"position": 9}
    for a, b in zip(saved, jax.tree.leaves((params, opt_state)), strict=True):
      np.testing.assert_array_equal(a, np.asarray(b))


def test_a_workdir_resumes_only_the_config_that_made_it(tmp_path):
  workdir = str(tmp_path / "run")
  with run_lib.Run(_config(), workdir, total_steps=2) as run:
    run.save(1, run.start.params, run.start.opt_state)
  other = _config()
  other.seed += 1
  with pytest.raises(WorkdirError, match="another config"):
    run_lib.Run(other, workdir, total_steps=2)
  with run_lib.Run(_config(stop_after=1), workdir, total_steps=2) as run:  # a resumable field
    step = run.start.step
    assert step == 1 and not run.steps_left(step)  # stopped where train.stop_after says


@pytest.mark.parametrize("every, due", [(0, []), (2, [2, 4, 5]), (3, [3, 5])])
def test_checkpoints_and_evaluations_fall_every_n_steps_and_on_the_last(tmp_path, every, due):
  with run_lib.Run(_config(), str(tmp_path / "run"), total_steps=5) as run:
    found = [step for step in range(1, 6) if run.should(step, every)]
  assert found == due


def test_the_tasks_the_scorer_found_broken_are_kept_in_the_workdir(tmp_path):
  """What the report names (broken_tasks.json), written at the end of each step."""
  from precisecoder.train import metrics  # pylint: disable=import-outside-toplevel

  class Scorer:
    broken_tasks = {"gen_3": "buggy program passes its tests"}

  workdir = tmp_path / "run"
  with run_lib.Run(_config(), str(workdir), total_steps=2) as run:
    step, params, opt_state = run.begin(_Iterator())
    run._scorer = Scorer()  # pylint: disable=protected-access
    run.end_step(1, params, opt_state, {"reward": 0.0}, None, 0.0, "")
  assert metrics.read_broken_tasks(workdir) == {"gen_3": "buggy program passes its tests"}
