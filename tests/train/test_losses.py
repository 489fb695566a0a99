"""Losses against hand-computed values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from precisecoder.train import losses


def test_aggregations_by_hand():
  per_token = jnp.array([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
  mask = jnp.array([[1, 1, 1], [1, 0, 0]], bool)
  assert float(losses.aggregate(per_token, mask, "token-mean")) == pytest.approx(10 / 4)
  assert float(losses.aggregate(per_token, mask, "seq-mean-token-mean")) == pytest.approx(3.0)
  assert (float(losses.aggregate(per_token, mask, "seq-mean-token-sum-norm"))
          == pytest.approx(10 / 6))
  with pytest.raises(ValueError, match="unknown loss aggregation"):
    losses.aggregate(per_token, mask, "sum")


def test_clip_low_and_high_are_separate():
  old = jnp.zeros((1, 4))
  # Ratios 0.5, 0.9, 1.25, 1.5 with advantage +1: only the upper clip (1.28) binds.
  logp = jnp.log(jnp.array([[0.5, 0.9, 1.25, 1.5]]))
  mask = jnp.ones((1, 4), bool)
  out = losses.policy_loss(logp, old, jnp.array([1.0]), mask, clip_low=0.2, clip_high=0.28)
  assert float(out.pg_loss) == pytest.approx(-(0.5 + 0.9 + 1.25 + 1.28) / 4, rel=1e-6)
  assert float(out.clip_fraction) == pytest.approx(0.25)
  # Advantage -1: the lower clip binds (ratio 0.5 -> 0.8): loss -min(-r, -clip(r)).
  out = losses.policy_loss(logp, old, jnp.array([-1.0]), mask, clip_low=0.2, clip_high=0.28)
  assert float(out.pg_loss) == pytest.approx((0.8 + 0.9 + 1.25 + 1.5) / 4, rel=1e-6)
  assert float(out.clip_fraction) == pytest.approx(0.25)


def test_on_policy_gradient_is_advantage_weighted_score():
  logits = jax.random.normal(jax.random.key(0), (2, 3, 5))
  targets = jnp.array([[1, 2, 3], [0, 4, 4]])
  mask = jnp.array([[1, 1, 1], [1, 1, 0]], bool)
  adv = jnp.array([0.7, -1.3])

  def loss_fn(x):
    logp, _ = losses.token_logprobs(x, targets)
    return losses.policy_loss(logp, jax.lax.stop_gradient(logp), adv, mask,
                              aggregation="seq-mean-token-sum-norm").loss

  def reference(x):
    logp, _ = losses.token_logprobs(x, targets)
    return -jnp.sum(adv[:, None] * logp * mask) / 6

  np.testing.assert_allclose(jax.grad(loss_fn)(logits), jax.grad(reference)(logits), atol=1e-6)


def test_kl_and_entropy():
  logp = jnp.log(jnp.array([[0.5, 0.25]]))
  ref = jnp.log(jnp.array([[0.25, 0.25]]))
  kl = losses.kl_k3(logp, ref)
  np.testing.assert_allclose(kl, [[0.5 - np.log(0.5) - 1, 0.0]], atol=1e-6)
  out = losses.policy_loss(logp, logp, jnp.zeros(1), jnp.ones((1, 2), bool), ref_logp=ref,
                           kl_beta=0.1)
  assert float(out.loss) == pytest.approx(0.1 * float(kl.mean()), rel=1e-5)
  _, ent = losses.token_logprobs(jnp.zeros((1, 1, 4)), jnp.zeros((1, 1), jnp.int32))
  assert float(ent[0, 0]) == pytest.approx(np.log(4), rel=1e-6)


def test_token_logprobs_temperature():
  logits = jnp.array([[[2.0, 0.0]]])
  logp, _ = losses.token_logprobs(logits, jnp.array([[0]]), temperature=2.0)
  assert float(logp[0, 0]) == pytest.approx(float(jax.nn.log_softmax(jnp.array([1.0, 0.0]))[0]))


def test_dpo_loss():
  loss, acc = losses.dpo_loss(jnp.array([-1.0]), jnp.array([-3.0]), jnp.array([-2.0]),
                              jnp.array([-2.0]), beta=0.5)
  assert float(loss) == pytest.approx(np.log1p(np.exp(-1.0)), rel=1e-6)
  assert float(acc) == 1.0
  # A pair of weight 0 (host padding) changes neither.
  weighted = losses.dpo_loss(jnp.array([-1.0, -9.0]), jnp.array([-3.0, 0.0]),
                             jnp.array([-2.0, 0.0]), jnp.array([-2.0, 0.0]), beta=0.5,
                             weights=jnp.array([1.0, 0.0]))
  assert [float(x) for x in weighted] == pytest.approx([float(loss), float(acc)], rel=1e-6)


@pytest.mark.parametrize("weight_axes,chunk_tokens", [("vd", 4), ("dv", 12), ("vd", 1000)])
def test_chunked_logprobs_equal_dense_values_and_gradients(weight_axes, chunk_tokens):
  b, t, d, v = 3, 11, 8, 50
  ks = jax.random.split(jax.random.key(1), 5)
  hidden = jax.random.normal(ks[0], (b, t, d))
  weight = jax.random.normal(ks[1], (v, d) if weight_axes == "vd" else (d, v))
  targets = jax.random.randint(ks[2], (b, t), 0, v)
  g_logp, g_entropy = jax.random.normal(ks[3], (b, t)), jax.random.normal(ks[4], (b, t))
  spec = "btd,vd->btv" if weight_axes == "vd" else "btd,dv->btv"

  def dense(hidden, weight):
    logp, entropy = losses.token_logprobs(jnp.einsum(spec, hidden, weight), targets, 0.7)
    return jnp.sum(logp * g_logp + entropy * g_entropy), (logp, entropy)

  def chunked(hidden, weight):
    logp, entropy = losses.chunked_token_logprobs(hidden, weight, targets,
                                                  weight_axes=weight_axes, temperature=0.7,
                                                  chunk_tokens=chunk_tokens)
    return jnp.sum(logp * g_logp + entropy * g_entropy), (logp, entropy)

  # chunk_tokens 4 -> 1 position per chunk, 12 -> 4 (ragged last chunk), 1000 -> one chunk.
  (_, want), grads_want = jax.value_and_grad(dense, (0, 1), has_aux=True)(hidden, weight)
  (_, got), grads_got = jax.jit(jax.value_and_grad(chunked, (0, 1), has_aux=True))(hidden,
                                                                                   weight)
  np.testing.assert_allclose(got[0], want[0], atol=1e-5)  # log-probs
  np.testing.assert_allclose(got[1], want[1], atol=1e-5)  # entropy
  np.testing.assert_allclose(grads_got[0], grads_want[0], atol=1e-5)
  np.testing.assert_allclose(grads_got[1], grads_want[1], atol=1e-5)


def test_chunked_logprobs_in_bfloat16_stay_close_to_float32():
  ks = jax.random.split(jax.random.key(2), 3)
  hidden = jax.random.normal(ks[0], (2, 9, 16))
  weight = jax.random.normal(ks[1], (64, 16)) * 0.3
  targets = jax.random.randint(ks[2], (2, 9), 0, 64)
  want, _ = losses.chunked_token_logprobs(hidden, weight, targets, chunk_tokens=4)
  got, _ = losses.chunked_token_logprobs(hidden.astype(jnp.bfloat16),
                                         weight.astype(jnp.bfloat16), targets, chunk_tokens=4)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, want, atol=0.1)
  grad = jax.grad(lambda w: jnp.sum(losses.chunked_token_logprobs(
      hidden.astype(jnp.bfloat16), w, targets, chunk_tokens=4)[0]))(weight.astype(jnp.bfloat16))
  assert grad.dtype == jnp.bfloat16 and np.isfinite(np.asarray(grad, np.float32)).all()
