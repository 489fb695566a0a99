"""Prompt + answer sequences for the supervised losses (SFT, DPO)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from precisecoder import multihost, sampling
from precisecoder.tasks import Task


def answer_text(program: str) -> str:
  """The answer the debug prompt asks for: the full program in a python block."""
  return f"```python\n{program.rstrip()}\n```"


def reference_answer(task: Task) -> str:
  return answer_text(task.gt_solution)


def power_bucket(n: int, multiple: int) -> int:
  """`n` rounded up to `multiple` times a power of two."""
  size = multiple
  while size < n:
    size *= 2
  return size


def sequence_batch(
  prompts: Sequence[Sequence[int]],
  answers: Sequence[Sequence[int]],
  pad_id: int,
  *,
  multiple: int = 32,
  max_len: int | None = None,
  power_of_two: bool = False,
) -> dict[str, np.ndarray]:
  """Left-padded prompts then right-padded answers, with the mask over the answer part.

  Lengths are rounded up to a multiple of `multiple`, or with `power_of_two` to `multiple`
  times a power of two (fewer shapes, so fewer compilations, for more padding) where that
  fits `max_len`. Answers longer than `max_len` minus the prompt are cut (the loss then
  covers the prefix); padding alone never cuts one.
  On several hosts this is collective: each calls it once per global batch with its own rows.
  """
  if len(prompts) != len(answers):
    raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
  # Every host pads to the longest lengths of any host: their rows join one global batch.
  longest = [multihost.global_max(max(map(len, rows))) for rows in (prompts, answers)]
  p, t = (sampling.bucket_length(n, multiple) for n in longest)
  powers = [power_bucket(n, multiple) for n in longest]
  if power_of_two and (max_len is None or sum(powers) <= max_len):
    p, t = powers
  if max_len is not None and p + t > max_len:
    t = max(multiple, max_len - p)
  prompt_tokens, prompt_mask = sampling.pad_rows(prompts, p, pad_id, left=True)
  answer_tokens, cmask = sampling.pad_rows([list(a)[:t] for a in answers], t, pad_id, left=False)
  return {
    "tokens": np.concatenate([prompt_tokens, answer_tokens], axis=1),
    "mask": np.concatenate([prompt_mask, cmask], axis=1),
    "completion_mask": cmask,
  }
