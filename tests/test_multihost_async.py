"""Exact resume with rollouts in flight on two hosts (rl.max_staleness = k, issue 41): a
2-process x 2-device run preempted by SIGTERM, or killed by SIGKILL, with k rollouts in flight
resumes to the uninterrupted run's trained prompts (in order, on each host), metrics and final
parameters, for k = 1 and 2.

The interruptions are deterministic: the hosts' test hooks (tests/multihost_runs.py `_hooks`)
send the signal after a given step's metrics, and every host logs which prompts each step
trained. Host starts and compiles cost more than these runs, so the runs are made by three
launches (a SIGKILL ends its launch): the uninterrupted runs, the SIGTERM runs and their
resumptions, then each SIGKILL run, each resumed by the next launch.
"""

import shutil

import numpy as np
import pytest
from conftest import ANSWERABLE_RL, answerable_tasks, answerable_train, save_step_zero
from conftest import saved_params, step_metrics
from multihost_runs import (
  RUN_TIMEOUT_S,
  TIMEOUTS,
  Launch,
  config_flags,
  prompt_digest,
  trained_prompts,
)


pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("multihost")]

STEPS = 4
# Two prompts of four samples a step (one per host). The learning rate is small enough that the
# policy keeps passing about half its samples (every step learns), large enough that the
# behaviour log-probs of stale and fresh parameters differ (in the metrics).
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
# SIGTERM after step 1's metrics: every host stops after step 2, which holds steps 3 .. 2 + k in
# flight. k = 1: to host 1 alone; k = 2: to host 0's process group, its reward workers too.
SIGTERM = {1: dict(step=1, hosts=[1], group=False), 2: dict(step=1, hosts=[0], group=True)}
STOPPED_AT = 2
# SIGKILL of both hosts after step 3, checkpoints every 2 steps: the rerun resumes from step 2
# (holding steps 3 .. 2 + k in flight) and trains step 3 again.
KILL_AT, KILL_CHECKPOINTS = 3, 2
# Runs after the first load their programs from a compilation cache the launches share: a host
# that starts a program's first collective 30 s after the other (gloo's rendezvous timeout), as
# one slower to compile can on a loaded machine, fails it.
CACHE = dict(JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")


def _run(start, name, k, workdir=None, hooks=None, **train):
  """A run of `configs/precisecoder.py:tiny` at staleness `k` in `workdir` (default: a new one
  named `name` holding the step-0 checkpoint)."""
  if workdir is None:
    workdir = start / name
    shutil.copytree(start / "start" / "checkpoints", workdir / "checkpoints")
  overrides = {
    **OVERRIDES,
    "rl": dict(OVERRIDES["rl"], max_staleness=k),
    "train": dict(OVERRIDES["train"], **train),
    "data": dict(task_file=str(start / "tasks.jsonl")),
  }
  args = ["--config=configs/precisecoder.py:tiny", f"--workdir={workdir}", *config_flags(overrides)]
  return dict(name=name, args=args, hooks=dict(hooks or {}, trace=True))


@pytest.fixture(scope="module")
def start(tmp_path_factory):
  """A task file and a workdir holding the step-0 checkpoint every run starts from."""
  from precisecoder.train import config as train_config

  base = tmp_path_factory.mktemp("multihost_async")
  answerable_tasks(base / "tasks.jsonl")
  cfg = train_config.default("tiny")
  for section, values in OVERRIDES.items():
    cfg[section].update(values)
  cfg.data.task_file = str(base / "tasks.jsonl")
  save_step_zero(cfg, base / "start")
  return base


@pytest.fixture(scope="module")
def launches(start):
  """The three launches of 2 processes x 2 devices, by the names of the runs they made."""
  killed = lambda k: _run(
    start, f"sigkill{k}", k, hooks=dict(kill=KILL_AT), checkpoint_every=KILL_CHECKPOINTS
  )
  resumed = lambda k: _run(
    start, f"sigkill{k}_resumed", k, start / f"sigkill{k}", checkpoint_every=KILL_CHECKPOINTS
  )
  plans = [[_run(start, f"straight{k}", k) for k in (1, 2)]]
  for k in (1, 2):
    plans[0].append(_run(start, f"sigterm{k}", k, hooks=dict(signal=SIGTERM[k])))
    plans[0].append(_run(start, f"sigterm{k}_resumed", k, start / f"sigterm{k}"))
  plans[0].append(killed(1))
  plans.append([resumed(1), killed(2)])
  plans.append([resumed(2)])
  out = {}
  for i, runs in enumerate(plans):
    ends_killed = i < len(plans) - 1
    cache = dict(CACHE, JAX_COMPILATION_CACHE_DIR=str(start / "compiled"))
    launch = Launch(
      start / f"launch{i}", 2, 2, runs, TIMEOUTS, ends_killed=ends_killed, extra_env=cache
    )
    launch.wait(RUN_TIMEOUT_S * len(runs))
    out.update({run["name"]: launch for run in runs})
  return out


def _trained(logs):
  """Each host's {step: digest of the prompts it trained} from a run's logs."""
  return {host: trained_prompts(text) for host, text in logs.items()}


def _straight(start, launches, k):
  """The uninterrupted run's workdir and trained prompts (each host's, by step)."""
  trained = _trained(launches[f"straight{k}"].run_logs(f"straight{k}"))
  assert all(sorted(steps) == list(range(1, STEPS + 1)) for steps in trained.values()), trained
  rows = step_metrics(start / f"straight{k}")
  assert [r["train/staleness"] for r in rows] == [min(k, t - 1) for t in range(1, STEPS + 1)]
  assert all(r["advantage_abs"] > 0 and r["train/grad_norm"] > 0 for r in rows), rows
  # Stale samples are another policy's: a resume that sampled with the wrong version would show.
  assert min(r["train/is_log_ratio_max_abs"] for r in rows[1:]) > 1e-3, rows
  return start / f"straight{k}", trained


def _held(workdir, step, k, straight):
  """The checkpoint of `step` holds each host's own rows of steps step + 1 .. step + k, those
  the straight run trained there on that host."""
  folder = workdir / "checkpoints" / str(step) / "rollouts"
  assert sorted(p.name for p in folder.glob("*.npz")) == [
    "process_0-of-2.npz",
    "process_1-of-2.npz",
  ]
  for host in (0, 1):
    with np.load(folder / f"process_{host}-of-2.npz") as held:
      assert [int(s) for s, _ in held["steps"]] == list(range(step + 1, step + 1 + k))
      digests = [prompt_digest(held[f"{i}/rollout/prompt_ids"]) for i in range(k)]
    want = straight[f"process_{host}.log"]
    assert digests == [want[s] for s in range(step + 1, step + 1 + k)], host


def _same_as_straight(workdir, straight_dir):
  assert step_metrics(workdir) == step_metrics(straight_dir)
  for a, b in zip(saved_params(workdir), saved_params(straight_dir), strict=True):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("k", [1, 2])
def test_sigterm_with_rollouts_in_flight_on_two_hosts_saves_every_host_and_resumes_exactly(
  start, launches, k
):
  """SIGTERM to one host (k = 2: to its reward workers too) after step 1: both hosts stop
  after step 2 and exit 0, each saving its own rows of the k steps in flight; the resumed run
  trains the straight run's prompts on each host, in order, none twice or lost, and ends with
  its metrics and parameters."""
  straight_dir, straight = _straight(start, launches, k)
  stopped = _trained(launches[f"sigterm{k}"].run_logs(f"sigterm{k}"))
  assert all(list(steps) == list(range(1, STOPPED_AT + 1)) for steps in stopped.values())
  workdir = start / f"sigterm{k}"
  data = workdir / "checkpoints" / str(STOPPED_AT) / "data"
  assert sorted(p.name for p in data.glob("*.json")) == [
    "process_0-of-2.json",
    "process_1-of-2.json",
  ]
  _held(workdir, STOPPED_AT, k, straight)
  resumed = _trained(launches[f"sigterm{k}_resumed"].run_logs(f"sigterm{k}_resumed"))
  assert {h: {**stopped[h], **resumed[h]} for h in stopped} == straight
  assert all(list(resumed[h]) == list(range(STOPPED_AT + 1, STEPS + 1)) for h in resumed)
  _same_as_straight(workdir, straight_dir)


@pytest.mark.parametrize("k", [1, 2])
def test_sigkill_with_rollouts_in_flight_on_two_hosts_resumes_from_the_last_checkpoint_exactly(
  start, launches, k
):
  """Both hosts killed (SIGKILL, reward workers too) after step 3, the checkpoint of step 2
  holding steps 3 .. 2 + k in flight: the rerun resumes there, trains step 3 again as the killed
  run did, and ends as the straight run (prompts, metrics, parameters)."""
  straight_dir, straight = _straight(start, launches, k)
  killed = _trained(launches[f"sigkill{k}"].killed_run_logs(f"sigkill{k}"))
  assert killed == {h: {s: straight[h][s] for s in range(1, KILL_AT + 1)} for h in straight}
  workdir = start / f"sigkill{k}"
  _held(workdir, KILL_CHECKPOINTS, k, straight)
  resumed = _trained(launches[f"sigkill{k}_resumed"].run_logs(f"sigkill{k}_resumed"))
  assert {h: list(steps) for h, steps in resumed.items()} == {
    h: list(range(KILL_CHECKPOINTS + 1, STEPS + 1)) for h in straight
  }
  assert {h: {**killed[h], **resumed[h]} for h in killed} == straight
  _same_as_straight(workdir, straight_dir)
