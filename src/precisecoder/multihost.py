"""Multi-host (multi-controller) plumbing: start-up, process-local <-> global arrays, gathers.

Every host runs the same program on its own slice of each global batch. Batch rows are laid
out host-major: host i's rows are the i-th contiguous block, on the devices it owns, so a
global batch is built from process-local data with `jax.make_array_from_process_local_data`
and each host reads its own rows back from its addressable shards. With one process every
function here reduces to the single-host behaviour.

Start-up (`initialize`): on Cloud TPU VMs `jax.distributed.initialize()` finds its peers from
the TPU metadata; elsewhere (N processes on one machine, `scripts/multihost_local.sh`) the
coordinator comes from JAX_COORDINATOR_ADDRESS with JAX_NUM_PROCESSES and JAX_PROCESS_ID.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding

from precisecoder.model.sharding import RULES, logical_to_spec


def initialize(
  initialization_timeout_s: int = 300, heartbeat_timeout_s: int = 100, shutdown_timeout_s: int = 300
) -> None:
  """Joins the other processes of a multi-host run (no-op for a single process, and for a
  process that has joined already: one that runs several trainings in turn joins once).

  The timeouts (seconds, JAX's defaults; the trainer passes `config.multihost`): how long a
  process waits for the others to join, how long one may go without a heartbeat before the
  coordinator calls it dead, and how long the first to finish waits for the rest.
  """
  env = os.environ
  tpu_pod = "," in env.get("TPU_WORKER_HOSTNAMES", "")
  if (not tpu_pod and "JAX_COORDINATOR_ADDRESS" not in env) or jax.distributed.is_initialized():
    return
  # Cross-process collectives on CPU (the local multi-process runs) need an implementation;
  # the setting is ignored by TPU and GPU backends.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  timeouts = dict(
    initialization_timeout=int(initialization_timeout_s),
    heartbeat_timeout_seconds=int(heartbeat_timeout_s),
    shutdown_timeout_seconds=int(shutdown_timeout_s),
  )
  if tpu_pod:
    jax.distributed.initialize(**timeouts)
  else:
    missing = [k for k in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID") if k not in env]
    if missing:
      raise ValueError(f"JAX_COORDINATOR_ADDRESS is set but {', '.join(missing)} is not")
    jax.distributed.initialize(
      env["JAX_COORDINATOR_ADDRESS"],
      num_processes=int(env["JAX_NUM_PROCESSES"]),
      process_id=int(env["JAX_PROCESS_ID"]),
      **timeouts,
    )
  logging.info(
    "process %d of %d, %d local devices of %d",
    jax.process_index(),
    jax.process_count(),
    jax.local_device_count(),
    jax.device_count(),
  )


def barrier(name: str, timeout_s: int) -> None:
  """Waits until every process has reached `name`, for at most `timeout_s` seconds.

  The coordination service's barrier, not a device collective: a host that is late by
  minutes (a slow load, a report being written) is waited for as long as the caller allows,
  where a first collective between hosts (gloo's on CPU) gives up after 30 s, and JAX's own
  shutdown after 5 minutes whatever its configured timeout.
  """
  if jax.process_count() == 1:
    return
  from jax._src import distributed  # pylint: disable=import-outside-toplevel

  # No public API holds the client (jax.experimental.multihost_utils and Orbax read it here).
  distributed.global_state.client.wait_at_barrier(f"precisecoder:{name}", int(timeout_s * 1000))


def is_primary() -> bool:
  """Whether this process writes the run's shared outputs (metrics, events, report)."""
  return jax.process_index() == 0


def spans_processes(mesh: Mesh | None) -> bool:
  return mesh is not None and len({d.process_index for d in mesh.devices.flat}) > 1


def batch_sharding(mesh: Mesh, global_shape: tuple[int, ...]) -> NamedSharding:
  """The sharding of an array whose first axis is the batch, split over the mesh's batch
  axes. Across processes each host must own one distinct, contiguous block of rows, in
  process order; a batch that cannot be split that way is an error that says why."""
  spec = logical_to_spec(("batch",) + (None,) * (len(global_shape) - 1), global_shape, mesh)
  sharding = NamedSharding(mesh, spec)
  if spans_processes(mesh):
    blocks: dict[int, set[tuple[int, int]]] = {}
    for device, index in sharding.devices_indices_map(global_shape).items():
      rows = index[0]
      blocks.setdefault(device.process_index, set()).add(
        (rows.start or 0, global_shape[0] if rows.stop is None else rows.stop)
      )
    count = jax.process_count()
    per_host = global_shape[0] // count
    expected = {p: (p * per_host, (p + 1) * per_host) for p in range(count)}
    for process, spans in blocks.items():
      lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
      if (lo, hi) != expected[process] or global_shape[0] % count:
        raise ValueError(
          f"a batch of {global_shape[0]} rows cannot be split into {count} per-host blocks "
          f"over mesh {dict(mesh.shape)}: the rows must be a multiple of the devices on "
          f"the batch axes (data x fsdp), with each host's devices adjacent in the mesh"
        )
  return sharding


def rows_per_host_multiple(mesh: Mesh) -> int:
  """Per-host batch sizes that fill whole devices: multiples of this."""
  devices = math.prod(mesh.shape[a] for a in RULES["batch"] if a in mesh.shape)
  return max(1, devices // jax.process_count())


def global_batch(local: Any, mesh: Mesh) -> Any:
  """A pytree of global arrays (batch sharded) from each host's rows of it."""

  def one(x):
    x = np.asarray(x)
    shape = (x.shape[0] * jax.process_count(),) + x.shape[1:]
    return jax.make_array_from_process_local_data(batch_sharding(mesh, shape), x, shape)

  return jax.tree.map(one, local)


def local_rows(x: jax.Array) -> np.ndarray:
  """This host's rows of a batch-sharded global array (all rows of a fully addressable one)."""
  if x.is_fully_addressable:
    return np.asarray(jax.device_get(x))
  blocks: dict[int, Any] = {}
  for shard in x.addressable_shards:
    blocks.setdefault(shard.index[0].start or 0, shard.data)
  return np.concatenate([np.asarray(blocks[k]) for k in sorted(blocks)])


def allgather_rows(local: Any) -> Any:
  """Every host's rows of a pytree of numpy arrays, concatenated in process order."""
  if jax.process_count() == 1:
    return local
  return jax.tree.map(
    lambda x: np.asarray(multihost_utils.process_allgather(np.asarray(x), tiled=True)), local
  )


def global_max(value: int) -> int:
  if jax.process_count() == 1:
    return int(value)
  return int(np.max(multihost_utils.process_allgather(np.int64(value))))


def rows_before(count: int) -> int:
  """How many rows the hosts before this one hold, given this host's `count`."""
  if jax.process_count() == 1:
    return 0
  counts = multihost_utils.process_allgather(np.int64(count))
  return int(np.sum(counts[: jax.process_index()]))


def allgather_json(value: Any) -> list[Any]:
  """Every host's JSON-serialisable `value`, in process order."""
  if jax.process_count() == 1:
    return [value]
  data = np.frombuffer(json.dumps(value).encode(), np.uint8)
  width = global_max(len(data))
  padded = np.zeros(width, np.uint8)
  padded[: len(data)] = data
  lengths = multihost_utils.process_allgather(np.int64(len(data)))
  rows = multihost_utils.process_allgather(padded)
  return [json.loads(bytes(row[:n]).decode()) for row, n in zip(rows, lengths)]


def host_slice(rows: int) -> slice:
  """This host's block of a host-major global batch of `rows` rows."""
  count = jax.process_count()
  if rows % count:
    raise ValueError(f"{rows} rows cannot be dealt equally to {count} hosts")
  per_host = rows // count
  return slice(jax.process_index() * per_host, (jax.process_index() + 1) * per_host)


def local_fingerprint(tree: Any) -> str:
  """SHA-256 of the parts of a pytree of arrays this host holds (each distinct shard once).
  Equal on two hosts whose parameters are replicated across them iff their copies agree."""
  digest = hashlib.sha256()
  for leaf in jax.tree.leaves(tree):
    shards = {}
    for shard in leaf.addressable_shards:
      shards.setdefault(tuple((s.start, s.stop) for s in shard.index), shard.data)
    for index in sorted(shards, key=str):
      digest.update(str(index).encode())
      digest.update(np.ascontiguousarray(np.asarray(shards[index])).tobytes())
  return digest.hexdigest()
