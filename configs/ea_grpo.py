"""Baseline: EA-GRPO (PRepair) — passing samples get 1 − T·β·σ(z) of their edit cost."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "ea_grpo"
  c.rl.advantage = "grpo"
  c.rl.ea_alpha = 0.5
  c.rl.ea_beta = 0.5
  return c
