"""The reward scorer a trainer uses, opened at set-up: an execution pool in this process
(`rl.reward_workers`, `rl.python`), or the reward servers `rl.reward_urls` names."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import ml_collections

from precisecoder.execution import ExecutionPool
from precisecoder.integrations.client import RemoteScorer
from precisecoder.rewards import RewardScorer


@contextlib.contextmanager
def open_scorer(rl: ml_collections.ConfigDict) -> Iterator[RewardScorer | RemoteScorer]:
  """The scorer of the config's `rl` section; what holds its resources closes on exit."""
  epsilon = None if rl.epsilon < 0 else int(rl.epsilon)
  if rl.get("reward_urls", ""):
    # On reward servers: the same terms. A batch that fails on every server (after retries)
    # stops the run with the reason; rerunning resumes from the last checkpoint.
    holder = scorer = RemoteScorer(rl.reward_urls, epsilon=epsilon, lam=rl.lam)
  else:
    holder = ExecutionPool(workers=rl.reward_workers, python=rl.python or None)
    scorer = RewardScorer(holder, epsilon=epsilon, lam=rl.lam)
  try:
    yield scorer
  finally:
    holder.close()
