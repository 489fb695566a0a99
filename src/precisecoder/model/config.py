"""Decoder hyper-parameters, read from and written to Hugging Face `config.json` dictionaries."""

from __future__ import annotations

import dataclasses
from typing import Any

# Hugging Face `model_type` -> our architecture family.
_ARCHS = {"qwen3": "qwen3", "llama": "llama"}
DTYPES = ("float32", "bfloat16")
# What the backward pass keeps of each layer's forward (decoder.REMAT_POLICIES says how).
REMAT = ("none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable", "offload_dots")
ATTENTION = ("auto", "dense", "chunked", "cudnn")  # model/attention.py
# ModelConfig's execution options: how, not what, it computes (a checkpoint's architecture
# leaves them out). A run's config sets them in its `model` section (train/config.py).
EXECUTION_FIELDS = ("remat", "attention", "attention_block", "logprob_chunk", "mlp_chunk")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """One decoder: Qwen3 (q/k RMSNorm) or Llama; both GQA + RoPE + SwiGLU."""

  arch: str
  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  intermediate_size: int
  rope_theta: float = 10000.0
  rms_norm_eps: float = 1e-6
  tie_embeddings: bool = True
  max_position_embeddings: int = 32768
  bos_token_id: int | None = None
  eos_token_ids: tuple[int, ...] = ()
  pad_token_id: int | None = None
  dtype: str = "float32"  # parameter and activation dtype; logits are always float32
  # Execution options (not part of the checkpoint's architecture):
  remat: str = "none"  # one of REMAT; True/False read as "full"/"none"
  attention: str = "auto"  # one of ATTENTION; "dense" builds the whole [B, H, T, T] scores
  attention_block: int = 512  # query and key block of the chunked attention
  logprob_chunk: int = 1024  # tokens per lm-head chunk in the losses; 0: full [B, T, V] logits
  mlp_chunk: int = 0  # tokens per MLP chunk (each rematerialised); 0: the whole sequence at once

  def __post_init__(self):
    if isinstance(self.remat, bool):  # remat=True/False: a switch, as architectures.get takes it
      object.__setattr__(self, "remat", "full" if self.remat else "none")
    if self.remat not in REMAT:
      raise ValueError(f"ModelConfig.remat: {self.remat!r} is not one of {REMAT}")
    if self.attention not in ATTENTION:
      raise ValueError(f"ModelConfig.attention: {self.attention!r} is not one of {ATTENTION}")
    if self.attention_block < 1 or self.logprob_chunk < 0 or self.mlp_chunk < 0:
      raise ValueError(
        f"ModelConfig: attention_block={self.attention_block} must be >= 1, "
        f"logprob_chunk={self.logprob_chunk} and mlp_chunk={self.mlp_chunk} >= 0"
      )
    if self.arch not in _ARCHS.values():
      raise ValueError(f"ModelConfig.arch: unsupported {self.arch!r} (want qwen3 or llama)")
    if self.dtype not in DTYPES:
      raise ValueError(f"ModelConfig.dtype: {self.dtype!r} is not one of {DTYPES}")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(
        f"ModelConfig: num_heads={self.num_heads} is not a multiple of "
        f"num_kv_heads={self.num_kv_heads}"
      )
    if self.head_dim % 2:
      raise ValueError(f"ModelConfig.head_dim={self.head_dim} must be even for RoPE")

  @property
  def qk_norm(self) -> bool:
    return self.arch == "qwen3"

  def replace(self, **changes) -> ModelConfig:
    return dataclasses.replace(self, **changes)

  def num_params(self) -> int:
    d, f, l = self.hidden_size, self.intermediate_size, self.num_layers
    attn = d * self.head_dim * (2 * self.num_heads + 2 * self.num_kv_heads)
    norms = 2 * d + (2 * self.head_dim if self.qk_norm else 0)
    embed = self.vocab_size * d * (1 if self.tie_embeddings else 2)
    return l * (attn + 3 * d * f + norms) + embed + d

  @classmethod
  def from_hf(cls, hf: dict[str, Any], *, where: str = "config.json", **overrides) -> ModelConfig:
    """Builds a config from a Hugging Face `config.json` dictionary."""
    model_type = hf.get("model_type")
    if model_type not in _ARCHS:
      raise ValueError(
        f"{where}: field 'model_type' is {model_type!r}; supported: {sorted(_ARCHS)}"
      )

    def need(key):
      if key not in hf:
        raise ValueError(f"{where}: missing field {key!r}")
      return hf[key]

    rope = hf.get("rope_parameters") or {}  # transformers 5 nests rope settings here
    scaling = hf.get("rope_scaling") or {}
    rope_type = (
      rope.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    )
    if rope_type != "default":
      raise ValueError(f"{where}: rope type {rope_type!r} is not supported (only 'default')")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
      raise ValueError(f"{where}: attention_bias/mlp_bias checkpoints are not supported")
    heads = need("num_attention_heads")
    eos = hf.get("eos_token_id")
    eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else (() if eos is None else (eos,))
    kwargs = dict(
      arch=_ARCHS[model_type],
      vocab_size=need("vocab_size"),
      hidden_size=need("hidden_size"),
      num_layers=need("num_hidden_layers"),
      num_heads=heads,
      num_kv_heads=hf.get("num_key_value_heads") or heads,
      head_dim=hf.get("head_dim") or need("hidden_size") // heads,
      intermediate_size=need("intermediate_size"),
      rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
      rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
      tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
      max_position_embeddings=hf.get("max_position_embeddings", 32768),
      bos_token_id=hf.get("bos_token_id"),
      eos_token_ids=eos_ids,
      pad_token_id=hf.get("pad_token_id"),
    )
    kwargs.update(overrides)
    return cls(**kwargs)

  def to_hf(self) -> dict[str, Any]:
    """The `config.json` dictionary that transformers reads back into the same model."""
    hf = {
      "architectures": ["Qwen3ForCausalLM" if self.arch == "qwen3" else "LlamaForCausalLM"],
      "model_type": self.arch,
      "vocab_size": self.vocab_size,
      "hidden_size": self.hidden_size,
      "num_hidden_layers": self.num_layers,
      "num_attention_heads": self.num_heads,
      "num_key_value_heads": self.num_kv_heads,
      "head_dim": self.head_dim,
      "intermediate_size": self.intermediate_size,
      "hidden_act": "silu",
      "rms_norm_eps": self.rms_norm_eps,
      "rope_theta": self.rope_theta,
      "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta},
      "tie_word_embeddings": self.tie_embeddings,
      "max_position_embeddings": self.max_position_embeddings,
      "attention_bias": False,
      "mlp_bias": False,
      "torch_dtype": self.dtype,
      "dtype": self.dtype,
    }
    if self.bos_token_id is not None:
      hf["bos_token_id"] = self.bos_token_id
    if self.eos_token_ids:
      hf["eos_token_id"] = (
        self.eos_token_ids[0] if len(self.eos_token_ids) == 1 else list(self.eos_token_ids)
      )
    if self.pad_token_id is not None:
      hf["pad_token_id"] = self.pad_token_id
    return hf
