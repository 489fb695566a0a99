"""Policy model: the Qwen3/Llama decoder, checkpoint import/export, sharding, tokenizers."""

from precisecoder.model import architectures
from precisecoder.model.loading import bundled_smollm2_gguf, load_checkpoint
from precisecoder.model.config import ModelConfig
from precisecoder.model.decoder import Decoder, KVCache, param_count
from precisecoder.model.hf import export_hf, load_hf
from precisecoder.model.sharding import constrain, make_mesh, shard_model
from precisecoder.model.tokenizer import load_tokenizer

__all__ = [
  "Decoder",
  "KVCache",
  "ModelConfig",
  "architectures",
  "bundled_smollm2_gguf",
  "constrain",
  "export_hf",
  "load_checkpoint",
  "load_hf",
  "load_tokenizer",
  "make_mesh",
  "param_count",
  "shard_model",
]
