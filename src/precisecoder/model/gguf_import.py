"""GGUF files (llama.cpp): configuration from metadata, weights dequantised with `gguf`."""

from __future__ import annotations

import os
import re

import gguf
import numpy as np
from gguf.quants import dequantize
from jax.sharding import Mesh

from precisecoder.model.build import build_decoder
from precisecoder.model.config import ModelConfig
from precisecoder.model.decoder import Decoder

# Hugging Face name (layer part stripped) -> GGUF name.
_NAMES = {
  "model.embed_tokens.weight": "token_embd.weight",
  "model.norm.weight": "output_norm.weight",
  "lm_head.weight": "output.weight",
  "input_layernorm.weight": "attn_norm.weight",
  "self_attn.q_proj.weight": "attn_q.weight",
  "self_attn.k_proj.weight": "attn_k.weight",
  "self_attn.v_proj.weight": "attn_v.weight",
  "self_attn.o_proj.weight": "attn_output.weight",
  "self_attn.q_norm.weight": "attn_q_norm.weight",
  "self_attn.k_norm.weight": "attn_k_norm.weight",
  "post_attention_layernorm.weight": "ffn_norm.weight",
  "mlp.gate_proj.weight": "ffn_gate.weight",
  "mlp.up_proj.weight": "ffn_up.weight",
  "mlp.down_proj.weight": "ffn_down.weight",
}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")


def _field(reader: gguf.GGUFReader, key: str, default=None, *, where: str):
  field = reader.fields.get(key)
  if field is None:
    if default is None:
      raise ValueError(f"{where}: GGUF metadata field {key!r} is missing")
    return default
  return field.contents()


def read_gguf_config(reader: gguf.GGUFReader, *, where: str, **overrides) -> ModelConfig:
  arch = _field(reader, "general.architecture", where=where)
  if arch not in ("llama", "qwen3"):
    raise ValueError(f"{where}: GGUF architecture {arch!r} is not supported (llama, qwen3)")
  names = {t.name for t in reader.tensors}
  embd = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
  if embd is None:
    raise ValueError(f"{where}: GGUF tensor 'token_embd.weight' is missing")
  heads = int(_field(reader, f"{arch}.attention.head_count", where=where))
  hidden = int(_field(reader, f"{arch}.embedding_length", where=where))
  eos = _field(reader, "tokenizer.ggml.eos_token_id", -1, where=where)
  bos = _field(reader, "tokenizer.ggml.bos_token_id", -1, where=where)
  pad = _field(reader, "tokenizer.ggml.padding_token_id", -1, where=where)
  kwargs = dict(
    arch=arch,
    vocab_size=int(embd.shape[1]),  # GGUF shapes are [in, out]
    hidden_size=hidden,
    num_layers=int(_field(reader, f"{arch}.block_count", where=where)),
    num_heads=heads,
    num_kv_heads=int(_field(reader, f"{arch}.attention.head_count_kv", heads, where=where)),
    head_dim=int(_field(reader, f"{arch}.attention.key_length", hidden // heads, where=where)),
    intermediate_size=int(_field(reader, f"{arch}.feed_forward_length", where=where)),
    rope_theta=float(_field(reader, f"{arch}.rope.freq_base", 10000.0, where=where)),
    rms_norm_eps=float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", where=where)),
    tie_embeddings="output.weight" not in names,
    max_position_embeddings=int(_field(reader, f"{arch}.context_length", 32768, where=where)),
    bos_token_id=None if bos < 0 else int(bos),
    eos_token_ids=() if eos < 0 else (int(eos),),
    pad_token_id=None if pad < 0 else int(pad),
  )
  kwargs.update(overrides)
  return ModelConfig(**kwargs)


def _unpermute_rope(w: np.ndarray, heads: int) -> np.ndarray:
  """Undoes llama.cpp's interleaved-RoPE row permutation of Llama q/k weights."""
  half = w.shape[0] // heads // 2
  return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class GGUFTensorReader:
  """Reads GGUF tensors by Hugging Face name, dequantised to float32 in HF layout."""

  def __init__(self, reader: gguf.GGUFReader, config: ModelConfig, where: str):
    self._tensors = {t.name: t for t in reader.tensors}
    self._config = config
    self._where = where

  def __call__(self, hf_name: str) -> np.ndarray:
    match = _LAYER.fullmatch(hf_name)
    suffix = match.group(2) if match else hf_name
    if suffix not in _NAMES:
      raise KeyError(f"{self._where}: no GGUF name for tensor {hf_name!r}")
    name = (f"blk.{match.group(1)}." if match else "") + _NAMES[suffix]
    if name not in self._tensors:
      raise KeyError(f"{self._where}: GGUF tensor {name!r} (for {hf_name!r}) is missing")
    tensor = self._tensors[name]
    w = np.asarray(dequantize(tensor.data, tensor.tensor_type), np.float32)
    w = w.reshape(tuple(int(s) for s in reversed(tensor.shape)))
    if self._config.arch == "llama" and suffix == "self_attn.q_proj.weight":
      w = _unpermute_rope(w, self._config.num_heads)
    elif self._config.arch == "llama" and suffix == "self_attn.k_proj.weight":
      w = _unpermute_rope(w, self._config.num_kv_heads)
    return w


class _Truncated(ValueError):
  pass


class _CheckedReader(gguf.GGUFReader):
  """gguf's reader, except that a read past the end of the file says so: the stock reader
  slices its memory map short and fails later with a numpy view or reshape error."""

  def _get(self, offset, dtype, count=1, override_order=None):
    end = int(offset) + np.dtype(dtype).itemsize * int(count)
    if end > len(self.data):
      raise _Truncated(f"{len(self.data)} bytes, but its contents reach byte {end}")
    return super()._get(offset, dtype, count, override_order)


def open_gguf(path: str | os.PathLike) -> gguf.GGUFReader:
  """A reader for a GGUF file; an empty, foreign or cut-short file is a ValueError naming it."""
  if os.path.getsize(path) == 0:
    raise ValueError(f"{path}: empty file, not a GGUF model")
  try:
    return _CheckedReader(path)
  except _Truncated as e:
    raise ValueError(f"{path}: truncated GGUF file ({e})") from None
  except (ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError) as e:
    raise ValueError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from None


def load_gguf(
  path: str | os.PathLike, *, dtype: str = "float32", mesh: Mesh | None = None, **execution
) -> tuple[Decoder, ModelConfig]:
  where = str(path)
  reader = open_gguf(path)
  config = read_gguf_config(reader, where=where, dtype=dtype, **execution)
  model = build_decoder(config, GGUFTensorReader(reader, config, where), mesh=mesh, where=where)
  return model, config


def transformers_reference(path: str | os.PathLike):
  """transformers' own reading of a Llama GGUF (its dequantisation and q/k reordering), as a
  PyTorch model in eval mode: the independent reference for parity checks and benchmarks.

  Built with `load_gguf_checkpoint` because `from_pretrained(gguf_file=...)` needs accelerate.
  """
  import pathlib

  import transformers
  from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

  path = pathlib.Path(path)
  config = transformers.AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
  reference = transformers.LlamaForCausalLM(config)
  tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=reference)["tensors"]
  reference.load_state_dict(tensors, strict=False)
  reference.tie_weights()
  return reference.eval()
