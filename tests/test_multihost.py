"""Multi-host RL on one CPU machine: JAX processes joined by a localhost coordinator
(scripts/multihost_local.sh), 2 processes x 2 CPU devices against 1 process x 4 devices.

The policy is the tiny random model with weights set so that after the prompt it answers
"1" (a program that passes these tasks' tests) about half the time and garbage otherwise
(conftest.answering_policy): rewards differ within groups, advantages are non-zero and every
step really moves the parameters. All runs start from that step-0 checkpoint.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import answerable_tasks, answering_policy

from precisecoder.train import metrics

ROOT = pathlib.Path(__file__).resolve().parents[1]
STEPS = 3
# Two prompts of four samples: 8 rows, one minibatch gathered (shuffled) from both hosts.
OVERRIDES = dict(rl=dict(prompts_per_step=2, group_size=4, max_new_tokens=4, minibatch_size=8,
                         rollout_chunks=1, prompt_bucket=1024, reward="r_lambda"),
                 train=dict(steps=STEPS, checkpoint_every=100, eval_every=0, report=False),
                 model=dict(mesh="2,2,1"), optim=dict(learning_rate=1e-5))


def _config(task_file):
  from precisecoder.train import config as base
  cfg = base.default("tiny")
  for section, values in OVERRIDES.items():
    cfg[section].update(values)
  cfg.data.task_file = str(task_file)
  return cfg


def _flags(task_file):
  flags = [f"--config.{s}.{k}={v}" for s, values in OVERRIDES.items() for k, v in values.items()]
  return flags + [f"--config.data.task_file={task_file}"]


@pytest.fixture(scope="module")
def start(tmp_path_factory):
  """A task file and a workdir holding the step-0 checkpoint every run starts from."""
  from precisecoder.train.run import Run
  base = tmp_path_factory.mktemp("multihost")
  answerable_tasks(base / "tasks.jsonl")
  cfg = _config(base / "tasks.jsonl")
  with Run(cfg, str(base / "start"), total_steps=STEPS) as run:
    run.params = answering_policy(run.params)
    run.save(None)
  return base


def _launch(start_dir, workdir, processes, devices, config="configs/precisecoder.py:tiny",
            flags=None):
  if not workdir.exists():
    shutil.copytree(start_dir / "start" / "checkpoints", workdir / "checkpoints")
  env = {**os.environ, "PYTHON": sys.executable, "DEVICES": str(devices)}
  return subprocess.Popen(
      [str(ROOT / "scripts/multihost_local.sh"), str(processes), config, str(workdir),
       *(flags if flags is not None else _flags(start_dir / "tasks.jsonl"))], cwd=ROOT, env=env,
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc, workdir, timeout=600):
  out, _ = proc.communicate(timeout=timeout)
  logs = {p.name: p.read_text() for p in sorted((workdir / "logs").glob("*.log"))}
  assert proc.returncode == 0, out + "\n".join(f"== {k}\n{v[-3000:]}" for k, v in logs.items())
  return logs


def _fingerprints(logs):
  return {name: re.findall(r"parameters on this host: sha256 (\w+)", text)[-1]
          for name, text in logs.items()}


def _step_metrics(workdir):
  return [{k: v for k, v in r.items() if not k.startswith(("time/", "reward_exposed"))}
          for r in metrics.read_metrics(workdir / "metrics.jsonl")]


def _params(workdir):
  import jax
  from flax import nnx
  from precisecoder.model import run_checkpoints
  model, _, _ = run_checkpoints.load(workdir)
  return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model))]


def test_a_global_batch_does_not_depend_on_the_number_of_hosts():
  """Host i's batch k is the i-th block of one host's batch k: the same tasks in the same
  order for any number of hosts (so the one-process run below sees the same global batch)."""
  from precisecoder.data import generator, pipeline
  tasks = generator.make_tasks("train", "easy", 10, seed=0)
  ids = lambda batch: [t.task_id for t in batch]
  one = pipeline.make_iterator(tasks, 4, seed=3)
  two = [pipeline.make_iterator(tasks, 2, seed=3, shard_index=i, shard_count=2) for i in (0, 1)]
  for _ in range(6):  # more than an epoch: reshuffles agree too
    assert ids(next(one)) == ids(next(two[0])) + ids(next(two[1]))


@pytest.fixture(scope="module")
def two_hosts(start):
  """The uninterrupted 2-process run (the reference of both tests)."""
  workdir = start / "two_hosts"
  t0 = time.perf_counter()
  logs = _finish(_launch(start, workdir, 2, 2), workdir)
  print(f"2 processes x 2 devices, {STEPS} steps: {time.perf_counter() - t0:.0f} s")
  return workdir, logs


def test_two_hosts_train_like_one_process_with_the_same_global_batch(start, two_hosts):
  workdir, logs = two_hosts
  prints = _fingerprints(logs)
  assert len(prints) == 2 and len(set(prints.values())) == 1, prints  # replicas agree
  rows = _step_metrics(workdir)
  assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
  # The policy really learns: rewards vary within groups and the parameters move.
  assert all(r["advantage_abs"] > 0 and r["train/grad_norm"] > 0 for r in rows), rows
  assert not np.allclose(np.concatenate([p.ravel() for p in _params(workdir)]),
                         np.concatenate([p.ravel() for p in _params(start / "start")]))

  single = start / "one_host"
  _finish(_launch(start, single, 1, 4), single)
  for a, b in zip(_params(workdir), _params(single)):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
  for x, y in zip(rows, _step_metrics(single)):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k  # float32 sums
  data = json.loads((workdir / "config.json").read_text())["data"]
  assert data["task_file"].endswith("tasks.jsonl")
  # Only the primary host writes the run's files; each host keeps its own iterator state.
  assert sorted(p.name for p in (workdir / "checkpoints" / str(STEPS) / "data").glob("*.json")) \
      == ["process_0-of-2.json", "process_1-of-2.json"]
  assert len(list((workdir / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_sigterm_to_one_host_then_resume_matches_the_uninterrupted_run(start, two_hosts):
  reference, _ = two_hosts
  workdir = start / "preempted"
  proc = _launch(start, workdir, 2, 2)
  while not metrics.read_metrics(workdir / "metrics.jsonl") and proc.poll() is None:
    time.sleep(0.1)
  os.kill(int((workdir / "logs" / "process_1.pid").read_text()), signal.SIGTERM)
  _finish(proc, workdir)
  saved = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  assert saved[0] == 0 and 1 <= saved[-1] < STEPS, saved  # both hosts saved the same step
  assert len(metrics.read_metrics(workdir / "metrics.jsonl")) == saved[-1]

  shutil.move(workdir / "logs", workdir.parent / "preempted_logs")
  _finish(_launch(start, workdir, 2, 2), workdir)
  assert _step_metrics(workdir) == _step_metrics(reference)
  for a, b in zip(_params(workdir), _params(reference)):
    np.testing.assert_array_equal(a, b)


def _config_file(name):
  """configs/<name>.py's get_config, loaded as absl's config flags would."""
  import importlib.util
  spec = importlib.util.spec_from_file_location(f"config_{name}", ROOT / "configs" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config


def _two_hosts_and_one_device(start, name, trainer, overrides, start_name="start"):
  """The 2-process x 2-device run of configs/<name>.py:tiny, then the same config in this
  process on its one device, both from the `start_name` checkpoint; returns both workdirs."""
  # Adam's first steps move every weight by ~lr whatever its gradient's size, so float32 sums in
  # another order can move a near-zero gradient's weight by up to lr: lr stays small (as RL's).
  overrides = {**overrides, "model": dict(mesh="2,2,1"), "optim": dict(learning_rate=1e-5),
               "data": dict(task_file=str(start / "tasks.jsonl")),
               "train": dict(steps=2, checkpoint_every=100, eval_every=0, report=False)}
  flags = [f"--config.{s}.{k}={v}" for s, values in overrides.items() for k, v in values.items()]
  two = start / f"{name}_two_hosts"
  if not two.exists():
    shutil.copytree(start / start_name / "checkpoints", two / "checkpoints")
  logs = _finish(_launch(start, two, 2, 2, f"configs/{name}.py:tiny", flags), two)
  assert len(set(_fingerprints(logs).values())) == 1  # the hosts' replicas agree

  cfg = _config_file(name)("tiny")
  for section, values in overrides.items():
    cfg[section].update(values)
  one = start / f"{name}_one_device"
  shutil.copytree(start / start_name / "checkpoints", one / "checkpoints")
  assert trainer(cfg, str(one)) == 0
  assert not np.allclose(np.concatenate([p.ravel() for p in _params(two)]),
                         np.concatenate([p.ravel() for p in _params(start / start_name)]))
  for a, b in zip(_params(two), _params(one)):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
  return two, one


def test_sft_on_two_hosts_trains_like_one_process(start):
  """The SFT baseline on a pod: each host pads its rows to the lengths all hosts agree on,
  and the token-mean loss over the global batch is the one-process loss."""
  from precisecoder.train import sft
  two, one = _two_hosts_and_one_device(start, "sft", sft.train, dict(sft=dict(batch_size=4)))
  for x, y in zip(_step_metrics(two), _step_metrics(one), strict=True):
    assert x["train/loss"] == pytest.approx(y["train/loss"], rel=1e-6)


def test_dpo_on_two_hosts_trains_like_one_process(start):
  """The DPO baseline on a pod: each host samples and scores its own tasks, pads its pairs
  to a count all hosts agree on with weight-0 pairs; the loss is the one-process loss."""
  from precisecoder.train import dpo
  two, one = _two_hosts_and_one_device(start, "dpo", dpo.train, dict(
      dpo=dict(batch_size=4, samples_per_task=4), rl=dict(max_new_tokens=4, prompt_bucket=1024)))
  rows = _step_metrics(two)
  assert all(r["pairs"] > 0 for r in rows), rows  # the policy's samples pass and fail
  for x, y in zip(rows, _step_metrics(one), strict=True):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k


@pytest.mark.slow  # two more multi-process runs: minutes on 2 cores (scripts/test.sh -m slow)
def test_agent_episodes_on_two_hosts_train_like_one_process(start):
  """Multi-turn RL on a pod: each host runs the episodes of its own tasks (a group's episodes
  stay on its host, feedback from its own pool) and every host takes the same turns; the
  parameters and metrics are one process's."""
  from precisecoder.train import rl
  from precisecoder.train.run import Run
  overrides = dict(rl=dict(OVERRIDES["rl"], turns=2, feedback_tokens=320))
  cfg = _config(start / "tasks.jsonl")
  with Run(cfg, str(start / "agent_start"), total_steps=2) as run:
    run.params = answering_policy(run.params, garbage_ends=True)  # failures hear feedback
    run.save(None)
  two, one = _two_hosts_and_one_device(start, "precisecoder_agent", rl.train, overrides,
                                       start_name="agent_start")
  rows = _step_metrics(two)
  assert max(r["agent/turns"] for r in rows) > 1 and all(r["advantage_abs"] > 0 for r in rows)
  for x, y in zip(rows, _step_metrics(one), strict=True):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k
