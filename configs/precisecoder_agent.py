"""PreciseCoder as a debugging agent: episodes of up to 5 answers, test feedback between them
(PAPER.md: a 5-turn agent trained with multi-turn RL, precision 67.4%, pass 56.3%).

Each answer's program runs on the task's visible tests; while some fail, the model hears which
(expected vs got, or the error) and answers again. The reward is the last program's r_λ on all
tests (GDPO over the G episodes of a task); the loss covers the model's own tokens only.

python -m precisecoder.train --config=configs/precisecoder_agent.py:qwen3-4b --workdir=runs/agent
"""

from precisecoder.train import config as train_config


def get_config(arg=None):
  c = train_config.default(arg)
  c.rl.reward = "r_lambda"
  c.rl.advantage = "gdpo"
  c.rl.lam = 1 / 3
  c.rl.turns = 5
  return c
