"""The policy a trainer starts from: model, tokenizer and the ids that end and pad a sequence."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import ml_collections
from absl import logging
from flax import nnx
from jax.sharding import Mesh

from precisecoder import model as model_lib
from precisecoder.model import checkpoint as model_checkpoint
from precisecoder.model import tokenizer as tokenizer_lib


class ByteTokenizer:
  """UTF-8 bytes as ids 2..257 (0 pad, 1 end): lets a random tiny model run the real path."""

  pad_token_id = 0
  eos_token_id = 1
  bos_token_id = None

  def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
    del add_special_tokens
    return [b + 2 for b in text.encode("utf-8")]

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, **kwargs) -> str:
    del skip_special_tokens, kwargs
    return bytes(int(i) - 2 for i in ids if 2 <= int(i) < 258).decode("utf-8", errors="replace")

  def apply_chat_template(self, messages: Sequence[dict[str, str]], *, tokenize: bool = True,
                          add_generation_prompt: bool = False, **kwargs) -> Any:
    del kwargs
    text = "".join(f"<{m['role']}>\n{m['content']}\n" for m in messages)
    if add_generation_prompt:
      text += "<assistant>\n"
    return self.encode(text) if tokenize else text


@dataclasses.dataclass
class Policy:
  model: model_lib.Decoder
  tokenizer: Any
  config: model_lib.ModelConfig
  eos_ids: list[int]
  pad_id: int
  source: str = ""  # checkpoint it was loaded from ("" for a random init)

  def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
    ids = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in transformers 5
      ids = ids["input_ids"]
    return [int(i) for i in ids]


def load_policy(cfg: ml_collections.ConfigDict, mesh: Mesh | None = None) -> Policy:
  """The model of `cfg.model`: a checkpoint when one is named, else random from the preset."""
  source = cfg.model.checkpoint
  if source == "bundled-smollm2":
    source = str(model_checkpoint.bundled_smollm2_gguf())
  if source:
    logging.info("loading %s", source)
    model, tokenizer, config = model_lib.load_checkpoint(source, dtype=cfg.model.dtype,
                                                         mesh=mesh, remat=cfg.model.remat)
  else:
    config = model_lib.presets.get(cfg.model.preset, dtype=cfg.model.dtype,
                                   remat=cfg.model.remat)
    model = model_lib.Decoder(config, rngs=nnx.Rngs(cfg.seed))
    if mesh is not None:
      model = model_lib.shard_model(model, mesh)
    tokenizer = ByteTokenizer()
    if config.vocab_size < 258:
      raise ValueError(f"model preset {cfg.model.preset}: vocab {config.vocab_size} is too "
                       "small for the byte tokenizer (needs 258)")
  eos = tokenizer_lib.eos_token_ids(tokenizer, config.eos_token_ids)
  pad = tokenizer_lib.pad_token_id(tokenizer, config.pad_token_id)
  logging.info("policy: %s, %.1fM parameters", cfg.model.preset,
               model_lib.param_count(model) / 1e6)
  return Policy(model=model, tokenizer=tokenizer, config=config, eos_ids=eos, pad_id=pad,
                source=source)
