"""The KV-cache sampler on a tiny random decoder."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import scripted_conversation
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder import sampling
from precisecoder.sampling import bucket_length, choose_tokens, sample

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [20]]
EOS = 1


@pytest.fixture(scope="module")
def model():
  # Large weights make the distribution peaked, so greedy and sampled runs differ visibly.
  config = architectures.get("tiny", num_layers=2)
  decoder = Decoder(config, rngs=nnx.Rngs(0))
  decoder.embed[...] = decoder.embed[...] * 3.5  # mean top probability ~0.6
  return decoder


def _run(model, **overrides):
  kwargs = dict(num_samples=3, max_new_tokens=12, temperature=1.0, eos_ids=(EOS,), pad_id=0, seed=0)
  kwargs.update(overrides)
  return sample(model, PROMPTS, **kwargs)


def test_shapes_groups_and_padding(model):
  out = _run(model)
  n = len(PROMPTS) * 3
  assert out.tokens.shape == (n, 12) and out.tokens.dtype == np.int32
  assert out.logprobs.shape == (n, 12) and out.logprobs.dtype == np.float32
  assert out.groups.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
  assert out.prompt_ids.shape == (n, bucket_length(7))
  for row in range(n):
    ids = PROMPTS[out.groups[row]]
    assert out.prompt_ids[row, -len(ids) :].tolist() == ids  # left-padded, prompt-major
    assert out.prompt_mask[row].sum() == len(ids)


def test_deterministic_for_a_seed_and_different_across_seeds(model):
  a, b, c = _run(model, seed=3), _run(model, seed=3), _run(model, seed=4)
  np.testing.assert_array_equal(a.tokens, b.tokens)
  np.testing.assert_array_equal(a.logprobs, b.logprobs)
  assert (a.tokens != c.tokens).any()
  assert (a.tokens[0] != a.tokens[1]).any()  # samples of one prompt differ


def test_logprobs_are_the_temperature_scaled_policy(model):
  temperature = 0.7
  out = _run(model, temperature=temperature, num_samples=2)
  full = np.concatenate([out.prompt_ids, out.tokens], axis=1)
  mask = np.concatenate([out.prompt_mask, out.completion_mask], axis=1)
  logits = model(jnp.asarray(full), jnp.asarray(mask)) / temperature
  logp = np.asarray(jax.nn.log_softmax(logits, axis=-1))
  p = out.prompt_ids.shape[1]
  for row in range(len(out.tokens)):
    for t in range(out.lengths[row]):
      want = logp[row, p + t - 1, out.tokens[row, t]]
      assert abs(out.logprobs[row, t] - want) < 1e-4


def test_eos_ends_a_row_and_pads_after_it(model):
  greedy = _run(model, temperature=0.0, num_samples=1)
  row, step = 1, 4  # make the greedy token at this step the end-of-sequence token
  eos = int(greedy.tokens[row, step])
  out = _run(model, temperature=0.0, num_samples=1, eos_ids=(eos,))
  first = int(np.argmax(out.tokens[row] == eos))
  assert out.lengths[row] == first + 1
  assert (out.tokens[row, first + 1 :] == 0).all() and (out.logprobs[row, first + 1 :] == 0).all()
  assert out.completion_ids(row, eos_ids=(eos,)) == out.tokens[row, :first].tolist()


def test_top_k_one_and_tiny_top_p_are_greedy(model):
  greedy = _run(model, temperature=0.0, num_samples=1)
  for kwargs in (dict(top_k=1), dict(top_p=1e-6)):
    out = _run(model, temperature=1.3, num_samples=2, seed=9, **kwargs)
    np.testing.assert_array_equal(out.tokens[::2], greedy.tokens)
    np.testing.assert_array_equal(out.tokens[1::2], greedy.tokens)


def test_choose_tokens_respects_top_k_and_top_p():
  logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]] * 4000))
  keys = jax.random.key(0)
  tokens, _ = choose_tokens(logits, keys, temperature=1.0, top_p=1.0, top_k=2)
  counts = np.bincount(np.asarray(tokens), minlength=4) / 4000
  assert counts[2] == counts[3] == 0 and abs(counts[0] - 0.625) < 0.03
  tokens, _ = choose_tokens(logits, keys, temperature=1.0, top_p=0.85, top_k=0)
  counts = np.bincount(np.asarray(tokens), minlength=4) / 4000
  assert counts[3] == 0 and counts[2] > 0.1  # 0.5 + 0.3 < 0.85, so the third token stays


def test_bad_arguments_raise(model):
  with pytest.raises(ValueError, match="prompt 1 is empty"):
    sample(model, [[1], []], max_new_tokens=2, eos_ids=(), pad_id=0)
  with pytest.raises(ValueError, match="exceeds"):
    sample(model, [[1]], max_new_tokens=10_000, eos_ids=(), pad_id=0)
  with pytest.raises(ValueError, match="top_p"):
    sample(model, [[1]], max_new_tokens=2, top_p=0.0, eos_ids=(), pad_id=0)


def test_segmented_decode_gives_the_same_samples(model):
  one = _run(model, decode_segments=1)
  three = _run(model, decode_segments=3)
  np.testing.assert_array_equal(one.tokens, three.tokens)
  np.testing.assert_allclose(one.logprobs, three.logprobs, atol=1e-5)


def test_padding_helpers_left_right_and_masks():
  tokens, mask = sampling.pad_rows([[5, 6], [7], []], 3, 0, left=True)
  np.testing.assert_array_equal(tokens, [[0, 5, 6], [0, 0, 7], [0, 0, 0]])
  np.testing.assert_array_equal(mask, [[0, 1, 1], [0, 0, 1], [0, 0, 0]])
  tokens, mask = sampling.pad_rows([[5, 6], [7]], 3, 0, left=False)
  np.testing.assert_array_equal(tokens, [[5, 6, 0], [7, 0, 0]])
  np.testing.assert_array_equal(mask, [[1, 1, 0], [1, 0, 0]])
  assert tokens.dtype == np.int32 and mask.dtype == bool
  x = np.array([[1, 2]])
  np.testing.assert_array_equal(sampling.pad_to(x, 4, 9, left=True), [[9, 9, 1, 2]])
  np.testing.assert_array_equal(sampling.pad_to(x, 4, 9, left=False), [[1, 2, 9, 9]])
  assert sampling.pad_to(x, 1, 9, left=False) is x
  np.testing.assert_array_equal(
    sampling.completion_mask(np.array([0, 2, 5]), 3), [[0, 0, 0], [1, 1, 0], [1, 1, 1]]
  )
  assert sampling.bucket_length(65, 32) == 96 and sampling.bucket_length(0, 32) == 32


def _feedback(turn, row, answer):
  """Scripted feedback of varied lengths; rows 2 and 5 end after their first answer."""
  if turn == 0 and row % 3 == 2:
    return []
  return [30 + (row * 7 + turn * 3 + i) % 200 for i in range(1 + (row + 2 * turn) % 9)]


def test_every_turn_is_a_fresh_greedy_generation_of_the_conversation_so_far(model):
  """Continuing the cache == sampling again from the whole conversation as one prompt, turn
  after turn; ended rows stay masked and yield nothing."""
  greedy = _run(model, temperature=0.0, num_samples=1, max_new_tokens=8)
  eos = (int(greedy.tokens[1, 3]), int(greedy.tokens[2, 5]))  # rows end at different steps
  conversation = sampling.Conversation(
    model,
    PROMPTS,
    turns=3,
    feedback_len=12,
    num_samples=2,
    max_new_tokens=8,
    temperature=0.0,
    eos_ids=eos,
    pad_id=0,
    prompt_bucket=8,
  )
  played = scripted_conversation(conversation, PROMPTS, _feedback)
  assert (played[0][0].lengths < 8).any()  # some answers end early, on an end token
  checked = 0
  for turn, (out, conversations) in enumerate(played):
    for row, so_far in enumerate(conversations):
      if so_far is None:
        assert out.lengths[row] == 0 and (out.tokens[row] == 0).all()
        continue
      fresh = sample(model, [so_far], max_new_tokens=8, temperature=0.0, eos_ids=eos, pad_id=0)
      n = fresh.lengths[0]
      assert out.tokens[row, : out.lengths[row]].tolist() == fresh.tokens[0, :n].tolist()
      np.testing.assert_allclose(out.logprobs[row, :n], fresh.logprobs[0, :n], atol=1e-4)
      checked += turn > 0
  assert checked >= 6
  with pytest.raises(ValueError, match="turns are taken"):
    conversation.reply([[]] * conversation.rows)


def test_a_sampled_conversation_draws_from_the_policy(model):
  """Sampled turns: the first is exactly `sample`'s; every answer token's behaviour log-prob is
  the temperature-scaled policy's given the whole conversation before it."""
  temperature = 0.8
  conversation = sampling.Conversation(
    model,
    PROMPTS,
    turns=2,
    feedback_len=12,
    num_samples=2,
    max_new_tokens=8,
    temperature=temperature,
    eos_ids=(EOS,),
    pad_id=0,
    seed=5,
    prompt_bucket=8,
  )
  first = sample(
    model,
    PROMPTS,
    num_samples=2,
    max_new_tokens=8,
    temperature=temperature,
    eos_ids=(EOS,),
    pad_id=0,
    seed=5,
    prompt_bucket=8,
  )
  np.testing.assert_array_equal(conversation.first.tokens, first.tokens)
  np.testing.assert_array_equal(conversation.first.logprobs, first.logprobs)
  (_, _), (second, conversations) = scripted_conversation(conversation, PROMPTS, _feedback)
  rows = [r for r, so_far in enumerate(conversations) if so_far is not None]
  sequences = [conversations[r] + second.tokens[r, : second.lengths[r]].tolist() for r in rows]
  tokens, mask = sampling.pad_rows(sequences, max(map(len, sequences)), 0, left=False)
  logp = np.asarray(
    jax.nn.log_softmax(model(jnp.asarray(tokens), jnp.asarray(mask)) / temperature, axis=-1)
  )
  for i, r in enumerate(rows):
    start = len(conversations[r])
    for t in range(second.lengths[r]):
      want = logp[i, start + t - 1, sequences[i][start + t]]
      assert abs(second.logprobs[r, t] - want) < 1e-4
