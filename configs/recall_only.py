"""Ablation: GDPO on (1 − λ)·unit + λ·gated recall (F1 replaced by recall)."""

from precisecoder.train import config as base


def get_config(arg=None):
  c = base.default(arg)
  c.rl.reward = "recall_only"
  c.rl.advantage = "gdpo"
  return c
