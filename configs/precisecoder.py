"""PreciseCoder: GDPO on r_λ = (2/3)·unit + (1/3)·F1 (PAPER.md "The method").

python -m precisecoder.train --config=configs/precisecoder.py:qwen3-4b --workdir=runs/pc-4b
The part after ':' picks a run preset (precisecoder/train/config.py); default `local`.
"""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "r_lambda"
  c.rl.advantage = "gdpo"
  c.rl.lam = 1 / 3
  return c
