"""Resuming a workdir: only with the config that made it, apart from RESUMABLE_FIELDS (the
trainer and `precisecoder compare` share the check). Validation: tests/commands/test_train.py."""

import pathlib

import pytest

from precisecoder.train import config as config_lib

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


def test_workdir_of_another_config_is_not_resumed(tmp_path):
  cfg = config_lib.load_file(f"{CONFIGS / 'grpo.py'}:tiny")
  (tmp_path / "config.json").write_text(cfg.to_json())
  config_lib.check_resumable(tmp_path, cfg)
  cfg.train.steps = 50          # a longer budget resumes
  cfg.model.remat = "full"      # so do other execution options
  config_lib.check_resumable(tmp_path, cfg)
  with cfg.unlocked():
    cfg.rl.added_since = 1      # a field the code gained after the workdir was written
  config_lib.check_resumable(tmp_path, cfg)
  cfg.rl.group_size = 8
  cfg.seed = 3
  with pytest.raises(config_lib.ConfigError, match=r"\(rl.group_size: 4 -> 8; seed: 0 -> 3\); "
                     "a workdir resumes only the run that made it"):
    config_lib.check_resumable(tmp_path, cfg)
