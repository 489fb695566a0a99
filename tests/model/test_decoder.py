"""The decoder on its own (tiny random Qwen3, two layers, float32): causal, blind to padding,
its cached decode gives the full forward pass's logits, and bfloat16 parameters stay close to
float32 (logits against transformers: test_parity.py; the attention backends against each
other: test_attention.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, KVCache, architectures

TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module", name="model")
def tiny_model():
  return Decoder(architectures.get("tiny", dtype="float32", num_layers=2), rngs=nnx.Rngs(0))


def _tokens(seed, shape):
  return jax.random.randint(jax.random.key(seed), shape, 2, 1000, dtype=jnp.int32)


def test_a_position_sees_only_the_tokens_before_it(model):
  tokens = _tokens(0, (1, 12))
  changed = tokens.at[0, 8:].set(_tokens(1, (4,)))
  a, b = np.asarray(model(tokens)), np.asarray(model(changed))
  np.testing.assert_allclose(a[:, :8], b[:, :8], **TOL)
  assert not np.allclose(a[:, 8:], b[:, 8:], **TOL)  # the change reaches what follows it


def test_padding_on_either_side_leaves_the_real_tokens_logits(model):
  tokens = _tokens(2, (1, 9))
  plain = np.asarray(model(tokens))[0]
  pad = jnp.zeros((1, 3), jnp.int32)
  left = jnp.concatenate([pad, tokens], axis=1)
  right = jnp.concatenate([tokens, pad], axis=1)
  real = jnp.ones((1, 9), bool)
  no = jnp.zeros((1, 3), bool)
  np.testing.assert_allclose(
    np.asarray(model(left, jnp.concatenate([no, real], axis=1)))[0, 3:], plain, **TOL
  )
  np.testing.assert_allclose(
    np.asarray(model(right, jnp.concatenate([real, no], axis=1)))[0, :9], plain, **TOL
  )
  # Padding that is not masked is attended to: the logits change.
  assert not np.allclose(np.asarray(model(left))[0, 3:], plain, **TOL)


def test_a_prefill_then_one_token_at_a_time_gives_the_full_pass_logits(model):
  prompt, steps = _tokens(3, (2, 6)), _tokens(4, (2, 2))
  # Row 1's prompt is left-padded by two slots, as the sampler builds a batch.
  prompt_valid = jnp.ones((2, 6), bool).at[1, :2].set(False)
  full_tokens = jnp.concatenate([prompt, steps], axis=1)
  full_valid = jnp.concatenate([prompt_valid, jnp.ones((2, 2), bool)], axis=1)
  want = np.asarray(model(full_tokens, full_valid))
  positions = jnp.maximum(jnp.cumsum(full_valid, axis=1) - 1, 0)
  cache = KVCache.zeros(model.config, 2, 8)
  logits, cache = model.forward_cached(prompt, positions[:, :6], prompt_valid, cache, 0)
  got = [np.asarray(logits)]
  for i in range(2):
    logits, cache = model.forward_cached(
      steps[:, i : i + 1], positions[:, 6 + i : 7 + i], jnp.ones((2, 1), bool), cache, 6 + i
    )
    got.append(np.asarray(logits))
  got = np.concatenate(got, axis=1)
  np.testing.assert_allclose(got[0], want[0], **TOL)
  np.testing.assert_allclose(got[1, 2:], want[1, 2:], **TOL)  # the real tokens of row 1


def test_bfloat16_parameters_and_sampling():
  from precisecoder.sampling import sample

  config = architectures.get("tiny", num_layers=2)
  f32 = Decoder(config, rngs=nnx.Rngs(0))
  bf16 = Decoder(config.replace(dtype="bfloat16"), rngs=nnx.Rngs(0))
  assert bf16.layers.q_proj[...].dtype == jnp.bfloat16
  tokens = jnp.asarray([[3, 4, 5, 6]])
  a, b = np.asarray(f32(tokens)), np.asarray(bf16(tokens))
  assert b.dtype == np.float32 and np.abs(a - b).max() < 0.05 * np.abs(a).max() + 1e-3
  out = sample(bf16, [[3, 4, 5]], num_samples=2, max_new_tokens=4, eos_ids=(), pad_id=0)
  assert out.tokens.shape == (2, 4) and np.isfinite(out.logprobs).all()
