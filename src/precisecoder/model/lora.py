"""LoRA adapters on the decoder's projections: W x + (alpha / rank) B A x, with W frozen.

Each adapted projection W (stacked over layers, e.g. q_proj [L, D, H, K]) gets two factors
beside it in `DecoderLayers`: `<name>_lora_a` [L, *in, r] and `<name>_lora_b` [L, r, *out],
where `in` and `out` are W's input and output axes. A is drawn like PEFT's (uniform within
1/sqrt(fan-in)) and B is zero, so a fresh adapter leaves the model exactly as it was.

What is trained: the adapters only. With adapters the decoder reads every base weight through
`stop_gradient` (decoder.py), so the base weights' gradients are zeros that XLA folds away;
the optimiser (train/step.py) keeps Adam moments for the adapters alone and sets the base's
updates to zero. Training runs the factors unmerged (two thin matmuls per projection, no
weight-sized temporary); the sampler (`Decoder.layer_params`) merges them into the weights it
slices once per sampling call, so decoding costs what the base's does. A run's checkpoints
hold the adapters only (the base comes from the base checkpoint, read again on resume), and
`merged` folds them into plain weights for export, generation and evaluation.

No dropout: the RL losses compare the trainer's log-probs with the sampler's, and dropout in
one of them only would bias that ratio.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precisecoder.model.config import ModelConfig

# Short name (config) -> the projection it adapts.
TARGETS = {
  "q": "q_proj",
  "k": "k_proj",
  "v": "v_proj",
  "o": "o_proj",
  "gate": "gate_proj",
  "up": "up_proj",
  "down": "down_proj",
}
SUFFIXES = ("_lora_a", "_lora_b")


@dataclasses.dataclass(frozen=True)
class LoraConfig:
  rank: int
  alpha: float
  targets: tuple[str, ...]  # projection names (TARGETS' values), in TARGETS' order

  def __post_init__(self):
    if self.rank < 1:
      raise ValueError(f"LoRA rank {self.rank} must be >= 1")
    if not self.alpha > 0:
      raise ValueError(f"LoRA alpha {self.alpha} must be > 0")
    unknown = sorted(set(self.targets) - set(TARGETS.values()))
    if unknown or not self.targets:
      raise ValueError(f"LoRA targets {list(self.targets)}: want some of {list(TARGETS)}")

  @property
  def scale(self) -> float:
    return self.alpha / self.rank

  def to_json(self) -> dict[str, Any]:
    return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets)}

  @classmethod
  def from_json(cls, data: dict[str, Any]) -> LoraConfig:
    return cls(rank=int(data["rank"]), alpha=float(data["alpha"]), targets=tuple(data["targets"]))


def parse_targets(text: str | Sequence[str]) -> tuple[str, ...]:
  """ "q,k,v,o" (or a list of short names) -> ("q_proj", ...); raises ValueError naming the
  unknown ones."""
  names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
  unknown = [n for n in names if n not in TARGETS]
  if unknown or not names:
    raise ValueError(f"unknown LoRA targets {unknown or names}; known: {', '.join(TARGETS)}")
  return tuple(v for k, v in TARGETS.items() if k in names)


def from_config(model_cfg: Any) -> LoraConfig | None:
  """The LoRA of a run config's `model` section (its `lora` block), or None when rank is 0."""
  block = model_cfg.get("lora") if hasattr(model_cfg, "get") else None
  if block is None or not block.rank:
    return None
  return LoraConfig(
    rank=int(block.rank), alpha=float(block.alpha), targets=parse_targets(block.targets)
  )


def _axes(config: ModelConfig) -> dict[str, tuple[tuple, tuple, tuple, tuple]]:
  """Projection -> (input shape, input logical axes, output shape, output logical axes),
  per layer, in the layout DecoderLayers stores the weight."""
  d, h, k, hd, f = (
    config.hidden_size,
    config.num_heads,
    config.num_kv_heads,
    config.head_dim,
    config.intermediate_size,
  )
  embed = ((d,), ("embed",))
  return {
    "q_proj": (*embed, (h, hd), ("q_heads", "head_dim")),
    "k_proj": (*embed, (k, hd), ("kv_heads", "head_dim")),
    "v_proj": (*embed, (k, hd), ("kv_heads", "head_dim")),
    "o_proj": ((h, hd), ("q_heads", "head_dim"), *embed),
    "gate_proj": (*embed, (f,), ("mlp",)),
    "up_proj": (*embed, (f,), ("mlp",)),
    "down_proj": ((f,), ("mlp",), *embed),
  }


def init_adapters(config: ModelConfig, lora: LoraConfig, rngs: nnx.Rngs) -> dict[str, nnx.Param]:
  """{"<proj>_lora_a": A, "<proj>_lora_b": B} for every target, stacked over layers."""
  layers, dtype = config.num_layers, jnp.dtype(config.dtype)
  out = {}
  for name in lora.targets:
    in_shape, in_axes, out_shape, out_axes = _axes(config)[name]
    bound = 1.0 / math.sqrt(math.prod(in_shape))
    a = jax.random.uniform(
      rngs.params(), (layers, *in_shape, lora.rank), jnp.float32, -bound, bound
    )
    out[name + "_lora_a"] = nnx.Param(
      a.astype(dtype), logical_axes=("layers", *in_axes, "lora_rank")
    )
    out[name + "_lora_b"] = nnx.Param(
      jnp.zeros((layers, lora.rank, *out_shape), dtype),
      logical_axes=("layers", "lora_rank", *out_axes),
    )
  return out


def delta(a: jax.Array, b: jax.Array, scale: float, dtype, *, stacked: bool) -> jax.Array:
  """scale * A B with the rank contracted: A [*lead, *in, r], B [*lead, r, *out] ->
  [*lead, *in, *out], where `lead` is the layers axis when `stacked`, else nothing."""
  lead = a.shape[:1] if stacked else ()
  r = a.shape[-1]
  in_shape, out_shape = a.shape[len(lead) : -1], b.shape[len(lead) + 1 :]
  a2 = a.reshape(*lead, math.prod(in_shape), r).astype(jnp.float32)
  b2 = b.reshape(*lead, r, math.prod(out_shape)).astype(jnp.float32)
  return (scale * (a2 @ b2)).reshape(*lead, *in_shape, *out_shape).astype(dtype)


def apply(y: jax.Array, p: dict[str, jax.Array], name: str, scale: float) -> jax.Array | None:
  """scale * (y A) B for y [N, *in] with p's per-layer factors of `name`, as [N, *out]; None
  when `name` has no adapter."""
  a, b = p.get(name + "_lora_a"), p.get(name + "_lora_b")
  if a is None:
    return None
  r = a.shape[-1]
  n = y.shape[0]
  low = y.reshape(n, -1) @ a.reshape(-1, r)
  out = (low @ b.reshape(r, -1)) * jnp.asarray(scale, low.dtype)
  return out.reshape(n, *b.shape[1:]).astype(y.dtype)


def is_adapter(path: Sequence[Any]) -> bool:
  """Whether a parameter path (keys, or jax key entries) names a LoRA factor."""
  for entry in path:
    key = str(getattr(entry, "key", getattr(entry, "name", entry)))
    if key.endswith(SUFFIXES):
      return True
  return False


def adapter_labels(params: Any) -> Any:
  """The tree of `params` with "adapter" or "frozen" at each leaf (optax.multi_transform)."""
  return jax.tree_util.tree_map_with_path(
    lambda path, _: "adapter" if is_adapter(path) else "frozen", params
  )


def adapters_of(params: nnx.State) -> nnx.State:
  """The adapters' part of a parameter state (what a LoRA run checkpoints)."""
  return nnx.from_flat_state(
    [(path, v) for path, v in nnx.to_flat_state(params) if is_adapter(path)]
  )


def with_adapters(params: nnx.State, adapters: nnx.State) -> nnx.State:
  """`params` with its adapters replaced by those of `adapters` (same paths)."""
  new = {path: v for path, v in nnx.to_flat_state(adapters)}
  return nnx.from_flat_state([(path, new.get(path, v)) for path, v in nnx.to_flat_state(params)])


def attach(model: nnx.Module, lora: LoraConfig, seed: int) -> nnx.Module:
  """Adds fresh adapters (B = 0) to a loaded decoder, in place, placed like their base
  weight when the base is sharded; returns the model."""
  adapters = init_adapters(model.config, lora, nnx.Rngs(seed))
  for name, var in adapters.items():
    base = getattr(model.layers, name.rsplit("_lora_", 1)[0])[...]
    sharding = getattr(base, "sharding", None)
    if isinstance(sharding, jax.sharding.NamedSharding):
      from precisecoder.model.sharding import named_sharding  # pylint: disable=import-outside-toplevel

      var = nnx.Param(
        jax.device_put(
          var[...],
          named_sharding(var.get_metadata()["logical_axes"], var[...].shape, sharding.mesh),
        ),
        logical_axes=var.get_metadata()["logical_axes"],
      )
    setattr(model.layers, name, var)
  model.lora = lora
  return model


def merged(model: nnx.Module) -> nnx.Module:
  """The decoder made plain, in place: its adapters folded into W + scale A B (what export
  writes and generation and evaluation run). A model without adapters is returned as it is."""
  lora = getattr(model, "lora", None)
  if lora is None:
    return model
  layers = model.layers
  for name in lora.targets:
    a, b = getattr(layers, name + "_lora_a"), getattr(layers, name + "_lora_b")
    w = getattr(layers, name)
    w.set_value(
      (
        w[...].astype(jnp.float32) + delta(a[...], b[...], lora.scale, jnp.float32, stacked=True)
      ).astype(w[...].dtype)
    )
    delattr(layers, name + "_lora_a")
    delattr(layers, name + "_lora_b")
  model.lora = None
  return model
