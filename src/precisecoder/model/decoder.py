"""The decoder: one Flax NNX module for Qwen3 and Llama checkpoints.

Layer weights are stacked along a leading `layers` axis and the forward scans over them, so a
30-layer model compiles as fast as a 1-layer one. Attention is grouped-query with rotary
position embeddings (non-interleaved halves, as in Hugging Face), SwiGLU MLPs and RMSNorm;
Qwen3 adds an RMSNorm over each query and key head.

Two entry points share the layer code:
  * `model(tokens, attention_mask)`: full-sequence logits for training (left or right padding);
    `hidden_states` is the same without the vocabulary projection, for losses that project in
    chunks (`train.losses.chunked_token_logprobs`);
  * `model.forward_cached(tokens, positions, cache, index)`: prefill and one-token decode
    against a fixed-size KV cache for sampling.

With LoRA (`Decoder(config, lora=...)`, model/lora.py) the adapted projections add their
low-rank term, every base weight is read through `stop_gradient` (only the adapters train),
and `layer_params()` hands the sampler weights with the adapters merged in.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precisecoder.model import attention
from precisecoder.model import lora as lora_lib
from precisecoder.model.config import ModelConfig
from precisecoder.model.sharding import constrain
from precisecoder.intmath import cdiv

# ModelConfig.remat -> what jax.checkpoint saves of each layer (None: no checkpointing).
REMAT_POLICIES = {
  "none": None,
  "full": jax.checkpoint_policies.nothing_saveable,
  "dots_saveable": jax.checkpoint_policies.dots_saveable,
  "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
  # Weight-matmul outputs go to host memory and come back for the backward (GPU/TPU only).
  "offload_dots": jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host"),
}


def _param(rngs: nnx.Rngs | None, shape, dtype, axes, *, ones: bool = False, std: float = 0.02):
  if ones:
    value = jnp.ones(shape, dtype)
  else:
    value = (std * jax.random.normal(rngs.params(), shape, jnp.float32)).astype(dtype)
  return nnx.Param(value, logical_axes=axes)


def rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
  x32 = x.astype(jnp.float32)
  x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (x32 * scale.astype(jnp.float32)).astype(x.dtype)


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
  """Rotary embedding of x [B, T, H, D] at integer positions [B, T] (rotate-half layout)."""
  half = x.shape[-1] // 2
  freqs = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
  angles = positions.astype(jnp.float32)[..., None] * freqs  # [B, T, half]
  cos, sin = jnp.cos(angles)[:, :, None, :], jnp.sin(angles)[:, :, None, :]
  x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
  out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return out.astype(x.dtype)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
  """Keys and values per layer at a fixed length S, and which slots hold real tokens.

  One array per layer (not one stacked array) so that each decode step updates and reads a
  layer's cache in place, with no per-step copies.
  """

  k: tuple[jax.Array, ...]  # L x [B, K, S, D]
  v: tuple[jax.Array, ...]  # L x [B, K, S, D]
  valid: jax.Array  # [B, S] bool

  @classmethod
  def zeros(cls, config: ModelConfig, batch: int, length: int) -> KVCache:
    shape = (batch, config.num_kv_heads, length, config.head_dim)
    dtype = jnp.dtype(config.dtype)
    layers = range(config.num_layers)
    return cls(
      k=tuple(jnp.zeros(shape, dtype) for _ in layers),
      v=tuple(jnp.zeros(shape, dtype) for _ in layers),
      valid=jnp.zeros((batch, length), bool),
    )


CACHE_AXES = ("batch", "kv_heads", "cache_seq", "head_dim")


class DecoderLayers(nnx.Module):
  """All transformer blocks, with weights stacked on a leading `layers` axis."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    c = config
    l, d, h, k, hd, f = (
      c.num_layers,
      c.hidden_size,
      c.num_heads,
      c.num_kv_heads,
      c.head_dim,
      c.intermediate_size,
    )
    dt = jnp.dtype(c.dtype)
    self.attn_norm = _param(rngs, (l, d), dt, ("layers", "norm"), ones=True)
    self.q_proj = _param(rngs, (l, d, h, hd), dt, ("layers", "embed", "q_heads", "head_dim"))
    self.k_proj = _param(rngs, (l, d, k, hd), dt, ("layers", "embed", "kv_heads", "head_dim"))
    self.v_proj = _param(rngs, (l, d, k, hd), dt, ("layers", "embed", "kv_heads", "head_dim"))
    self.o_proj = _param(rngs, (l, h, hd, d), dt, ("layers", "q_heads", "head_dim", "embed"))
    if c.qk_norm:
      self.q_norm = _param(rngs, (l, hd), dt, ("layers", "head_dim"), ones=True)
      self.k_norm = _param(rngs, (l, hd), dt, ("layers", "head_dim"), ones=True)
    self.mlp_norm = _param(rngs, (l, d), dt, ("layers", "norm"), ones=True)
    self.gate_proj = _param(rngs, (l, d, f), dt, ("layers", "embed", "mlp"))
    self.up_proj = _param(rngs, (l, d, f), dt, ("layers", "embed", "mlp"))
    self.down_proj = _param(rngs, (l, f, d), dt, ("layers", "mlp", "embed"))

  def stacked(self, frozen: bool = False) -> dict[str, jax.Array]:
    """Every stacked weight by name (LoRA factors included); `frozen`: the base weights
    through stop_gradient (a LoRA model trains its adapters only)."""
    names = [
      "attn_norm",
      "q_proj",
      "k_proj",
      "v_proj",
      "o_proj",
      "mlp_norm",
      "gate_proj",
      "up_proj",
      "down_proj",
    ]
    if hasattr(self, "q_norm"):
      names += ["q_norm", "k_norm"]
    out = {n: _frozen(getattr(self, n)[...], frozen) for n in names}
    for name in list(vars(self)):
      if name.endswith(lora_lib.SUFFIXES):
        out[name] = getattr(self, name)[...]
    return out


def _frozen(x: jax.Array, frozen: bool) -> jax.Array:
  return jax.lax.stop_gradient(x) if frozen else x


def _block(config: ModelConfig, x, p, positions, attend, lora_scale: float = 0.0):
  """One transformer block. `attend(q, k, v) -> out` hides training vs cached attention.
  LoRA factors in `p` (`<proj>_lora_a/b`) add their term, times `lora_scale`."""
  eps = config.rms_norm_eps
  y = rms_norm(x, p["attn_norm"], eps)
  q, k, v = (
    _with_lora(_heads_projection(y, p[name]), y, p, name, lora_scale)
    for name in ("q_proj", "k_proj", "v_proj")
  )
  if config.qk_norm:
    q, k = rms_norm(q, p["q_norm"], eps), rms_norm(k, p["k_norm"], eps)
  q = constrain(rope(q, positions, config.rope_theta), ("batch", "seq", "q_heads", "head_dim"))
  k = constrain(rope(k, positions, config.rope_theta), ("batch", "seq", "kv_heads", "head_dim"))
  v = constrain(v, ("batch", "seq", "kv_heads", "head_dim"))
  attn, extra = attend(q, k, v)
  x = x + _with_lora(jnp.einsum("bthk,hkd->btd", attn, p["o_proj"]), attn, p, "o_proj", lora_scale)
  x = constrain(x, ("batch", "seq", "act_embed"))
  x = x + _mlp(config, rms_norm(x, p["mlp_norm"], eps), p, lora_scale)
  return constrain(x, ("batch", "seq", "act_embed")), extra


def _with_lora(out, y, p, name, scale):
  """out (y's projection by `name`, [B, T, *out]) plus the adapter's term when `p` has one."""
  b, t = y.shape[:2]
  extra = lora_lib.apply(y.reshape(b * t, *y.shape[2:]), p, name, scale)
  return out if extra is None else out + extra.reshape(out.shape)


def _heads_projection(y, w):
  """y [B, T, D] @ w [D, H, K] -> [B, T, H, K] as one [D, H*K] matmul: its weight gradient
  then comes out in the weight's own layout (as a per-head einsum, a TPU computes it head-major
  and copies every layer's stack back: 1 GiB for Qwen3-4B's q/k/v at the end of the backward)."""
  d, h, k = w.shape
  return jnp.einsum("btd,dn->btn", y, w.reshape(d, h * k)).reshape(*y.shape[:2], h, k)


def _mlp(config: ModelConfig, y, p, lora_scale: float = 0.0):
  """SwiGLU on y [B, T, D]. Past `config.mlp_chunk` tokens it runs over chunks of the
  sequence, each rematerialised, so no [B, T, F] intermediate (forward or backward) exists."""

  def swiglu(y):
    # As [B*T, D] matrices: with [B, T, D] einsums XLA's CPU backend transposes the [B, T, F]
    # activations for the weight gradients, slowing the MLP's backward pass.
    b, t, d = y.shape
    x = y.reshape(b * t, d)
    gate, up = (_flat_with_lora(x @ p[n], x, p, n, lora_scale) for n in ("gate_proj", "up_proj"))
    hidden = constrain((jax.nn.silu(gate) * up).reshape(b, t, -1), ("batch", "seq", "mlp"))
    hidden = hidden.reshape(b * t, -1)
    down = _flat_with_lora(hidden @ p["down_proj"], hidden, p, "down_proj", lora_scale)
    return down.reshape(b, t, d)

  b, t, d = y.shape
  c = max(1, config.mlp_chunk // b)
  if not config.mlp_chunk or c >= t:
    return swiglu(y)
  n = cdiv(t, c)
  chunks = jnp.pad(y, ((0, 0), (0, n * c - t), (0, 0))).reshape(b, n, c, d).swapaxes(0, 1)
  out = jax.lax.map(jax.checkpoint(swiglu, prevent_cse=False), chunks)
  return out.swapaxes(0, 1).reshape(b, n * c, d)[:, :t]


def _flat_with_lora(out, x, p, name, scale):
  extra = lora_lib.apply(x, p, name, scale)
  return out if extra is None else out + extra


def _heads_first(x):
  return x.transpose(0, 2, 1, 3)  # [B, T, K, D] -> [B, K, T, D]


def positions_from_mask(attention_mask: jax.Array) -> jax.Array:
  """Position of each token = number of real tokens before it (0 on padding)."""
  return jnp.maximum(jnp.cumsum(attention_mask.astype(jnp.int32), axis=-1) - 1, 0)


class Decoder(nnx.Module):
  """Causal language model: tokens -> next-token logits."""

  def __init__(
    self, config: ModelConfig, *, rngs: nnx.Rngs, lora: lora_lib.LoraConfig | None = None
  ):
    self.config = config
    self.lora = lora  # adapters on the projections (model/lora.py); None: none
    dt = jnp.dtype(config.dtype)
    v, d = config.vocab_size, config.hidden_size
    self.embed = _param(rngs, (v, d), dt, ("vocab", "embed"))
    self.layers = DecoderLayers(config, rngs=rngs)
    self.final_norm = _param(rngs, (d,), dt, ("norm",), ones=True)
    if not config.tie_embeddings:
      self.lm_head = _param(rngs, (d, v), dt, ("embed", "vocab"))
    if lora is not None:  # drawn last: the base weights are those of the same seed without
      for name, var in lora_lib.init_adapters(config, lora, rngs).items():
        setattr(self.layers, name, var)

  @property
  def _lora_scale(self) -> float:
    return self.lora.scale if self.lora is not None else 0.0

  def _base(self, x: jax.Array) -> jax.Array:
    """A base weight as the forward reads it: frozen (stop_gradient) under LoRA."""
    return _frozen(x, self.lora is not None)

  def _embed(self, tokens):
    # Gather from an explicitly all-gathered table: XLA cannot gather from a vocab- and
    # embed-sharded table into batch-sharded activations without a full rematerialisation.
    table = constrain(self._base(self.embed[...]), (None, None))
    x = jnp.take(table, tokens, axis=0)
    return constrain(x, ("batch", "seq", "act_embed"))

  def output_projection(self) -> tuple[jax.Array, str]:
    """(weight, axes) of the vocabulary projection: the embedding [V, D] ("vd") when tied."""
    if self.config.tie_embeddings:
      return self._base(self.embed[...]), "vd"
    return self._base(self.lm_head[...]), "dv"

  def logits(self, x: jax.Array) -> jax.Array:
    """float32 logits [B, T, V] of final hidden states x [B, T, D]."""
    weight, axes = self.output_projection()
    spec = "btd,vd->btv" if axes == "vd" else "btd,dv->btv"
    logits = jnp.einsum(spec, x, weight, preferred_element_type=jnp.float32)
    return constrain(logits.astype(jnp.float32), ("batch", "seq", "vocab"))

  def __call__(self, tokens: jax.Array, attention_mask: jax.Array | None = None) -> jax.Array:
    """Logits float32[B, T, V] for int32[B, T] tokens; mask bool[B, T] marks real tokens."""
    return self.logits(self.hidden_states(tokens, attention_mask))

  def hidden_states(self, tokens: jax.Array, attention_mask: jax.Array | None = None) -> jax.Array:
    """Final-normed hidden states [B, T, D]; padding may be on either side (see attention.py)."""
    config = self.config
    if attention_mask is None:
      attention_mask = jnp.ones(tokens.shape, bool)
    attention_mask = attention_mask.astype(bool)
    impl = attention.resolve(config.attention, config.dtype, config.head_dim)
    if impl == "cudnn":  # cuDNN masks causal + right padding only: left-align every row
      gather, scatter = attention.contiguous_rows(attention_mask)
      tokens = jnp.take_along_axis(tokens, gather, axis=1)
      attention_mask = jnp.take_along_axis(attention_mask, gather, axis=1)
    positions = positions_from_mask(attention_mask)
    t = tokens.shape[1]

    if impl == "dense":
      mask = jnp.tril(jnp.ones((t, t), bool))[None] & attention_mask[:, None, :]
      attend = lambda q, k, v: attention.dense(q, _heads_first(k), _heads_first(v), mask)
    elif impl == "chunked":
      block = config.attention_block
      attend = lambda q, k, v: attention.chunked(
        q,
        _heads_first(k),
        _heads_first(v),
        jnp.arange(t),
        attention_mask,
        block_q=block,
        block_k=block,
      )
    else:
      attend = attention.cudnn_causal

    scale = self._lora_scale

    def body(x, p):
      return _block(config, x, p, positions, lambda q, k, v: (attend(q, k, v), None), scale)[
        0
      ], None

    policy = REMAT_POLICIES[config.remat]
    if policy is not None:
      body = jax.checkpoint(body, policy=policy, prevent_cse=False)
    x, _ = jax.lax.scan(body, self._embed(tokens), self.layers.stacked(self.lora is not None))
    x = rms_norm(x, self._base(self.final_norm[...]), config.rms_norm_eps)
    if impl == "cudnn":
      x = jnp.take_along_axis(x, scatter[..., None], axis=1)
    return x

  def layer_params(self, merge: bool = True) -> list[dict[str, jax.Array]]:
    """Each layer's weights as separate arrays (sliced once, e.g. before a decode loop).

    With LoRA and `merge` (the sampler), each adapted weight is W + scale A B, computed once
    here: decoding then costs what the base's does. `merge=False` keeps the factors apart
    (training through `shared_prefix_hidden`: gradients reach the adapters without a
    weight-sized temporary per layer)."""
    stacked = self.layers.stacked(self.lora is not None)
    layers = [{n: w[i] for n, w in stacked.items()} for i in range(self.config.num_layers)]
    if self.lora is None or not merge:
      return layers
    for p in layers:
      for name in self.lora.targets:
        a, b = p.pop(name + "_lora_a"), p.pop(name + "_lora_b")
        p[name] = (
          p[name].astype(jnp.float32)
          + lora_lib.delta(a, b, self.lora.scale, jnp.float32, stacked=False)
        ).astype(p[name].dtype)
    return layers

  def forward_cached(
    self,
    tokens: jax.Array,
    positions: jax.Array,
    token_valid: jax.Array,
    cache: KVCache,
    index: jax.Array,
    layer_params: list[dict[str, jax.Array]] | None = None,
    window: int | None = None,
    last_logits_only: bool = False,
    hidden_only: bool = False,
  ) -> tuple[jax.Array, KVCache]:
    """Runs tokens [B, T] written at cache slots index..index+T-1; returns (logits, cache).

    Each query attends to every valid cache slot up to its own; `token_valid` [B, T] marks
    which new tokens are real (left padding in a prefill is not). Only the first `window`
    slots are read (default: all), so callers that know how far the cache is filled (a
    prefill, an early decode step) skip the empty tail. Layers are unrolled: on CPU a scan
    would copy every layer's weights and cache out of the stacks at each step. Pass
    `layer_params` (from `layer_params()`, computed outside a decode loop) to slice the
    stacked weights once instead of once per step. A prefill that only samples from its last
    position sets `last_logits_only` and skips the vocabulary projection elsewhere.
    """
    config = self.config
    t = tokens.shape[1]
    window = cache.valid.shape[1] if window is None else window
    valid = jax.lax.dynamic_update_slice(cache.valid, token_valid, (0, index))
    slots = jnp.arange(window)
    mask = valid[:, None, :window] & (slots[None, None, :] <= index + jnp.arange(t)[None, :, None])
    # A prefill's [B, H, T, S] scores are as large as training's: on the chunked backends
    # (CPU, TPU) it runs chunked. Decode steps (T = 1) and GPU prefills stay dense.
    chunked_prefill = (
      t > 1 and attention.resolve(config.attention, config.dtype, config.head_dim) == "chunked"
    )
    layer_params = self.layer_params() if layer_params is None else layer_params
    x = self._embed(tokens)
    new_k, new_v = [], []
    for p, k_cache, v_cache in zip(layer_params, cache.k, cache.v):

      def attend(q, k, v, k_cache=k_cache, v_cache=v_cache):
        k = k.transpose(0, 2, 1, 3).astype(k_cache.dtype)  # [B, K, T, D]
        v = v.transpose(0, 2, 1, 3).astype(v_cache.dtype)
        k_cache = jax.lax.dynamic_update_slice(k_cache, k, (0, 0, index, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v, (0, 0, index, 0))
        k_seen, v_seen = k_cache[:, :, :window], v_cache[:, :, :window]
        if chunked_prefill:
          out = attention.chunked(
            q,
            k_seen,
            v_seen,
            index + jnp.arange(t),
            valid[:, :window],
            block_q=config.attention_block,
            block_k=config.attention_block,
          )
        else:
          out = attention.dense(q, k_seen, v_seen, mask)
        return out, (k_cache, v_cache)

      x, (k_cache, v_cache) = _block(config, x, p, positions, attend, self._lora_scale)
      new_k.append(k_cache)
      new_v.append(v_cache)
    if last_logits_only:
      x = x[:, -1:]
    x = rms_norm(x, self._base(self.final_norm[...]), config.rms_norm_eps)
    cache = KVCache(k=tuple(new_k), v=tuple(new_v), valid=valid)
    return (x if hidden_only else self.logits(x)), cache

  def shared_prefix_hidden(
    self,
    prefix: jax.Array,
    prefix_mask: jax.Array,
    suffix: jax.Array,
    suffix_mask: jax.Array,
    *,
    with_prefix: bool = False,
  ) -> jax.Array | tuple[jax.Array, jax.Array]:
    """The final-normed hidden states that predict each suffix token, [B, T, D], for rows
    whose prefixes come in groups: row r continues prefix r // (B // N).

    prefix [N, P] (left-padded) runs once per group and its keys and values are repeated for
    the group's rows; suffix [B, T] (right-padded) attends to them. Equal to
    `hidden_states(concat(prefix, suffix))[:, P - 1:-1]` with each prefix repeated (a test),
    in less work when groups are large: the G samples of an RL group share one prompt, so
    their prompt is computed once instead of G times, forward and backward. `with_prefix`:
    also the prefix's own final-normed hidden states [N, P, D] (a loss on the prompt's tokens),
    returned first.
    """
    n, p = prefix.shape
    b, t = suffix.shape
    repeats = b // n
    cache = KVCache.zeros(self.config, n, p + t)
    layer_params = self.layer_params(merge=False)
    x, cache = self.forward_cached(
      prefix,
      positions_from_mask(prefix_mask),
      prefix_mask,
      cache,
      jnp.int32(0),
      layer_params,
      window=p,
      hidden_only=True,
    )

    def repeat(a):
      return jnp.repeat(a, repeats, axis=0, total_repeat_length=b)

    cache = KVCache(
      k=tuple(map(repeat, cache.k)), v=tuple(map(repeat, cache.v)), valid=repeat(cache.valid)
    )
    mask = jnp.concatenate([repeat(prefix_mask), suffix_mask], axis=1)
    positions = positions_from_mask(mask)[:, p:]
    y, _ = self.forward_cached(
      suffix, positions, suffix_mask, cache, jnp.int32(p), layer_params, hidden_only=True
    )
    hidden = jnp.concatenate([repeat(x[:, -1:]), y[:, :-1]], axis=1)
    return (x, hidden) if with_prefix else hidden


def param_count(model: nnx.Module) -> int:
  return sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


def abstract_decoder(
  config: ModelConfig, lora: lora_lib.LoraConfig | None = None
) -> tuple[Any, nnx.State]:
  """(graphdef, abstract state) without allocating weights; loaders fill in the values."""
  return nnx.split(nnx.eval_shape(lambda: Decoder(config, rngs=nnx.Rngs(0), lora=lora)))
