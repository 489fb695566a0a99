"""Our decoder against transformers' PyTorch Qwen3 and Llama on the same random weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from conftest import scripted_conversation

from precisecoder.model import export_hf, load_hf
from precisecoder.model.decoder import KVCache, positions_from_mask
from precisecoder.sampling import Conversation, sample

TOL = 1e-4
_COMMON = dict(
  vocab_size=320,
  hidden_size=64,
  intermediate_size=112,
  num_hidden_layers=2,
  num_attention_heads=4,
  num_key_value_heads=2,
  head_dim=16,
  max_position_embeddings=512,
  rms_norm_eps=1e-6,
)


def _randomise(model: torch.nn.Module, seed: int):
  """Weights large enough that logits are peaked (greedy has no near-ties); norms not all 1."""
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      noise = torch.randn(p.shape, generator=gen)
      p.copy_(1.0 + 0.2 * noise if "norm" in name else 0.15 * noise)


def _make(kind: str, tmp_path_factory):
  torch.manual_seed(0)
  if kind == "qwen3":
    config = transformers.Qwen3Config(**_COMMON, rope_theta=1e6, tie_word_embeddings=False)
    model = transformers.Qwen3ForCausalLM(config)
  else:
    config = transformers.LlamaConfig(**_COMMON, rope_theta=1e5, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config)
  _randomise(model, seed=1 if kind == "qwen3" else 2)
  model.eval()
  folder = tmp_path_factory.mktemp(kind)
  model.save_pretrained(folder)
  ours, our_config = load_hf(folder)
  return model, ours, our_config, folder


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def pair(request, tmp_path_factory):
  return _make(request.param, tmp_path_factory)


def _torch_logits(model, tokens, mask):
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
  with torch.no_grad():
    out = model(
      input_ids=torch.tensor(tokens, dtype=torch.long),
      attention_mask=torch.tensor(mask, dtype=torch.long),
      position_ids=torch.tensor(positions, dtype=torch.long),
    )
  return out.logits.float().numpy()


def _batch(seed=0, length=24):
  rng = np.random.default_rng(seed)
  tokens = rng.integers(3, _COMMON["vocab_size"], (3, length)).astype(np.int32)
  mask = np.ones((3, length), bool)
  mask[1, :7] = False  # left padding
  mask[2, -5:] = False  # right padding
  return tokens, mask


def test_config_read_from_config_json(pair):
  torch_model, _, config, _ = pair
  hf = torch_model.config
  assert config.arch == hf.model_type
  assert config.rope_theta == hf.rope_parameters["rope_theta"]
  assert config.tie_embeddings == hf.tie_word_embeddings
  assert (config.num_heads, config.num_kv_heads, config.head_dim) == (4, 2, 16)


def test_full_logits_match(pair):
  torch_model, ours, _, _ = pair
  tokens, mask = _batch()
  want = _torch_logits(torch_model, tokens, mask)
  got = np.asarray(ours(jnp.asarray(tokens), jnp.asarray(mask)))
  assert got.dtype == np.float32 and got.shape == want.shape
  np.testing.assert_allclose(got[mask], want[mask], atol=TOL, rtol=0)
  assert np.isfinite(got).all()  # padded queries too


def test_cached_decode_matches_full_logits(pair):
  torch_model, ours, config, _ = pair
  tokens, mask = _batch(seed=1, length=20)
  mask[2] = True  # decode rows need a suffix of real tokens; keep left padding only
  want = _torch_logits(torch_model, tokens, mask)
  prefill = 12
  cache = KVCache.zeros(config, 3, 20)
  positions = np.asarray(positions_from_mask(jnp.asarray(mask)))
  step = jax.jit(lambda t, p, v, c, i: ours.forward_cached(t, p, v, c, i))
  logits, cache = step(
    tokens[:, :prefill], positions[:, :prefill], mask[:, :prefill], cache, jnp.int32(0)
  )
  got = [np.asarray(logits)]
  for i in range(prefill, 20):
    logits, cache = step(
      tokens[:, i : i + 1], positions[:, i : i + 1], mask[:, i : i + 1], cache, jnp.int32(i)
    )
    got.append(np.asarray(logits))
  got = np.concatenate(got, axis=1)
  np.testing.assert_allclose(got[mask], want[mask], atol=TOL, rtol=0)


def test_greedy_generation_is_token_identical(pair):
  torch_model, ours, _, _ = pair
  prompts = [[5, 17, 99, 42, 7, 230], [11, 12, 13], [300, 4, 250, 250, 9, 8, 77, 31, 2]]
  out = sample(
    ours, prompts, num_samples=1, max_new_tokens=32, temperature=0.0, eos_ids=(), pad_id=0, seed=0
  )
  torch_model.generation_config.eos_token_id = None
  torch_model.generation_config.pad_token_id = 0
  for row, prompt in enumerate(prompts):
    with torch.no_grad():
      want = torch_model.generate(
        torch.tensor([prompt]),
        max_new_tokens=32,
        do_sample=False,
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
      )
    assert out.tokens[row].tolist() == want[0, len(prompt) :].tolist()
    assert out.lengths[row] == 32


def test_export_round_trips_through_transformers(pair, tmp_path):
  _, ours, config, _ = pair
  export_hf(ours, config, None, tmp_path / "export")
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export")
  reloaded.eval()
  tokens, mask = _batch(seed=3)
  want = np.asarray(ours(jnp.asarray(tokens), jnp.asarray(mask)))
  np.testing.assert_allclose(
    _torch_logits(reloaded, tokens, mask)[mask], want[mask], atol=TOL, rtol=0
  )
  again, again_config = load_hf(tmp_path / "export")
  assert again_config == config
  np.testing.assert_array_equal(np.asarray(again.embed[...]), np.asarray(ours.embed[...]))


def test_every_turn_of_a_conversation_is_what_transformers_generates_from_it(pair):
  """A multi-turn greedy conversation on our KV caches: each turn's answer is transformers'
  greedy generation from the whole conversation so far (prompt, answers, feedback)."""
  torch_model, ours, config, _ = pair
  if config.arch != "qwen3":
    pytest.skip("the Qwen3 pair is enough here")
  prompts = [[5, 17, 99, 42, 7, 230], [11, 12, 13]]
  conversation = Conversation(
    ours,
    prompts,
    turns=3,
    feedback_len=8,
    max_new_tokens=10,
    temperature=0.0,
    eos_ids=(),
    pad_id=0,
    prompt_bucket=8,
  )
  played = scripted_conversation(
    conversation,
    prompts,
    lambda turn, row, answer: [
      (31 * row + 17 * turn + 5 * i) % 300 + 3 for i in range(2 + 3 * row + turn)
    ],
  )
  torch_model.generation_config.eos_token_id = None
  torch_model.generation_config.pad_token_id = 0
  for out, conversations in played:
    for row, so_far in enumerate(conversations):
      with torch.no_grad():
        want = torch_model.generate(
          torch.tensor([so_far]),
          max_new_tokens=10,
          do_sample=False,
          attention_mask=torch.ones(1, len(so_far), dtype=torch.long),
        )
      assert out.tokens[row].tolist() == want[0, len(so_far) :].tolist()
