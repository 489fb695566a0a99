"""Chunked (flash-style) attention against the dense [B, H, T, S] computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, KVCache, architectures, attention
from precisecoder.model.config import REMAT
from precisecoder.intmath import cdiv

B, T, H, KV, D = 3, 37, 4, 2, 16  # T is not a multiple of the blocks: ragged last tiles


def _padding_mask():
  mask = np.ones((B, T), bool)
  mask[0, :9] = False  # left padding (a prompt)
  mask[1, 29:] = False  # right padding (a short completion)
  mask[2, :4] = mask[2, 33:] = False  # both, as in a training row
  return jnp.asarray(mask)


def _inputs(seed=0):
  ks = jax.random.split(jax.random.key(seed), 4)
  q = jax.random.normal(ks[0], (B, T, H, D))
  k = jax.random.normal(ks[1], (B, KV, T, D))
  v = jax.random.normal(ks[2], (B, KV, T, D))
  # The cotangent of padded query rows is zero, as in training (their outputs are never used).
  weights = jax.random.normal(ks[3], (B, T, H, D)) * _padding_mask()[:, :, None, None]
  return q, k, v, weights


# (30, 16): T = 37 is two balanced query blocks of 24, not two of 30, and three key blocks of 16.
@pytest.mark.parametrize("block_q,block_k", [(8, 16), (30, 16), (64, 64)])
def test_chunked_equals_dense_values_and_gradients(block_q, block_k):
  q, k, v, weights = _inputs()
  key_mask = _padding_mask()
  dense_mask = jnp.tril(jnp.ones((T, T), bool))[None] & key_mask[:, None, :]

  def dense(q, k, v):
    return jnp.sum(attention.dense(q, k, v, dense_mask) * weights)

  def chunked(q, k, v):
    out = attention.chunked(q, k, v, jnp.arange(T), key_mask, block_q=block_q, block_k=block_k)
    return jnp.sum(out * weights)

  real = np.asarray(key_mask)[:, :, None, None]
  want = attention.dense(q, k, v, dense_mask)
  got = jax.jit(
    lambda q, k, v: attention.chunked(
      q, k, v, jnp.arange(T), key_mask, block_q=block_q, block_k=block_k
    )
  )(q, k, v)
  np.testing.assert_allclose(np.where(real, got, 0), np.where(real, want, 0), atol=1e-5)
  grads_want = jax.grad(dense, argnums=(0, 1, 2))(q, k, v)
  grads_got = jax.jit(jax.grad(chunked, argnums=(0, 1, 2)))(q, k, v)
  for name, g_got, g_want in zip("qkv", grads_got, grads_want):
    np.testing.assert_allclose(g_got, g_want, atol=2e-5, err_msg=f"d{name}")


def test_balanced_blocks_are_no_larger_no_more_and_pad_least():
  for length in (1, 7, 37, 511, 512, 513, 1028, 2144, 4096):
    for block in (4, 16, 100, 512):
      size = attention.balanced_block(length, block)
      count = cdiv(length, size)
      # The memory bound, as many blocks as before, and each pads less than the alignment.
      assert size <= block and count == cdiv(length, block), (length, block, size)
      assert count * size - length < count * 8, (length, block, size)


def test_a_sequence_just_past_a_block_multiple_is_not_padded_by_a_block():
  assert attention.balanced_block(1028, 512) == 344  # 1032 slots, not 1536
  assert attention.balanced_block(1024, 512) == 512


def test_chunked_prefill_with_offset_queries_matches_dense():
  """Queries written at cache slots index..index+T-1 (a prefill after earlier tokens)."""
  q, k, v, _ = _inputs(1)
  t, index = 11, 20
  valid = _padding_mask()
  q = q[:, :t]
  q_pos = index + jnp.arange(t)
  mask = valid[:, None, :] & (jnp.arange(T)[None, None, :] <= q_pos[None, :, None])
  want = attention.dense(q, k, v, mask)
  got = attention.chunked(q, k, v, q_pos, valid, block_q=4, block_k=8)
  np.testing.assert_allclose(got, want, atol=1e-5)


def test_contiguous_rows_round_trip():
  mask = _padding_mask()
  gather, scatter = attention.contiguous_rows(mask)
  aligned = np.asarray(jnp.take_along_axis(mask, gather, axis=1))
  for row in aligned:  # real tokens first, then all padding
    n = row.sum()
    assert row[:n].all() and not row[n:].any()
  x = jnp.arange(B * T).reshape(B, T)
  back = jnp.take_along_axis(jnp.take_along_axis(x, gather, axis=1), scatter, axis=1)
  np.testing.assert_array_equal(back, x)


def test_resolve_picks_chunked_on_cpu_and_rejects_unknown_names():
  assert attention.resolve("auto", "bfloat16", 128) == "chunked"  # tests run on CPU
  assert attention.resolve("dense", "float32", 32) == "dense"
  with pytest.raises(ValueError, match="attention implementation"):
    attention.resolve("flash", "float32", 32)


def _decoder(**execution):
  return Decoder(architectures.get("tiny", num_layers=2, **execution), rngs=nnx.Rngs(0))


def _gradients(model, loss):
  graphdef, params = nnx.split(model)
  return nnx.to_flat_state(jax.jit(jax.grad(lambda p: loss(nnx.merge(graphdef, p))))(params))


def _assert_same(want, got, atol):
  for (path, a), (_, b) in zip(want, got):
    np.testing.assert_allclose(b.get_value(), a.get_value(), atol=atol, err_msg=str(path))


def test_decoder_chunked_matches_dense_logits_gradients_and_prefill():
  tokens = jax.random.randint(jax.random.key(2), (B, T), 2, 1024)
  mask = _padding_mask()
  dense = _decoder(attention="dense")
  chunked = _decoder(attention="chunked", attention_block=16)
  real = np.asarray(mask)
  np.testing.assert_allclose(
    np.asarray(chunked(tokens, mask))[real], np.asarray(dense(tokens, mask))[real], atol=1e-4
  )

  loss = lambda model: jnp.sum(jax.nn.log_softmax(model(tokens, mask))[..., 5] * mask)
  _assert_same(_gradients(dense, loss), _gradients(chunked, loss), atol=1e-4)

  # A prefill runs chunked too; its last logits equal the full forward's.
  cache = KVCache.zeros(chunked.config, B, T + 4)
  positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0)
  graphdef, params = nnx.split(chunked)
  logits, _ = jax.jit(
    lambda p: nnx.merge(graphdef, p).forward_cached(tokens, positions, mask, cache, jnp.int32(0))
  )(params)
  want = dense(tokens, mask)
  np.testing.assert_allclose(np.asarray(logits)[real], np.asarray(want)[real], atol=1e-4)


def test_remat_policies_keep_the_gradient():
  tokens = jax.random.randint(jax.random.key(3), (2, 16), 2, 1024)
  loss = lambda model: jnp.mean(model(tokens)[..., 7])
  want = _gradients(_decoder(remat="none"), loss)
  for remat in REMAT:
    if remat not in ("none", "offload_dots"):  # offloading needs a host memory space (GPU/TPU)
      _assert_same(want, _gradients(_decoder(remat=remat), loss), atol=1e-6)


def test_mlp_chunks_keep_logits_and_gradients():
  tokens = jax.random.randint(jax.random.key(5), (B, T), 2, 1024)
  mask = _padding_mask()
  whole, chunked = _decoder(), _decoder(mlp_chunk=24)  # 8 positions a chunk, the last ragged
  np.testing.assert_allclose(chunked(tokens, mask), whole(tokens, mask), atol=1e-5)
  loss = lambda model: jnp.mean(model(tokens, mask)[..., 3])
  _assert_same(_gradients(whole, loss), _gradients(chunked, loss), atol=2e-5)  # sum order


def test_cudnn_path_left_aligns_rows_and_restores_them(monkeypatch):
  """The cuDNN path's row rolling, on CPU: a plain causal kernel stands in for cuDNN's."""
  tokens = jax.random.randint(jax.random.key(4), (B, T), 2, 1024)
  mask = _padding_mask()
  want = _decoder(attention="dense")(tokens, mask)

  def causal_only(q, k, v):  # what cuDNN computes with is_causal=True and no padding mask
    t = q.shape[1]
    return attention.dense(
      q,
      k.transpose(0, 2, 1, 3),
      v.transpose(0, 2, 1, 3),
      jnp.broadcast_to(jnp.tril(jnp.ones((t, t), bool)), (q.shape[0], t, t)),
    )

  monkeypatch.setattr(attention, "cudnn_causal", causal_only)
  got = _decoder(attention="cudnn")(tokens, mask)
  real = np.asarray(mask)
  np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], atol=1e-4)
