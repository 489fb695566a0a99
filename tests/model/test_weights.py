"""How our parameters map to Hugging Face tensors (model/weights.py), called directly: one spec
per HF tensor of each architecture, and to_ours/to_hf exact inverses with our layouts
([in, heads, head_dim] and the like). Whole checkpoints through them: test_hf.py,
test_parity.py."""

import numpy as np

from precisecoder.model import architectures
from precisecoder.model.weights import weight_specs


def _hf_shape(config, name):
  d, f, hd = config.hidden_size, config.intermediate_size, config.head_dim
  shapes = {
    "embed_tokens": (config.vocab_size, d),
    "lm_head": (config.vocab_size, d),
    "q_proj": (config.num_heads * hd, d),
    "k_proj": (config.num_kv_heads * hd, d),
    "v_proj": (config.num_kv_heads * hd, d),
    "o_proj": (d, config.num_heads * hd),
    "q_norm": (hd,),
    "k_norm": (hd,),
    "gate_proj": (f, d),
    "up_proj": (f, d),
    "down_proj": (d, f),
  }
  return next((s for k, s in shapes.items() if f".{k}." in f".{name}"), (d,))


def test_specs_name_every_tensor_once_per_architecture():
  qwen = architectures.get("tiny")
  llama = qwen.replace(arch="llama", tie_embeddings=False)
  names = {c.arch: {s.hf_name for s in weight_specs(c)} for c in (qwen, llama)}
  assert names["qwen3"] - names["llama"] == {
    "model.layers.{i}.self_attn.q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight",
  }
  assert names["llama"] - names["qwen3"] == {"lm_head.weight"}  # untied embeddings
  assert len(names["llama"]) == len(list(weight_specs(llama))) == 12


def test_to_ours_and_to_hf_are_exact_inverses_in_our_layouts():
  config = architectures.get("tiny").replace(tie_embeddings=False)
  d, h, k, hd = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
  rng = np.random.default_rng(0)
  ours, hf = {}, {}
  for spec in weight_specs(config):
    hf[spec.path] = rng.standard_normal(_hf_shape(config, spec.hf_name)).astype(np.float32)
    ours[spec.path] = spec.to_ours(hf[spec.path])
    np.testing.assert_array_equal(spec.to_hf(ours[spec.path]), hf[spec.path])
  assert ours[("layers", "q_proj")].shape == (d, h, hd)
  # HF's output row head * head_dim + j is our [:, head, j]: x @ ours[:, head] is that head.
  np.testing.assert_array_equal(
    ours[("layers", "q_proj")][:, 1, 2], hf[("layers", "q_proj")][1 * hd + 2]
  )
  assert ours[("layers", "k_proj")].shape == (d, k, hd)
  assert ours[("layers", "o_proj")].shape == (h, hd, d)
  assert ours[("lm_head",)].shape == (d, config.vocab_size)
