"""Jitted train steps (RL, SFT, DPO) over (graphdef, params) with donated buffers.

A batch holds whole sequences (prompt left-padded, then the completion or answer right-padded)
and `completion_mask` over the last T positions, where the loss lives.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from precisecoder import multihost
from precisecoder.model import lora
from precisecoder.model.sharding import constrain
from precisecoder.train import losses


def make_optimizer(
  optim: ml_collections.ConfigDict, adapters_only: bool = False
) -> optax.GradientTransformation:
  """Global-norm clipping (when grad_clip > 0), then AdamW after a linear warm-up.

  `adapters_only` (LoRA, model/lora.py): all of it on the adapters alone, whose Adam moments
  are then the whole optimiser state; every other parameter's update is zero."""
  warmup = max(int(optim.warmup_steps), 0)
  schedule = (
    optax.join_schedules(
      [
        optax.linear_schedule(0.0, optim.learning_rate, max(warmup, 1)),
        optax.constant_schedule(optim.learning_rate),
      ],
      [warmup],
    )
    if warmup
    else optim.learning_rate
  )
  parts = [optax.clip_by_global_norm(optim.grad_clip)] if optim.grad_clip > 0 else []
  parts.append(optax.adamw(schedule, b1=optim.b1, b2=optim.b2, weight_decay=optim.weight_decay))
  tx = optax.chain(*parts)
  if adapters_only:
    tx = optax.multi_transform({"adapter": tx, "frozen": optax.set_to_zero()}, lora.adapter_labels)
  return tx


def init_optimizer(tx: optax.GradientTransformation, params: Any, mesh: Mesh | None = None) -> Any:
  """The optimiser state; on a mesh each moment is sharded like its parameter (else jit
  would replicate them) and the rest (step counts) is replicated."""
  if mesh is None:
    return jax.jit(tx.init)(params)
  return jax.jit(tx.init, out_shardings=state_shardings(tx, params, mesh))(params)


def state_shardings(tx: optax.GradientTransformation, params: Any, mesh: Mesh) -> Any:
  """The shardings of `tx`'s state for `params` (arrays or ShapeDtypeStructs with shardings):
  a leaf whose path ends with a parameter's path (an Adam moment) is sharded like it, the rest
  replicated. By path, not `optax.tree_map_params`, which does not see through the masked
  state of a LoRA optimiser."""
  by_path = {_keys(path): p.sharding for path, p in jax.tree_util.tree_flatten_with_path(params)[0]}
  replicated = NamedSharding(mesh, PartitionSpec())

  def one(path, _):
    keys = _keys(path)
    for start in range(len(keys)):
      if keys[start:] in by_path:
        return by_path[keys[start:]]
    return replicated

  return jax.tree_util.tree_map_with_path(one, jax.eval_shape(tx.init, params))


def _keys(path) -> tuple[str, ...]:
  return tuple(str(getattr(e, "key", getattr(e, "name", getattr(e, "idx", e)))) for e in path)


def completion_logprobs(
  graphdef: nnx.GraphDef,
  params: nnx.State,
  tokens: jax.Array,
  mask: jax.Array,
  completion_len: int,
  temperature: float = 1.0,
  group: int = 1,
) -> tuple[jax.Array, jax.Array]:
  """(log-prob, entropy) [B, T] of the last `completion_len` tokens given what precedes them.

  `group` > 1: rows come in groups of that many consecutive rows sharing one prompt (an RL
  group's samples), and each prompt is computed once for its group (`shared_prefix_hidden`).
  The vocabulary projection runs in chunks (`ModelConfig.logprob_chunk` tokens) unless that
  is 0, which keeps the full [B, T, V] float32 logits (the baseline of bench_memory.py).
  """
  model = nnx.merge(graphdef, params)
  start = tokens.shape[1] - completion_len
  targets = tokens[:, start:]
  if group > 1:
    hidden = model.shared_prefix_hidden(
      tokens[::group, :start], mask[::group, :start], targets, mask[:, start:]
    )
  else:
    hidden = model.hidden_states(tokens, mask)[:, start - 1 : -1]
  chunk = model.config.logprob_chunk
  if not chunk:
    return losses.token_logprobs(model.logits(hidden), targets, temperature)
  weight, axes = model.output_projection()
  return losses.chunked_token_logprobs(
    hidden, weight, targets, weight_axes=axes, temperature=temperature, chunk_tokens=chunk
  )


def _apply(tx, params, opt_state, grads):
  updates, opt_state = tx.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, optax.tree.norm(grads)


def make_rl_step(
  graphdef: nnx.GraphDef, tx: optax.GradientTransformation, rl: ml_collections.ConfigDict
) -> Callable:
  """step(params, opt_state, batch, rows) -> (params, opt_state, metrics): one update on
  the minibatch `batch[rows]` (whole groups, in order, when `rl.shared_prompt`)."""
  group = shared_group(rl)
  loss_name = rl.get("policy_loss", "ppo_clip")
  clip = (
    (rl.gspo_clip_low, rl.gspo_clip_high) if loss_name == "gspo" else (rl.clip_low, rl.clip_high)
  )
  correction = rl.get("is_correction", "none")
  level, cap = is_level(rl), float(rl.get("is_cap", 2.0))

  def loss_fn(params, batch):
    t = batch["completion_mask"].shape[1]
    logp, entropy = completion_logprobs(
      graphdef, params, batch["tokens"], batch["mask"], t, rl.temperature, group
    )
    cmask = batch["completion_mask"]
    behaviour = batch["old_logprobs"]
    old, weights = behaviour, None
    if correction != "none":
      # verl's decoupled form: PPO's ratio to the learner before this step's updates, and
      # the truncated learner/sampler ratio as a weight on each token's surrogate.
      old = batch["learner_logprobs"]
      weights = losses.is_weights(old, behaviour, cmask, level, cap)
    out = losses.policy_loss(
      logp,
      old,
      batch["advantages"],
      cmask,
      clip_low=clip[0],
      clip_high=clip[1],
      aggregation=rl.aggregation,
      entropy=entropy,
      ref_logp=batch.get("ref_logprobs"),
      kl_beta=rl.kl_beta,
      loss=loss_name,
      kl_estimator=rl.get("kl_estimator", "k3"),
      weights=weights,
    )
    mismatch = losses.mismatch_metrics(jax.lax.stop_gradient(logp), behaviour, cmask, level, cap)
    return out.loss, (out, mismatch)

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, batch, rows):
    # The minibatch is gathered on device from the step's global batch, so its rows may come
    # from any host's rollouts: minibatches are the same for any number of hosts.
    minibatch = {
      k: constrain(v[rows], ("batch",) + (None,) * (v.ndim - 1)) for k, v in batch.items()
    }
    (_, (out, mismatch)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, minibatch)
    params, opt_state, gnorm = _apply(tx, params, opt_state, grads)
    return params, opt_state, {**out._asdict(), "grad_norm": gnorm, **mismatch}

  return step


def is_level(rl: ml_collections.ConfigDict) -> str:
  """The importance-sampling level of `rl.is_correction` (token without one: its metrics)."""
  return "sequence" if rl.get("is_correction", "none") == "sequence_tis" else "token"


def needs_logprob_fn(rl: ml_collections.ConfigDict) -> bool:
  """Whether a step computes log-probs outside its updates: the reference's (kl_beta > 0),
  the learner's before the updates (an importance-sampling correction)."""
  return rl.kl_beta > 0 or rl.get("is_correction", "none") != "none"


def add_step_logprobs(
  logprob_fn: Callable,
  params: Any,
  reference_params: Any,
  device_batch: dict[str, jax.Array],
  rl: ml_collections.ConfigDict,
) -> None:
  """Adds to `device_batch` the log-probs its updates need beyond the rollout's: the
  reference policy's (`ref_logprobs`, kl_beta > 0) and, with an importance-sampling
  correction, the learner's at `params`, before the step's first update
  (`learner_logprobs`)."""
  args = (device_batch["tokens"], device_batch["mask"], device_batch["completion_mask"])
  if rl.kl_beta > 0:
    device_batch["ref_logprobs"] = logprob_fn(reference_params, *args)
  if rl.get("is_correction", "none") != "none":
    device_batch["learner_logprobs"] = logprob_fn(params, *args)


def mismatch_metrics(
  minibatch_metrics: list[dict[str, Any]],
  device_batch: dict[str, Any],
  rl: ml_collections.ConfigDict,
) -> dict[str, float]:
  """The sampler/learner log-ratio metrics of a step (`losses.mismatch_metrics`): over the
  whole batch where the learner's log-probs were computed (a correction), else from the
  step's first update, whose minibatch met the parameters that sampled it."""
  if "learner_logprobs" in device_batch:
    out = _mismatch(
      device_batch["learner_logprobs"],
      device_batch["old_logprobs"],
      device_batch["completion_mask"],
      is_level(rl),
      float(rl.is_cap),
    )
  else:
    out = {k: v for k, v in minibatch_metrics[0].items() if k.startswith("is_")}
  return {k: float(v) for k, v in jax.device_get(out).items()}


_mismatch = jax.jit(losses.mismatch_metrics, static_argnums=(3, 4))


def shared_group(rl: ml_collections.ConfigDict) -> int:
  """Rows per shared prompt in the RL step: the group size with `rl.shared_prompt`, else 1."""
  return int(rl.group_size) if rl.get("shared_prompt", False) else 1


def make_logprob_fn(graphdef: nnx.GraphDef, temperature: float = 1.0, group: int = 1) -> Callable:
  """logprobs(params, tokens, mask, completion_mask) -> [B, T] (reference policy, DPO)."""

  @jax.jit
  def fn(params, tokens, mask, completion_mask):
    logp, _ = completion_logprobs(
      graphdef, params, tokens, mask, completion_mask.shape[1], temperature, group
    )
    return logp * completion_mask

  return fn


def prompt_logprobs(
  graphdef: nnx.GraphDef,
  params: nnx.State,
  tokens: jax.Array,
  mask: jax.Array,
  completion_len: int,
  group: int = 1,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(log-prob [B, T], prompt log-prob [N, P - 1], prompt mask [N, P - 1]): the completion's
  tokens as `completion_logprobs`, and each prompt token after the first given those before
  it (its mask: both tokens real), one row per prompt (`group` consecutive rows share one)."""
  model = nnx.merge(graphdef, params)
  start = tokens.shape[1] - completion_len
  targets = tokens[:, start:]
  if group > 1:
    prefix, prefix_mask = tokens[::group, :start], mask[::group, :start]
    prefix_hidden, hidden = model.shared_prefix_hidden(
      prefix, prefix_mask, targets, mask[:, start:], with_prefix=True
    )
  else:
    prefix, prefix_mask = tokens[:, :start], mask[:, :start]
    every = model.hidden_states(tokens, mask)
    prefix_hidden, hidden = every[:, :start], every[:, start - 1 : -1]
  prompt_mask = prefix_mask[:, :-1] & prefix_mask[:, 1:]
  chunk = model.config.logprob_chunk
  out = []
  for h, t in ((hidden, targets), (prefix_hidden[:, :-1], prefix[:, 1:])):
    if not chunk:
      out.append(losses.token_logprobs(model.logits(h), t)[0])
    else:
      weight, axes = model.output_projection()
      out.append(
        losses.chunked_token_logprobs(h, weight, t, weight_axes=axes, chunk_tokens=chunk)[0]
      )
  return out[0], out[1], prompt_mask


def make_sft_step(
  graphdef: nnx.GraphDef,
  tx: optax.GradientTransformation,
  group: int = 1,
  prompt_weight: float = 0.0,
) -> Callable:
  """`group` > 1: consecutive rows come in groups sharing one prompt (several targets each).

  `prompt_weight` > 0: the loss adds that times the prompts' mean negative log-likelihood
  (each prompt once, `prompt_logprobs`); the metric `loss` stays the answers' alone, the one
  every SFT run reports, and `prompt_loss` is the prompts'."""

  def loss_fn(params, batch):
    t = batch["completion_mask"].shape[1]
    if prompt_weight <= 0:
      logp, _ = completion_logprobs(
        graphdef, params, batch["tokens"], batch["mask"], t, group=group
      )
      loss = losses.sft_loss(logp, batch["completion_mask"])
      return loss, {"loss": loss}
    logp, prompt_logp, prompt_mask = prompt_logprobs(
      graphdef, params, batch["tokens"], batch["mask"], t, group
    )
    loss = losses.sft_loss(logp, batch["completion_mask"])
    prompt_loss = losses.sft_loss(prompt_logp, prompt_mask)
    return loss + prompt_weight * prompt_loss, {"loss": loss, "prompt_loss": prompt_loss}

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, batch):
    (_, out), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
    params, opt_state, gnorm = _apply(tx, params, opt_state, grads)
    return params, opt_state, {**out, "grad_norm": gnorm}

  return step


def make_dpo_step(
  graphdef: nnx.GraphDef, tx: optax.GradientTransformation, beta: float
) -> Callable:
  """Pairs interleaved in one batch: row 2i chosen, row 2i + 1 rejected, so a pair stays
  whole however the rows are dealt to hosts; `pair_weights` [B/2] is 0 for padding pairs."""

  def loss_fn(params, batch):
    t = batch["completion_mask"].shape[1]
    logp, _ = completion_logprobs(graphdef, params, batch["tokens"], batch["mask"], t)
    seq = jnp.sum(logp * batch["completion_mask"], axis=-1)
    ref = batch["ref_seq_logprobs"]
    return losses.dpo_loss(
      seq[0::2], seq[1::2], ref[0::2], ref[1::2], beta, weights=batch["pair_weights"]
    )

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, batch):
    (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
    params, opt_state, gnorm = _apply(tx, params, opt_state, grads)
    return params, opt_state, {"loss": loss, "preference_accuracy": accuracy, "grad_norm": gnorm}

  return step


def to_device(batch: dict[str, Any], mesh: Mesh | None = None) -> dict[str, jax.Array]:
  """Device arrays of a batch; on a mesh, one global batch sharded over its batch axes,
  built from each host's rows (host-major)."""
  if mesh is None:
    return {k: jnp.asarray(v) for k, v in batch.items()}
  return multihost.global_batch(dict(batch), mesh)
