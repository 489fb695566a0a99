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
from precisecoder import prompts
from precisecoder.model import loading
from precisecoder.model import tokenizer as tokenizer_lib
from precisecoder.model.config import EXECUTION_FIELDS
from precisecoder.tasks import Task


class ByteTokenizer:
  """UTF-8 bytes as ids 2..257 (0 pad, 1 end): lets a random tiny model run the real path."""

  pad_token_id = 0
  eos_token_id = 1
  bos_token_id = None

  def __len__(self) -> int:
    return 258

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
  # None in a trainer's own copy: the weights live in its loop (rl.py's `policy_at`).
  model: model_lib.Decoder | None
  tokenizer: Any
  config: model_lib.ModelConfig
  eos_ids: list[int]
  pad_id: int
  source: str = ""  # checkpoint it was loaded from ("" for a random init)

  def prompt_ids(self, task: Task, *, include_tests: bool = True) -> list[int]:
    """The task's prompt ids, through the one path `generate` and evaluation use too."""
    return prompts.prompt_ids(self.tokenizer, task, include_tests=include_tests)


def load_policy(cfg: ml_collections.ConfigDict, mesh: Mesh | None = None, *,
                checkpoint: str | None = None) -> Policy:
  """The model of `cfg.model`: a checkpoint when one is named, else random from the preset.

  `checkpoint` replaces `cfg.model.checkpoint`: where "base" resolved to (the base policy's
  folder, which the command builds: experiments/base_model.py)."""
  source = cfg.model.checkpoint if checkpoint is None else checkpoint
  execution = {k: cfg.model[k] for k in EXECUTION_FIELDS}
  if source == "bundled-smollm2":
    source = str(loading.bundled_smollm2_gguf())
  elif source == "base":
    raise ValueError("config.model.checkpoint='base' is resolved where the run starts (the "
                     "base policy's folder, built by experiments/base_model.py): pass it as "
                     "`checkpoint`")
  if source:
    logging.info("loading %s", source)
    model, tokenizer, config = model_lib.load_checkpoint(source, dtype=cfg.model.dtype,
                                                         mesh=mesh, **execution)
  else:
    config = model_lib.architectures.get(cfg.model.arch, dtype=cfg.model.dtype, **execution)
    model = model_lib.Decoder(config, rngs=nnx.Rngs(cfg.seed))
    if mesh is not None:
      model = model_lib.shard_model(model, mesh)
    # A random init reads a tokenizer folder when one is named (the small policy's own BPE,
    # which checkpoints then point to), else bytes.
    source = cfg.model.get("tokenizer", "")
    tokenizer = model_lib.load_tokenizer(source) if source else ByteTokenizer()
    if config.vocab_size < len(tokenizer):
      raise ValueError(f"architecture {cfg.model.arch}: vocab {config.vocab_size} is too "
                       f"small for the tokenizer ({len(tokenizer)} ids)")
  eos = tokenizer_lib.eos_token_ids(tokenizer, config.eos_token_ids)
  pad = tokenizer_lib.pad_token_id(tokenizer, config.pad_token_id)
  logging.info("policy: %s, %.1fM parameters", cfg.model.arch,
               model_lib.param_count(model) / 1e6)
  return Policy(model=model, tokenizer=tokenizer, config=config, eos_ids=eos, pad_id=pad,
                source=source)
