"""Asynchronous RL (rl.max_staleness, train/inflight.py): the loop trains exactly what the
schedule written out plainly trains, and resumes exactly with rollouts in flight (stopped,
SIGTERM, SIGKILL)."""

import concurrent.futures
import dataclasses
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import answerable_rl_config, answerable_tasks, save_step_zero, saved_params
from conftest import step_metrics

from precisecoder import reward_recipes
from precisecoder.train import config as train_config
from precisecoder.train import checkpoint_writer, inflight, metrics, overlong, rl, scoring
from precisecoder.train import tasksets
from precisecoder.train import policy as policy_lib
from precisecoder.train import rollout as rollout_lib
from precisecoder.train import run as run_lib
from precisecoder.train import step as step_lib

STEPS = 4


def _config(task_file, k, **train):
  cfg = answerable_rl_config(task_file, STEPS, max_staleness=k)
  cfg.train.update(train)
  return cfg


@pytest.fixture(scope="module")
def start(tmp_path_factory):
  """Tasks the answering policy passes about half the time (rewards vary in a group), and a
  workdir holding its step-0 checkpoint that every run starts from."""
  base = tmp_path_factory.mktemp("async")
  answerable_tasks(base / "tasks.jsonl")
  save_step_zero(_config(base / "tasks.jsonl", 0), base / "start")
  return base


def _workdir(start, name):
  shutil.copytree(start / "start" / "checkpoints", start / name / "checkpoints")
  return start / name


def test_rollouts_in_flight_round_trip_through_a_checkpoint(tmp_path):
  """What a checkpoint keeps of the rollouts in flight (each host's rows, as data) comes back
  as it went, in step order; a checkpoint without any gives none."""
  import jax.numpy as jnp

  rng = np.random.default_rng(0)

  def item(step, version, episodes):
    rollout = rollout_lib.Rollout(
      tasks=[],
      prompt_ids=rng.integers(0, 9, (4, 3)).astype(np.int32),
      prompt_mask=rng.random((4, 3)) > 0.3,
      tokens=rng.integers(0, 9, (4, 5)).astype(np.int32),
      logprobs=rng.normal(size=(4, 5)).astype(np.float32),
      lengths=np.array([5, 2, 0, 4], np.int32),
      completions=["a"] * 4,
      programs=["b"] * 4,
      model_mask=(rng.random((4, 5)) > 0.5) if episodes else None,
    )
    terms = {"unit": rng.random(4).astype(np.float32), "agent_stop": np.arange(4, dtype=np.int32)}
    timing = {"time/sample": 0.125, "dynamic/rounds": 2.0}
    return inflight.InFlight(step, version, inflight.Ready((rollout, terms, timing)))

  items = [item(3, 1, episodes=False), item(4, 2, episodes=True)]
  ckpt = checkpoint_writer.Checkpointer(tmp_path, async_save=False)
  params, opt_state = {"w": jnp.ones(3)}, {"count": jnp.zeros(())}
  ckpt.save(2, params, opt_state, {"step": 2}, rollouts=inflight.save_state(items))
  ckpt.save(5, params, opt_state, {"step": 5}, rollouts=inflight.save_state([]))
  assert (tmp_path / "2" / "rollouts" / "process_0-of-1.npz").exists()
  back = inflight.restore(ckpt.restore_rollouts(2), 2)
  assert ckpt.restore_rollouts(5) is None and not inflight.restore(None, 5)
  with pytest.raises(ValueError, match="step 3 holds rollouts in flight for steps"):
    inflight.restore(ckpt.restore_rollouts(2), 3)
  ckpt.close()
  assert [(x.step, x.version) for x in back] == [(3, 1), (4, 2)]
  for went, came in zip(items, back):
    (r0, t0, s0), (r1, t1, s1) = went.pending.result(), came.pending.result()
    assert len(r1) == len(r0) == 4  # rows, though a restored rollout keeps no tasks
    for name in ("prompt_ids", "prompt_mask", "tokens", "logprobs", "lengths", "model_mask"):
      a, b = getattr(r0, name), getattr(r1, name)
      assert (a is None and b is None) or (a.dtype == b.dtype and np.array_equal(a, b)), name
    assert t0.keys() == t1.keys() and all(np.array_equal(t0[k], t1[k]) for k in t0)
    assert s0 == s1


def test_max_staleness_is_checked():
  cfg = train_config.default("tiny")
  cfg.rl.max_staleness = -1
  with pytest.raises(train_config.ConfigError, match=r"rl.max_staleness=-1: must be an integer"):
    train_config.validate(cfg)


_STRAIGHT = {}


def _straight(start, k):
  """The uninterrupted run at staleness k (once per module)."""
  if k not in _STRAIGHT:
    workdir = _workdir(start, f"straight{k}")
    assert rl.train(_config(start / "tasks.jsonl", k), str(workdir)) == 0
    _STRAIGHT[k] = workdir
  return _STRAIGHT[k]


def _reference(start, k, workdir):
  """The schedule written out plainly, one step after another with nothing in flight: step t
  samples with the parameters after update max(0, t - 1 - k) (every version kept) and the rng
  of step t, is scored, then learns. Its per-step rewards and losses, and final parameters."""
  import jax
  from flax import nnx

  cfg = _config(start / "tasks.jsonl", k)
  shutil.copytree(start / "start" / "checkpoints", workdir / "checkpoints")
  policy = policy_lib.load_policy(cfg)
  graphdef, params = nnx.split(policy.model)
  tx = step_lib.make_optimizer(cfg.optim)
  iterator = tasksets.task_iterator(tasksets.train_tasks(cfg), cfg.rl.prompts_per_step, cfg.seed)
  with run_lib.Run(cfg, str(workdir)) as run, scoring.open_scorer(cfg.rl) as scorer:
    step, params, opt_state = run.restore(params, step_lib.init_optimizer(tx, params), iterator)
    assert step == 0
    step_fn = step_lib.make_rl_step(graphdef, tx, cfg.rl)
    versions = [jax.tree.map(lambda x: x.copy(), params)]
    rows = []
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
      for t in range(1, STEPS + 1):
        version = max(0, t - 1 - k)
        sampler = dataclasses.replace(policy, model=nnx.merge(graphdef, versions[version]))
        tasks = tasksets.as_tasks(next(iterator), f"step {t}")
        rollout, terms, _ = rl.sample_and_score(
          cfg.rl,
          sampler,
          tasks,
          scorer,
          executor,
          seed=cfg.seed,
          step=t,
          include_tests=cfg.data.include_tests_in_prompt,
          mesh=None,
        ).result()
        lengths = rollout.loss_mask.sum(axis=1, dtype=np.int32)
        cut = overlong.cut_samples(rollout, policy.eos_ids, cfg.rl.max_new_tokens)
        advantages, reward = reward_recipes.compute_advantages(
          cfg.rl, {**terms, "lengths": lengths, "truncated": cut}
        )
        batch = rollout_lib.training_arrays(rollout, policy.pad_id, completion_len=4)
        batch["advantages"] = advantages
        learned = {}
        if np.any(advantages):  # no reward variance: no update (as the loop skips it)
          params, opt_state, learned = rl.learn(
            cfg.rl, step_fn, params, opt_state, batch, seed=cfg.seed, step=t, mesh=None
          )
        versions.append(jax.tree.map(lambda x: x.copy(), params))
        rows.append(
          dict(reward=float(reward.mean()), loss=learned.get("loss"), staleness=t - 1 - version)
        )
  return rows, [np.asarray(x) for x in jax.tree.leaves(params)]


@pytest.mark.slow  # two runs each; the default suite keeps the SIGTERM test below (k = 2)
@pytest.mark.parametrize("k", [0, 1, 2])
def test_the_loop_trains_what_the_schedule_written_out_trains(start, k):
  """k = 0 is the synchronous loop; k >= 1 samples ahead and scores while learning, and
  still trains bit for bit what the plain schedule trains."""
  workdir = _straight(start, k)
  rows, params = _reference(start, k, start / f"reference{k}")
  got = step_metrics(workdir)
  assert [r["step"] for r in got] == list(range(1, STEPS + 1))
  assert [r["train/staleness"] for r in got] == [min(k, t - 1) for t in range(1, STEPS + 1)]
  assert [(r["reward"], r.get("train/loss"), r["train/staleness"]) for r in got] == [
    (r["reward"], r["loss"], r["staleness"]) for r in rows
  ]
  for a, b in zip(saved_params(workdir), params):
    np.testing.assert_array_equal(a, b)
  # The sampler/learner log-ratio: numerics alone at k = 0; an update or more apart after.
  ratios = [r["train/is_log_ratio_max_abs"] for r in got if "train/is_log_ratio_max_abs" in r]
  assert ratios and (min(ratios[1:]) > 1e-3 if k else max(ratios) < 1e-4), ratios


@pytest.mark.slow  # two more runs (the SIGTERM test resumes with rollouts in flight too)
@pytest.mark.parametrize("k", [1, 2])
def test_stopped_with_rollouts_in_flight_then_resumed_matches_the_straight_run(start, k):
  """Stopped after step 1 with k rollouts in flight: the checkpoint holds them and the
  iterator past their tasks; the resumed run trains every prompt once, as the straight one."""
  workdir = _workdir(start, f"stopped{k}")
  task_file = start / "tasks.jsonl"
  assert rl.train(_config(task_file, k, stop_after=1), str(workdir)) == 0
  reader = checkpoint_writer.Checkpointer(workdir / "checkpoints")
  held = inflight.from_arrays(reader.restore_rollouts(1))
  reader.close()
  assert [(x.step, x.version) for x in held] == [(t, 0) for t in range(2, 2 + k)]
  assert rl.train(_config(task_file, k), str(workdir)) == 0
  assert step_metrics(workdir) == step_metrics(_straight(start, k))
  for a, b in zip(saved_params(workdir), saved_params(_straight(start, k))):
    np.testing.assert_array_equal(a, b)


def test_sigterm_with_rollouts_in_flight_saves_them_and_resumes_exactly(start, monkeypatch):
  """A SIGTERM (through the run's own handler) during step 2 at k = 2: step 2 is saved with
  steps 3 and 4 in flight and the run exits 0; the rerun finishes as the straight run."""
  workdir = _workdir(start, "sigterm")
  real_write = metrics.MetricsWriter.write

  def write(self, step, values, **kwargs):
    real_write(self, step, values, **kwargs)
    if step == 1:
      os.kill(os.getpid(), signal.SIGTERM)

  monkeypatch.setattr(metrics.MetricsWriter, "write", write)
  assert rl.train(_config(start / "tasks.jsonl", 2), str(workdir)) == 0
  monkeypatch.undo()
  assert [r["step"] for r in step_metrics(workdir)] == [1, 2]
  assert rl.train(_config(start / "tasks.jsonl", 2), str(workdir)) == 0
  assert step_metrics(workdir) == step_metrics(_straight(start, 2))
  for a, b in zip(saved_params(workdir), saved_params(_straight(start, 2))):
    np.testing.assert_array_equal(a, b)


_KILLED_RUN = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from precisecoder.train import metrics, rl
from test_async_rl import _config
real_write = metrics.MetricsWriter.write
def write(self, step, values, **kwargs):
  real_write(self, step, values, **kwargs)
  if step == 3:
    os.kill(os.getpid(), signal.SIGKILL)
metrics.MetricsWriter.write = write
rl.train(_config({tasks!r}, 1, checkpoint_every=2), {workdir!r})
"""


@pytest.mark.slow  # a process of its own
def test_sigkill_with_rollouts_in_flight_resumes_from_the_last_checkpoint_exactly(start):
  """Killed (SIGKILL) after step 3 at k = 1, checkpoints every 2 steps: the rerun goes on from
  the last checkpoint written (its rollout in flight with it), the steps after it again, and
  ends as the straight run."""
  workdir = _workdir(start, "sigkill")
  code = _KILLED_RUN.format(
    tests=str(pathlib.Path(__file__).parent),
    tasks=str(start / "tasks.jsonl"),
    workdir=str(workdir),
  )
  tests = str(pathlib.Path(__file__).parents[1])
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
  killed = subprocess.run([sys.executable, "-c", code], env=env, timeout=600, check=False)
  assert killed.returncode == -signal.SIGKILL
  assert [r["step"] for r in step_metrics(workdir)] == [1, 2, 3]
  assert rl.train(_config(start / "tasks.jsonl", 1, checkpoint_every=2), str(workdir)) == 0
  assert step_metrics(workdir) == step_metrics(_straight(start, 1))
  for a, b in zip(saved_params(workdir), saved_params(_straight(start, 1))):
    np.testing.assert_array_equal(a, b)
