"""A host's part of a global batch sampled on devices of its own (sampling.HostRows, the
disaggregated placement on several hosts): given its prompts' place in the batch and the
longest prompt of all, it samples exactly the rows the whole batch gives them."""

import numpy as np
import pytest
from flax import nnx

from precisecoder import sampling
from precisecoder.model import Decoder, architectures

# Two "hosts" of two prompts each; the longest prompt is the second host's.
PROMPTS = [[5, 6, 7], [8, 9], [20, 21, 22, 23, 24, 25, 26, 27, 28, 29], [30]]
KWARGS = dict(num_samples=2, max_new_tokens=6, eos_ids=(1,), pad_id=0, seed=7, prompt_bucket=8)


@pytest.fixture(scope="module")
def model():
  decoder = Decoder(architectures.get("tiny", num_layers=2), rngs=nnx.Rngs(0))
  decoder.embed[...] = decoder.embed[...] * 3.5  # peaked: samples of one prompt still differ
  return decoder


def test_agree_rows_on_one_process():
  rows = sampling.agree_rows([[3, 2], [10, 1, 4]])
  assert rows == [sampling.HostRows(0, 3), sampling.HostRows(0, 10)]


def test_each_hosts_rows_are_the_global_batchs(model):
  """Each host's tokens are the whole batch's rows of its prompts; their log-probs agree to
  float32 precision (a batch of 4 rows is another matmul than one of 8 on CPU: on several
  hosts each host's device holds its own rows either way, and the log-probs are bit-equal,
  tests/test_multihost_sampler_mesh.py)."""
  whole = sampling.sample(model, PROMPTS, **KWARGS)
  longest = max(len(p) for p in PROMPTS)
  for host in (0, 1):
    mine = PROMPTS[2 * host : 2 * host + 2]
    part = sampling.sample(model, mine, host_rows=sampling.HostRows(2 * host, longest), **KWARGS)
    block = slice(4 * host, 4 * host + 4)
    for name in ("prompt_ids", "prompt_mask", "tokens", "lengths"):
      np.testing.assert_array_equal(getattr(part, name), getattr(whole, name)[block], name)
    np.testing.assert_allclose(part.logprobs, whole.logprobs[block], rtol=1e-5, atol=1e-6)
  # Without the agreement a host pads to its own longest prompt and seeds its rows from 0.
  first = sampling.sample(model, PROMPTS[:2], **KWARGS)
  assert first.prompt_ids.shape[1] < whole.prompt_ids.shape[1]
  second = sampling.sample(model, PROMPTS[2:], **KWARGS)
  assert not np.array_equal(second.tokens, whole.tokens[4:])


def test_conversations_take_the_agreed_place_too(model):
  kwargs = dict(KWARGS, turns=2, feedback_len=4)
  whole = sampling.Conversation(model, PROMPTS, **kwargs)
  rows = sampling.HostRows(first=2, longest=10)
  part = sampling.Conversation(model, PROMPTS[2:], host_rows=rows, **kwargs)
  np.testing.assert_array_equal(part.first.tokens, whole.first.tokens[4:])
  feedback = [[40, 41]] * 8
  np.testing.assert_array_equal(part.reply(feedback[4:]).tokens, whole.reply(feedback).tokens[4:])


def test_host_rows_shorter_than_a_prompt_are_refused(model):
  with pytest.raises(ValueError, match="prompts of at most 3 tokens"):
    sampling.sample(model, PROMPTS[2:], host_rows=sampling.HostRows(2, 3), **KWARGS)
