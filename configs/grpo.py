"""Baseline: GRPO on the unit-test reward alone (PAPER.md "Baselines")."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "unit"
  c.rl.advantage = "grpo"
  return c
