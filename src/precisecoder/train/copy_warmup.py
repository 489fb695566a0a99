"""An induction warm-up before SFT: copying spans of random tokens.

A small decoder trained from scratch on the program space learns the programs' statistics long
before it learns to copy the program in its prompt (benchmarks/RESULTS.md, "Why the
program-space base does not copy"). On random tokens nothing but a copy predicts anything, so
the copy circuit (induction heads: attend to the token after an earlier occurrence of the
current one) is the only thing to learn, and short rows make each step cheap.

Each row: a prompt of `length` tokens drawn uniformly from the vocabulary (special tokens
left out) and an answer that repeats a span of `length // 2` of them starting at a random
offset. The span's first token cannot be predicted (the offset is random); every later one
can, by copying. The copy accuracy is the share of those later tokens the model gives more
than half its probability (so they are its greedy choice), on a batch it never trains on.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging
from flax import nnx

from precisecoder.train import losses, sequences, step as step_lib


def copy_batch(
  rng: np.random.Generator, token_ids: Sequence[int], rows: int, length: int, pad_id: int
) -> dict[str, np.ndarray]:
  """`rows` rows of a random prompt of `length` tokens and a copy of a random half of it."""
  if length < 4:
    raise ValueError(f"copy warm-up rows need at least 4 tokens, got length {length}")
  ids = np.asarray(token_ids)
  span = length // 2
  prompts = rng.choice(ids, size=(rows, length))
  starts = rng.integers(0, length - span + 1, size=rows)
  answers = [p[s : s + span].tolist() for p, s in zip(prompts, starts)]
  return sequences.sequence_batch(prompts.tolist(), answers, pad_id, multiple=8)


def answer_logprobs(graphdef: nnx.GraphDef, params: Any, batch, ids: jax.Array | None) -> jax.Array:
  """log p [B, T] of each answer token; with `ids` [K] under a softmax over those ids alone
  (the answer's tokens must be among them)."""
  t = batch["completion_mask"].shape[1]
  if ids is None:
    return step_lib.completion_logprobs(graphdef, params, batch["tokens"], batch["mask"], t)[0]
  model = nnx.merge(graphdef, params)
  tokens = batch["tokens"]
  start = tokens.shape[1] - t
  hidden = model.hidden_states(tokens, batch["mask"])[:, start - 1 : -1]
  weight, axes = model.output_projection()
  weight = weight[ids] if axes == "vd" else weight[:, ids].T
  logits = jnp.einsum("btd,kd->btk", hidden, weight, preferred_element_type=jnp.float32)
  # Each answer token's place among `ids` (padding, outside the mask, finds place 0).
  place = jnp.argmax(tokens[:, start:, None] == ids[None, None, :], axis=-1)
  return jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), place[..., None], axis=-1)[..., 0]


def make_step(graphdef: nnx.GraphDef, tx: optax.GradientTransformation) -> Callable:
  """step(params, opt_state, batch, ids) -> (params, opt_state, metrics): one update on the
  answers' mean negative log-likelihood, under a softmax over `ids` alone (None: all)."""

  def loss_fn(params, batch, ids):
    return losses.sft_loss(answer_logprobs(graphdef, params, batch, ids), batch["completion_mask"])

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, batch, ids):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, ids)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, {"loss": loss}

  return step


def make_accuracy_fn(graphdef: nnx.GraphDef) -> Callable:
  """accuracy(params, batch, ids=None): the share of answer tokens after the first that the
  model gives probability > 1/2 (with `ids`, under the softmax over them alone)."""

  @jax.jit
  def fn(params, batch, ids=None):
    logp = answer_logprobs(graphdef, params, batch, ids)
    mask = batch["completion_mask"][:, 1:]
    hits = (logp[:, 1:] > math.log(0.5)) & mask
    return jnp.sum(hits) / jnp.maximum(jnp.sum(mask), 1)

  return fn


def token_ids(tokenizer: Any, special: Sequence[int] = (), limit: int = 0) -> list[int]:
  """The ids the warm-up draws from: the vocabulary but its special tokens (the tokenizer's,
  if it names them, and `special`); with `limit` > 0 only the `limit` lowest of them (a BPE's
  bytes and most frequent merges: fewer distinct tokens make the copy circuit form sooner)."""
  left_out = set(getattr(tokenizer, "all_special_ids", ())) | set(special)
  ids = [i for i in range(len(tokenizer)) if i not in left_out]
  return ids[:limit] if limit > 0 else ids


def stages(count: int, first: int, widen: int) -> list[int]:
  """How many of `count` ids each stage of a widening warm-up draws from: `first` (0: all),
  times `widen` (< 2: no widening) each stage, the last all of them."""
  sizes = [min(first, count) if first > 0 else count]
  while widen >= 2 and sizes[-1] < count:
    sizes.append(min(sizes[-1] * widen, count))
  return sizes


def warm_up(
  graphdef: nnx.GraphDef,
  params: Any,
  tx: optax.GradientTransformation,
  *,
  token_ids: Sequence[int],
  pad_id: int,
  steps: int,
  rows: int,
  length: int,
  seed: int,
  log_every: int = 25,
  log_path: pathlib.Path | None = None,
  stop: Callable[[], bool] | None = None,
  target_accuracy: float = 0.0,
  first: int = 0,
  widen: int = 0,
  own_softmax: bool = False,
) -> tuple[Any, dict[str, float]]:
  """`params` after `steps` copy steps of `rows` rows (its own optimiser state, dropped
  after), or fewer: with `target_accuracy` > 0 it ends at the first logged step whose copy
  accuracy reaches it (the circuit forms in a phase change whose step no fixed count
  foresees). Rows draw from the `first` of `token_ids` (0: all); with `widen` >= 2 (and a
  target) each time the target is reached the ids widen that many times (`stages`), and it
  ends when the target is reached on all of them: a copy learnt on a few ids, then carried to
  the whole vocabulary. Returns the last loss, copy accuracy, step and number of ids,
  `reached` 1.0 when the target was reached on the last stage, and `stopped` 1.0 when `stop()`
  (asked before each step) ended it early. Each logged step is a JSON line of `log_path`
  (step, ids, loss, accuracy, seconds). `own_softmax`: loss and accuracy under a softmax over
  the stage's ids alone, so that the model need not first learn to rule out the rest of its
  vocabulary (with a few ids of a large vocabulary that slows the copy's forming)."""
  if widen >= 2 and target_accuracy <= 0:
    raise ValueError("a widening copy warm-up needs a target accuracy to move on at")
  step_fn = make_step(graphdef, tx)
  accuracy_fn = make_accuracy_fn(graphdef)
  opt_state = step_lib.init_optimizer(tx, params)
  rng = np.random.default_rng([seed, 0xC0B1])
  sizes = stages(len(token_ids), first, widen)

  def held_out(size: int):  # rows it never trains on, from the stage's ids
    key = [seed, 0xE7A1] if size == sizes[0] else [seed, 0xE7A1, size]
    ids = token_ids[:size]
    return step_lib.to_device(copy_batch(np.random.default_rng(key), ids, rows, length, pad_id))

  def softmax_ids(size: int):
    return jnp.asarray(list(token_ids[:size]), jnp.int32) if own_softmax else None

  stage, held, stage_ids = 0, held_out(sizes[0]), softmax_ids(sizes[0])
  out = {"loss": float("nan"), "accuracy": float("nan"), "step": 0.0, "ids": float(sizes[0])}
  out.update(reached=0.0, stopped=0.0)
  t0 = time.perf_counter()
  for step in range(1, steps + 1):
    if stop is not None and stop():
      return params, {**out, "stopped": 1.0}
    ids = token_ids[: sizes[stage]]
    batch = step_lib.to_device(copy_batch(rng, ids, rows, length, pad_id))
    params, opt_state, m = step_fn(params, opt_state, batch, stage_ids)
    if step % log_every == 0 or step == steps:
      accuracy = float(accuracy_fn(params, held, stage_ids))
      reached = target_accuracy > 0 and accuracy >= target_accuracy
      out = {"loss": float(m["loss"]), "accuracy": accuracy, "step": float(step)}
      out.update(ids=float(len(ids)), reached=0.0, stopped=0.0)
      row = {"step": step, "ids": len(ids), "loss": out["loss"], "accuracy": out["accuracy"]}
      row["seconds"] = time.perf_counter() - t0
      logging.info(
        "copy warm-up %d/%d on %d ids: loss %.3f, copy accuracy %.1f%%",
        step,
        steps,
        len(ids),
        row["loss"],
        100 * row["accuracy"],
      )
      if log_path is not None:
        with open(log_path, "a") as handle:
          handle.write(json.dumps(row) + "\n")
      if reached and stage + 1 < len(sizes):
        stage += 1
        held, stage_ids = held_out(sizes[stage]), softmax_ids(sizes[stage])
      elif reached:
        out["reached"] = 1.0
        break
  return params, out
