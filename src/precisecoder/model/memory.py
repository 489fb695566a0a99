"""Memory that sampling and training need, from the model config alone, against what the
machine has: a batch that cannot fit is refused in a second, before any model work, instead of
running out of memory minutes later.

The figures are lower bounds (what must exist at once, not XLA's whole working set): the
weights; the KV cache, `rows x (prompt + new tokens)` per layer for keys and values, plus the
per-prompt cache it is copied from; the sampler's float32 logits over the vocabulary (two
[rows, vocab] arrays in a decode step); and the train step's logits, a chunk of
`logprob_chunk` tokens at a time (or the whole [rows, tokens, vocab] when it is 0). A refusal
therefore means the batch cannot fit; a pass does not promise it will
(`benchmarks/bench_memory.py` compiles a step for its real figure).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from precisecoder.model.config import ModelConfig

_FLOAT32 = 4
# [rows, vocab] float32 arrays that must coexist in a decode step: the logits carried from
# the last step and the new ones (choose_tokens' temporaries may fuse away; not counted).
DECODE_LOGIT_COPIES = 2
# [chunk, vocab] float32 arrays that must coexist in a train step: a chunk's logits and their
# log-softmax (forward), or the recomputed log-softmax and its gradient (backward).
TRAIN_LOGIT_COPIES = 2


class BatchTooLarge(ValueError):
  """A batch that cannot fit in this machine's memory; the message names the sizes."""


def itemsize(config: ModelConfig) -> int:
  return 2 if config.dtype == "bfloat16" else 4


def weights_bytes(config: ModelConfig) -> int:
  return config.num_params() * itemsize(config)


def kv_cache_bytes(config: ModelConfig, rows: int, length: int) -> int:
  """Keys and values of every layer for `rows` sequences of `length` positions."""
  per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * itemsize(config)
  return rows * length * per_token


def sampler_bytes(
  config: ModelConfig, *, prompts: int, samples: int, prompt_len: int, max_new_tokens: int
) -> dict[str, int]:
  """What one sampler call of `prompts` x `samples` rows needs at least, by part."""
  rows = prompts * samples
  length = prompt_len + max_new_tokens
  return {
    "weights": weights_bytes(config),
    "KV cache": kv_cache_bytes(config, rows + prompts, length),
    "logits": DECODE_LOGIT_COPIES * rows * config.vocab_size * _FLOAT32,
  }


def train_logits_bytes(config: ModelConfig, rows: int, tokens: int) -> int:
  """The train step's float32 logits: one `logprob_chunk` at a time, or all of them."""
  chunk = min(config.logprob_chunk, rows * tokens) if config.logprob_chunk else rows * tokens
  return TRAIN_LOGIT_COPIES * chunk * config.vocab_size * _FLOAT32


def available_bytes(devices: int = 1) -> tuple[int, str]:
  """(bytes, where) this process may still allocate: on an accelerator the free memory of
  `devices` devices like the first (a batch sharded over them), else the host's available
  memory (or its cgroup's limit, if lower)."""
  import jax  # pylint: disable=import-outside-toplevel

  device = jax.devices()[0]
  if device.platform != "cpu":
    stats = device.memory_stats() or {}
    if stats.get("bytes_limit"):
      free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
      return devices * free, f"memory on {devices} {device.device_kind} device(s)"
  return _host_available(), "available host memory"


def _host_available() -> int:
  found = []
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          found.append(int(line.split()[1]) * 1024)
  except OSError:
    found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
  try:  # a container's own limit (cgroup v2)
    with open("/sys/fs/cgroup/memory.max") as f:
      limit = f.read().strip()
    if limit != "max":
      with open("/sys/fs/cgroup/memory.current") as f:
        found.append(int(limit) - int(f.read().strip()))
  except (OSError, ValueError):
    pass
  return min(found)


def gigabytes(n: int) -> str:
  return f"{n / 1e9:.1f} GB"


def check(
  need: Mapping[str, int],
  what: str,
  advice: str,
  *,
  devices: int = 1,
  available: tuple[int, str] | None = None,
) -> None:
  """Raises BatchTooLarge when the parts of `need` add up to more than is available:
  "`what` needs at least X GB (part a, part b, ...); this machine has Y GB of `where`
  (`advice`)"."""
  have, where = available or available_bytes(devices)
  total = sum(need.values())
  if total > have:
    parts = ", ".join(f"{name} {gigabytes(n)}" for name, n in need.items())
    raise BatchTooLarge(
      f"{what} needs at least {gigabytes(total)} ({parts}); this machine has "
      f"{gigabytes(have)} of {where} ({advice})"
    )
