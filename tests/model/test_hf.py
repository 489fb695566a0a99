"""Hugging Face config.json: its errors name the file and field; configs round-trip."""

import json

import pytest

from precisecoder.model import ModelConfig, architectures
from precisecoder.model.hf import read_config


def test_config_json_errors_name_file_and_field(tmp_path):
  hf = architectures.get("tiny").to_hf()
  del hf["hidden_size"]
  (tmp_path / "config.json").write_text(json.dumps(hf))
  with pytest.raises(ValueError, match=r"config.json: missing field 'hidden_size'"):
    read_config(tmp_path)
  (tmp_path / "config.json").write_text(json.dumps(dict(hf, model_type="gpt2")))
  with pytest.raises(ValueError, match="'model_type' is 'gpt2'"):
    read_config(tmp_path)
  (tmp_path / "config.json").write_text("{\n  oops")
  with pytest.raises(ValueError, match=r"config.json:2: invalid JSON"):
    read_config(tmp_path)


def test_config_round_trips_through_hf_dict():
  for name in ("tiny", "smollm2-135m", "qwen3-8b"):
    config = architectures.get(name)
    assert ModelConfig.from_hf(config.to_hf()) == config
