"""Multi-host training on one CPU machine: JAX processes joined by a localhost coordinator,
2 processes x 2 CPU devices against one process (1 x 4 devices, or this process's one device).

The policy is the tiny random model with weights set so that after the prompt it answers
"1" (a program that passes these tasks' tests) about half the time and garbage otherwise
(conftest.answering_policy): rewards differ within groups, advantages are non-zero and every
step really moves the parameters. All runs start from that step-0 checkpoint.

Starting hosts (imports, jax.distributed, compiles) costs more than these runs: one launch of
2 hosts (`hosts`) makes every 2-host run the tests read, in turn (tests/multihost_runs.py), and
one of 1 process x 4 devices (`one_host`) the RL reference; a failed run fails the tests that
read it, with the hosts' logs.
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
from conftest import ANSWERABLE_RL, answerable_tasks, answerable_train, save_step_zero
from conftest import saved_params, step_metrics
from multihost_runs import RUN_TIMEOUT_S, TIMEOUTS, Launch, config_flags

from precisecoder.train import metrics

# One xdist worker runs this module's tests, so its launches happen once (pyproject: loadgroup).
pytestmark = pytest.mark.xdist_group("multihost")

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The preempted run stops after step 1 (see `hosts`), so two steps still resume one.
STEPS = 2
# Two prompts of four samples: 8 rows, one minibatch gathered (shuffled) from both hosts.
OVERRIDES = dict(
  rl=dict(
    **ANSWERABLE_RL,
    rollout_chunks=1,
    prompt_bucket=1024,
    reward="r_lambda",
  ),
  train=answerable_train(STEPS),
  model=dict(mesh="2,2,1"),
  optim=dict(learning_rate=1e-5),
)
# The baselines' and agent episodes' 2-step runs: configs/<name>.py:tiny with these overrides.
# Adam's first steps move every weight by ~lr whatever its gradient's size, so float32 sums in
# another order can move a near-zero gradient's weight by up to lr: lr stays small (as RL's).
TWO_STEPS = dict(
  model=dict(mesh="2,2,1"),
  optim=dict(learning_rate=1e-5),
  train=dict(steps=2, checkpoint_every=100, eval_every=0, report=False),
)
RUNS = {  # name: (config file, its overrides beyond TWO_STEPS, the checkpoint it starts from)
  "sft": ("sft", dict(sft=dict(batch_size=4)), "start"),
  "dpo": (
    "dpo",
    dict(dpo=dict(batch_size=4, samples_per_task=4), rl=dict(max_new_tokens=4, prompt_bucket=1024)),
    "start",
  ),
  "agent": (
    "precisecoder_agent",
    dict(rl=dict(OVERRIDES["rl"], turns=2, feedback_tokens=320)),
    "agent_start",
  ),
  # Rollouts sampled a step ahead (rl.max_staleness=1), scored while the step learns.
  "stale": ("precisecoder", dict(rl=dict(OVERRIDES["rl"], max_staleness=1)), "start"),
}
# The runs only a slow test reads, by the test: a launch makes them when it is selected.
SLOW_RUNS = {
  "sft": "test_sft_on_two_hosts_trains_like_one_process",
  "dpo": "test_dpo_on_two_hosts_trains_like_one_process",
  "agent": "test_agent_episodes_on_two_hosts_train_like_one_process",
  "stale": "test_rollouts_in_flight_on_two_hosts_train_and_resume_like_one_process",
}


def _config(task_file):
  from precisecoder.train import config as train_config

  cfg = train_config.default("tiny")
  for section, values in OVERRIDES.items():
    cfg[section].update(values)
  cfg.data.task_file = str(task_file)
  return cfg


def _rl_overrides(start):
  return {**OVERRIDES, "data": dict(task_file=str(start / "tasks.jsonl"))}


def _overrides(start, name):
  return {**RUNS[name][1], **TWO_STEPS, "data": dict(task_file=str(start / "tasks.jsonl"))}


def _step_zero(task_file, workdir, **policy):
  """A workdir holding the step-0 checkpoint of `answering_policy(**policy)`."""
  save_step_zero(_config(task_file), workdir, **policy)


@pytest.fixture(scope="module")
def start(tmp_path_factory):
  """A task file and a workdir holding the step-0 checkpoint every run starts from."""
  base = tmp_path_factory.mktemp("multihost")
  answerable_tasks(base / "tasks.jsonl")
  _step_zero(base / "tasks.jsonl", base / "start")
  return base


def _workdir(start, name, checkpoint="start"):
  """A workdir of its own for a run, holding the checkpoint it starts from."""
  shutil.copytree(start / checkpoint / "checkpoints", start / name / "checkpoints")
  return start / name


def _run(name, config, workdir, overrides, copy=None):
  """A run of a launch: `precisecoder train --config=configs/<config>.py:tiny` in `workdir`."""
  return dict(
    name=name,
    args=[f"--config=configs/{config}.py:tiny", f"--workdir={workdir}", *config_flags(overrides)],
    copy=copy and [str(p) for p in copy],
  )


@pytest.fixture(scope="module")
def hosts(request, start):
  """The launch of 2 processes x 2 devices: the RL run, the same run preempted by SIGTERM to
  one host then resumed, and the runs of the slow tests selected (SLOW_RUNS)."""
  rl = _rl_overrides(start)
  runs = [
    _run("rl", "precisecoder", _workdir(start, "rl"), rl),
    _run("preempted", "precisecoder", _workdir(start, "preempted"), rl),
    _run(
      "resumed",
      "precisecoder",
      start / "resumed",
      rl,
      copy=(start / "preempted", start / "resumed"),
    ),
  ]
  selected = {item.name for item in request.session.items}
  names = [name for name, test in SLOW_RUNS.items() if test in selected]
  if "agent" in names:
    _step_zero(start / "tasks.jsonl", start / "agent_start", garbage_ends=True)  # hears feedback
  for name in names:
    config, _, checkpoint = RUNS[name]
    runs.append(
      _run(name, config, _workdir(start, f"{name}_two_hosts", checkpoint), _overrides(start, name))
    )
  if "stale" in names:  # stopped after step 1 with step 2's rollouts in flight, then resumed
    overrides = _overrides(start, "stale")
    stopped = dict(overrides, train=dict(overrides["train"], stop_after=1))
    runs.append(_run("stale_stopped", "precisecoder", _workdir(start, "stale_stopped"), stopped))
    runs.append(_run("stale_resumed", "precisecoder", start / "stale_stopped", overrides))
  launch = Launch(start / "hosts", 2, 2, runs, TIMEOUTS)
  deadline = time.monotonic() + RUN_TIMEOUT_S * len(runs)  # for hosts that hang
  # The preemption: SIGTERM to one host once the run has started (its watcher is in place
  # before it logs where it resumed): step 1 is under way, so the hosts save it and stop.
  started = f"resumed {start / 'preempted'} at step 0 "
  log = start / "hosts" / "logs" / "process_1.log"
  while started not in log.read_text() and launch.running() and time.monotonic() < deadline:
    time.sleep(0.1)
  if launch.running():
    launch.send_signal(1, signal.SIGTERM)
  return launch.wait(max(0.0, deadline - time.monotonic()))


@pytest.fixture(scope="module")
def one_host(start):
  """The RL run in 1 process x 4 devices."""
  run = _run("rl", "precisecoder", _workdir(start, "rl_one_host"), _rl_overrides(start))
  return Launch(start / "one_host", 1, 4, [run], TIMEOUTS).wait(RUN_TIMEOUT_S)


def _fingerprints(logs):
  return {
    name: re.findall(r"parameters on this host: sha256 (\w+)", text)[-1]
    for name, text in logs.items()
  }


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


def test_a_failed_run_fails_the_tests_that_read_it_and_the_later_runs_with_the_logs(tmp_path):
  args = ["--config=configs/sft.py:tiny", f"--workdir={tmp_path / 'run'}"]
  runs = [
    dict(name="bad", args=[*args, "--config.sft.no_such_field=1"]),
    dict(name="later", args=args),
  ]
  launch = Launch(tmp_path / "launch", 1, 1, runs, TIMEOUTS).wait(RUN_TIMEOUT_S)
  for name, status in (("bad", "'2'"), ("later", "'no end'")):
    with pytest.raises(AssertionError, match=f"run '{name}': {{'process_0.log': {status}}}") as e:
      launch.run_logs(name)
    assert "host exit statuses [2]" in str(e.value)
    assert "--config.sft.no_such_field=1: unknown override" in str(e.value)  # the host's log


def test_two_hosts_train_like_one_process_with_the_same_global_batch(start, hosts, one_host):
  workdir = start / "rl"
  prints = _fingerprints(hosts.run_logs("rl"))
  assert len(prints) == 2 and len(set(prints.values())) == 1, prints  # replicas agree
  rows = step_metrics(workdir)
  assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
  # The policy really learns: rewards vary within groups and the parameters move.
  assert all(r["advantage_abs"] > 0 and r["train/grad_norm"] > 0 for r in rows), rows
  assert not np.allclose(
    np.concatenate([p.ravel() for p in saved_params(workdir)]),
    np.concatenate([p.ravel() for p in saved_params(start / "start")]),
  )

  one_host.run_logs("rl")
  single = start / "rl_one_host"
  for a, b in zip(saved_params(workdir), saved_params(single)):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
  for x, y in zip(rows, step_metrics(single)):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k  # float32 sums
  data = json.loads((workdir / "config.json").read_text())["data"]
  assert data["task_file"].endswith("tasks.jsonl")
  # Only the primary host writes the run's files; each host keeps its own iterator state.
  assert sorted(p.name for p in (workdir / "checkpoints" / str(STEPS) / "data").glob("*.json")) == [
    "process_0-of-2.json",
    "process_1-of-2.json",
  ]
  assert len(list((workdir / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_sigterm_to_one_host_then_resume_matches_the_uninterrupted_run(start, hosts):
  hosts.run_logs("rl")
  reference = start / "rl"
  hosts.run_logs("preempted")
  workdir = start / "preempted"
  saved = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  assert saved[0] == 0 and 1 <= saved[-1] < STEPS, saved  # both hosts saved the same step
  assert len(metrics.read_metrics(workdir / "metrics.jsonl")) == saved[-1]

  hosts.run_logs("resumed")  # in a copy of the preempted workdir
  resumed = start / "resumed"
  assert step_metrics(resumed) == step_metrics(reference)
  for a, b in zip(saved_params(resumed), saved_params(reference)):
    np.testing.assert_array_equal(a, b)


def _config_file(name):
  """configs/<name>.py's get_config, loaded as absl's config flags would."""
  import importlib.util

  spec = importlib.util.spec_from_file_location(f"config_{name}", ROOT / "configs" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config


def _two_hosts_and_one_device(start, hosts, name):
  """The 2-process x 2-device run `name` of `hosts`, and the same config run by the train
  command in this process on its one device, both from the same checkpoint; both workdirs."""
  from precisecoder.commands import train

  assert len(set(_fingerprints(hosts.run_logs(name)).values())) == 1  # the hosts' replicas agree
  two = start / f"{name}_two_hosts"
  config, _, checkpoint = RUNS[name]
  cfg = _config_file(config)("tiny")
  for section, values in _overrides(start, name).items():
    cfg[section].update(values)
  one = _workdir(start, f"{name}_one_device", checkpoint)
  assert train.train(cfg, str(one)) == 0
  assert not np.allclose(
    np.concatenate([p.ravel() for p in saved_params(two)]),
    np.concatenate([p.ravel() for p in saved_params(start / checkpoint)]),
  )
  for a, b in zip(saved_params(two), saved_params(one)):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
  return two, one


@pytest.mark.slow  # one more 2-host run and its reference (-m slow)
def test_sft_on_two_hosts_trains_like_one_process(start, hosts):
  """The SFT baseline on a pod: each host pads its rows to the lengths all hosts agree on,
  and the token-mean loss over the global batch is the one-process loss."""
  two, one = _two_hosts_and_one_device(start, hosts, "sft")
  for x, y in zip(step_metrics(two), step_metrics(one), strict=True):
    assert x["train/loss"] == pytest.approx(y["train/loss"], rel=1e-6)


@pytest.mark.slow  # one more 2-host run and its reference (-m slow)
def test_dpo_on_two_hosts_trains_like_one_process(start, hosts):
  """The DPO baseline on a pod: each host samples and scores its own tasks, pads its pairs
  to a count all hosts agree on with weight-0 pairs; the loss is the one-process loss."""
  two, one = _two_hosts_and_one_device(start, hosts, "dpo")
  rows = step_metrics(two)
  assert all(r["pairs"] > 0 for r in rows), rows  # the policy's samples pass and fail
  for x, y in zip(rows, step_metrics(one), strict=True):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k


@pytest.mark.slow  # one more 2-host run and its reference: minutes on 2 cores (-m slow)
def test_agent_episodes_on_two_hosts_train_like_one_process(start, hosts):
  """Multi-turn RL on a pod: each host runs the episodes of its own tasks (a group's episodes
  stay on its host, feedback from its own pool) and every host takes the same turns; the
  parameters and metrics are one process's."""
  two, one = _two_hosts_and_one_device(start, hosts, "agent")
  rows = step_metrics(two)
  assert max(r["agent/turns"] for r in rows) > 1 and all(r["advantage_abs"] > 0 for r in rows)
  for x, y in zip(rows, step_metrics(one), strict=True):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k


@pytest.mark.slow  # three more 2-host runs and a reference: minutes on 2 cores (-m slow)
def test_rollouts_in_flight_on_two_hosts_train_and_resume_like_one_process(start, hosts):
  """rl.max_staleness=1 on a pod: each host samples its tasks a step ahead and checkpoints its
  own rows in flight; the run trains as one process does, and stopped after step 1 with step
  2's rollouts in flight then resumed, as the run never stopped."""
  two, one = _two_hosts_and_one_device(start, hosts, "stale")
  rows = step_metrics(two)
  assert [r["train/staleness"] for r in rows] == [0.0, 1.0]
  for x, y in zip(rows, step_metrics(one), strict=True):
    assert x.keys() == y.keys()
    for k in x:
      assert x[k] == pytest.approx(y[k], rel=1e-6, abs=1e-6), k
  hosts.run_logs("stale_stopped")
  hosts.run_logs("stale_resumed")
  resumed = start / "stale_stopped"
  held = sorted(p.name for p in (resumed / "checkpoints" / "1" / "rollouts").glob("*.npz"))
  assert held == ["process_0-of-2.npz", "process_1-of-2.npz"]
  assert step_metrics(resumed) == rows
  for a, b in zip(saved_params(resumed), saved_params(two)):
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # a 2-host launch of its own: a minute or two on 2 cores (-m slow)
def test_the_local_pod_script_trains_the_tiny_preset_on_two_hosts(tmp_path):
  """scripts/multihost_local.sh as docs/multihost.md runs it (its default mesh, fsdp over both
  hosts' devices): both hosts finish every step and the primary writes the run's report."""
  workdir = tmp_path / "run"
  done = subprocess.run(
    [
      str(ROOT / "scripts" / "multihost_local.sh"),
      "2",
      "configs/precisecoder.py:tiny",
      str(workdir),
      "--config.train.steps=2",
    ],
    cwd=ROOT,
    env={**os.environ, "PYTHON": sys.executable},
    capture_output=True,
    text=True,
    timeout=1800,
    check=False,
  )
  logs = {p.name: p.read_text() for p in (workdir / "logs").glob("*.log")}
  assert done.returncode == 0 and "2 processes done (exit 0)" in done.stdout, (done, logs)
  assert sorted(logs) == ["process_0.log", "process_1.log"]
  # Each host holds its own shards of the parameters, and says so at the last step.
  assert all("step 2: parameters on this host: sha256" in text for text in logs.values()), logs
  assert sorted({r["step"] for r in step_metrics(workdir)}) == [0, 1, 2]  # evaluated at 0
  assert json.loads((workdir / "report.json").read_text())
