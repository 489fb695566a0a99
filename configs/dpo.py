"""Baseline: DPO with chosen = a precise passing fix, rejected = a failing or over-editing one.

Pairs come from the policy's own samples scored by the reward (on-policy preference data);
a task with no precise passing sample uses its reference fix as the chosen answer.
"""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.trainer = "dpo"
  c.optim.learning_rate = 1e-6 if (arg or "local") != "tiny" else 1e-3
  return c
