"""The disaggregated placement (rl.sampler_devices, train/placement.py): the sampler on devices
of its own trains exactly what the shared mesh trains, samples beside the learning, gets the
weights device to device, and resumes exactly with rollouts in flight.

A process's device count is fixed when JAX starts, so the two-device runs happen in a fresh
interpreter (this file, run as a script) with XLA_FLAGS set; the shared reference runs here, on
this process's one CPU device.
"""

import collections
import json
import pathlib
import shutil
import sys
import threading

import numpy as np
import pytest
from conftest import answerable_rl_config, answerable_tasks, run_with_cpu_devices, save_step_zero
from conftest import saved_params, step_metrics

STEPS = 4


def _config(task_file, sampler_devices, **train):
  cfg = answerable_rl_config(task_file, STEPS, max_staleness=1, sampler_devices=sampler_devices)
  cfg.train.update(train)
  return cfg


def _workdir(base, name):
  shutil.copytree(base / "start" / "checkpoints", base / name / "checkpoints")
  return base / name


def _two_devices(base: pathlib.Path) -> dict:
  """In a process with two CPU devices: the straight run with rl.sampler_devices = 1 (learner
  on device 0, sampler on device 1), and one stopped after step 1 then resumed. Every weight
  transfer runs under transfer guards that refuse host copies; each learner update waits for
  the sampler's thread to start sampling the next step (a handshake: a loop that sampled only
  after learning would time out). Returns what it saw."""
  import jax

  from precisecoder.train import placement, rl

  assert jax.device_count() == 2, jax.devices()
  seen = collections.defaultdict(list)
  started = collections.defaultdict(threading.Event)
  real_to_sampler, real_sample, real_learn = placement.to_sampler, rl.sample_and_score, rl.learn

  def devices(tree):
    return sorted({d.id for x in jax.tree.leaves(tree) for d in x.devices()})

  def to_sampler(params, shardings):
    with (
      jax.transfer_guard_host_to_device("disallow_explicit"),
      jax.transfer_guard_device_to_host("disallow_explicit"),
    ):
      out = real_to_sampler(params, shardings)
    seen["transfers"].append([devices(params), devices(out)])
    # The guards are live: the same copy through the host is refused.
    try:
      with jax.transfer_guard_host_to_device("disallow_explicit"):
        jax.device_put(jax.device_get(params), shardings)
      seen["host_copy_refused"].append(False)
    except Exception:  # pylint: disable=broad-except
      seen["host_copy_refused"].append(True)
    return out

  def sample_and_score(*args, step, mesh, **kwargs):
    started[step].set()
    seen["sampled"].append(
      [step, threading.current_thread().name, sorted(d.id for d in mesh.devices.flat)]
    )
    return real_sample(*args, step=step, mesh=mesh, **kwargs)

  def learn(rl_cfg, step_fn, params, *args, step, **kwargs):
    seen["learned"].append([step, devices(params)])
    if step < STEPS:  # the timeout only turns a hang into a failure
      seen["overlapped"].append(started[step + 1].wait(timeout=900))
    return real_learn(rl_cfg, step_fn, params, *args, step=step, **kwargs)

  placement.to_sampler, rl.sample_and_score, rl.learn = to_sampler, sample_and_score, learn
  tasks = base / "tasks.jsonl"
  assert rl.train(_config(tasks, 1), str(_workdir(base, "disaggregated"))) == 0
  started.clear()
  stopped = _workdir(base, "stopped")
  assert rl.train(_config(tasks, 1, stop_after=1), str(stopped)) == 0
  started.clear()
  assert rl.train(_config(tasks, 1), str(stopped)) == 0
  return dict(seen)


def _four_devices() -> dict:
  """In a process with four CPU devices: the meshes `place` builds, and the tiny model's
  weights, sharded over the learner's three devices, copied onto the sampler's one (and onto
  a two-device sampler mesh) under transfer guards that refuse host copies."""
  import jax
  from flax import nnx

  from precisecoder.model import Decoder, architectures, shard_model
  from precisecoder.train import config as train_config
  from precisecoder.train import placement

  assert jax.device_count() == 4, jax.devices()
  out = {}
  cfg = _config("", 1)
  cfg.model.mesh = "fsdp"
  for n in (1, 2, 4):
    cfg.rl.sampler_devices = n
    try:
      meshes = placement.place(cfg)
    except train_config.ConfigError as e:
      out[f"place{n}"] = str(e)
      continue
    out[f"place{n}"] = [[d.id for d in m.devices.flat] for m in (meshes.learner, meshes.sampler)]
    model = shard_model(Decoder(architectures.get("tiny"), rngs=nnx.Rngs(0)), meshes.learner)
    params = nnx.state(model)
    shardings = placement.sampler_shardings(params, meshes.sampler)
    with (
      jax.transfer_guard_host_to_device("disallow_explicit"),
      jax.transfer_guard_device_to_host("disallow_explicit"),
    ):
      copied = placement.to_sampler(params, shardings)
      try:  # the same copy through the host
        jax.device_put(jax.device_get(params), shardings)
        refused = False
      except Exception:  # pylint: disable=broad-except
        refused = True
    pairs = list(zip(jax.tree.leaves(params), jax.tree.leaves(copied), jax.tree.leaves(shardings)))
    out[f"copy{n}"] = dict(
      equal=all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b, _ in pairs),
      placed=all(b.sharding == s for _, b, s in pairs),
      q_proj=str(copied["layers"]["q_proj"][...].sharding.spec),
      host_copy_refused=refused,
    )
  return out


@pytest.fixture(scope="module")
def start(tmp_path_factory):
  """Tasks the answering policy passes about half the time, and the step-0 checkpoint that
  every run starts from."""
  base = tmp_path_factory.mktemp("placement")
  answerable_tasks(base / "tasks.jsonl")
  save_step_zero(_config(base / "tasks.jsonl", 0), base / "start")
  return base


def test_sampler_devices_are_checked():
  from precisecoder.train import config as train_config

  def problem(**rl):
    cfg = _config("", 1)
    cfg.rl.update(rl)
    with pytest.raises(train_config.ConfigError) as e:
      train_config.validate(cfg)
    return str(e.value)

  assert problem(sampler_devices=-1).startswith("config.rl.sampler_devices=-1: must be an integer")
  assert "needs rl.max_staleness >= 1" in problem(max_staleness=0)
  assert problem(sampler_mesh="1,-1").startswith("config.rl.sampler_mesh='1,-1': must be")
  assert problem(sampler_mesh="-1,-1,1").startswith("config.rl.sampler_mesh='-1,-1,1'")
  train_config.validate(_config("", 1))  # k = 1 with a sampler mesh of its own is fine


def test_placement_on_one_device():
  """Shared: the learner's mesh is the sampler's (none on one device). One device cannot be
  split: the error names the field. (Several hosts: tests/test_multihost_sampler_mesh.py.)"""
  from precisecoder.train import config as train_config
  from precisecoder.train import placement

  shared = placement.place(_config("", 0))
  assert shared.learner is None and shared.sampler is None and not shared.disaggregated
  with pytest.raises(train_config.ConfigError, match=r"config.rl.sampler_devices=1 must leave"):
    placement.place(_config("", 1))


@pytest.mark.slow  # four runs, one in a process of its own
def test_disaggregated_run_trains_what_the_shared_run_trains_and_resumes_exactly(start):
  """rl.sampler_devices = 1 on two devices, at k = 1: the same rewards, losses, staleness and
  IS metrics and bit-identical final parameters as the shared placement on one device (the
  learner's mesh), straight and stopped after step 1 with a rollout in flight then resumed.
  Sampling ran on the sampler's thread and device, beside the learning; every update's weights
  went from device 0 to device 1 with host copies refused."""
  from precisecoder.train import rl

  shared = _workdir(start, "shared")
  assert rl.train(_config(start / "tasks.jsonl", 0), str(shared)) == 0
  seen = run_with_cpu_devices(__file__, 2, 2, start)

  want = step_metrics(shared)
  assert [r["train/staleness"] for r in want] == [0, 1, 1, 1]
  for name in ("disaggregated", "stopped"):
    assert step_metrics(start / name) == want, name
    for a, b in zip(saved_params(start / name), saved_params(shared)):
      np.testing.assert_array_equal(a, b)
  # Straight run: steps 1..4; the stopped one's 1, 2 then the resumed one's 3, 4 (its step 2
  # was in the checkpoint).
  assert sorted(s for s, _, _ in seen["sampled"]) == [1, 1, 2, 2, 3, 3, 4, 4]
  assert {(thread.split("_")[0], tuple(ids)) for _, thread, ids in seen["sampled"]} == {
    ("sampler", (1,))
  }
  assert all(ids == [0] for _, ids in seen["learned"])
  assert seen["overlapped"] and all(seen["overlapped"])
  # The initial weights and one copy per update (no update skipped here), device 0 to 1.
  assert all(pair == [[0], [1]] for pair in seen["transfers"])
  assert len(seen["transfers"]) == len(seen["learned"]) + 3  # each run's start
  assert all(seen["host_copy_refused"])


def test_weights_go_to_the_sampler_mesh_device_to_device():
  """On four devices: the sampler takes the last n, the learner the rest (four cannot leave it
  one); the weights sharded over the learner's mesh arrive on the sampler's shardings unchanged,
  with host copies refused (and a copy through the host is refused, so the guard is live)."""
  seen = run_with_cpu_devices(__file__, 4, 4)
  assert seen["place1"] == [[0, 1, 2], [3]]
  assert seen["place2"] == [[0, 1], [2, 3]]
  assert seen["place4"].startswith("config.rl.sampler_devices=4 must leave the learner")
  for n in (1, 2):
    copy = seen[f"copy{n}"]
    assert copy["equal"] and copy["placed"] and copy["host_copy_refused"], (n, copy)
  assert seen["copy2"]["q_proj"] == "P(None, 'fsdp')"  # split over the sampler's two devices


if __name__ == "__main__":
  if sys.argv[1] == "2":
    print(json.dumps(_two_devices(pathlib.Path(sys.argv[2]))))
  else:
    print(json.dumps(_four_devices()))
