"""Baseline: SFT on buggy -> reference-fix demonstrations, loss on the answer only."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.trainer = "sft"
  c.optim.learning_rate = 1e-5 if (arg or "local") != "tiny" else 1e-3
  return c
