"""DAPO's handling of samples the token budget cut (Yu et al. 2025, "Overlong Reward
Shaping"): mask their loss out (`filter`), or penalise length softly near the budget (`soft`:
the penalty is a reward term, `reward_recipes.soft_length_penalty`).

A sample is cut when it used every token of `rl.max_new_tokens` without ending
(end-of-sequence). Its unit-test reward then says little about its program: masking its loss
keeps that noise out of the update; the soft penalty instead teaches the model to finish early.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MODES = ("none", "filter", "soft")


def truncated(
  tokens: np.ndarray, lengths: np.ndarray, eos_ids: Sequence[int], max_new_tokens: int
) -> np.ndarray:
  """bool [N]: the samples that reached `max_new_tokens` tokens without an end token.

  `tokens` [N, T] are the generated tokens (right-padded), `lengths` [N] how many each has."""
  lengths = np.asarray(lengths)
  rows = np.arange(len(lengths))
  last = np.asarray(tokens)[rows, np.clip(lengths - 1, 0, None)]
  ended = (lengths > 0) & np.isin(last, np.asarray(list(eos_ids)))
  return (lengths >= max_new_tokens) & ~ended


def cut_samples(rollout, eos_ids: Sequence[int], max_new_tokens: int) -> np.ndarray:
  """bool [N]: `truncated` for a rollout of single answers; all False for episodes (rl.turns
  > 1), whose token budget is per answer and whose last turn may be feedback."""
  if rollout.model_mask is not None:
    return np.zeros(len(rollout), bool)
  return truncated(rollout.tokens, rollout.lengths, eos_ids, max_new_tokens)


def filter_loss_mask(loss_mask: np.ndarray, cut: np.ndarray) -> np.ndarray:
  """The loss mask [N, T] without the rows of cut samples (`cut` [N])."""
  return loss_mask & ~np.asarray(cut, bool)[:, None]
