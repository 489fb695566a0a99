"""What a run's batches need in memory, checked against the machine before the model loads.

Each phase of a step (sampling a rollout chunk, a greedy evaluation batch, a train step) is
sized from the config with model/memory.py's lower bounds; a phase that cannot fit is one line
naming the config fields that size it. Parameters, gradients and Adam's moments are counted as
sharded over the run's hosts (the run presets shard them with fsdp); rows are this host's.
"""

from __future__ import annotations

import ml_collections

from precisecoder.model import architectures, memory
from precisecoder.model.loading import bundled_smollm2_gguf, read_config
from precisecoder.model.config import EXECUTION_FIELDS, ModelConfig
from precisecoder.intmath import cdiv


def model_config(cfg: ml_collections.ConfigDict) -> ModelConfig:
  """The policy's ModelConfig without its weights (raises CheckpointError)."""
  execution = {k: cfg.model[k] for k in EXECUTION_FIELDS}
  source = cfg.model.checkpoint
  if source == "bundled-smollm2":
    source = str(bundled_smollm2_gguf())
  if source == "base":  # the small policy's base (maybe not built yet): its architecture
    return architectures.get(cfg.base.model, dtype=cfg.model.dtype, **execution)
  if source:
    return read_config(source, dtype=cfg.model.dtype, **execution)
  return architectures.get(cfg.model.arch, dtype=cfg.model.dtype, **execution)


def phases(
  cfg: ml_collections.ConfigDict, config: ModelConfig, hosts: int = 1
) -> list[tuple[str, dict[str, int], str]]:
  """(what, bytes by part, advice) for each phase of the run's steps."""
  share = lambda n: cdiv(n, hosts)  # this host's part of a global count
  weights = cdiv(memory.weights_bytes(config), hosts)
  # Gradients like the weights, Adam's two moments in float32.
  optimizer = weights + cdiv(2 * config.num_params() * 4, hosts)
  reference = weights if cfg.trainer == "dpo" or (cfg.trainer == "rl" and cfg.rl.kl_beta > 0) else 0
  out = []

  def sampling(what, prompts, samples, max_new_tokens, advice):
    need = memory.sampler_bytes(
      config,
      prompts=prompts,
      samples=samples,
      prompt_len=cfg.rl.prompt_bucket,
      max_new_tokens=max_new_tokens,
    )
    need["weights"] = weights + reference
    out.append((what, need, advice))

  def training(what, rows, tokens, advice):
    out.append(
      (
        what,
        {
          "weights": weights + reference,
          "gradients and Adam moments": optimizer,
          "logits": memory.train_logits_bytes(config, rows, tokens),
        },
        advice,
      )
    )

  rl = cfg.rl
  if cfg.trainer == "rl":
    chunk = cdiv(share(rl.prompts_per_step), rl.rollout_chunks)
    sampling(
      f"a rollout chunk of {chunk} prompt(s) (config.rl.prompts_per_step "
      f"{rl.prompts_per_step} / rl.rollout_chunks {rl.rollout_chunks}) x rl.group_size "
      f"{rl.group_size} x rl.max_new_tokens {rl.max_new_tokens}",
      chunk,
      rl.group_size,
      rl.max_new_tokens,
      "lower them, or raise config.rl.rollout_chunks",
    )
    training(
      f"a train step on config.rl.minibatch_size {rl.minibatch_size} rows of "
      f"rl.prompt_bucket {rl.prompt_bucket} + rl.max_new_tokens {rl.max_new_tokens} "
      "tokens",
      share(rl.minibatch_size),
      rl.prompt_bucket + rl.max_new_tokens,
      "lower them, or set config.model.logprob_chunk",
    )
  elif cfg.trainer == "dpo":
    d = cfg.dpo
    sampling(
      f"sampling config.dpo.batch_size {d.batch_size} prompt(s) x dpo.samples_per_task "
      f"{d.samples_per_task} x rl.max_new_tokens {rl.max_new_tokens}",
      share(d.batch_size),
      d.samples_per_task,
      rl.max_new_tokens,
      "lower them",
    )
    training(
      f"a DPO step on 2 x config.dpo.batch_size {d.batch_size} rows of dpo.max_len "
      f"{d.max_len} tokens",
      2 * share(d.batch_size),
      d.max_len,
      "lower them",
    )
  else:
    training(
      f"an SFT step on config.sft.batch_size {cfg.sft.batch_size} rows of sft.max_len "
      f"{cfg.sft.max_len} tokens",
      share(cfg.sft.batch_size),
      cfg.sft.max_len,
      "lower them",
    )
  if cfg.train.eval_every > 0 or cfg.train.eval_at_start:
    t = cfg.train
    sampling(
      f"an evaluation batch of config.train.eval_batch_size {t.eval_batch_size} prompt(s) "
      f"x train.eval_max_new_tokens {t.eval_max_new_tokens}",
      t.eval_batch_size,
      1,
      t.eval_max_new_tokens,
      "lower them",
    )
  return out


def check(cfg: ml_collections.ConfigDict, *, hosts: int = 1, devices: int = 1) -> None:
  """Raises memory.BatchTooLarge for the first phase of the run that cannot fit in the memory
  of this host's `devices` devices (or its host memory on CPU)."""
  config = model_config(cfg)
  available = memory.available_bytes(devices)
  for what, need, advice in phases(cfg, config, hosts):
    memory.check(need, what, advice, available=available)
