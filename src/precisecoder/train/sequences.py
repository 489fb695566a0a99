"""Prompt + answer sequences for the supervised losses (SFT, DPO)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from precisecoder.tasks import Task
from precisecoder.train.rollout import bucket


def answer_text(program: str) -> str:
  """The answer the debug prompt asks for: the full program in a python block."""
  return f"```python\n{program.rstrip()}\n```"


def reference_answer(task: Task) -> str:
  return answer_text(task.gt_solution)


def sequence_batch(prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]],
                   pad_id: int, *, multiple: int = 32, max_len: int | None = None
                   ) -> dict[str, np.ndarray]:
  """Left-padded prompts then right-padded answers, with the mask over the answer part.

  Answers longer than `max_len` minus the prompt are cut (the loss then covers the prefix).
  """
  if len(prompts) != len(answers):
    raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
  p = bucket(max(len(x) for x in prompts), multiple)
  t = bucket(max(len(x) for x in answers), multiple)
  if max_len is not None and p + t > max_len:
    t = max(multiple, max_len - p)
  n = len(prompts)
  tokens = np.full((n, p + t), pad_id, np.int32)
  mask = np.zeros((n, p + t), bool)
  cmask = np.zeros((n, t), bool)
  for i, (prompt, answer) in enumerate(zip(prompts, answers)):
    answer = list(answer)[:t]
    tokens[i, p - len(prompt):p] = prompt
    mask[i, p - len(prompt):p] = True
    tokens[i, p:p + len(answer)] = answer
    mask[i, p:p + len(answer)] = True
    cmask[i, :len(answer)] = True
  return {"tokens": tokens, "mask": mask, "completion_mask": cmask}
