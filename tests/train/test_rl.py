"""The RL loop end to end on the tiny random model: CI's smoke run, exact resume, SIGTERM."""

import json
import pathlib
import shutil

import numpy as np
import pytest
from conftest import ANSWERABLE_RL, answerable_tasks, save_step_zero

from precisecoder.commands import train as train_command
from precisecoder.train import config as train_config
from precisecoder.train import metrics, rl


def _config(**train):
  cfg = train_config.default("tiny")
  cfg.rl.max_new_tokens = 16
  cfg.train.eval_every = 0
  cfg.train.report = False
  cfg.train.update(train)
  return cfg


def _params(workdir: pathlib.Path):
  """The latest checkpoint's parameters, read back through the model loader."""
  import jax
  from flax import nnx
  from precisecoder.model import run_checkpoints

  model, _, _ = run_checkpoints.load(workdir)
  return jax.tree.leaves(nnx.state(model))


def _step_metrics(workdir: pathlib.Path):
  drop = ("time/", "reward_exposed_fraction")
  return [
    {k: v for k, v in r.items() if not k.startswith(drop)}
    for r in metrics.read_metrics(workdir / "metrics.jsonl")
  ]


def test_minibatch_order_shuffles_whole_groups_by_seed():
  order = rl.minibatch_order(12, 3, [0, 5, 1])
  assert order.dtype == np.int32 and sorted(order) == list(range(12))
  groups = order.reshape(4, 3)  # each group's rows, consecutive and in order
  np.testing.assert_array_equal(groups - groups[:, :1], np.tile(np.arange(3), (4, 1)))
  assert np.all(groups[:, 0] % 3 == 0)
  np.testing.assert_array_equal(order, rl.minibatch_order(12, 3, [0, 5, 1]))
  assert len({tuple(rl.minibatch_order(12, 1, [0, 5, epoch])) for epoch in range(4)}) == 4


def test_mean_metrics():
  assert rl.mean_metrics([]) == {}
  assert rl.mean_metrics([{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}]) == {"a": 2.0, "b": 3.0}


def test_exact_resume_matches_an_uninterrupted_run(tmp_path):
  """Stopped after step 1 and resumed to step 2 == never stopped, bit for bit on CPU."""
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"
  assert rl.train(_config(steps=2), str(straight)) == 0
  assert rl.train(_config(steps=2, stop_after=1), str(resumed)) == 0
  assert len(metrics.read_metrics(resumed / "metrics.jsonl")) == 1
  assert rl.train(_config(steps=2), str(resumed)) == 0
  assert _step_metrics(straight) == _step_metrics(resumed)
  for a, b in zip(_params(straight), _params(resumed)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  config = json.loads((resumed / "config.json").read_text())
  assert config["rl"]["reward"] == "r_lambda"


def test_precisecoder_main_path_with_eval_and_report(tmp_path, monkeypatch):
  """The main job's path (eval before/after, report) on the tiny config: CI's smoke run,
  through the train command (which writes the report), in a workdir named relative to where
  it runs. Step 2's advantages are all 0: it skips the update, so Adam's momentum from step 1
  does not move the weights (fed a zero gradient, it would)."""
  from precisecoder import reward_recipes

  real, calls = reward_recipes.compute_advantages, []

  def first_step_only(rl_cfg, terms):
    advantages, reward = real(rl_cfg, terms)
    calls.append(None)
    signal = np.resize([1.0, -1.0], advantages.shape).astype(advantages.dtype)
    return (signal if len(calls) == 1 else np.zeros_like(advantages)), reward

  monkeypatch.setattr(reward_recipes, "compute_advantages", first_step_only)
  monkeypatch.chdir(tmp_path)
  cfg = _config(steps=2, eval_every=2, checkpoint_every=1)
  cfg.train.report = True
  assert train_command.train(cfg, "run") == 0
  workdir = tmp_path / "run"
  report = (workdir / "report.md").read_text()
  assert "| base (step 0) |" in report and "| step 2 (final) |" in report
  assert "**This run did not learn**" in report  # a random tiny model fixes nothing
  assert "- 2 steps; **1 of 2 had no reward variance in any group**" in report
  assert (workdir / "eval.png").exists() and (workdir / "train.png").exists()
  rows = metrics.read_metrics(workdir / "metrics.jsonl")
  step_rows = [r for r in rows if "reward" in r]
  assert [r["skipped_update"] for r in step_rows] == [0.0, 1.0]
  for key in (
    "time/sample",
    "time/reward",
    "time/reward_exposed",
    "time/train",
    "reward/unit",
    "zero_variance_groups",
  ):
    assert all(key in r for r in step_rows), key
  assert step_rows[0]["train/grad_norm"] > 0 and "train/entropy" in step_rows[0]
  assert step_rows[1]["train/grad_norm"] == 0.0 and "train/entropy" not in step_rows[1]
  assert all(r["broken_task_rows"] == 0 for r in step_rows)  # the generator's tasks are sound
  assert list((workdir / "tensorboard").glob("events.out.tfevents.*"))
  for a, b in zip(_params(workdir / "checkpoints" / "1"), _params(workdir / "checkpoints" / "2")):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_sigterm_saves_and_exits_zero(tmp_path):
  """A preempted run checkpoints the step it finished and returns 0; the rerun resumes."""
  import os
  import signal
  import threading
  import time

  def preempt_after_first_step():
    while not metrics.read_metrics(tmp_path / "metrics.jsonl"):
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

  killer = threading.Thread(target=preempt_after_first_step, daemon=True)
  killer.start()
  assert rl.train(_config(steps=50, checkpoint_every=100), str(tmp_path)) == 0
  killer.join(timeout=5)
  done = len(metrics.read_metrics(tmp_path / "metrics.jsonl"))
  assert 1 <= done < 50
  steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
  assert steps == [done]


def _agent_config(task_file, k=0, **train):
  """configs/precisecoder_agent.py's recipe at the tiny size: episodes of up to 2 answers
  (`k`: rl.max_staleness)."""
  cfg = _config(**train)
  cfg.rl.max_staleness = k
  cfg.data.task_file = str(task_file)
  cfg.rl.update(ANSWERABLE_RL, turns=2, feedback_tokens=320, rollout_chunks=1, prompt_bucket=128)
  cfg.optim.learning_rate = 1e-5
  return cfg


@pytest.fixture(scope="module")
def agent_start(tmp_path_factory):
  """Tasks the answering policy passes with "1"; its other answers (one token) fail and hear
  feedback. Runs start from its step-0 checkpoint."""
  base_dir = tmp_path_factory.mktemp("agent")
  answerable_tasks(base_dir / "tasks.jsonl")
  save_step_zero(_agent_config(base_dir / "tasks.jsonl"), base_dir / "start", garbage_ends=True)
  return base_dir


def _from_start(start, workdir):
  shutil.copytree(start / "start" / "checkpoints", workdir / "checkpoints")
  return workdir


@pytest.mark.parametrize("k", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_agent_episodes_learn_and_resume_exactly(agent_start, tmp_path, k):
  """Multi-turn RL: episodes hear feedback, the behaviour log-probs are the learner's (ratio
  1 before the update), the policy moves; stopped after step 1 and resumed == never stopped
  (k = 1: with step 2's episodes, played by the step-0 policy, in flight)."""
  task_file = agent_start / "tasks.jsonl"
  straight = _from_start(agent_start, tmp_path / "straight")
  resumed = _from_start(agent_start, tmp_path / "resumed")
  assert rl.train(_agent_config(task_file, k, steps=2), str(straight)) == 0
  assert rl.train(_agent_config(task_file, k, steps=2, stop_after=1), str(resumed)) == 0
  assert rl.train(_agent_config(task_file, k, steps=2), str(resumed)) == 0
  rows = _step_metrics(straight)
  assert rows == _step_metrics(resumed)
  assert [r["train/staleness"] for r in rows] == [0, k]
  for a, b in zip(_params(straight), _params(resumed)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert max(r["agent/turns"] for r in rows) > 1 and max(r["agent/feedback_tokens"] for r in rows)
  for r in rows:
    assert r["agent/pass_turn1"] <= r["agent/pass_turn2"] == r["reward/unit"]
    assert r["advantage_abs"] > 0
    if r["train/staleness"] == 0:  # sampled by the parameters it starts from
      assert abs(r["train/ratio_mean"] - 1) < 1e-4
    assert sum(r[f"agent/stop_{s}"] for s in ("passed", "no_program", "budget", "turns")) == 1
  start = np.concatenate([np.ravel(p) for p in _params(agent_start / "start")])
  assert not np.allclose(np.concatenate([np.ravel(p) for p in _params(straight)]), start)
