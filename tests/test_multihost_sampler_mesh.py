"""The disaggregated placement on two hosts (rl.sampler_devices = 1, rl.max_staleness = 1): 2
processes x 2 CPU devices, the learner's mesh every host's first device (its weights split over
both hosts), each host's sampler mesh its own last device, sampling that host's tasks on a
thread of its own. It trains what the shared placement on the learner's mesh (2 processes x 1
device) trains, bit for bit, and resumes exactly after a stop with a rollout in flight.

Two launches (tests/multihost_runs.py): the disaggregated runs on 2 x 2 devices, the shared
reference on 2 x 1.
"""

import shutil

import numpy as np
import pytest
from conftest import ANSWERABLE_RL, answerable_tasks, answerable_train, save_step_zero
from conftest import saved_params, step_metrics
from multihost_runs import RUN_TIMEOUT_S, TIMEOUTS, Launch, config_flags, trained_prompts

from precisecoder.train import metrics

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("multihost")]

STEPS = 3
# Two prompts of four samples a step (one per host), in two chunks, so each host samples two
# batches a step whose padded width and row seeds the hosts agree on before sampling.
OVERRIDES = dict(
  rl=dict(
    **ANSWERABLE_RL,
    rollout_chunks=2,
    prompt_bucket=1024,
    reward="r_lambda",
    max_staleness=1,
  ),
  train=answerable_train(STEPS),
  # fsdp over the learner's two devices, one per host: each host holds half of every weight,
  # so the copy to a host's sampler gathers the other half from the other host.
  model=dict(mesh="fsdp"),
  # Small enough that the policy keeps passing about half its samples (every step learns),
  # large enough that stale and fresh behaviour log-probs differ (in the metrics).
  optim=dict(learning_rate=1e-5),
)
DISAGGREGATED = dict(sampler_devices=1, sampler_mesh="1,-1,1")
CACHE = dict(JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")


def _run(start, name, workdir=None, rl=None, **train):
  """A run of `configs/precisecoder.py:tiny` in `workdir` (default: a new one named `name`
  holding the step-0 checkpoint)."""
  if workdir is None:
    workdir = start / name
    shutil.copytree(start / "start" / "checkpoints", workdir / "checkpoints")
  overrides = {
    **OVERRIDES,
    "rl": dict(OVERRIDES["rl"], **(rl or {})),
    "train": dict(OVERRIDES["train"], **train),
    "data": dict(task_file=str(start / "tasks.jsonl")),
  }
  args = ["--config=configs/precisecoder.py:tiny", f"--workdir={workdir}", *config_flags(overrides)]
  return dict(name=name, args=args, hooks=dict(trace=True))


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
  """The runs, by name: the disaggregated one, one stopped after step 1 (step 2's rollouts in
  flight) and resumed, on 2 x 2 devices; the shared one on 2 x 1."""
  from precisecoder.train import config as train_config

  start = tmp_path_factory.mktemp("multihost_sampler_mesh")
  answerable_tasks(start / "tasks.jsonl")
  cfg = train_config.default("tiny")
  cfg.data.task_file = str(start / "tasks.jsonl")
  save_step_zero(cfg, start / "start")
  plans = {
    "disaggregated": (
      2,
      [
        _run(start, "disaggregated", rl=DISAGGREGATED),
        _run(start, "stopped", rl=DISAGGREGATED, stop_after=1),
        _run(start, "resumed", start / "stopped", rl=DISAGGREGATED),
      ],
    ),
    "shared": (1, [_run(start, "shared")]),
  }
  out = {"start": start}
  for name, (devices, runs) in plans.items():
    cache = dict(CACHE, JAX_COMPILATION_CACHE_DIR=str(start / f"compiled_{devices}"))
    launch = Launch(start / f"launch_{name}", 2, devices, runs, TIMEOUTS, extra_env=cache)
    launch.wait(RUN_TIMEOUT_S * len(runs))
    out.update({run["name"]: launch for run in runs})
  return out


def _trained(launch, name):
  """Each host's {step: digest of the prompts it trained} in run `name`."""
  return {host: trained_prompts(text) for host, text in launch.run_logs(name).items()}


def test_disaggregated_on_two_hosts_trains_what_the_shared_placement_trains(launches):
  """Each host samples its own tasks on its own device, with the rows' global seeds and the
  padded width both hosts agreed on: every host trains the shared run's prompts, and the run
  its metrics and parameters, bit for bit; the weights went over after every update."""
  start = launches["start"]
  shared = _trained(launches["shared"], "shared")
  assert _trained(launches["disaggregated"], "disaggregated") == shared
  assert all(sorted(steps) == list(range(1, STEPS + 1)) for steps in shared.values()), shared
  assert shared["process_0.log"] != shared["process_1.log"]  # each host its own tasks
  want = step_metrics(start / "shared")
  assert [r["train/staleness"] for r in want] == [0, 1, 1]
  assert all(r["advantage_abs"] > 0 and r["train/grad_norm"] > 0 for r in want), want
  # Stale samples are another policy's: a sampler given the wrong weights would show.
  assert min(r["train/is_log_ratio_max_abs"] for r in want[1:]) > 1e-3, want
  assert step_metrics(start / "disaggregated") == want
  for a, b in zip(saved_params(start / "disaggregated"), saved_params(start / "shared")):
    np.testing.assert_array_equal(a, b)
  rows = metrics.read_metrics(start / "disaggregated" / "metrics.jsonl")
  assert all(r["time/weight_transfer"] > 0 for r in rows), rows


def test_disaggregated_on_two_hosts_resumes_exactly_with_rollouts_in_flight(launches):
  """Stopped after step 1, each host saves its own rows of step 2, sampled on its sampler; the
  resumed run trains the straight run's prompts on each host and ends with its metrics and
  parameters."""
  start = launches["start"]
  launch = launches["disaggregated"]
  straight = _trained(launch, "disaggregated")
  stopped, resumed = _trained(launch, "stopped"), _trained(launch, "resumed")
  assert {h: {**stopped[h], **resumed[h]} for h in stopped} == straight
  assert all(list(steps) == [2, 3] for steps in resumed.values()), resumed
  held = sorted(
    p.name for p in (start / "stopped" / "checkpoints" / "1" / "rollouts").glob("*.npz")
  )
  assert held == ["process_0-of-2.npz", "process_1-of-2.npz"]
  assert step_metrics(start / "stopped") == step_metrics(start / "disaggregated")
  for a, b in zip(saved_params(start / "stopped"), saved_params(start / "disaggregated")):
    np.testing.assert_array_equal(a, b)
