"""DPO: which samples make a preference pair, and a few steps of the DPO update on a tiny
random model (loss log 2 against itself, then the chosen answer gains on the rejected one)."""

import jax
import numpy as np
import optax
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder.train import dpo, sequences, step as step_lib
from precisecoder.train.policy import ByteTokenizer


def _terms(unit, precision, edit_lines):
  return {
    "unit": np.float32(unit),
    "precision": np.float32(precision),
    "edit_lines": np.float32(edit_lines),
  }


def test_pairs_prefer_the_most_precise_pass_over_a_failure_or_an_over_edit():
  terms = _terms(
    unit=[
      1,
      1,
      0,
      0,  # chosen: the more precise pass; rejected: the failure editing most
      1,
      1,
      1,
      1,  # all pass: rejected is the widest over-edit
      0,
      0,
      0,
      0,  # none pass: the reference fix is chosen
      1,
      1,
      1,
      1,
    ],  # all pass with equal edits: nothing to prefer, skipped
    precision=[0.5, 1.0, 0.0, 0.0, 1.0, 0.2, 0.5, 1.0, 0, 0, 0, 0, 1, 1, 1, 1],
    edit_lines=[2, 1, 3, 5, 1, 6, 2, 1, 1, 4, 2, 0, 1, 1, 1, 1],
  )
  assert dpo.choose_pairs(terms, 4) == [(0, 1, 3), (1, 4, 5), (2, None, 9)]


def test_a_lone_pass_with_nothing_worse_is_skipped():
  assert dpo.choose_pairs(_terms([1, 1], [1.0, 0.5], [1, 1]), 1) == []


def test_dpo_steps_raise_the_chosen_answer_over_the_rejected_one():
  config = architectures.get("tiny", num_layers=1)
  model = Decoder(config, rngs=nnx.Rngs(0))
  graphdef, params = nnx.split(model)
  reference = jax.tree.map(lambda x: x.copy(), params)
  tok = ByteTokenizer()
  prompts = [tok.encode("def f(x):\n    return x - 1")] * 2
  chosen = [tok.encode(sequences.answer_text("def f(x):\n    return x + 1")) + [1]] * 2
  rejected = [tok.encode(sequences.answer_text("def f(x):\n    return 0")) + [1]] * 2
  # Two real pairs and one of weight 0 (padding): it must not count in loss or accuracy.
  batch = dpo.preference_batch(prompts, chosen, rejected, pad_id=0, pairs=3)
  batch["pair_weights"][1] = 0.0
  logprob_fn = step_lib.make_logprob_fn(graphdef)

  def seq_logprobs(p):
    logp = logprob_fn(p, batch["tokens"], batch["mask"], batch["completion_mask"])
    return np.asarray(logp).sum(axis=-1)

  ref = seq_logprobs(reference)
  tx = optax.adam(1e-2)
  step_fn = step_lib.make_dpo_step(graphdef, tx, beta=0.5)
  device_batch = step_lib.to_device({**batch, "ref_seq_logprobs": ref})
  opt_state = tx.init(params)
  metrics = []
  for _ in range(8):
    params, opt_state, m = step_fn(params, opt_state, device_batch)
    metrics.append({k: float(v) for k, v in jax.device_get(m).items()})
  # The first step sees the policy equal to its reference: margin 0, loss log 2, no preference.
  np.testing.assert_allclose(metrics[0]["loss"], np.log(2), rtol=1e-5)
  assert metrics[0]["preference_accuracy"] == 0
  assert metrics[-1]["loss"] < metrics[0]["loss"] and metrics[-1]["preference_accuracy"] == 1
  after = seq_logprobs(params)
  assert (after[0::2] - ref[0::2] > after[1::2] - ref[1::2]).all()


def test_preference_batches_interleave_pairs_and_pad_with_weight_0():
  batch = dpo.preference_batch(
    [[5, 6], [7]], [[1, 2, 3], [4]], [[8], [9, 9]], pad_id=0, pairs=3, max_len=None
  )
  answers = [
    row[mask].tolist()
    for row, mask in zip(
      batch["tokens"][:, -batch["completion_mask"].shape[1] :], batch["completion_mask"]
    )
  ]
  assert answers == [[1, 2, 3], [8], [4], [9, 9], [1, 2, 3], [8]]  # chosen, rejected, ...
  np.testing.assert_array_equal(batch["pair_weights"], [1, 1, 0])
  unweighted = dpo.preference_batch([[5]], [[1]], [[2]], 0, pairs=2, weighted=0)
  assert unweighted["pair_weights"].sum() == 0
