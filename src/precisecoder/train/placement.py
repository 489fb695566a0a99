"""Where the learner and the sampler run (`rl.sampler_devices`).

0 (the default): one mesh of every device (`model.mesh`; none on one device), time-shared:
the sampler reads the learner's own arrays. n >= 1 (disaggregated): each process's last n
devices are the sampler's own mesh (`rl.sampler_mesh`) and the others the learner's, and after
each update the new parameters are resharded onto the sampler's mesh device to device
(`to_sampler`), so that sampling the next steps (on a thread of its own, rl.py) runs while the
learner learns.

On several hosts the learner's mesh spans them (every host's first devices) and each host's
sampler mesh is its own: it samples that host's tasks, their place in the global batch (row
seeds, padded width) agreed on the loop's thread beforehand (sampling.agree_rows), so no
collective ever runs on the sampler's thread, where its order beside the learner's would be
the threads' race, not the same on every host. The weights reach each host's sampler from the
learner's mesh by an all-gather on that mesh (`to_sampler`, on the loop's thread after each
update, in the same order on every host: a host's sampler holds the whole model, so it needs
every other host's shards) and a copy from the host's own learner device to its sampler mesh.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import ml_collections
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from precisecoder.model.sharding import make_mesh, state_shardings
from precisecoder.train.config import ConfigError


@dataclasses.dataclass(frozen=True)
class Placement:
  learner: Mesh | None  # None: one device, no mesh
  sampler: Mesh | None  # the learner's own when shared

  @property
  def disaggregated(self) -> bool:
    return self.sampler is not self.learner

  @property
  def sampler_per_host(self) -> bool:
    """Each host samples on a mesh of its own (disaggregated, several hosts)."""
    return self.disaggregated and jax.process_count() > 1


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
  hosts: dict[int, list] = {}
  for device in jax.devices():
    hosts.setdefault(device.process_index, []).append(device)
  local = hosts[jax.process_index()]
  if n >= len(local):
    raise ConfigError(
      f"config.rl.sampler_devices={n} must leave the learner at least one of this process's "
      f"{len(local)} devices (one device cannot be split: use rl.sampler_devices=0)"
    )
  learner = [d for p in sorted(hosts) for d in hosts[p][:-n]]  # host-major, as a batch's rows
  return Placement(
    learner=_mesh("model.mesh", cfg.model.mesh, learner),
    sampler=_mesh("rl.sampler_mesh", cfg.rl.sampler_mesh, local[-n:]),
  )


def sampler_shardings(params: Any, mesh: Mesh) -> Any:
  """Where each parameter of `params` (an nnx.State with logical axes) lives on the sampler's
  mesh: the same logical sharding rules as the learner's, on the sampler's axes."""
  return state_shardings(params, mesh)


@functools.cache
def _gather(mesh: Mesh):
  """A copy of an array on `mesh` whole on each of its devices (an all-gather across hosts)."""
  return jax.jit(lambda x: x, out_shardings=NamedSharding(mesh, PartitionSpec()))


def to_sampler(params: Any, shardings: Any) -> Any:
  """`params` copied onto `shardings` (`sampler_shardings`'), device to device: jax reshards
  each array between the two meshes (no host copy; tests/train/test_sampler_mesh.py runs it
  under jax's transfer guards). Waits for the copy, so that its time is the transfer's and
  the next update may donate `params`.

  On several hosts (the learner's arrays span them) each parameter is first gathered whole
  onto each of the learner's devices (a collective: every host calls this at the same point
  of its loop), then copied from this host's first one: one parameter at a time, so that the
  gathered copies add one parameter's size to a learner device, not the model's."""
  leaves, tree = jax.tree.flatten(params)
  targets = jax.tree.leaves(shardings)
  if all(x.is_fully_addressable for x in leaves):
    return jax.block_until_ready(jax.device_put(params, shardings))
  out = []
  for x, target in zip(leaves, targets, strict=True):
    whole = _gather(x.sharding.mesh)(x).addressable_data(0)
    out.append(jax.block_until_ready(jax.device_put(whole, target)))
  return jax.tree.unflatten(tree, out)
