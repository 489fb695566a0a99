"""Ablation: GDPO on (1 − λ)·unit + λ·gated recall (F1 replaced by recall)."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "recall_only"
  c.rl.advantage = "gdpo"
  return c
