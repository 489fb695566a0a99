"""Where the learner and the sampler run (`rl.sampler_devices`).

0 (the default): one mesh of every device (`model.mesh`; none on one device), time-shared:
the sampler reads the learner's own arrays. n >= 1 (disaggregated): the process's last n
devices are the sampler's own mesh (`rl.sampler_mesh`) and the others the learner's, and after
each update the new parameters are resharded onto the sampler's mesh device to device
(`to_sampler`), so that sampling the next steps (on a thread of its own, rl.py) runs while the
learner learns.

One process only: on several hosts the sampler's collectives (the prompt width every host
agrees on, the global batch) would run on their own thread beside the learner's, in an order
the hosts need not share, which can deadlock. They are refused here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import ml_collections
from jax.sharding import Mesh

from precisecoder.model.sharding import make_mesh, state_shardings
from precisecoder.train.config import ConfigError


@dataclasses.dataclass(frozen=True)
class Placement:
  learner: Mesh | None  # None: one device, no mesh
  sampler: Mesh | None  # the learner's own when shared

  @property
  def disaggregated(self) -> bool:
    return self.sampler is not self.learner


def _mesh(field: str, shape: str, devices: list) -> Mesh:
  try:
    return make_mesh(shape, devices)
  except (KeyError, ValueError) as e:
    raise ConfigError(f"config.{field}={shape!r} on {len(devices)} devices: {e}") from e


def place(cfg: ml_collections.ConfigDict) -> Placement:
  """The meshes of the learner and the sampler for `cfg` on this process's devices."""
  n = cfg.rl.get("sampler_devices", 0)
  if n == 0:
    mesh = make_mesh(cfg.model.mesh) if jax.device_count() > 1 else None
    return Placement(learner=mesh, sampler=mesh)
  if jax.process_count() > 1:
    raise ConfigError(
      f"config.rl.sampler_devices={n}: a sampler mesh of its own runs in one process only "
      f"(this run has {jax.process_count()}); set rl.sampler_devices=0 on several hosts"
    )
  devices = jax.devices()
  if n >= len(devices):
    raise ConfigError(
      f"config.rl.sampler_devices={n} must leave the learner at least one of this process's "
      f"{len(devices)} devices (one device cannot be split: use rl.sampler_devices=0)"
    )
  return Placement(
    learner=_mesh("model.mesh", cfg.model.mesh, devices[:-n]),
    sampler=_mesh("rl.sampler_mesh", cfg.rl.sampler_mesh, devices[-n:]),
  )


def sampler_shardings(params: Any, mesh: Mesh) -> Any:
  """Where each parameter of `params` (an nnx.State with logical axes) lives on the sampler's
  mesh: the same logical sharding rules as the learner's, on the sampler's axes."""
  return state_shardings(params, mesh)


def to_sampler(params: Any, shardings: Any) -> Any:
  """`params` copied onto `shardings` (`sampler_shardings`'), device to device: jax reshards
  each array between the two meshes (no host copy; tests/train/test_sampler_mesh.py runs it
  under jax's transfer guards). Waits for the copy, so that its time is the transfer's and
  the next update may donate `params`."""
  return jax.block_until_ready(jax.device_put(params, shardings))
