"""Ablation: GDPO on (1 − λ)·unit + λ·precision (F1 replaced by precision)."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "precision_only"
  c.rl.advantage = "gdpo"
  return c
