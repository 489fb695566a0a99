"""Causal grouped-query attention in three implementations, one per kind of machine.

  * `dense`: scores [B, K, G, T, S] in float32, softmax, weighted sum. Exact and simple, but the
    score tensor is quadratic in the sequence: 4 x 5120 tokens x 32 heads is 13 GiB per layer.
    Decode steps (T = 1) always use it.
  * `chunked`: flash-style, in pure JAX so it runs on every backend. Queries and keys are cut
    into blocks; an online softmax keeps a running max and normaliser per query row, so no
    more than one [block_q, block_k] tile of scores per head exists at a time. Blocks wholly
    above the causal diagonal are skipped. The gradient is a custom VJP that recomputes the
    tiles from the saved log-sum-exp (FlashAttention-2's backward), so the backward pass stores
    nothing quadratic either.
  * `cudnn`: `jax.nn.dot_product_attention(implementation="cudnn")`, cuDNN's fused flash
    kernel (GPU, bfloat16/float16, head_dim a multiple of 8 up to 128). cuDNN's masks are causal
    plus right padding only, so `Decoder` rolls each row's leading padding to its end first
    (`contiguous_rows`): this requires every row's real tokens to be one contiguous run (left
    and/or right padding, never holes), which is how the trainers build their batches.

`auto` picks cudnn on a GPU where cuDNN supports the shapes and chunked everywhere else. TPUs
also run `chunked`: Pallas' splash kernel would be faster there but needs a shard_map around
the sharded call and per-shape block tuning that cannot be tested without a TPU (README says so).

Masking convention, shared by all three: a query at slot q attends to key slot s iff
`s <= q_pos[q]` and `k_valid[b, s]`. A query with no visible key (padding) gets some finite
average of values; its output is never used, so only real rows are compared across
implementations.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from precisecoder.model.config import ATTENTION as IMPLEMENTATIONS
from precisecoder.intmath import cdiv, round_up

NEG_INF = -1e30  # finite, so fully masked rows give finite outputs, not NaN (-2e30 is fine too)


def cudnn_supported(dtype, head_dim: int) -> bool:
  return jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and head_dim % 8 == 0 and head_dim <= 128


def resolve(name: str, dtype, head_dim: int) -> str:
  """The implementation `name` ("auto" -> the best one for the default backend)."""
  if name not in IMPLEMENTATIONS:
    raise ValueError(f"attention implementation {name!r}; known: {IMPLEMENTATIONS}")
  if name != "auto":
    return name
  if jax.default_backend() == "gpu" and cudnn_supported(dtype, head_dim):
    return "cudnn"
  return "chunked"


def dense(q, k, v, mask):
  """q [B,T,H,D], k/v [B,K,S,D] (heads before positions), mask [B,T,S] -> [B,T,H,D].

  With heads ahead of positions both einsums are plain batched matmuls over (B, K): no
  transposed copy of a long KV cache at every decode step. Softmax runs in float32.
  """
  b, t, h, d = q.shape
  kv = k.shape[1]
  q = q.reshape(b, t, kv, h // kv, d).transpose(0, 2, 3, 1, 4)  # [B, K, G, T, D]
  if t == 1 and jax.default_backend() == "cpu":
    # A decode step's scores are matrix-vector products; as a dot, XLA's CPU backend
    # transposes the whole key cache at every step.
    # An elementwise product and sum reads the cache where it is.
    scores = jnp.sum(
      q[:, :, :, :, None, :].astype(jnp.float32) * k[:, :, None, None, :, :].astype(jnp.float32),
      axis=-1,
    )
  else:
    scores = jnp.einsum("bkgtd,bksd->bkgts", q, k, preferred_element_type=jnp.float32)
  scores = scores * (d**-0.5)
  scores = jnp.where(mask[:, None, None, :, :], scores, NEG_INF)
  weights = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  out = jnp.einsum("bkgts,bksd->bkgtd", weights, v)  # [B, K, G, T, D]
  return out.transpose(0, 3, 1, 2, 4).reshape(b, t, h, d)


def cudnn_causal(q, k, v):
  """q [B,T,H,D], k/v [B,T,K,D] -> [B,T,H,D]; plain causal (rows already left-aligned)."""
  return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")


def contiguous_rows(attention_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(gather, scatter) index arrays [B, T] that move each row's leading padding to its end.

  `take_along_axis(x, gather)` left-aligns a row whose real tokens are one contiguous run;
  `take_along_axis(y, scatter)` puts results back in the original slots.
  """
  t = attention_mask.shape[1]
  lead = jnp.argmax(attention_mask, axis=1).astype(jnp.int32)  # first real token (0 if none)
  slots = jnp.arange(t, dtype=jnp.int32)[None, :]
  return (slots + lead[:, None]) % t, (slots - lead[:, None]) % t


def chunked(q, k, v, q_pos, k_valid, *, block_q: int = 512, block_k: int = 512):
  """Flash-style attention. q [B,T,H,D]; k/v [B,K,S,D]; q_pos int [T]; k_valid bool [B,S].

  Returns [B,T,H,D]. Peak extra memory per call is a few [B, K, G, block_q, block_k] float32
  tiles, independent of T and S; the blocks used are `balanced_block`s, never larger.
  """
  b, t, h, d = q.shape
  kv, s = k.shape[1], k.shape[2]
  bq, bk = balanced_block(t, block_q), balanced_block(s, block_k)
  tp, sp = round_up(t, bq), round_up(s, bk)
  qh = q.reshape(b, t, kv, h // kv, d).transpose(0, 2, 3, 1, 4)  # [B, K, G, T, D]
  qh = jnp.pad(qh, ((0, 0),) * 3 + ((0, tp - t), (0, 0)))
  q_pos = jnp.pad(q_pos.astype(jnp.int32), (0, tp - t), constant_values=-1)  # pads see nothing
  k = jnp.pad(k, ((0, 0), (0, 0), (0, sp - s), (0, 0)))
  v = jnp.pad(v, ((0, 0), (0, 0), (0, sp - s), (0, 0)))
  k_valid = jnp.pad(k_valid.astype(bool), ((0, 0), (0, sp - s)))
  out = _flash(qh, k, v, q_pos, k_valid, bq, bk)
  return out[:, :, :, :t].transpose(0, 3, 1, 2, 4).reshape(b, t, h, d)


def balanced_block(length: int, block: int, align: int = 8) -> int:
  """The block size, at most `block`, that covers `length` in as few blocks as `block` does,
  with the least padding (blocks rounded up to a multiple of `align`).

  A sequence just past a multiple of the block (a 1024-token prompt bucket plus 4 new tokens)
  would otherwise pad to a whole extra block: 1028 tokens in blocks of 512 are three of 512
  (1536 slots, 2.2x the causal tiles' work); balanced, three of 344 (1032 slots).
  """
  if length <= block:
    return length
  count = cdiv(length, block)  # as many blocks as `block` makes
  size = cdiv(length, count)  # the fewest slots per block that cover `length`
  return min(block, round_up(size, align))


def _tile_scores(qi, kj, pos_i, valid_j, first_slot):
  """Masked, scaled float32 scores [B, K, G, bq, bk] of one (query, key) tile.

  The mask is added as two small biases, [bq, bk] causal and [B, bk] padding, never as a
  tile-sized array: inside a differentiated layer scan, JAX's partial evaluation stacks
  anything that depends only on constants (a full-tile mask would be stacked per tile pair).
  """
  scores = jnp.einsum("bkgtd,bksd->bkgts", qi, kj, preferred_element_type=jnp.float32)
  slots = first_slot + jnp.arange(kj.shape[2])
  causal = jnp.where(slots[None, :] <= pos_i[:, None], 0.0, NEG_INF)  # [bq, bk]
  padding = jnp.where(valid_j, 0.0, NEG_INF)[:, None, None, None, :]  # [B, 1, 1, 1, bk]
  return scores * (qi.shape[-1] ** -0.5) + causal + padding


def _slice(x, start, size, axis):
  return jax.lax.dynamic_slice_in_dim(x, start, size, axis=axis)


def _flash_forward(q, k, v, q_pos, k_valid, bq, bk):
  """(out [B,K,G,T,D], log-sum-exp [B,K,G,T]) with T, S multiples of the block sizes."""
  b, kv, g, tp, d = q.shape
  nk = k.shape[2] // bk

  def query_block(i):
    qi, pos_i = _slice(q, i * bq, bq, 3), _slice(q_pos, i * bq, bq, 0)
    last = jnp.max(pos_i)

    def key_block(j, carry):

      def visit(carry):
        m, l, acc = carry
        kj, vj = _slice(k, j * bk, bk, 2), _slice(v, j * bk, bk, 2)
        scores = _tile_scores(qi, kj, pos_i, _slice(k_valid, j * bk, bk, 1), j * bk)
        m_new = jnp.maximum(m, jnp.max(scores, axis=-1))
        p = jnp.exp(scores - m_new[..., None])
        correction = jnp.exp(m - m_new)
        l = l * correction + jnp.sum(p, axis=-1)
        pv = jnp.einsum(
          "bkgts,bksd->bkgtd", p.astype(v.dtype), vj, preferred_element_type=jnp.float32
        )
        return m_new, l, acc * correction[..., None] + pv

      # Tiles wholly above the causal diagonal contribute nothing: skip them.
      return jax.lax.cond(j * bk <= last, visit, lambda c: c, carry)

    init = (
      jnp.full((b, kv, g, bq), NEG_INF, jnp.float32),
      jnp.zeros((b, kv, g, bq), jnp.float32),
      jnp.zeros((b, kv, g, bq, d), jnp.float32),
    )
    m, l, acc = jax.lax.fori_loop(0, nk, key_block, init)
    l = jnp.where(l == 0, 1.0, l)  # a padding block that visited no key at all
    return (acc / l[..., None]).astype(q.dtype), m + jnp.log(l)

  out, lse = jax.lax.map(query_block, jnp.arange(tp // bq))  # [nq, B, K, G, bq, ...]
  out = jnp.moveaxis(out, 0, 3).reshape(b, kv, g, tp, d)
  lse = jnp.moveaxis(lse, 0, 3).reshape(b, kv, g, tp)
  return out, lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _flash(q, k, v, q_pos, k_valid, bq, bk):
  return _flash_forward(q, k, v, q_pos, k_valid, bq, bk)[0]


def _flash_fwd(q, k, v, q_pos, k_valid, bq, bk):
  out, lse = _flash_forward(q, k, v, q_pos, k_valid, bq, bk)
  return out, (q, k, v, q_pos, k_valid, out, lse)


def _flash_bwd(bq, bk, residuals, d_out):
  """FlashAttention-2's backward: one pass over key blocks, recomputing each tile."""
  q, k, v, q_pos, k_valid, out, lse = residuals
  b, kv, g, tp, d = q.shape
  nq, nk = tp // bq, k.shape[2] // bk
  delta = jnp.sum(d_out.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # [B,K,G,T]
  last = jnp.max(q_pos.reshape(nq, bq), axis=1)  # furthest key slot each query block sees

  def key_block(dq, j):
    kj, vj = _slice(k, j * bk, bk, 2), _slice(v, j * bk, bk, 2)
    valid_j = _slice(k_valid, j * bk, bk, 1)

    def query_block(i, carry):

      def visit(carry):
        dq, dk, dv = carry
        qi, doi = _slice(q, i * bq, bq, 3), _slice(d_out, i * bq, bq, 3)
        scores = _tile_scores(qi, kj, _slice(q_pos, i * bq, bq, 0), valid_j, j * bk)
        p = jnp.exp(scores - _slice(lse, i * bq, bq, 3)[..., None])
        dv = dv + jnp.einsum(
          "bkgts,bkgtd->bksd", p.astype(doi.dtype), doi, preferred_element_type=jnp.float32
        )
        dp = jnp.einsum("bkgtd,bksd->bkgts", doi, vj, preferred_element_type=jnp.float32)
        ds = p * (dp - _slice(delta, i * bq, bq, 3)[..., None]) * (d**-0.5)
        dq_i = jnp.einsum(
          "bkgts,bksd->bkgtd", ds.astype(kj.dtype), kj, preferred_element_type=jnp.float32
        )
        dq = jax.lax.dynamic_update_slice_in_dim(
          dq, _slice(dq, i * bq, bq, 3) + dq_i, i * bq, axis=3
        )
        dk = dk + jnp.einsum(
          "bkgts,bkgtd->bksd", ds.astype(qi.dtype), qi, preferred_element_type=jnp.float32
        )
        return dq, dk, dv

      return jax.lax.cond(last[i] >= j * bk, visit, lambda c: c, carry)

    zeros = jnp.zeros((b, kv, bk, d), jnp.float32)
    dq, dk, dv = jax.lax.fori_loop(0, nq, query_block, (dq, zeros, zeros))
    return dq, (dk, dv)

  dq, (dk, dv) = jax.lax.scan(key_block, jnp.zeros(q.shape, jnp.float32), jnp.arange(nk))
  dk = jnp.moveaxis(dk, 0, 2).reshape(k.shape)
  dv = jnp.moveaxis(dv, 0, 2).reshape(v.shape)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None, None


_flash.defvjp(_flash_fwd, _flash_bwd)
