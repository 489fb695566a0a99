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
  assert float(losses.aggregate(per_token, mask, "seq-mean-token-sum")) == pytest.approx(5.0)
  assert float(losses.aggregate(per_token, mask, "seq-mean-token-sum-norm")) == pytest.approx(
    10 / 6
  )
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
    return losses.policy_loss(
      logp, jax.lax.stop_gradient(logp), adv, mask, aggregation="seq-mean-token-sum-norm"
    ).loss

  def reference(x):
    logp, _ = losses.token_logprobs(x, targets)
    return -jnp.sum(adv[:, None] * logp * mask) / 6

  np.testing.assert_allclose(jax.grad(loss_fn)(logits), jax.grad(reference)(logits), atol=1e-6)


def test_kl_and_entropy():
  logp = jnp.log(jnp.array([[0.5, 0.25]]))
  ref = jnp.log(jnp.array([[0.25, 0.25]]))
  kl = losses.kl_k3(logp, ref)
  np.testing.assert_allclose(kl, [[0.5 - np.log(0.5) - 1, 0.0]], atol=1e-6)
  out = losses.policy_loss(
    logp, logp, jnp.zeros(1), jnp.ones((1, 2), bool), ref_logp=ref, kl_beta=0.1
  )
  assert float(out.loss) == pytest.approx(0.1 * float(kl.mean()), rel=1e-5)
  _, ent = losses.token_logprobs(jnp.zeros((1, 1, 4)), jnp.zeros((1, 1), jnp.int32))
  assert float(ent[0, 0]) == pytest.approx(np.log(4), rel=1e-6)


def _policy_loss_before_variants(
  logp, old_logp, advantages, mask, *, clip_low, clip_high, aggregation, entropy, ref_logp, kl_beta
):
  """policy_loss as it was before rl.policy_loss / kl_estimator / is_correction existed."""
  ratio = jnp.exp(logp - old_logp)
  adv = advantages[:, None]
  unclipped = ratio * adv
  clipped = jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
  per_token = -jnp.minimum(unclipped, clipped)
  fmask = mask.astype(jnp.float32)
  pg = losses.aggregate(per_token, mask, aggregation)
  kl = losses.aggregate(losses.kl_k3(logp, ref_logp), mask, aggregation)
  n = jnp.maximum(jnp.sum(fmask), 1.0)
  return (
    pg + kl_beta * kl,
    pg,
    kl,
    jnp.sum(entropy * fmask) / n,
    jnp.sum((clipped < unclipped) * fmask) / n,
    jnp.sum(ratio * fmask) / n,
    jnp.sum(losses.kl_k3(old_logp, logp) * fmask) / n,
  )


@pytest.mark.parametrize(
  "aggregation", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
def test_defaults_are_the_loss_before_the_variants_bit_for_bit(aggregation):
  """rl.policy_loss=ppo_clip, kl_estimator=k3, no IS weights: values and gradients equal
  to the last bit, jitted, to the loss before those knobs."""
  keys = jax.random.split(jax.random.key(3), 5)
  logp = -jax.random.uniform(keys[0], (4, 7), minval=0.1, maxval=3.0)
  old = logp + jax.random.uniform(keys[1], (4, 7), minval=-0.5, maxval=0.5)
  ref = logp + jax.random.uniform(keys[2], (4, 7), minval=-1.0, maxval=1.0)
  entropy = jax.random.uniform(keys[3], (4, 7))
  adv = jax.random.normal(keys[4], (4,))
  mask = jnp.arange(7)[None, :] < jnp.array([7, 3, 5, 1])[:, None]
  kw = dict(clip_low=0.2, clip_high=0.28, aggregation=aggregation, kl_beta=0.05)
  new = jax.jit(
    lambda x: tuple(losses.policy_loss(x, old, adv, mask, entropy=entropy, ref_logp=ref, **kw))
  )
  before = jax.jit(
    lambda x: _policy_loss_before_variants(x, old, adv, mask, entropy=entropy, ref_logp=ref, **kw)
  )
  for a, b in zip(new(logp), before(logp), strict=True):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(
    jax.jit(jax.grad(lambda x: new(x)[0]))(logp), jax.jit(jax.grad(lambda x: before(x)[0]))(logp)
  )


def test_kl_estimators_values_and_gradients_by_hand():
  """p - r = 0.5: k1 0.5 (gradient 1), k2 0.125 (gradient 0.5), k3 e^-0.5 - 0.5 (gradient
  1 - e^-0.5); the straight-through forms keep the value, take k2's gradient."""
  logp, ref = jnp.array([[-1.0]]), jnp.array([[-1.5]])
  k3 = np.exp(-0.5) + 0.5 - 1
  want = {
    "k1": (0.5, 1.0),
    "k2": (0.125, 0.5),
    "k3": (k3, 1 - np.exp(-0.5)),
    "k1+": (0.5, 0.5),
    "k3+": (k3, 0.5),
  }
  for name, (value, grad) in want.items():
    fn = lambda x, name=name: losses.kl_estimate(x, ref, name)[0, 0]
    assert float(fn(logp)) == pytest.approx(value, rel=1e-6), name
    assert float(jax.grad(fn)(logp)[0, 0]) == pytest.approx(grad, rel=1e-6), name
  with pytest.raises(ValueError, match="unknown KL estimator"):
    losses.kl_estimate(logp, ref, "k4")
  # The estimator reaches the loss's KL term.
  out = losses.policy_loss(
    logp, logp, jnp.zeros(1), jnp.ones((1, 1), bool), ref_logp=ref, kl_beta=1.0, kl_estimator="k2"
  )
  assert float(out.kl) == pytest.approx(0.125)


def test_gspo_ratio_and_clip_by_hand():
  """Log-ratios 0.1 and 0.3: the sequence ratio is e^0.2 on both tokens. With A = +1 it is
  clipped at 1 + 4e-4 (no gradient); with A = -1 the unclipped e^0.2 counts, and each
  token's gradient is e^0.2 / |y| under seq-mean-token-mean (GSPO's d s / d log p_t)."""
  old = jnp.zeros((1, 2))
  logp = jnp.array([[0.1, 0.3]])
  mask = jnp.ones((1, 2), bool)

  def run(adv):
    fn = lambda x: losses.policy_loss(
      x,
      old,
      jnp.array([adv]),
      mask,
      clip_low=3e-4,
      clip_high=4e-4,
      aggregation="seq-mean-token-mean",
      loss="gspo",
    )
    return fn(logp), jax.grad(lambda x: fn(x).loss)(logp)

  out, grad = run(1.0)
  assert float(out.pg_loss) == pytest.approx(-(1 + 4e-4), rel=1e-6)
  assert float(out.clip_fraction) == 1.0
  assert float(out.ratio_mean) == pytest.approx(np.exp(0.2), rel=1e-6)
  np.testing.assert_array_equal(grad, 0.0)
  out, grad = run(-1.0)
  assert float(out.pg_loss) == pytest.approx(np.exp(0.2), rel=1e-6)
  np.testing.assert_allclose(grad, [[np.exp(0.2) / 2] * 2], rtol=1e-6)
  with pytest.raises(ValueError, match="unknown policy loss"):
    losses.policy_loss(logp, old, jnp.ones(1), mask, loss="grpo")


@pytest.mark.parametrize("aggregation", losses.AGGREGATIONS)
def test_gspo_token_form_equals_the_sequence_objective(aggregation):
  """With one advantage per sequence, GSPO-token (verl's form, ours) has the value and the
  gradient of GSPO's sequence objective -min(s_i A_i, clip(s_i) A_i), s_i = exp(mean log
  ratio), spread over the sequence's tokens and aggregated alike."""
  keys = jax.random.split(jax.random.key(7), 3)
  old = -jax.random.uniform(keys[0], (5, 6), minval=0.1, maxval=2.0)
  logp = old + jax.random.uniform(keys[1], (5, 6), minval=-2e-3, maxval=2e-3)
  adv = jax.random.normal(keys[2], (5,))
  mask = jnp.arange(6)[None, :] < jnp.array([6, 2, 4, 1, 5])[:, None]

  def token_form(x):
    return losses.policy_loss(
      x, old, adv, mask, clip_low=3e-4, clip_high=4e-4, aggregation=aggregation, loss="gspo"
    ).loss

  def sequence_form(x):
    length = jnp.sum(mask, axis=-1)
    s = jnp.exp(jnp.sum((x - old) * mask, axis=-1) / length)
    per_seq = -jnp.minimum(s * adv, jnp.clip(s, 1 - 3e-4, 1 + 4e-4) * adv)
    return losses.aggregate(jnp.broadcast_to(per_seq[:, None], x.shape), mask, aggregation)

  assert float(token_form(logp)) == pytest.approx(float(sequence_form(logp)), rel=1e-5)
  np.testing.assert_allclose(
    jax.grad(token_form)(logp), jax.grad(sequence_form)(logp), rtol=1e-5, atol=1e-7
  )
  assert np.any(jax.grad(token_form)(logp) != 0)


def test_is_weights_and_mismatch_metrics_by_hand():
  """Learner minus sampler log-probs 0.5, 1.0, -0.2 (and a padding token): token TIS weights
  e^0.5, min(e, 2), e^-0.2; sequence TIS min(e^1.3, 2) on every token; the log-ratio mean
  1.3 / 3, its largest magnitude 1.0, and 1 of 3 tokens (the 1 sequence) past log 2."""
  behaviour = jnp.array([[-1.0, -2.0, -0.5, 0.0]])
  learner = behaviour + jnp.array([[0.5, 1.0, -0.2, 0.0]])
  mask = jnp.array([[True, True, True, False]])
  np.testing.assert_allclose(
    losses.is_weights(learner, behaviour, mask, "token", 2.0),
    [[np.exp(0.5), 2.0, np.exp(-0.2), 0.0]],
    rtol=1e-6,
  )
  np.testing.assert_allclose(
    losses.is_weights(learner, behaviour, mask, "sequence", 2.0), [[2.0, 2.0, 2.0, 0.0]], rtol=1e-6
  )
  np.testing.assert_allclose(
    losses.is_weights(learner, behaviour, mask, "sequence", 5.0),
    [[np.exp(1.3)] * 3 + [0.0]],
    rtol=1e-5,
  )
  for level, truncated in (("token", 1 / 3), ("sequence", 1.0)):
    m = losses.mismatch_metrics(learner, behaviour, mask, level, 2.0)
    assert float(m["is_log_ratio_mean"]) == pytest.approx(1.3 / 3, rel=1e-5)
    assert float(m["is_log_ratio_max_abs"]) == pytest.approx(1.0, rel=1e-6)
    assert float(m["is_truncated_fraction"]) == pytest.approx(truncated)
  # Weights multiply each token's surrogate: at ratio 1 the loss is -sum(w A) / n.
  out = losses.policy_loss(
    learner,
    learner,
    jnp.array([1.0]),
    mask,
    weights=losses.is_weights(learner, behaviour, mask, "token", 2.0),
  )
  assert float(out.pg_loss) == pytest.approx(-(np.exp(0.5) + 2 + np.exp(-0.2)) / 3, rel=1e-6)


def test_token_logprobs_temperature():
  logits = jnp.array([[[2.0, 0.0]]])
  logp, _ = losses.token_logprobs(logits, jnp.array([[0]]), temperature=2.0)
  assert float(logp[0, 0]) == pytest.approx(float(jax.nn.log_softmax(jnp.array([1.0, 0.0]))[0]))


def test_dpo_loss():
  loss, acc = losses.dpo_loss(
    jnp.array([-1.0]), jnp.array([-3.0]), jnp.array([-2.0]), jnp.array([-2.0]), beta=0.5
  )
  assert float(loss) == pytest.approx(np.log1p(np.exp(-1.0)), rel=1e-6)
  assert float(acc) == 1.0
  # A pair of weight 0 (host padding) changes neither.
  weighted = losses.dpo_loss(
    jnp.array([-1.0, -9.0]),
    jnp.array([-3.0, 0.0]),
    jnp.array([-2.0, 0.0]),
    jnp.array([-2.0, 0.0]),
    beta=0.5,
    weights=jnp.array([1.0, 0.0]),
  )
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
    logp, entropy = losses.chunked_token_logprobs(
      hidden, weight, targets, weight_axes=weight_axes, temperature=0.7, chunk_tokens=chunk_tokens
    )
    return jnp.sum(logp * g_logp + entropy * g_entropy), (logp, entropy)

  # chunk_tokens 4 -> 1 position per chunk, 12 -> 4 (ragged last chunk), 1000 -> one chunk.
  (_, want), grads_want = jax.value_and_grad(dense, (0, 1), has_aux=True)(hidden, weight)
  (_, got), grads_got = jax.jit(jax.value_and_grad(chunked, (0, 1), has_aux=True))(hidden, weight)
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
  got, _ = losses.chunked_token_logprobs(
    hidden.astype(jnp.bfloat16), weight.astype(jnp.bfloat16), targets, chunk_tokens=4
  )
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, want, atol=0.1)
  grad = jax.grad(
    lambda w: jnp.sum(
      losses.chunked_token_logprobs(hidden.astype(jnp.bfloat16), w, targets, chunk_tokens=4)[0]
    )
  )(weight.astype(jnp.bfloat16))
  assert grad.dtype == jnp.bfloat16 and np.isfinite(np.asarray(grad, np.float32)).all()
