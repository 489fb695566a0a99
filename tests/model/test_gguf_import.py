"""SmolLM2-135M-Instruct from its GGUF file: ours against transformers' own GGUF reader."""

import jax.numpy as jnp
import numpy as np
import pytest

from precisecoder.model import bundled_smollm2_gguf, gguf_import, load_checkpoint
from precisecoder.sampling import sample

GGUF = bundled_smollm2_gguf()
PROMPTS = [
  "def add(a, b):",
  "Write a Python function that reverses a string.",
  "Fix the bug: def inc(x): return x - 1",
]
# Thirty float32 layers with logits of magnitude ~40: measured max |diff| 1.2e-4.
LOGIT_TOL = 5e-4


@pytest.fixture(scope="module")
def models():
  torch = pytest.importorskip("torch")
  ours, tokenizer, config = load_checkpoint(GGUF)
  reference = gguf_import.transformers_reference(GGUF)
  return ours, tokenizer, config, reference, torch


def _prompt_ids(tokenizer, text):
  ids = tokenizer.apply_chat_template(
    [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
  )
  return list(ids if isinstance(ids, list) else ids["input_ids"])


@pytest.mark.slow
def test_config_from_gguf_metadata(models):
  _, _, config, _, _ = models
  assert (
    config.arch,
    config.num_layers,
    config.hidden_size,
    config.num_heads,
    config.num_kv_heads,
    config.vocab_size,
  ) == ("llama", 30, 576, 9, 3, 49152)
  assert config.tie_embeddings and config.rope_theta == 100000.0


@pytest.mark.slow
def test_logits_and_greedy_match_transformers(models):
  ours, tokenizer, config, reference, torch = models
  prompts = [_prompt_ids(tokenizer, text) for text in PROMPTS]
  for ids in prompts:
    x = np.asarray([ids], np.int32)
    got = np.asarray(ours(jnp.asarray(x), jnp.ones(x.shape, bool)))
    with torch.no_grad():
      want = reference(torch.tensor(x, dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(got, want, atol=LOGIT_TOL, rtol=0)
  out = sample(ours, prompts, max_new_tokens=32, temperature=0.0, eos_ids=(), pad_id=2, seed=0)
  reference.generation_config.eos_token_id = None
  for row, ids in enumerate(prompts):
    with torch.no_grad():
      want = reference.generate(
        torch.tensor([ids]),
        max_new_tokens=32,
        do_sample=False,
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        pad_token_id=2,
      )
    assert out.tokens[row].tolist() == want[0, len(ids) :].tolist(), tokenizer.decode(ids)


def test_unpermute_inverts_llama_cpp_rope_permutation():
  heads, head_dim, d = 3, 8, 5
  w = np.arange(heads * head_dim * d, dtype=np.float32).reshape(heads * head_dim, d)
  # llama.cpp convert_hf_to_gguf.py: reshape(n_head, 2, dim // n_head // 2, ...).swapaxes(1, 2)
  permuted = w.reshape(heads, 2, head_dim // 2, d).swapaxes(1, 2).reshape(w.shape)
  np.testing.assert_array_equal(gguf_import._unpermute_rope(permuted, heads), w)
