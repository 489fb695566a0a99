"""Baseline agent: GRPO on the unit-test reward alone, in episodes of up to 5 answers with test
feedback between them (configs/precisecoder_agent.py with grpo.py's reward)."""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "unit"
  c.rl.advantage = "grpo"
  c.rl.turns = 5
  return c
