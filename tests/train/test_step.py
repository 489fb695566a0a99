"""The jitted train steps: a shared prompt computed once per group gives the same log-probs and
gradients as every row computing it; one RL update moves log-probs the way advantages say; its
PPO clip, KL term and minibatch gather, checked on the gradient."""

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder.train import losses, step as step_lib


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
      tokens[r, p - length : p] = ids
      mask[r, p - length : p] = True
      n = rng.integers(1, completion + 1)
      tokens[r, p : p + n] = rng.integers(3, vocab, n)
      mask[r, p : p + n] = True
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
  return ml_collections.ConfigDict(
    dict(
      temperature=1.0,
      clip_low=0.2,
      clip_high=0.28,
      aggregation="seq-mean-token-sum-norm",
      kl_beta=0.0,
      group_size=3,
      shared_prompt=shared_prompt,
    )
  )


@pytest.mark.parametrize("shared_prompt", [False, True])
def test_one_rl_step_raises_positive_and_lowers_negative_advantage_samples(shared_prompt):
  """On-policy (behaviour log-probs = the policy's own), one update with advantages of both
  signs: every sample with A > 0 becomes more likely and every one with A < 0 less likely."""
  graphdef, params = nnx.split(_model())
  tokens, mask, cmask = _grouped_batch(seed=1)
  logp_fn = step_lib.make_logprob_fn(graphdef)
  before = np.asarray(logp_fn(params, tokens, mask, cmask)).sum(-1)
  advantages = np.array([1.0, -1.0, 0.5, -0.5, 1.0, -1.0], np.float32)
  optim = ml_collections.ConfigDict(
    dict(learning_rate=1e-3, warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.999, grad_clip=0.0)
  )
  tx = step_lib.make_optimizer(optim)
  step = step_lib.make_rl_step(graphdef, tx, _rl_config(shared_prompt))
  batch = step_lib.to_device(
    {
      "tokens": tokens,
      "mask": mask,
      "completion_mask": cmask,
      "old_logprobs": np.asarray(logp_fn(params, tokens, mask, cmask)),
      "advantages": advantages,
    }
  )
  params, _, metrics = step(
    params, step_lib.init_optimizer(tx, params), batch, np.arange(len(tokens), dtype=np.int32)
  )
  after = np.asarray(logp_fn(params, tokens, mask, cmask)).sum(-1)
  change = after - before
  assert float(metrics["ratio_mean"]) == pytest.approx(1.0, abs=1e-4)  # on-policy
  assert np.all(change[advantages > 0] > 0), change
  assert np.all(change[advantages < 0] < 0), change


# One RL update with SGD at rate 1 changes every parameter by minus its gradient: the tests
# below read the step's gradient off its update (Adam's first step is about sign(gradient)).
_SGD = optax.sgd(1.0)


@pytest.fixture(scope="module")
def policy():
  """(params, logprob_fn, rl_step(**rl)) of a one-layer tiny model; each function compiled
  once for the module."""
  graphdef, params = nnx.split(Decoder(architectures.get("tiny", num_layers=1), rngs=nnx.Rngs(0)))

  @functools.cache
  def rl_step(**rl):
    cfg = dict(
      temperature=1.0,
      clip_low=0.2,
      clip_high=0.28,
      aggregation="token-mean",
      kl_beta=0.0,
      group_size=3,
      shared_prompt=False,
    )
    return step_lib.make_rl_step(graphdef, _SGD, ml_collections.ConfigDict({**cfg, **rl}))

  return params, step_lib.make_logprob_fn(graphdef), rl_step


def _rl_batch(logprob_fn, params, advantages, shift=0.0, **extra):
  """A batch of 6 rows (2 groups of 3) whose behaviour log-probs are the policy's own plus
  `shift` (per row): the ratio of a row's tokens is exp(-shift)."""
  tokens, mask, cmask = _grouped_batch(seed=1)
  logp = np.asarray(logprob_fn(params, tokens, mask, cmask))
  old = (logp + np.asarray(shift, np.float32).reshape(-1, 1)) * cmask
  return {
    "tokens": tokens,
    "mask": mask,
    "completion_mask": cmask,
    "old_logprobs": old,
    "advantages": np.asarray(advantages, np.float32),
    **extra,
  }


def _gradient(step, params, batch, rows=None):
  """(the step's gradient as a flat float64 vector, its metrics) on `batch[rows]`."""
  rows = np.arange(len(batch["tokens"])) if rows is None else rows
  fresh = jax.tree.map(jnp.array, params)  # the step donates what it is given
  after, _, metrics = step(
    fresh, _SGD.init(fresh), step_lib.to_device(batch), np.asarray(rows, np.int32)
  )
  grad = [
    np.asarray(a, np.float64) - np.asarray(b, np.float64)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(after), strict=True)
  ]
  return np.concatenate([g.ravel() for g in grad]), jax.device_get(metrics)


def _close(a, b):
  return np.allclose(a, b, rtol=1e-5, atol=1e-7 * np.abs(b).max())


def test_rl_step_gives_no_gradient_to_a_ratio_clipped_in_its_advantage_direction(policy):
  """PPO's clip: a row whose ratio is past 1 + clip_high with A > 0, or below 1 - clip_low with
  A < 0, adds nothing to the gradient (the same as advantage 0); past the clip the other way
  (A > 0, ratio below 1 - clip_low), or inside the clip range, it still does."""
  params, logprob_fn, rl_step = policy
  first = np.arange(6) == 0
  advantages = np.array([1.0, -1.0, 0.5, -0.5, 1.0, -1.0])
  for a0, shift0, clipped in (
    (1.0, -1.0, True),  # ratio e > 1.28, A > 0
    (-1.0, 1.0, True),  # ratio 1/e < 0.8, A < 0
    (1.0, 1.0, False),  # ratio 1/e, A > 0: still pushed up
    (1.0, -0.1, False),
  ):  # ratio 1.11, inside the range
    shift = np.where(first, shift0, 0.0)
    grad, metrics = _gradient(
      rl_step(), params, _rl_batch(logprob_fn, params, np.where(first, a0, advantages), shift)
    )
    without, _ = _gradient(
      rl_step(), params, _rl_batch(logprob_fn, params, np.where(first, 0.0, advantages), shift)
    )
    assert _close(grad, without) == clipped, (a0, shift0)
    assert (float(metrics["clip_fraction"]) > 0) == clipped, (a0, shift0)


def test_rl_step_kl_term_off_at_zero_beta_and_pulls_towards_the_reference(policy):
  """kl_beta 0: the reference log-probs change nothing. kl_beta > 0 with zero advantages: the
  update is the KL term's alone, and a small step along it raises the sampled tokens'
  log-probs towards a reference that finds them likelier, lowering the KL."""
  params, logprob_fn, rl_step = policy
  plain = _rl_batch(logprob_fn, params, [1.0, -1.0, 0.5, -0.5, 1.0, -1.0])
  ref = plain["old_logprobs"] + 0.5 * plain["completion_mask"]
  with_ref = {**plain, "ref_logprobs": ref}
  np.testing.assert_array_equal(
    _gradient(rl_step(), params, with_ref)[0], _gradient(rl_step(), params, plain)[0]
  )
  idle = {**with_ref, "advantages": np.zeros(6, np.float32)}
  assert not np.any(_gradient(rl_step(), params, idle)[0])  # no advantage, no KL: nothing
  grad, metrics = _gradient(rl_step(kl_beta=0.5), params, idle)
  assert float(metrics["kl"]) > 0 and np.linalg.norm(grad) > 0
  tokens, mask, cmask = plain["tokens"], plain["mask"], plain["completion_mask"]
  before = np.asarray(logprob_fn(params, tokens, mask, cmask))
  after = np.asarray(
    logprob_fn(_shifted(params, -1e-2 * grad / np.linalg.norm(grad)), tokens, mask, cmask)
  )
  assert (after - before).sum() > 0
  kl = lambda logp: float(np.sum(losses.kl_k3(logp, ref) * cmask))
  assert kl(after) < kl(before)


def _shifted(params, flat):
  """`params` plus the flat vector `flat` (in tree-leaf order)."""
  leaves, treedef = jax.tree.flatten(params)
  sizes = np.cumsum([0] + [leaf.size for leaf in leaves])
  return jax.tree.unflatten(
    treedef,
    [
      jnp.asarray(np.asarray(leaf) + flat[a:b].reshape(leaf.shape), leaf.dtype)
      for leaf, a, b in zip(leaves, sizes[:-1], sizes[1:])
    ],
  )


@pytest.mark.parametrize(
  "shared_prompt, rows, other", [(False, [4, 1, 3], [0, 2, 5]), (True, [3, 4, 5], [0, 1, 2])]
)  # whole groups, in order
def test_rl_step_minibatch_is_the_gathered_rows(policy, shared_prompt, rows, other):
  """The update on `batch[rows]` (gathered inside the step) equals the update on a batch made
  of those rows by hand, and differs from another selection's."""
  params, logprob_fn, rl_step = policy
  step = rl_step(shared_prompt=shared_prompt)
  batch = _rl_batch(
    logprob_fn, params, [1.0, -1.0, 0.5, -0.5, 1.0, -0.25], shift=[0.0, 0.1, -0.1, 0.2, 0.0, -0.3]
  )
  gathered, _ = _gradient(step, params, batch, rows)
  by_hand, _ = _gradient(step, params, {k: v[rows] for k, v in batch.items()})
  np.testing.assert_allclose(gathered, by_hand, rtol=1e-5, atol=1e-7 * np.abs(by_hand).max())
  assert not _close(gathered, _gradient(step, params, batch, other)[0])


def _row_weighted(batch, learner, weights):
  """The batch with the learner's log-probs as the old ones and each row's advantage times
  its weight: what a correction with those per-row weights must equal at ratio 1."""
  return {**batch, "old_logprobs": learner, "advantages": batch["advantages"] * weights}


@pytest.mark.parametrize("correction", ["token_tis", "sequence_tis"])
def test_rl_step_tis_weighs_each_row_by_its_truncated_importance_ratio(policy, correction):
  """Behaviour log-probs shifted by s per token from the learner's: the step's gradient is
  the uncorrected one (taken at the learner's log-probs) with each row's advantage weighted
  by min(e^-s, 2) (token TIS) or min(e^(-s·|y|), 2) (sequence TIS); e^1.2 and e^(0.4|y|)
  are truncated at the cap. The mismatch metrics see the whole shift."""
  params, logprob_fn, rl_step = policy
  shift = np.array([-1.2, 0.5, 0.0, -0.1, 0.3, -0.4], np.float32)
  batch = _rl_batch(logprob_fn, params, [1.0, -1.0, 0.5, -0.5, 1.0, -0.25], shift)
  cmask = batch["completion_mask"]
  learner = batch["old_logprobs"] - shift[:, None] * cmask
  corrected = {**batch, "learner_logprobs": learner}
  exponent = -shift * (cmask.sum(axis=1) if correction == "sequence_tis" else 1)
  weights = np.minimum(np.exp(exponent), 2.0).astype(np.float32)
  assert (weights == 2.0).any() and (weights < 1).any()
  grad, metrics = _gradient(rl_step(is_correction=correction, is_cap=2.0), params, corrected)
  want, _ = _gradient(rl_step(), params, _row_weighted(batch, learner, weights))
  # Float32 noise of two differently fused computations (weights up to 2, as large as 1/30).
  np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())
  assert float(metrics["is_log_ratio_mean"]) == pytest.approx(
    float(np.sum(-shift[:, None] * cmask) / cmask.sum()), abs=1e-5
  )
  assert float(metrics["is_log_ratio_max_abs"]) == pytest.approx(1.2, abs=1e-5)


def test_rl_step_without_correction_still_measures_the_mismatch(policy):
  """is_correction none: the loss is today's, and the metrics hold the sampler/learner
  log-ratio (here -shift) and the tokens whose token-level weight would pass the cap."""
  params, logprob_fn, rl_step = policy
  shift = np.array([-1.0, 0.5, 0.0, 0.0, 0.0, 0.0], np.float32)
  batch = _rl_batch(logprob_fn, params, [1.0, -1.0, 0.5, -0.5, 1.0, -0.25], shift)
  cmask = batch["completion_mask"]
  _, metrics = _gradient(rl_step(), params, batch)
  assert float(metrics["is_log_ratio_max_abs"]) == pytest.approx(1.0, abs=1e-5)
  assert float(metrics["is_truncated_fraction"]) == pytest.approx(
    cmask[0].sum() / cmask.sum(), abs=1e-6
  )  # e^1 > 2 on row 0's tokens only
  # The step's helpers: the learner's log-probs before the updates, metrics over them all.
  rl = ml_collections.ConfigDict(dict(kl_beta=0.0, is_correction="token_tis", is_cap=2.0))
  assert step_lib.needs_logprob_fn(rl)
  device_batch = step_lib.to_device(batch)
  step_lib.add_step_logprobs(logprob_fn, params, None, device_batch, rl)
  assert "ref_logprobs" not in device_batch
  np.testing.assert_allclose(
    device_batch["learner_logprobs"], batch["old_logprobs"] - shift[:, None] * cmask, atol=1e-5
  )
  whole = step_lib.mismatch_metrics([metrics], device_batch, rl)
  assert whole["is_log_ratio_max_abs"] == pytest.approx(1.0, abs=1e-5)
  assert whole["is_truncated_fraction"] == pytest.approx(cmask[0].sum() / cmask.sum())


def test_rl_step_gspo_clips_the_sequence_ratio_in_its_own_range(policy):
  """A row whose sequence ratio is e^0.01 with A > 0 is past GSPO's 1 + 4e-4: it adds nothing
  to the gradient; under PPO's clip (1.28) the same row still counts."""
  params, logprob_fn, rl_step = policy
  first = np.arange(6) == 0
  advantages = np.array([1.0, -1.0, 0.5, -0.5, 1.0, -1.0])
  shift = np.where(first, -0.01, 0.0)
  batch = _rl_batch(logprob_fn, params, advantages, shift)
  silent = _rl_batch(logprob_fn, params, np.where(first, 0.0, advantages), shift)
  gspo = rl_step(policy_loss="gspo", gspo_clip_low=3e-4, gspo_clip_high=4e-4)
  grad, metrics = _gradient(gspo, params, batch)
  assert _close(grad, _gradient(gspo, params, silent)[0])
  assert float(metrics["clip_fraction"]) > 0
  assert not _close(_gradient(rl_step(), params, batch)[0], _gradient(rl_step(), params, silent)[0])


def test_default_rl_step_is_the_step_before_the_loss_variants_bit_for_bit(policy):
  """With the default knobs (ppo_clip, k3, no correction) one update leaves the parameters and
  the shared metrics exactly as the step did before those knobs (its loss written out here)."""
  params, logprob_fn, rl_step = policy
  graphdef, _ = nnx.split(Decoder(architectures.get("tiny", num_layers=1), rngs=nnx.Rngs(0)))

  def old_loss_fn(params, batch):
    t = batch["completion_mask"].shape[1]
    logp, entropy = step_lib.completion_logprobs(
      graphdef, params, batch["tokens"], batch["mask"], t, 1.0, 1
    )
    old, mask = batch["old_logprobs"], batch["completion_mask"]
    ratio = jnp.exp(logp - old)
    adv = batch["advantages"][:, None]
    unclipped, clipped = ratio * adv, jnp.clip(ratio, 1.0 - 0.2, 1.0 + 0.28) * adv
    pg = losses.aggregate(-jnp.minimum(unclipped, clipped), mask, "token-mean")
    kl = losses.aggregate(losses.kl_k3(logp, batch["ref_logprobs"]), mask, "token-mean")
    fmask = mask.astype(jnp.float32)
    n = jnp.maximum(jnp.sum(fmask), 1.0)
    return pg + 0.1 * kl, {
      "pg_loss": pg,
      "kl": kl,
      "entropy": jnp.sum(entropy * fmask) / n,
      "clip_fraction": jnp.sum((clipped < unclipped) * fmask) / n,
    }

  @jax.jit
  def old_step(params, opt_state, batch):
    (_, out), grads = jax.value_and_grad(old_loss_fn, has_aux=True)(params, batch)
    updates, opt_state = _SGD.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), out

  batch = _rl_batch(
    logprob_fn, params, [1.0, -1.0, 0.5, -0.5, 1.0, -0.25], shift=[0.0, 0.3, -0.3, 0.2, 0.0, -0.1]
  )
  batch["ref_logprobs"] = batch["old_logprobs"] + 0.2 * batch["completion_mask"]
  device = step_lib.to_device(batch)
  fresh = jax.tree.map(jnp.array, params)
  new_params, _, new = rl_step(kl_beta=0.1)(
    fresh, _SGD.init(fresh), device, np.arange(6, dtype=np.int32)
  )
  before, old = old_step(params, _SGD.init(params), device)
  for a, b in zip(jax.tree.leaves(new_params), jax.tree.leaves(before), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  for key, value in old.items():
    np.testing.assert_array_equal(new[key], value, err_msg=key)
