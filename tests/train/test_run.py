"""What every trainer shares (run.py): the workdir held by one run at a time (`Run`), resumed from
its latest checkpoint, only with the config that made it; the step schedule; sampling seeds
(whole trainers on top of it: test_rl.py, test_sft.py, test_dpo.py)."""

import jax
import numpy as np
import pytest
from flax import nnx

from precisecoder.train import config as config_lib, policy as policy_lib
from precisecoder.train import run as run_lib, step as step_lib
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


def _initial():
  """A policy's parameters and optimiser state, as a trainer starts them."""
  cfg = _config()
  graphdef, params = nnx.split(policy_lib.load_policy(cfg).model)
  del graphdef
  tx = step_lib.make_optimizer(cfg.optim)
  return params, step_lib.init_optimizer(tx, params, None)


def test_a_run_holds_its_workdir_and_resumes_its_latest_checkpoint(tmp_path):
  workdir = str(tmp_path / "run")
  params, opt_state = _initial()
  with run_lib.Run(_config(), workdir) as run:
    step, params, opt_state = run.restore(params, opt_state, _Iterator())
    assert step == 0 and run_lib.steps_left(run.cfg, step)
    with pytest.raises(WorkdirError):
      run_lib.Run(_config(), workdir)  # held: a second run may not start
    run.save(3, params, opt_state, {"position": 5}, model={})
    saved = [np.asarray(x) for x in jax.tree.leaves((params, opt_state))]
  fresh, fresh_opt = _initial()
  with run_lib.Run(_config(steps=4), workdir) as resumed:  # released on close
    iterator = _Iterator()
    step, params, opt_state = resumed.restore(fresh, fresh_opt, iterator)
    assert step == 3 and iterator.state == {"position": 5}
    for a, b in zip(saved, jax.tree.leaves((params, opt_state)), strict=True):
      np.testing.assert_array_equal(a, np.asarray(b))
    assert run_lib.steps_left(resumed.cfg, 3) and not run_lib.steps_left(resumed.cfg, 4)


def test_a_workdir_resumes_only_the_config_that_made_it(tmp_path):
  workdir = str(tmp_path / "run")
  params, opt_state = _initial()
  with run_lib.Run(_config(steps=2), workdir) as run:
    run.save(1, params, opt_state, None, model={})
  other = _config(steps=2)
  other.seed += 1
  with pytest.raises(WorkdirError, match="another config"):
    run_lib.Run(other, workdir)
  with run_lib.Run(_config(steps=2, stop_after=1), workdir) as run:  # a resumable field
    step = run.restore(params, opt_state, _Iterator()).step
    assert step == 1 and not run_lib.steps_left(run.cfg, step)  # stopped at train.stop_after


@pytest.mark.parametrize("every, due", [(0, []), (2, [2, 4, 5]), (3, [3, 5])])
def test_checkpoints_and_evaluations_fall_every_n_steps_and_on_the_last(every, due):
  assert [step for step in range(1, 6) if run_lib.due(step, every, 5)] == due


@pytest.mark.parametrize("at_start, every, due", [(True, 2, [0, 2, 4, 5]), (False, 0, [])])
def test_evaluations_fall_at_the_start_when_asked_then_every_n_steps(at_start, every, due):
  train = config_lib.default("tiny").train
  train.update(eval_at_start=at_start, eval_every=every, steps=5)
  assert [step for step in range(6) if run_lib.eval_due(train, step)] == due
