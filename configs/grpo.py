"""Baseline: GRPO on the unit-test reward alone (PAPER.md "Baselines")."""

from precisecoder.train import config as base


def get_config(arg=None):
  c = base.default(arg)
  c.rl.reward = "unit"
  c.rl.advantage = "grpo"
  return c
