"""The decoder's hyper-parameters (model/config.py): Hugging Face config dictionaries round-trip,
unsupported checkpoints and options are refused naming the field, old boolean remat is read.
Reading config.json files: test_hf.py."""

import pytest

from precisecoder.model import ModelConfig, architectures


def test_from_hf_reads_defaults_and_refuses_what_the_decoder_cannot_run():
  hf = {
    k: v
    for k, v in architectures.get("tiny").to_hf().items()
    if k not in ("num_key_value_heads", "head_dim", "rope_parameters", "rope_theta")
  }
  config = ModelConfig.from_hf(dict(hf, eos_token_id=[3, 4]), dtype="bfloat16")
  assert config.num_kv_heads == config.num_heads  # no GQA field: plain multi-head attention
  assert config.head_dim == config.hidden_size // config.num_heads
  assert config.eos_token_ids == (3, 4) and config.dtype == "bfloat16"
  assert config.to_hf()["eos_token_id"] == [3, 4]
  with pytest.raises(ValueError, match=r"^my.json: rope type 'yarn' is not supported"):
    ModelConfig.from_hf(dict(hf, rope_scaling={"type": "yarn"}), where="my.json")
  with pytest.raises(ValueError, match="attention_bias/mlp_bias checkpoints are not supported"):
    ModelConfig.from_hf(dict(hf, attention_bias=True))
  with pytest.raises(ValueError, match="num_heads=.* is not a multiple of num_kv_heads=3"):
    ModelConfig.from_hf(dict(hf, num_key_value_heads=3))


def test_config_round_trips_through_hf_dict():
  for name in ("tiny", "smollm2-135m", "qwen3-8b"):
    config = architectures.get(name)
    assert ModelConfig.from_hf(config.to_hf()) == config


def test_config_reads_old_boolean_remat_and_rejects_unknown_options():
  assert architectures.get("tiny", remat=True).remat == "full"
  assert architectures.get("tiny", remat=False).remat == "none"
  with pytest.raises(ValueError, match="ModelConfig.remat"):
    architectures.get("tiny", remat="some")
  with pytest.raises(ValueError, match="ModelConfig.attention"):
    architectures.get("tiny", attention="splash")
