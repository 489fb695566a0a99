"""The small base policy: a BPE tokenizer trained on the task corpus, then SFT from scratch on a
mixture of answers (reference fixes, fixes with extra edits, wrong edits, no-ops).

precisecoder base --preset cpu [--config.mixture.noop=0.2 ...]   # build (cached) and measure
The part after ':' picks a base preset (BASE_PRESETS in precisecoder/train/config.py): tiny,
cpu (2 CPU cores), gpu (one H200). The run presets `local` and `compare-cpu` start from `cpu`.
"""

from precisecoder.train import config as train_config


def get_config(arg=None):
  return train_config.base_config(arg or "cpu")
