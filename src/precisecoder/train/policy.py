"""The policy a trainer starts from: model, tokenizer and the ids that end and pad a sequence."""

from __future__ import annotations

import dataclasses
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
from precisecoder.model.config import EXECUTION_FIELDS
from precisecoder.model.tokenizer import ByteTokenizer  # the tiny models' (tests use it here)
from precisecoder.tasks import Task


@dataclasses.dataclass
class Policy:
  # None in a trainer's own copy: the weights live in its loop (rl.py's `policy_at`).
  model: model_lib.Decoder | None
  tokenizer: Any
  config: model_lib.ModelConfig
  eos_ids: list[int]
  pad_id: int
  # The checkpoint it was loaded from; for a random init, its tokenizer folder or
  # tokenizer.BYTES (checkpoints record it: model/run_checkpoints.py).
  source: str = ""

  def prompt_ids(self, task: Task, *, include_tests: bool = True) -> list[int]:
    """The task's prompt ids, through the one path `generate` and evaluation use too."""
    return prompts.prompt_ids(self.tokenizer, task, include_tests=include_tests)


def load_policy(
  cfg: ml_collections.ConfigDict, mesh: Mesh | None = None, *, checkpoint: str | None = None
) -> Policy:
  """The model of `cfg.model`: a checkpoint when one is named, else random from the preset.

  `checkpoint` replaces `cfg.model.checkpoint`: where "base" resolved to (the base policy's
  folder, which the command builds: experiments/base_model.py)."""
  source = cfg.model.checkpoint if checkpoint is None else checkpoint
  execution = {k: cfg.model[k] for k in EXECUTION_FIELDS}
  if source == "bundled-smollm2":
    source = str(loading.bundled_smollm2_gguf())
  elif source == "base":
    raise ValueError(
      "config.model.checkpoint='base' is resolved where the run starts (the "
      "base policy's folder, built by experiments/base_model.py): pass it as "
      "`checkpoint`"
    )
  if source:
    logging.info("loading %s", source)
    model, tokenizer, config = model_lib.load_checkpoint(
      source, dtype=cfg.model.dtype, mesh=mesh, **execution
    )
  else:
    config = model_lib.architectures.get(cfg.model.arch, dtype=cfg.model.dtype, **execution)
    model = model_lib.Decoder(config, rngs=nnx.Rngs(cfg.seed))
    if mesh is not None:
      model = model_lib.shard_model(model, mesh)
    # A random init reads a tokenizer folder when one is named (the small policy's own BPE,
    # which checkpoints then point to), else bytes.
    source = cfg.model.get("tokenizer", "")
    tokenizer = model_lib.load_tokenizer(source) if source else ByteTokenizer()
    source = source or tokenizer_lib.BYTES
    if config.vocab_size < len(tokenizer):
      raise ValueError(
        f"architecture {cfg.model.arch}: vocab {config.vocab_size} is too "
        f"small for the tokenizer ({len(tokenizer)} ids)"
      )
  lora = lora_lib.from_config(cfg.model)
  if lora is not None:  # fresh adapters (B = 0) on the loaded base; a resume restores them
    lora_lib.attach(model, lora, cfg.seed)
  eos = tokenizer_lib.eos_token_ids(tokenizer, config.eos_token_ids)
  pad = tokenizer_lib.pad_token_id(tokenizer, config.pad_token_id)
  logging.info("policy: %s, %.1fM parameters", cfg.model.arch, model_lib.param_count(model) / 1e6)
  return Policy(
    model=model, tokenizer=tokenizer, config=config, eos_ids=eos, pad_id=pad, source=source
  )
