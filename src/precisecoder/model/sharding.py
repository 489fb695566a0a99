"""Logical axis names -> mesh axes (`data`, `fsdp`, `tensor`), and the named meshes (MESHES).

Parameters carry logical axis names in their `logical_axes` metadata; activations are annotated
with `constrain`. One rules table maps both onto whatever mesh is active, so the same model code
runs on one CPU, 8 fake CPU devices, one GPU and a TPU pod. A mesh axis that does not divide a
dimension is dropped for that array (it is replicated along that axis instead).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import jax
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# Logical axis -> mesh axes, in order. Batch over data and fsdp; weights' model dimension over
# fsdp (ZeRO-3 style); heads, MLP hidden units and the vocabulary over tensor.
RULES: dict[str, tuple[str, ...]] = {
  "batch": ("data", "fsdp"),
  "embed": ("fsdp",),
  "vocab": ("tensor",),
  "q_heads": ("tensor",),
  "kv_heads": ("tensor",),
  "mlp": ("tensor",),
  "layers": (),
  "head_dim": (),
  "norm": (),
  "seq": (),
  "cache_seq": (),
  "act_embed": (),  # activations keep the model dimension whole
  "lora_rank": (),  # LoRA factors (model/lora.py): the rank is small; never split
}

# (data, fsdp, tensor) shapes for common slices; `-1` takes the remaining devices.
MESHES: dict[str, tuple[int, int, int]] = {
  "cpu": (1, 1, 1),
  "gpu": (1, 1, 1),
  "fsdp": (1, -1, 1),
  "v5e-8": (1, 8, 1),
  "v5e-16": (2, 8, 1),
  "v5e-64": (8, 8, 1),
  "v5p-8": (1, 4, 1),
  "v5p-32": (1, 16, 1),
  "v5p-128": (4, 16, 1),
  "v6e-8": (1, 4, 2),
  "v6e-64": (4, 8, 2),
}


def make_mesh(
  shape: Sequence[int] | str = (1, -1, 1), devices: Sequence[jax.Device] | None = None
) -> Mesh:
  """A (data, fsdp, tensor) mesh from a shape ("2,2,1" too) or a name in MESHES; one `-1` is
  inferred."""
  if isinstance(shape, str) and "," in shape:  # "data,fsdp,tensor", e.g. "2,2,1"
    shape = tuple(int(n) for n in shape.split(","))
  if isinstance(shape, str):
    if shape not in MESHES:
      raise KeyError(f"unknown mesh {shape!r}; known: {sorted(MESHES)}")
    shape = MESHES[shape]
  devices = list(jax.devices() if devices is None else devices)
  shape = list(shape)
  if len(shape) != 3:
    raise ValueError(f"mesh shape {shape} must have 3 entries (data, fsdp, tensor)")
  if shape.count(-1) > 1:
    raise ValueError(f"mesh shape {shape}: at most one -1")
  if -1 in shape:
    known = math.prod(s for s in shape if s != -1)
    shape[shape.index(-1)] = len(devices) // known
  if math.prod(shape) != len(devices):
    raise ValueError(
      f"mesh shape {tuple(shape)} needs {math.prod(shape)} devices; {len(devices)} available"
    )
  return jax.make_mesh(tuple(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def logical_to_spec(
  axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh | jax.sharding.AbstractMesh
) -> PartitionSpec:
  """The PartitionSpec for an array of `shape` whose dimensions have logical names `axes`."""
  if len(axes) != len(shape):
    raise ValueError(f"logical axes {tuple(axes)} do not match shape {tuple(shape)}")
  used: set[str] = set()
  spec = []
  for name, size in zip(axes, shape):
    if name is None:
      spec.append(None)
      continue
    if name not in RULES:
      raise KeyError(f"logical axis {name!r} has no sharding rule")
    chosen = []
    for axis in RULES[name]:
      n = mesh.shape.get(axis, 1)
      if axis in used or n == 1:
        continue
      if size % (math.prod(mesh.shape[a] for a in chosen) * n) == 0:
        chosen.append(axis)
    used.update(chosen)
    spec.append(None if not chosen else chosen[0] if len(chosen) == 1 else tuple(chosen))
  while spec and spec[-1] is None:  # the canonical form jit gives its outputs: no recompiles
    spec.pop()
  return PartitionSpec(*spec)


def named_sharding(axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, logical_to_spec(axes, shape, mesh))


def constrain(x: jax.Array, axes: Sequence[str | None]) -> jax.Array:
  """Annotates an activation with its logical axes; a no-op when no mesh is active."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or mesh.size == 1:
    return x
  return jax.lax.with_sharding_constraint(x, logical_to_spec(axes, x.shape, mesh))


def state_shardings(state: nnx.State, mesh: Mesh) -> nnx.State:
  """NamedShardings for every variable in `state`, from its `logical_axes` metadata."""

  def one(var):
    axes = var.get_metadata().get("logical_axes") or (None,) * var.get_value().ndim
    return named_sharding(axes, var.get_value().shape, mesh)

  return jax.tree.map(one, state, is_leaf=lambda v: isinstance(v, nnx.Variable))


def shard_model(model: nnx.Module, mesh: Mesh) -> nnx.Module:
  """Moves every parameter of `model` onto its sharding over `mesh` (in place) and returns it."""
  graphdef, state = nnx.split(model)
  shardings = state_shardings(state, mesh)
  values = jax.tree.map(
    lambda v: v.get_value(), state, is_leaf=lambda v: isinstance(v, nnx.Variable)
  )
  placed = jax.device_put(
    values, jax.tree.map(lambda v: v, shardings, is_leaf=lambda v: isinstance(v, NamedSharding))
  )
  nnx.update(model, placed)
  return model


def mesh_scope(mesh: Mesh | None) -> contextlib.AbstractContextManager:
  """The context that jitted code runs in: `mesh` set as JAX's current mesh (the sharding
  constraints inside name its axes), or nothing on one device."""
  return jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext()
