"""SFT on a handful of demonstrations drives their loss toward zero (tiny random model); the
loss on the prompt's tokens; a step on some of each task's answers; the copy warm-up in the
trainer."""

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from precisecoder import tasks as tasks_lib
from precisecoder.model import Decoder, architectures
from precisecoder.train import config as config_lib, metrics, sequences, sft, step as step_lib
from precisecoder.train.policy import ByteTokenizer, Policy


def _task(i: int) -> tasks_lib.Task:
  fixed = f"def f(x):\n    return x + {i}"
  buggy = f"def f(x):\n    return x - {i}"
  return tasks_lib.Task(
    task_id=f"t{i}",
    buggy_code=buggy,
    gt_solution=fixed,
    gt_diff=tasks_lib.derive_gt_diff(buggy, fixed),
    tests={"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 1 + i}]},
  )


def test_sft_overfits_a_handful_of_examples():
  config = architectures.get("tiny", num_layers=1)
  policy = Policy(
    model=Decoder(config, rngs=nnx.Rngs(0)),
    tokenizer=ByteTokenizer(),
    config=config,
    eos_ids=[1],
    pad_id=0,
  )
  batch = sft.sft_batch(policy, [_task(i) for i in range(4)], include_tests=False)
  # Only the answer is supervised: prompt positions carry no loss.
  assert batch["completion_mask"].sum() == sum(
    len(ByteTokenizer().encode(f"```python\ndef f(x):\n    return x + {i}\n```")) + 1
    for i in range(4)
  )
  optim = ml_collections.ConfigDict(
    dict(learning_rate=1e-2, warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.99, grad_clip=1.0)
  )
  graphdef, params = nnx.split(policy.model)
  tx = step_lib.make_optimizer(optim)
  opt_state = tx.init(params)
  step_fn = step_lib.make_sft_step(graphdef, tx)
  # Train on short prompts (the buggy code alone) to keep the test quick on 2 cores.
  tok = ByteTokenizer()
  demos = [_task(i) for i in range(4)]
  short = sequences.sequence_batch(
    [tok.encode(t.buggy_code) for t in demos],
    [tok.encode(sequences.reference_answer(t)) + [1] for t in demos],
    pad_id=0,
  )
  device_batch = step_lib.to_device(short)
  losses = []
  for _ in range(60):
    params, opt_state, m = step_fn(params, opt_state, device_batch)
    losses.append(float(jax.device_get(m["loss"])))
  print(f"SFT loss {losses[0]:.3f} -> {losses[-1]:.4f}")
  assert losses[0] > 4.0  # ~log(1024) at random init
  assert losses[-1] < 0.1
  assert np.all(np.isfinite(losses))


def test_the_prompt_loss_scores_each_prompt_once_and_leaves_the_answer_loss_alone():
  """`prompt_logprobs` on rows sharing prompts (group 2, each prompt computed once) matches
  the full forward pass; `make_sft_step(prompt_weight=...)` reports the answers' loss as
  without it and the prompts' mean NLL apart, and trains on their sum."""
  config = architectures.get("tiny", num_layers=1, vocab_size=300)
  graphdef, params = nnx.split(Decoder(config, rngs=nnx.Rngs(0)))
  tok = ByteTokenizer()
  prompts = [tok.encode("def f(x):"), tok.encode("ab")]  # unequal: the second is left-padded
  answers = [tok.encode(a) + [1] for a in ("x + 1", "x", "abc", "b")]
  batch = sequences.sequence_batch([p for p in prompts for _ in range(2)], answers, pad_id=0)
  dev = step_lib.to_device(batch)
  t = batch["completion_mask"].shape[1]
  # Jitted: run op by op, each of their few hundred operations would compile on its own.
  logp, prompt_logp, prompt_mask = jax.jit(
    lambda p, tokens, mask: step_lib.prompt_logprobs(graphdef, p, tokens, mask, t, group=2)
  )(params, dev["tokens"], dev["mask"])
  # The reference: every position's log-softmax from one forward pass of the whole rows.
  full = jax.jit(lambda p, tokens, mask: jax.nn.log_softmax(nnx.merge(graphdef, p)(tokens, mask)))(
    params, dev["tokens"], dev["mask"]
  )
  tokens, mask = batch["tokens"], batch["mask"]
  picked = np.take_along_axis(np.asarray(full[:, :-1]), tokens[:, 1:, None], axis=-1)[..., 0]
  start = tokens.shape[1] - t
  np.testing.assert_allclose(logp, picked[:, start - 1 :], atol=2e-5)
  want_mask = (mask[:, :-1] & mask[:, 1:])[::2, : start - 1]
  np.testing.assert_array_equal(prompt_mask, want_mask)
  assert want_mask.sum(axis=1).tolist() == [len(prompts[0]) - 1, len(prompts[1]) - 1]
  np.testing.assert_allclose(
    np.where(want_mask, prompt_logp, 0), np.where(want_mask, picked[::2, : start - 1], 0), atol=2e-5
  )
  # One step with and without the prompt's loss, from the same weights.
  optim = ml_collections.ConfigDict(
    dict(learning_rate=1e-2, warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.99, grad_clip=1.0)
  )
  tx = step_lib.make_optimizer(optim)
  out = {}
  for weight in (0.0, 0.5):
    fresh = jax.tree.map(jnp.copy, params)  # a step donates its parameters
    new, _, m = step_lib.make_sft_step(graphdef, tx, 2, prompt_weight=weight)(
      fresh, tx.init(fresh), dev
    )
    out[weight] = (new, {k: float(v) for k, v in m.items()})
  answer_nll = -float(np.sum(picked[:, start - 1 :] * batch["completion_mask"]))
  assert out[0.0][1]["loss"] == pytest.approx(answer_nll / batch["completion_mask"].sum(), 1e-5)
  assert out[0.5][1]["loss"] == pytest.approx(out[0.0][1]["loss"], 1e-6)
  assert "prompt_loss" not in out[0.0][1]
  prompt_nll = -float(np.sum(picked[::2, : start - 1] * want_mask)) / want_mask.sum()
  assert out[0.5][1]["prompt_loss"] == pytest.approx(prompt_nll, 1e-5)
  moved = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), out[0.0][0], out[0.5][0])
  assert max(jax.tree.leaves(moved)) > 0  # the prompt's loss changed the update


@pytest.mark.parametrize(
  "field, value, message",
  [
    (
      "prompt_loss_weight",
      -0.5,
      "config.sft.prompt_loss_weight=-0.5: must be a number in [0, inf]",
    ),
    (
      "copy_warmup_target_accuracy",
      1.5,
      "config.sft.copy_warmup_target_accuracy=1.5: must be a number in [0, 1]",
    ),
    ("length_multiple", -8, "config.sft.length_multiple=-8: must be an integer >= 0"),
    ("copy_warmup_widen", 1, "config.sft.copy_warmup_widen=1: must be 0, or >= 2 with"),
    ("copy_warmup_widen", 8, "config.sft.copy_warmup_widen=8: must be 0, or >= 2 with"),
  ],
)
def test_bad_sft_options_are_named(field, value, message):
  cfg = config_lib.default("tiny")
  cfg.trainer = "sft"
  cfg.sft[field] = value
  with pytest.raises(config_lib.ConfigError, match=re.escape(message)):
    config_lib.validate(cfg)


def test_a_step_may_train_on_some_of_each_tasks_answers():
  task = _task(0)
  task = dataclasses.replace(task, extra={"sft_targets": ["a", "b", "c", "d"]})
  rng = np.random.default_rng(0)
  drawn = [sft.some_answers([task, task], 2, rng) for _ in range(20)]
  kept = [t.extra["sft_targets"] for pair in drawn for t in pair]
  assert all(len(k) == 2 and k == sorted(set(k)) for k in kept)  # distinct, in their order
  assert len({tuple(k) for k in kept}) > 3  # a fresh choice each time
  assert task.extra["sft_targets"] == ["a", "b", "c", "d"]  # the task itself is unchanged


def test_length_units_batch_tasks_of_similar_answer_length():
  """Bins of 256 characters hold these short answers in one bin, shuffled; bins of one
  character sort them, so each batch's answers are no longer than the next batch's."""
  tasks = [
    dataclasses.replace(_task(i), extra={"sft_targets": ["x" * (1 + (7 * i) % 40)]})
    for i in range(40)
  ]
  longest = [[len(sft.answers(t)[0]) for t in unit] for unit in sft.length_units(tasks, 4, 0)]
  assert sorted(map(max, longest)) != list(map(max, longest))
  units = sft.length_units(tasks, 4, 0, bin_chars=1)
  lengths = [[len(sft.answers(t)[0]) for t in unit] for unit in units]
  assert [n for unit in lengths for n in unit] == sorted(1 + (7 * i) % 40 for i in range(40))
  assert sorted(t.task_id for unit in units for t in unit) == sorted(t.task_id for t in tasks)


def test_sft_batches_pad_to_multiples_of_the_length_multiple():
  config = architectures.get("tiny", num_layers=1)
  policy = Policy(model=None, tokenizer=ByteTokenizer(), config=config, eos_ids=[1], pad_id=0)
  tasks = [_task(i) for i in range(2)]
  prompt = len(policy.prompt_ids(tasks[0], include_tests=False))
  answer = len(ByteTokenizer().encode(sequences.reference_answer(tasks[0]))) + 1
  batch = sft.sft_batch(policy, tasks, include_tests=False, multiple=8)
  assert batch["completion_mask"].shape[1] == -(-answer // 8) * 8
  assert batch["tokens"].shape[1] == -(-prompt // 8) * 8 + -(-answer // 8) * 8


def test_the_trainer_batches_by_sorted_length_with_a_length_multiple(tmp_path, monkeypatch):
  """group_by_length with sft.length_multiple: batches of two tasks of neighbouring answer
  length (answers of about 35 to 120 characters), padded to multiples of 16 tokens, not powers
  of two, and no answer cut."""
  made = []

  def recording(policy, tasks, **kwargs):
    batch = real_batch(policy, tasks, **kwargs)
    whole = [
      len(policy.tokenizer.encode(sequences.answer_text(a), add_special_tokens=False)) + 1
      for t in tasks
      for a in sft.answers(t)
    ]
    assert batch["completion_mask"].sum(axis=1).tolist() == whole  # no answer cut
    made.append(({t.task_id for t in tasks}, batch))
    return batch

  real_batch = sft.sft_batch
  monkeypatch.setattr(sft, "sft_batch", recording)
  demos = [
    dataclasses.replace(t, extra={"sft_targets": [t.gt_solution + "  # " + "y" * (12 * i)]})
    for i, t in enumerate(_task(i) for i in range(8))
  ]
  tasks_lib.write_tasks(tmp_path / "tasks.jsonl", demos)
  cfg = config_lib.default("tiny")
  cfg.trainer = "sft"
  cfg.model.arch = "tiny"
  cfg.data.update(task_file=str(tmp_path / "tasks.jsonl"), num_validation=0, num_clean=0)
  cfg.data.include_tests_in_prompt = False
  cfg.sft.update(batch_size=2, max_len=2048, group_by_length=True, length_multiple=16)
  cfg.train.update(steps=4, eval_every=0, eval_at_start=False, report=False)
  config_lib.validate(cfg)
  assert sft.train(cfg, str(tmp_path / "run")) == 0
  rows = metrics.read_metrics(tmp_path / "run" / "metrics.jsonl")
  assert [r["step"] for r in rows] == [1, 2, 3, 4] and all(r["train/loss"] > 0 for r in rows)
  # One pass over the four batches: neighbours in answer length (in one 256-character bin
  # these would be drawn at random).
  assert sorted(sorted(ids) for ids, _ in made) == [[f"t{i}", f"t{i + 1}"] for i in (0, 2, 4, 6)]
  for _, batch in made:
    longest = int(batch["completion_mask"].sum(axis=1).max())
    assert batch["completion_mask"].shape[1] == -(-longest // 16) * 16


@pytest.mark.slow
def test_the_copy_warm_up_and_one_answer_a_step_run_in_the_trainer(tmp_path):
  """sft.train with `sft.copy_warmup_steps` logs the warm-up (here capped before its target,
  on its first ids), then trains its steps on one of each task's two answers with the prompt's
  loss beside; more answers a step than a task carries is refused."""
  demos = [
    dataclasses.replace(t, extra={"sft_targets": [t.gt_solution, t.buggy_code]})
    for t in (_task(i) for i in range(4))
  ]
  tasks_lib.write_tasks(tmp_path / "tasks.jsonl", demos)
  cfg = config_lib.default("tiny")
  cfg.trainer = "sft"
  cfg.model.arch = "tiny"
  cfg.data.update(task_file=str(tmp_path / "tasks.jsonl"), num_validation=0, num_clean=0)
  cfg.sft.update(batch_size=2, max_len=256, answers_per_task=1)
  cfg.sft.update(copy_warmup_steps=2, copy_warmup_rows=4, copy_warmup_length=8)
  cfg.sft.update(copy_warmup_vocab=64, copy_warmup_widen=4, copy_warmup_target_accuracy=0.99)
  cfg.sft.prompt_loss_weight = 0.5
  cfg.train.update(steps=2, eval_every=0, eval_at_start=False, report=False)
  config_lib.validate(cfg)
  assert sft.train(cfg, str(tmp_path / "run")) == 0
  warmup = [json.loads(line) for line in (tmp_path / "run" / "copy_warmup.jsonl").open()]
  assert [(r["step"], r["ids"]) for r in warmup] == [(2, 64)]
  rows = metrics.read_metrics(tmp_path / "run" / "metrics.jsonl")
  assert [r["step"] for r in rows] == [1, 2]
  assert all(r["train/prompt_loss"] > 0 and r["train/loss"] > 0 for r in rows)
  cfg.sft.answers_per_task = 3
  with pytest.raises(ValueError, match="answers_per_task=3 but the SFT tasks carry 2"):
    sft.train(cfg, str(tmp_path / "other"))
