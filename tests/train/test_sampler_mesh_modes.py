"""rl.sampler_devices = 1 with every RL mode: agent episodes (rl.turns = 2, their feedback run
on the sampler's thread), dynamic sampling (its rounds on the sampler's device, in the loop's
thread), LoRA (after the first copy only the adapters go to the sampler) and each reward
recipe beside the default r_lambda. Two steps at k = 1 on two CPU devices (learner on device 0,
sampler on device 1) train bit for bit what the shared placement trains on one.

A process's device count is fixed when JAX starts, so the two-device runs happen in one fresh
interpreter (this file, run as a script); the shared references run here, on this process's
one CPU device.
"""

import json
import pathlib
import shutil
import sys

import numpy as np
import pytest
from conftest import answerable_rl_config, answerable_tasks, run_with_cpu_devices, save_step_zero
from conftest import step_metrics

STEPS = 2
LORA = dict(rank=4, alpha=8.0, targets="q,v,down")
MODES = {  # name: (overrides by config section, the step-0 checkpoint it starts from)
  "turns": (dict(rl=dict(turns=2, feedback_tokens=320)), "agent_start"),
  "dynamic": (dict(rl=dict(dynamic_sampling=True, dynamic_sampling_max_rounds=1)), "start"),
  "lora": (dict(lora=LORA), None),  # the base is `start`'s checkpoint
  "unit": (dict(rl=dict(reward="unit", advantage="grpo")), "start"),
  "precision_only": (dict(rl=dict(reward="precision_only")), "start"),
  "recall_only": (dict(rl=dict(reward="recall_only")), "start"),
  "ea_grpo": (dict(rl=dict(reward="ea_grpo", advantage="grpo")), "start"),
}


def _config(base, mode, sampler_devices):
  cfg = answerable_rl_config(
    base / "tasks.jsonl",
    STEPS,
    rollout_chunks=1,
    max_staleness=1,
    sampler_devices=sampler_devices,
  )
  overrides, checkpoint = MODES[mode]
  for section, values in overrides.items():
    (cfg.model.lora if section == "lora" else cfg[section]).update(values)
  if checkpoint is None:
    cfg.model.checkpoint = str(base / "start")
  return cfg


def _train(base, mode, sampler_devices):
  """Trains `mode` in a workdir of its own; returns the workdir."""
  from precisecoder.train import rl

  name = f"{mode}_{'disaggregated' if sampler_devices else 'shared'}"
  checkpoint = MODES[mode][1]
  if checkpoint is not None:
    shutil.copytree(base / checkpoint / "checkpoints", base / name / "checkpoints")
  assert rl.train(_config(base, mode, sampler_devices), str(base / name)) == 0
  return base / name


def _params(workdir):
  """The parameters of a run's latest checkpoint (a LoRA run's adapters on their base)."""
  import jax
  from flax import nnx

  from precisecoder.model import load_checkpoint

  model, _, _ = load_checkpoint(workdir, with_tokenizer=False)
  return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model))]


def _two_devices(base: pathlib.Path) -> dict:
  """In a process with two CPU devices: each mode's run with rl.sampler_devices = 1; the
  parameters each weight transfer moved, per mode."""
  import jax

  from precisecoder.train import placement

  assert jax.device_count() == 2, jax.devices()
  moved = {}
  real = placement.to_sampler

  def to_sampler(params, shardings):
    moved[mode].append(len(jax.tree.leaves(params)))
    return real(params, shardings)

  placement.to_sampler = to_sampler
  for mode in MODES:
    moved[mode] = []
    _train(base, mode, 1)
  return moved


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Every mode's disaggregated run (in a two-device process) and shared one (here)."""
  base = tmp_path_factory.mktemp("sampler_modes")
  answerable_tasks(base / "tasks.jsonl")
  save_step_zero(_config(base, "unit", 0), base / "start")
  save_step_zero(_config(base, "unit", 0), base / "agent_start", garbage_ends=True)
  moved = run_with_cpu_devices(__file__, 2, base)
  return base, moved


@pytest.mark.slow  # 14 short runs, 7 in a process of their own: minutes on 2 cores
@pytest.mark.parametrize("mode", list(MODES))
def test_sampler_mesh_trains_what_the_shared_placement_trains(runs, mode):
  base, moved = runs
  shared = _train(base, mode, 0)
  want = step_metrics(shared)
  assert [r["train/staleness"] for r in want] == [0, 1]
  assert any(r["advantage_abs"] > 0 for r in want), want  # the runs learn something
  assert step_metrics(base / f"{mode}_disaggregated") == want
  for a, b in zip(_params(base / f"{mode}_disaggregated"), _params(shared), strict=True):
    np.testing.assert_array_equal(a, b)
  if mode == "turns":
    assert max(r["agent/turns"] for r in want) > 1, want  # episodes heard feedback
  if mode == "dynamic":
    assert all("dynamic/rounds" in r for r in want), want
  # The start's copy holds every parameter; LoRA's later ones its adapters alone.
  full = moved[mode][0]
  adapters = 2 * len(LORA["targets"].split(","))  # A and B of each target
  assert len(moved[mode]) == 1 + sum(1 for r in want if not r["skipped_update"])
  assert all(n == (adapters if mode == "lora" else full) for n in moved[mode][1:]), moved


if __name__ == "__main__":
  print(json.dumps(_two_devices(pathlib.Path(sys.argv[1]))))
