"""Builds a Decoder from a tensor source, placing each weight straight onto its sharding.

No full host copy of the model is made: each device shard is assembled from the source's
per-layer tensors when `jax.make_array_from_callback` asks for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, SingleDeviceSharding
from tqdm import tqdm

from precisecoder.model.config import ModelConfig
from precisecoder.model.decoder import Decoder, abstract_decoder
from precisecoder.model.sharding import named_sharding
from precisecoder.model.weights import WeightSpec, weight_specs

# Reads one tensor by its Hugging Face name, in Hugging Face layout, as a numpy array.
TensorReader = Callable[[str], np.ndarray]


def _check_shape(
  spec: WeightSpec, name: str, got: tuple[int, ...], want: tuple[int, ...], where: str
):
  if got != want:
    raise ValueError(f"{where}: tensor {name!r} has shape {got}; config implies {want}")


def build_decoder(
  config: ModelConfig, read: TensorReader, *, mesh: Mesh | None = None, where: str = "checkpoint"
) -> Decoder:
  """A Decoder whose parameters are read through `read` (HF names and layouts)."""
  graphdef, abstract = abstract_decoder(config)
  flat = dict(nnx.to_flat_state(abstract))
  specs = {spec.path: spec for spec in weight_specs(config)}
  missing = set(flat) - set(specs)
  if missing:
    raise RuntimeError(f"no weight mapping for parameters {sorted(missing)}")
  dtype = np.dtype(jax.numpy.dtype(config.dtype))

  @functools.lru_cache(maxsize=4)
  def ours(spec_path: tuple[str, ...], layer: int | None) -> np.ndarray:
    spec = specs[spec_path]
    name = spec.hf_name.format(i=layer)
    return spec.to_ours(read(name)).astype(dtype, copy=False)

  new_flat = []
  for path, var in tqdm(flat.items(), desc=f"loading {where}", unit="tensor", leave=False):
    spec = specs[path]
    shape = tuple(var.get_value().shape)
    axes = var.get_metadata().get("logical_axes")
    sharding = (
      named_sharding(axes, shape, mesh)
      if mesh is not None
      else SingleDeviceSharding(jax.devices()[0])
    )

    def shard(index, spec=spec, shape=shape):
      if spec.per_layer:
        layers = range(*index[0].indices(shape[0]))
        parts = []
        for i in layers:
          full = ours(spec.path, i)
          _check_shape(spec, spec.hf_name.format(i=i), full.shape, shape[1:], where)
          parts.append(full[index[1:]])
        return np.stack(parts)
      full = ours(spec.path, None)
      _check_shape(spec, spec.hf_name, full.shape, shape, where)
      return full[index]

    new_flat.append((path, var.replace(jax.make_array_from_callback(shape, sharding, shard))))
    ours.cache_clear()
  return nnx.merge(graphdef, nnx.from_flat_state(new_flat))
