"""GRPO (configs/grpo.py) with its rollouts sampled one step ahead of the learner
(`rl.max_staleness` = 1, train/inflight.py): the asynchronous twin of `grpo` in a comparison."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "unit"
  c.rl.advantage = "grpo"
  c.rl.max_staleness = 1
  return c
