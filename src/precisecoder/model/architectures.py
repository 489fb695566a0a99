"""Named architectures: model configurations without weights (those come from checkpoints).

A run preset (train/config.py) names one in `config.model.arch`."""

from __future__ import annotations

from precisecoder.model.config import ModelConfig

_QWEN3_VOCAB = 151936
_QWEN3_EOS = (151645, 151643)  # <|im_end|>, <|endoftext|>


def _qwen3(layers, hidden, heads, kv_heads, ffn, tied) -> ModelConfig:
  return ModelConfig(
    arch="qwen3",
    vocab_size=_QWEN3_VOCAB,
    hidden_size=hidden,
    num_layers=layers,
    num_heads=heads,
    num_kv_heads=kv_heads,
    head_dim=128,
    intermediate_size=ffn,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_embeddings=tied,
    max_position_embeddings=40960,
    bos_token_id=None,
    eos_token_ids=_QWEN3_EOS,
    pad_token_id=151643,
  )


def _coder(vocab, hidden, layers, heads, kv_heads, head_dim, ffn) -> ModelConfig:
  return ModelConfig(
    arch="qwen3",
    vocab_size=vocab,
    hidden_size=hidden,
    num_layers=layers,
    num_heads=heads,
    num_kv_heads=kv_heads,
    head_dim=head_dim,
    intermediate_size=ffn,
    rope_theta=10_000.0,
    rms_norm_eps=1e-6,
    tie_embeddings=True,
    max_position_embeddings=2048,
    bos_token_id=None,
    eos_token_ids=(2,),
    pad_token_id=0,
  )


ARCHITECTURES: dict[str, ModelConfig] = {
  # A few million parameters: unit tests and CPU benchmarks.
  "tiny": ModelConfig(
    arch="qwen3",
    vocab_size=1024,
    hidden_size=128,
    num_layers=4,
    num_heads=8,
    num_kv_heads=4,
    head_dim=32,
    intermediate_size=384,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_embeddings=True,
    max_position_embeddings=4096,
    bos_token_id=None,
    eos_token_ids=(1,),
    pad_token_id=0,
  ),
  # The small policies trained from scratch on the task corpus (experiments/base_model.py), with
  # the corpus's own BPE (model/bpe.py: ids 0 pad, 1 <|im_start|>, 2 <|im_end|>).
  "coder-tiny": _coder(vocab=512, hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, ffn=128),
  "coder-cpu": _coder(vocab=2048, hidden=128, layers=4, heads=4, kv_heads=2, head_dim=32, ffn=384),
  "coder-gpu": _coder(vocab=4096, hidden=512, layers=8, heads=8, kv_heads=4, head_dim=64, ffn=1536),
  # HuggingFaceTB/SmolLM2-135M-Instruct (Llama architecture).
  "smollm2-135m": ModelConfig(
    arch="llama",
    vocab_size=49152,
    hidden_size=576,
    num_layers=30,
    num_heads=9,
    num_kv_heads=3,
    head_dim=64,
    intermediate_size=1536,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_embeddings=True,
    max_position_embeddings=8192,
    bos_token_id=1,
    eos_token_ids=(2,),
    pad_token_id=2,
  ),
  "qwen3-0.6b": _qwen3(28, 1024, 16, 8, 3072, tied=True),
  "qwen3-1.7b": _qwen3(28, 2048, 16, 8, 6144, tied=True),
  "qwen3-4b": _qwen3(36, 2560, 32, 8, 9728, tied=True),
  "qwen3-8b": _qwen3(36, 4096, 32, 8, 12288, tied=False),
  "qwen3-14b": _qwen3(40, 5120, 40, 8, 17408, tied=False),
}


def get(name: str, **overrides) -> ModelConfig:
  """The architecture `name`, with any field overridden (e.g. dtype="bfloat16", remat=True)."""
  if name not in ARCHITECTURES:
    raise KeyError(f"unknown architecture {name!r}; known: {sorted(ARCHITECTURES)}")
  return ARCHITECTURES[name].replace(**overrides)
