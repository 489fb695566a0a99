"""Hugging Face config.json files: their errors name the file and field (the config's own
checks and round trip: test_config.py)."""

import json

import pytest

from precisecoder.model import architectures
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
