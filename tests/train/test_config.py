"""Resuming a workdir: only with the config that made it, apart from RESUMABLE_FIELDS (the
trainer and `precisecoder compare` share the check). Validation: tests/commands/test_train.py."""

import dataclasses
import json
import pathlib

import pytest

from precisecoder.model.config import EXECUTION_FIELDS, ModelConfig
from precisecoder.train import config as config_lib

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


def test_workdir_of_another_config_is_not_resumed(tmp_path):
  cfg = config_lib.load_file(f"{CONFIGS / 'grpo.py'}:tiny")
  (tmp_path / "config.json").write_text(cfg.to_json())
  config_lib.check_resumable(tmp_path, cfg)
  cfg.train.steps = 50  # a longer budget resumes
  cfg.model.remat = "full"  # so do other execution options
  config_lib.check_resumable(tmp_path, cfg)
  with cfg.unlocked():
    cfg.rl.added_since = 1  # a field the code gained after the workdir was written
  config_lib.check_resumable(tmp_path, cfg)
  cfg.rl.group_size = 8
  cfg.seed = 3
  with pytest.raises(
    config_lib.ConfigError,
    match=r"\(rl.group_size: 4 -> 8; seed: 0 -> 3\); "
    "a workdir resumes only the run that made it",
  ):
    config_lib.check_resumable(tmp_path, cfg)


def test_a_workdir_recording_a_field_that_is_gone_is_named_not_resumed(tmp_path):
  """A config.json from older code (model.preset, since model.arch) fails with the file and the
  field, not a KeyError."""
  recorded = config_lib.default("tiny").to_dict()
  recorded["model"]["preset"] = recorded["model"].pop("arch")
  (tmp_path / "config.json").write_text(json.dumps(recorded))
  with pytest.raises(config_lib.ConfigError) as raised:
    config_lib.check_resumable(tmp_path, config_lib.default("tiny"))
  assert str(raised.value).startswith(f"{tmp_path / 'config.json'} was written with another")
  assert "model.preset: 'tiny', no such field now" in str(raised.value)
  assert config_lib.unknown_field(config_lib.default("tiny"), "model.preset").startswith(
    "config.model has no field 'preset'"
  )


def test_execution_options_default_to_the_models_own_but_mlp_chunk():
  """ModelConfig defines the execution options; training chunks its MLP (a long sequence's
  activations for the backward pass), where inference has no backward pass to keep them for."""
  model = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in EXECUTION_FIELDS}
  trained = {k: config_lib.default("qwen3-4b").model[k] for k in EXECUTION_FIELDS}
  assert trained == {**model, "mlp_chunk": 4096}
