"""The induction warm-up (train/copy_warmup.py): its rows, and that a tiny model learns from it
to copy spans of random tokens it has never seen."""

import json

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder.train import copy_warmup, step as step_lib


def test_each_answer_repeats_a_span_of_its_prompt():
  batch = copy_warmup.copy_batch(np.random.default_rng(0), range(3, 50), 16, 12, pad_id=0)
  tokens, cmask = batch["tokens"], batch["completion_mask"]
  t = cmask.shape[1]
  prompts, answers = tokens[:, :-t], tokens[:, -t:]
  starts = set()
  for row, (prompt, answer, keep) in enumerate(zip(prompts, answers, cmask)):
    span = answer[keep].tolist()
    prompt = prompt[batch["mask"][row, :-t]]  # left-padded
    assert len(prompt) == 12 and min(prompt) >= 3 and len(span) == 6
    found = [s for s in range(7) if prompt[s : s + 6].tolist() == span]
    assert found
    starts.add(found[0])
  assert len(starts) > 1  # the span starts anywhere, not at a fixed offset
  with pytest.raises(ValueError, match="at least 4 tokens"):
    copy_warmup.copy_batch(np.random.default_rng(0), range(3, 50), 2, 3, pad_id=0)


def test_the_special_tokens_are_never_drawn():
  class Tokenizer:
    all_special_ids = [0, 5]

    def __len__(self):
      return 8

  assert copy_warmup.token_ids(Tokenizer(), [7]) == [1, 2, 3, 4, 6]
  assert copy_warmup.token_ids(Tokenizer(), [7], limit=3) == [1, 2, 3]


def _tiny(vocab_size: int):
  config = architectures.get("tiny", num_layers=2, vocab_size=vocab_size)
  graphdef = nnx.split(Decoder(config, rngs=nnx.Rngs(0)))[0]

  def fresh():  # each warm-up donates the parameters it is given
    return nnx.split(Decoder(config, rngs=nnx.Rngs(0)))[1]

  optim = ml_collections.ConfigDict(
    dict(learning_rate=1e-2, warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.98, grad_clip=1.0)
  )
  return graphdef, fresh, step_lib.make_optimizer(optim)


def test_the_warm_up_logs_its_loss_and_copy_accuracy(tmp_path):
  graphdef, fresh, tx = _tiny(32)
  log = tmp_path / "copy_warmup.jsonl"
  _, out = copy_warmup.warm_up(
    graphdef,
    fresh(),
    tx,
    token_ids=range(8, 32),
    pad_id=0,
    steps=3,
    rows=4,
    length=8,
    seed=0,
    log_every=2,
    log_path=log,
  )
  rows = [json.loads(line) for line in log.read_text().splitlines()]
  assert [r["step"] for r in rows] == [2, 3]
  assert out == {
    "loss": rows[-1]["loss"],
    "accuracy": rows[-1]["accuracy"],
    "step": 3.0,
    "ids": 24.0,
    "reached": 0.0,
    "stopped": 0.0,
  }
  assert 0 <= out["accuracy"] < 0.5 and 2.0 < out["loss"] < 5.0  # chance: log(24) = 3.2
  # A preemption (asked before each step) stops it early.
  asked = []
  _, out = copy_warmup.warm_up(
    graphdef,
    fresh(),
    tx,
    token_ids=range(8, 32),
    pad_id=0,
    steps=5,
    rows=4,
    length=8,
    seed=0,
    stop=lambda: asked.append(1) or len(asked) > 2,
  )
  assert out["stopped"] == 1.0 and len(asked) == 3


def test_the_warm_up_ends_at_the_first_logged_step_that_reaches_its_target(tmp_path, monkeypatch):
  """With `target_accuracy` the step count is a cap: the warm-up stops at the first logged
  step whose copy accuracy reaches the target (here a scripted accuracy: 0.1, 0.3, 0.6)."""
  accuracies = iter([0.1, 0.3, 0.6, 0.9])
  monkeypatch.setattr(
    copy_warmup, "make_accuracy_fn", lambda graphdef: lambda params, batch, ids: next(accuracies)
  )
  graphdef, fresh, tx = _tiny(32)
  log = tmp_path / "copy_warmup.jsonl"
  kwargs = dict(token_ids=range(8, 32), pad_id=0, rows=4, length=8, seed=0, log_every=2)
  _, out = copy_warmup.warm_up(
    graphdef, fresh(), tx, steps=20, log_path=log, target_accuracy=0.5, **kwargs
  )
  rows = [json.loads(line) for line in log.read_text().splitlines()]
  assert [(r["step"], r["accuracy"]) for r in rows] == [(2, 0.1), (4, 0.3), (6, 0.6)]
  assert (out["step"], out["accuracy"], out["reached"]) == (6.0, 0.6, 1.0)
  # Never reached: all its steps, and `reached` says so.
  accuracies = iter([0.1, 0.2, 0.3])
  _, out = copy_warmup.warm_up(graphdef, fresh(), tx, steps=5, target_accuracy=0.5, **kwargs)
  assert (out["step"], out["accuracy"], out["reached"]) == (5.0, 0.3, 0.0)


def test_a_widening_warm_up_moves_to_more_ids_each_time_it_reaches_its_target(
  tmp_path, monkeypatch
):
  """From the 4 lowest ids, times 3 each time the target is reached (4, 12, then all 24),
  each stage drawing only from its ids; it ends once the target is reached on all of them."""
  assert copy_warmup.stages(24, 4, 3) == [4, 12, 24]
  assert copy_warmup.stages(24, 0, 3) == [24] and copy_warmup.stages(24, 4, 0) == [4]
  accuracies = iter([0.6, 0.2, 0.7, 0.1, 0.4, 0.8, 0.9])
  monkeypatch.setattr(
    copy_warmup, "make_accuracy_fn", lambda graphdef: lambda params, batch, ids: next(accuracies)
  )
  drawn = []
  batch = copy_warmup.copy_batch
  monkeypatch.setattr(
    copy_warmup,
    "copy_batch",
    lambda rng, ids, *a, **k: drawn.append(len(ids)) or batch(rng, ids, *a, **k),
  )
  graphdef, fresh, tx = _tiny(32)
  log = tmp_path / "copy_warmup.jsonl"
  kwargs = dict(pad_id=0, rows=4, length=8, seed=0, log_every=1, log_path=log)
  _, out = copy_warmup.warm_up(
    graphdef,
    fresh(),
    tx,
    token_ids=range(8, 32),
    steps=20,
    target_accuracy=0.5,
    first=4,
    widen=3,
    **kwargs,
  )
  rows = [json.loads(line) for line in log.read_text().splitlines()]
  assert [(r["step"], r["ids"]) for r in rows] == [
    (1, 4),
    (2, 12),
    (3, 12),
    (4, 24),
    (5, 24),
    (6, 24),
  ]
  assert (out["step"], out["ids"], out["reached"]) == (6.0, 24.0, 1.0)
  # Training batches (every step's) and held-out ones (one per stage) came from the stage's ids.
  assert drawn == [4, 4, 12, 12, 12, 24, 24, 24, 24]
  with pytest.raises(ValueError, match="needs a target accuracy"):
    copy_warmup.warm_up(graphdef, fresh(), tx, token_ids=range(8, 32), steps=2, widen=3, **kwargs)


def test_its_own_softmax_is_over_the_ids_it_draws_from(tmp_path):
  """`answer_logprobs` with ids: the full model's logits at those ids alone, renormalised;
  without: the trainers' log-probs. A warm-up with `own_softmax` trains and logs on them."""
  graphdef, fresh, tx = _tiny(32)
  params = fresh()
  batch = step_lib.to_device(
    copy_warmup.copy_batch(np.random.default_rng(0), range(8, 16), 4, 8, pad_id=0)
  )
  t = batch["completion_mask"].shape[1]
  start = batch["tokens"].shape[1] - t
  # Jitted: op by op, each operation would compile on its own.
  forward = jax.jit(lambda p, tokens, mask: nnx.merge(graphdef, p)(tokens, mask))
  logits = forward(params, batch["tokens"], batch["mask"])[:, start - 1 : -1]
  targets = np.asarray(batch["tokens"][:, start:])
  mask = np.asarray(batch["completion_mask"])
  own = jax.nn.log_softmax(logits[..., 8:16], axis=-1)
  want = np.take_along_axis(np.asarray(own), np.clip(targets - 8, 0, 7)[..., None], -1)[..., 0]
  answer_logprobs = jax.jit(
    lambda p, batch, ids: copy_warmup.answer_logprobs(graphdef, p, batch, ids)
  )
  got = answer_logprobs(params, batch, jnp.arange(8, 16))
  np.testing.assert_allclose(np.where(mask, got, 0), np.where(mask, want, 0), atol=1e-5)
  full, _ = jax.jit(
    lambda p, tokens, mask: step_lib.completion_logprobs(graphdef, p, tokens, mask, t)
  )(params, batch["tokens"], batch["mask"])
  np.testing.assert_array_equal(answer_logprobs(params, batch, None), full)
  assert np.all((np.asarray(full) < np.asarray(got)) | ~mask)  # less mass to share out
  log = tmp_path / "copy_warmup.jsonl"
  _, out = copy_warmup.warm_up(
    graphdef,
    fresh(),
    tx,
    token_ids=range(8, 32),
    pad_id=0,
    steps=2,
    rows=4,
    length=8,
    seed=0,
    log_every=1,
    log_path=log,
    first=8,
    own_softmax=True,
  )
  rows = [json.loads(line) for line in log.read_text().splitlines()]
  assert [r["ids"] for r in rows] == [8, 8]
  assert 0.5 < rows[0]["loss"] < 2.5  # chance among its 8 ids: log(8) = 2.1; among 32: 3.5


@pytest.mark.slow
def test_a_tiny_model_learns_to_copy_unseen_spans(tmp_path):
  """Induction forms in a phase change (at about step 200 here): before it, no token is
  predicted with probability > 1/2 (chance is 1/64 a token); after it, nearly all the copied
  ones are, on rows never trained on."""
  graphdef, fresh, tx = _tiny(80)
  log = tmp_path / "copy_warmup.jsonl"
  kwargs = dict(token_ids=range(16, 80), pad_id=0, rows=64, length=16, seed=0, log_path=log)
  _, after = copy_warmup.warm_up(graphdef, fresh(), tx, steps=300, log_every=50, **kwargs)
  rows = [json.loads(line) for line in log.read_text().splitlines()]
  print([(r["step"], round(r["accuracy"], 2)) for r in rows])
  assert rows[0]["accuracy"] < 0.05
  assert after["accuracy"] > 0.8 and after["loss"] < rows[0]["loss"] / 2
