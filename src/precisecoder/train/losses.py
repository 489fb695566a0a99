"""Policy-gradient, KL, SFT and DPO losses on per-token log-probs (pure JAX, jit-friendly).

Shapes: [B, T] for per-token arrays (T = completion tokens), [B] for per-sequence ones.
`mask` marks real completion tokens.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from precisecoder.intmath import cdiv

AGGREGATIONS = (
  "token-mean",
  "seq-mean-token-mean",
  "seq-mean-token-sum",
  "seq-mean-token-sum-norm",
)
POLICY_LOSSES = ("ppo_clip", "gspo")
# verl's `kl_penalty` names: k1 "kl", k2 "mse", k3 "low_var_kl"; "+": k2's gradient under the
# estimator's value (straight-through), k2 being the one whose expected gradient is KL's.
KL_ESTIMATORS = ("k1", "k2", "k3", "k1+", "k3+")
IS_CORRECTIONS = ("none", "token_tis", "sequence_tis")
_GSPO_MAX_LOG_RATIO = 10.0  # verl clamps the sequence log-ratio here: exp stays finite
_IS_LOG_BOUND = 20.0  # verl's safety bound on a log importance ratio before exp


def token_logprobs(
  logits: jax.Array, targets: jax.Array, temperature: float = 1.0
) -> tuple[jax.Array, jax.Array]:
  """(log p(target), entropy) per position under softmax(logits / temperature)."""
  logp_all = jax.nn.log_softmax(logits.astype(jnp.float32) / temperature, axis=-1)
  logp = jnp.take_along_axis(logp_all, targets[..., None], axis=-1)[..., 0]
  entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
  return logp, entropy


def chunked_token_logprobs(
  hidden: jax.Array,
  weight: jax.Array,
  targets: jax.Array,
  *,
  weight_axes: str = "vd",
  temperature: float = 1.0,
  chunk_tokens: int = 1024,
) -> tuple[jax.Array, jax.Array]:
  """`token_logprobs(hidden @ weight, targets)` without the [B, T, V] float32 logits.

  hidden [B, T, D] (after the final norm), weight [V, D] (`weight_axes="vd"`, tied embeddings)
  or [D, V] ("dv"). Positions are taken `chunk_tokens // B` at a time: each chunk's logits
  exist only inside its step, forward and backward (a custom VJP recomputes them), so peak
  memory is a few [chunk_tokens, V] float32 arrays whatever T is. The weight's gradient is
  accumulated in float32 across chunks.
  """
  if weight_axes not in ("vd", "dv"):
    raise ValueError(f"weight_axes {weight_axes!r}: want 'vd' or 'dv'")
  b, t, d = hidden.shape
  c = max(1, min(t, chunk_tokens // b))
  n = cdiv(t, c)
  hidden = jnp.pad(hidden, ((0, 0), (0, n * c - t), (0, 0)))
  targets = jnp.pad(targets, ((0, 0), (0, n * c - t)))
  h_chunks = hidden.reshape(b, n, c, d).swapaxes(0, 1)  # [n, B, c, D]
  t_chunks = targets.reshape(b, n, c).swapaxes(0, 1)
  logp, entropy = _chunked_logprobs(h_chunks, weight, t_chunks, weight_axes, float(temperature))
  unchunk = lambda x: x.swapaxes(0, 1).reshape(b, n * c)[:, :t]
  return unchunk(logp), unchunk(entropy)


def _chunk_logits(h, weight, weight_axes, temperature):
  spec = "btd,vd->btv" if weight_axes == "vd" else "btd,dv->btv"
  return jnp.einsum(spec, h, weight, preferred_element_type=jnp.float32) / temperature


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _chunked_logprobs(h_chunks, weight, t_chunks, weight_axes, temperature):

  def one(args):
    h, tgt = args
    return token_logprobs(_chunk_logits(h, weight, weight_axes, temperature), tgt)

  return jax.lax.map(one, (h_chunks, t_chunks))


def _chunked_logprobs_fwd(h_chunks, weight, t_chunks, weight_axes, temperature):
  out = _chunked_logprobs(h_chunks, weight, t_chunks, weight_axes, temperature)
  return out, (h_chunks, weight, t_chunks)


def _chunked_logprobs_bwd(weight_axes, temperature, residuals, cotangents):
  h_chunks, weight, t_chunks = residuals
  g_logp, g_entropy = cotangents

  def one(dw, args):
    h, tgt, g_lp, g_ent = args
    logp_all = jax.nn.log_softmax(_chunk_logits(h, weight, weight_axes, temperature), axis=-1)
    p = jnp.exp(logp_all)
    entropy = -jnp.sum(p * logp_all, axis=-1, keepdims=True)
    # d logp[target] / dz = onehot - p;  d entropy / dz = -p (log p + entropy).
    dz = -p * (g_lp[..., None] + g_ent[..., None] * (logp_all + entropy))
    dz = dz + g_lp[..., None] * jax.nn.one_hot(tgt, dz.shape[-1], dtype=dz.dtype)
    dz = (dz / temperature).astype(weight.dtype)
    if weight_axes == "vd":
      dh = jnp.einsum("btv,vd->btd", dz, weight, preferred_element_type=jnp.float32)
      dw = dw + jnp.einsum("btv,btd->vd", dz, h, preferred_element_type=jnp.float32)
    else:
      dh = jnp.einsum("btv,dv->btd", dz, weight, preferred_element_type=jnp.float32)
      dw = dw + jnp.einsum("btd,btv->dv", h, dz, preferred_element_type=jnp.float32)
    return dw, dh.astype(h.dtype)

  dw, dh = jax.lax.scan(
    one, jnp.zeros(weight.shape, jnp.float32), (h_chunks, t_chunks, g_logp, g_entropy)
  )
  return dh, dw.astype(weight.dtype), None


_chunked_logprobs.defvjp(_chunked_logprobs_fwd, _chunked_logprobs_bwd)


def aggregate(per_token: jax.Array, mask: jax.Array, mode: str) -> jax.Array:
  """Reduces a [B, T] per-token loss to a scalar.

  token-mean: every token in the batch weighs the same (DAPO).
  seq-mean-token-mean: mean over each sequence, then over sequences (GRPO as published).
  seq-mean-token-sum: each sequence's token sum, averaged over sequences (verl's name).
  seq-mean-token-sum-norm: token sums divided by a constant T (Dr. GRPO: no length bias).
  """
  mask = mask.astype(per_token.dtype)
  if mode == "token-mean":
    return jnp.sum(per_token * mask) / jnp.maximum(jnp.sum(mask), 1.0)
  if mode == "seq-mean-token-mean":
    per_seq = jnp.sum(per_token * mask, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1.0)
    return jnp.mean(per_seq)
  if mode == "seq-mean-token-sum":
    return jnp.mean(jnp.sum(per_token * mask, axis=-1))
  if mode == "seq-mean-token-sum-norm":
    return jnp.sum(per_token * mask) / (per_token.shape[0] * per_token.shape[1])
  raise ValueError(f"unknown loss aggregation {mode!r}; known: {AGGREGATIONS}")


class PolicyLoss(NamedTuple):
  loss: jax.Array
  pg_loss: jax.Array
  kl: jax.Array  # to the reference policy (0 without one)
  entropy: jax.Array
  clip_fraction: jax.Array
  ratio_mean: jax.Array
  kl_sampler: jax.Array  # KL(sampling policy || current), k3 on the sampled tokens


def kl_k3(logp: jax.Array, ref_logp: jax.Array) -> jax.Array:
  """Per-token KL(policy || reference) estimate exp(r - p) - (r - p) - 1 (always >= 0)."""
  delta = ref_logp - logp
  return jnp.exp(delta) - delta - 1.0


def kl_estimate(logp: jax.Array, ref_logp: jax.Array, estimator: str = "k3") -> jax.Array:
  """Per-token estimate of KL(policy || reference) on tokens sampled from the policy
  (Schulman, "Approximating KL divergence", 2020).

  k1: p - r (unbiased, high variance, can be negative); k2: (p - r)^2 / 2 (biased, its
  gradient is KL's in expectation); k3: exp(r - p) - (r - p) - 1 (unbiased, >= 0).
  "k1+" / "k3+": the value of k1 / k3 with k2's gradient (straight-through, as verl's
  `kl_penalty`), so the estimate logged is unbiased and the gradient that of KL.
  """
  base = estimator[:-1] if estimator.endswith("+") else estimator
  if base == "k1":
    value = logp - ref_logp
  elif base == "k2":
    value = 0.5 * jnp.square(logp - ref_logp)
  elif base == "k3":
    value = kl_k3(logp, ref_logp)
  else:
    raise ValueError(f"unknown KL estimator {estimator!r}; known: {KL_ESTIMATORS}")
  if not estimator.endswith("+") or base == "k2":
    return value
  k2 = 0.5 * jnp.square(logp - ref_logp)
  return k2 - jax.lax.stop_gradient(k2) + jax.lax.stop_gradient(value)


def gspo_log_ratio(logp: jax.Array, old_logp: jax.Array, mask: jax.Array) -> jax.Array:
  """GSPO-token's log s_i,t = sg[log s_i] + log p_t - sg[log p_t] [B, T], where log s_i is the
  sequence's mean token log-ratio (Zheng et al. 2025, eq. 7 and 13): each token carries the
  sequence's ratio as value and its own log-prob's gradient. With one advantage per sequence
  (ours), its gradient is the sequence-level GSPO objective's, whatever the aggregation."""
  fmask = mask.astype(jnp.float32)
  length = jnp.maximum(jnp.sum(fmask, axis=-1), 1.0)
  seq = jnp.sum((logp - old_logp) * fmask, axis=-1) / length
  log_ratio = logp - jax.lax.stop_gradient(logp) + jax.lax.stop_gradient(seq)[:, None]
  return jnp.minimum(log_ratio, _GSPO_MAX_LOG_RATIO)


def is_log_ratio(
  learner_logp: jax.Array, behaviour_logp: jax.Array, mask: jax.Array, level: str
) -> jax.Array:
  """log(π_learner / π_behaviour) per token ("token") or per sequence, broadcast over its
  tokens ("sequence": the sum over the sequence's tokens) [B, T]; 0 off the mask."""
  fmask = mask.astype(jnp.float32)
  log_ratio = (learner_logp - behaviour_logp) * fmask
  if level == "sequence":
    log_ratio = jnp.broadcast_to(jnp.sum(log_ratio, axis=-1, keepdims=True), log_ratio.shape)
  elif level != "token":
    raise ValueError(f"importance-sampling level {level!r}: want 'token' or 'sequence'")
  return log_ratio * fmask


def is_weights(
  learner_logp: jax.Array, behaviour_logp: jax.Array, mask: jax.Array, level: str, cap: float
) -> jax.Array:
  """Truncated importance weights min(π_learner / π_behaviour, cap) [B, T] (TIS: Yao et al.
  2025; verl `rollout_is`), per token or per sequence, 0 off the mask, without gradient: they
  reweight the samples' loss, they are not optimised."""
  log_ratio = is_log_ratio(learner_logp, behaviour_logp, mask, level)
  raw = jnp.exp(jnp.clip(log_ratio, -_IS_LOG_BOUND, _IS_LOG_BOUND)) * mask.astype(jnp.float32)
  return jax.lax.stop_gradient(jnp.minimum(raw, cap))


def mismatch_metrics(
  learner_logp: jax.Array, behaviour_logp: jax.Array, mask: jax.Array, level: str, cap: float
) -> dict[str, jax.Array]:
  """How far the learner's log-probs are from the sampler's on the sampled tokens: the mean
  token log-ratio, its largest magnitude, and the fraction of tokens (or sequences, at
  sequence level) whose importance weight exceeds `cap` (would be truncated)."""
  fmask = mask.astype(jnp.float32)
  n = jnp.maximum(jnp.sum(fmask), 1.0)
  token = (learner_logp - behaviour_logp) * fmask
  log_ratio = is_log_ratio(learner_logp, behaviour_logp, mask, level)
  over = (log_ratio > jnp.log(cap)) & mask
  if level == "sequence":
    rows = jnp.maximum(jnp.sum(jnp.any(mask, axis=-1)), 1)
    truncated = jnp.sum(jnp.any(over, axis=-1)) / rows
  else:
    truncated = jnp.sum(over) / n
  return {
    "is_log_ratio_mean": jnp.sum(token) / n,
    "is_log_ratio_max_abs": jnp.max(jnp.abs(token)),
    "is_truncated_fraction": truncated.astype(jnp.float32),
  }


def policy_loss(
  logp: jax.Array,
  old_logp: jax.Array,
  advantages: jax.Array,
  mask: jax.Array,
  *,
  clip_low: float = 0.2,
  clip_high: float = 0.2,
  aggregation: str = "token-mean",
  entropy: jax.Array | None = None,
  ref_logp: jax.Array | None = None,
  kl_beta: float = 0.0,
  loss: str = "ppo_clip",
  kl_estimator: str = "k3",
  weights: jax.Array | None = None,
) -> PolicyLoss:
  """Clipped surrogate + β·KL to the reference, reduced by `aggregation`.

  ppo_clip: the PPO ratio per token, with separate lower/upper clip (DAPO's clip-higher).
  gspo: the sequence's ratio (geometric mean of its token ratios) in the GSPO-token form
  (`gspo_log_ratio`), clipped by the given range (GSPO's is ~1e-3 wide, not PPO's 0.2).
  `weights` [B, T] (no gradient) multiply each token's surrogate: truncated importance
  weights (`is_weights`), as verl applies `rollout_is_weights`.
  """
  if loss == "ppo_clip":
    ratio = jnp.exp(logp - old_logp)
  elif loss == "gspo":
    ratio = jnp.exp(gspo_log_ratio(logp, old_logp, mask))
  else:
    raise ValueError(f"unknown policy loss {loss!r}; known: {POLICY_LOSSES}")
  adv = advantages[:, None]
  unclipped = ratio * adv
  clipped = jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
  per_token = -jnp.minimum(unclipped, clipped)
  if weights is not None:
    per_token = per_token * weights
  fmask = mask.astype(jnp.float32)
  pg = aggregate(per_token, mask, aggregation)
  if ref_logp is not None:
    kl = aggregate(kl_estimate(logp, ref_logp, kl_estimator), mask, aggregation)
  else:
    kl = jnp.zeros((), jnp.float32)
  total = pg + kl_beta * kl
  n = jnp.maximum(jnp.sum(fmask), 1.0)
  clip_fraction = jnp.sum((clipped < unclipped) * fmask) / n
  ent = jnp.zeros((), jnp.float32) if entropy is None else jnp.sum(entropy * fmask) / n
  # How far the update has moved the policy from the one that sampled these tokens (~0 in
  # the first minibatch of a step, up to numerics; grows over its later minibatches).
  kl_sampler = jnp.sum(kl_k3(old_logp, logp) * fmask) / n
  return PolicyLoss(
    loss=total,
    pg_loss=pg,
    kl=kl,
    entropy=ent,
    clip_fraction=clip_fraction,
    ratio_mean=jnp.sum(ratio * fmask) / n,
    kl_sampler=kl_sampler,
  )


def sft_loss(logp: jax.Array, mask: jax.Array) -> jax.Array:
  """Mean negative log-likelihood of the answer tokens."""
  return aggregate(-logp, mask, "token-mean")


def dpo_loss(
  policy_chosen: jax.Array,
  policy_rejected: jax.Array,
  ref_chosen: jax.Array,
  ref_rejected: jax.Array,
  beta: float = 0.1,
  weights: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
  """DPO on summed sequence log-probs [B]; returns (loss, preference accuracy), means over the
  pairs weighted by `weights` [B] (default all 1; 0 drops a padding pair)."""
  margin = beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))
  if weights is None:
    weights = jnp.ones_like(margin)
  total = jnp.maximum(jnp.sum(weights), 1e-9)
  return (
    jnp.sum(weights * -jax.nn.log_sigmoid(margin)) / total,
    jnp.sum(weights * (margin > 0)) / total,
  )
