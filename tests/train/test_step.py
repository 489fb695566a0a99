"""The jitted train steps: a shared prompt computed once per group gives the same log-probs and
gradients as every row computing it; one RL update moves log-probs the way advantages say."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder.train import step as step_lib


def _model(**overrides):
  return Decoder(architectures.get("tiny", num_layers=2, **overrides), rngs=nnx.Rngs(0))


def _grouped_batch(groups=2, group=3, prompt=13, completion=7, vocab=1024, seed=0):
  """Rows in groups sharing a left-padded prompt; right-padded completions of varied length."""
  rng = np.random.default_rng(seed)
  p = 16
  tokens = np.zeros((groups * group, p + completion), np.int32)
  mask = np.zeros_like(tokens, bool)
  for g in range(groups):
    length = prompt - 3 * g  # prompts of different lengths: left padding differs by group
    ids = rng.integers(3, vocab, length)
    for r in range(g * group, (g + 1) * group):
      tokens[r, p - length:p] = ids
      mask[r, p - length:p] = True
      n = rng.integers(1, completion + 1)
      tokens[r, p:p + n] = rng.integers(3, vocab, n)
      mask[r, p:p + n] = True
  return tokens, mask, mask[:, p:]


@pytest.mark.parametrize("attention,logprob_chunk", [("chunked", 1024), ("dense", 0)])
def test_shared_prompt_equals_per_row_values_and_gradients(attention, logprob_chunk):
  graphdef, params = nnx.split(_model(attention=attention, logprob_chunk=logprob_chunk))
  tokens, mask, cmask = _grouped_batch()
  t = cmask.shape[1]

  def loss(params, group):
    logp, entropy = step_lib.completion_logprobs(graphdef, params, tokens, mask, t, 1.0, group)
    return jnp.sum(logp * cmask) + 0.1 * jnp.sum(entropy * cmask), (logp, entropy)

  grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)
  (_, (logp1, ent1)), grads1 = grad(params, 1)
  (_, (logp3, ent3)), grads3 = grad(params, 3)
  np.testing.assert_allclose(np.where(cmask, logp3, 0), np.where(cmask, logp1, 0), atol=2e-5)
  np.testing.assert_allclose(np.where(cmask, ent3, 0), np.where(cmask, ent1, 0), atol=2e-5)
  for a, b in zip(jax.tree.leaves(grads1), jax.tree.leaves(grads3)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=2e-5, rtol=1e-4)


def _rl_config(shared_prompt):
  return ml_collections.ConfigDict(dict(
      temperature=1.0, clip_low=0.2, clip_high=0.28, aggregation="seq-mean-token-sum-norm",
      kl_beta=0.0, group_size=3, shared_prompt=shared_prompt))


@pytest.mark.parametrize("shared_prompt", [False, True])
def test_one_rl_step_raises_positive_and_lowers_negative_advantage_samples(shared_prompt):
  """On-policy (behaviour log-probs = the policy's own), one update with advantages of both
  signs: every sample with A > 0 becomes more likely and every one with A < 0 less likely."""
  graphdef, params = nnx.split(_model())
  tokens, mask, cmask = _grouped_batch(seed=1)
  logp_fn = step_lib.make_logprob_fn(graphdef)
  before = np.asarray(logp_fn(params, tokens, mask, cmask)).sum(-1)
  advantages = np.array([1.0, -1.0, 0.5, -0.5, 1.0, -1.0], np.float32)
  optim = ml_collections.ConfigDict(dict(learning_rate=1e-3, warmup_steps=0, weight_decay=0.0,
                                         b1=0.9, b2=0.999, grad_clip=0.0))
  tx = step_lib.make_optimizer(optim)
  step = step_lib.make_rl_step(graphdef, tx, _rl_config(shared_prompt))
  batch = step_lib.to_device({"tokens": tokens, "mask": mask, "completion_mask": cmask,
                              "old_logprobs": np.asarray(logp_fn(params, tokens, mask, cmask)),
                              "advantages": advantages})
  params, _, metrics = step(params, step_lib.init_optimizer(tx, params), batch,
                            np.arange(len(tokens), dtype=np.int32))
  after = np.asarray(logp_fn(params, tokens, mask, cmask)).sum(-1)
  change = after - before
  assert float(metrics["ratio_mean"]) == pytest.approx(1.0, abs=1e-4)  # on-policy
  assert np.all(change[advantages > 0] > 0), change
  assert np.all(change[advantages < 0] < 0), change
