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
from precisecoder.model import lora as lora_lib
from precisecoder.model import tokenizer as tokenizer_lib
from precisecoder.tasks import Task


# Fields of `cfg.model` that become ModelConfig's execution options.
EXECUTION_FIELDS = ("remat", "attention", "attention_block", "logprob_chunk", "mlp_chunk")


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
  # None in a training run's own copy (train/run.py): the weights live in the trainer's loop.
  model: model_lib.Decoder | None
  tokenizer: Any
  config: model_lib.ModelConfig
  eos_ids: list[int]
  pad_id: int
  source: str = ""  # checkpoint it was loaded from ("" for a random init)

  def prompt_ids(self, task: Task, *, include_tests: bool = True) -> list[int]:
    """The task's prompt ids, through the one path `generate` and evaluation use too."""
    return prompts.prompt_ids(self.tokenizer, task, include_tests=include_tests)


def load_policy(cfg: ml_collections.ConfigDict, mesh: Mesh | None = None) -> Policy:
  """The model of `cfg.model`: a checkpoint when one is named, else random from the preset."""
  source = cfg.model.checkpoint
  execution = {k: cfg.model[k] for k in EXECUTION_FIELDS}
  if source == "bundled-smollm2":
    source = str(loading.bundled_smollm2_gguf())
  elif source == "base":  # the small policy's base, built on first use (base_model.py)
    from precisecoder.train import base_model  # pylint: disable=import-outside-toplevel
    source = str(base_model.ensure(cfg.base))
  if source:
    logging.info("loading %s", source)
    model, tokenizer, config = model_lib.load_checkpoint(source, dtype=cfg.model.dtype,
                                                         mesh=mesh, **execution)
  else:
    config = model_lib.architectures.get(cfg.model.preset, dtype=cfg.model.dtype, **execution)
    model = model_lib.Decoder(config, rngs=nnx.Rngs(cfg.seed))
    if mesh is not None:
      model = model_lib.shard_model(model, mesh)
    # A random init reads a tokenizer folder when one is named (the small policy's own BPE,
    # which checkpoints then point to), else bytes.
    source = cfg.model.get("tokenizer", "")
    tokenizer = model_lib.load_tokenizer(source) if source else ByteTokenizer()
    if config.vocab_size < len(tokenizer):
      raise ValueError(f"architecture {cfg.model.preset}: vocab {config.vocab_size} is too "
                       f"small for the tokenizer ({len(tokenizer)} ids)")
  lora = lora_lib.from_config(cfg.model)
  if lora is not None:  # fresh adapters (B = 0) on the loaded base; a resume restores them
    lora_lib.attach(model, lora, cfg.seed)
  eos = tokenizer_lib.eos_token_ids(tokenizer, config.eos_token_ids)
  pad = tokenizer_lib.pad_token_id(tokenizer, config.pad_token_id)
  logging.info("policy: %s, %.1fM parameters", cfg.model.preset,
               model_lib.param_count(model) / 1e6)
  return Policy(model=model, tokenizer=tokenizer, config=config, eos_ids=eos, pad_id=pad,
                source=source)
