"""How our parameters correspond to Hugging Face tensor names and layouts.

Hugging Face stores `nn.Linear` weights as [out, in]; we store [in, heads, head_dim] and the
like, stacked over layers. `to_ours` and `to_hf` are exact inverses, so import then export
round-trips bit for bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np

from precisecoder.model.config import ModelConfig


@dataclasses.dataclass(frozen=True)
class WeightSpec:
  path: tuple[str, ...]  # our parameter path in the NNX state
  hf_name: str  # with "{i}" for the layer index when `per_layer`
  per_layer: bool
  to_ours: Callable[[np.ndarray], np.ndarray]  # one HF tensor -> one (per-layer) slice of ours
  to_hf: Callable[[np.ndarray], np.ndarray]


def _same(x):
  return x


def _transpose(x):
  return np.ascontiguousarray(x.T)


def weight_specs(config: ModelConfig) -> Iterator[WeightSpec]:
  d, h, k, hd = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
  layer = "model.layers.{i}."

  def in_heads(n):  # [n*hd, d] <-> [d, n, hd]
    return (
      lambda x: np.ascontiguousarray(x.T).reshape(d, n, hd),
      lambda x: np.ascontiguousarray(x.reshape(d, n * hd).T),
    )

  yield WeightSpec(("embed",), "model.embed_tokens.weight", False, _same, _same)
  yield WeightSpec(("final_norm",), "model.norm.weight", False, _same, _same)
  if not config.tie_embeddings:
    yield WeightSpec(("lm_head",), "lm_head.weight", False, _transpose, _transpose)
  yield WeightSpec(("layers", "attn_norm"), layer + "input_layernorm.weight", True, _same, _same)
  yield WeightSpec(("layers", "q_proj"), layer + "self_attn.q_proj.weight", True, *in_heads(h))
  yield WeightSpec(("layers", "k_proj"), layer + "self_attn.k_proj.weight", True, *in_heads(k))
  yield WeightSpec(("layers", "v_proj"), layer + "self_attn.v_proj.weight", True, *in_heads(k))
  yield WeightSpec(
    ("layers", "o_proj"),
    layer + "self_attn.o_proj.weight",
    True,
    lambda x: np.ascontiguousarray(x.T).reshape(h, hd, d),
    lambda x: np.ascontiguousarray(x.reshape(h * hd, d).T),
  )
  if config.qk_norm:
    yield WeightSpec(("layers", "q_norm"), layer + "self_attn.q_norm.weight", True, _same, _same)
    yield WeightSpec(("layers", "k_norm"), layer + "self_attn.k_norm.weight", True, _same, _same)
  yield WeightSpec(
    ("layers", "mlp_norm"), layer + "post_attention_layernorm.weight", True, _same, _same
  )
  for name in ("gate_proj", "up_proj", "down_proj"):
    yield WeightSpec(("layers", name), layer + f"mlp.{name}.weight", True, _transpose, _transpose)
