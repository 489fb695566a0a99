"""Configs, GGUF weight layout, sharding rules and training-checkpoint loading."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AbstractMesh, AxisType, PartitionSpec

from precisecoder.model import Decoder, ModelConfig, load_checkpoint, presets
from precisecoder.model.checkpoint import CheckpointError
from precisecoder.model.gguf_import import _unpermute_rope
from precisecoder.model.hf import read_config
from precisecoder.model.sharding import logical_to_spec, make_mesh
from precisecoder.model.training_checkpoint import model_meta


def test_presets_and_parameter_counts():
  assert presets.get("smollm2-135m").num_params() == 134_515_008  # HF's count for SmolLM2-135M
  tiny = presets.get("tiny")
  model = Decoder(tiny, rngs=nnx.Rngs(0))
  assert sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))) == tiny.num_params()
  with pytest.raises(KeyError, match="unknown model preset"):
    presets.get("gpt5")


def test_config_json_errors_name_file_and_field(tmp_path):
  hf = presets.get("tiny").to_hf()
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
    config = presets.get(name)
    assert ModelConfig.from_hf(config.to_hf()) == config


def test_unpermute_inverts_llama_cpp_rope_permutation():
  heads, head_dim, d = 3, 8, 5
  w = np.arange(heads * head_dim * d, dtype=np.float32).reshape(heads * head_dim, d)
  # llama.cpp convert_hf_to_gguf.py: reshape(n_head, 2, dim // n_head // 2, ...).swapaxes(1, 2)
  permuted = w.reshape(heads, 2, head_dim // 2, d).swapaxes(1, 2).reshape(w.shape)
  np.testing.assert_array_equal(_unpermute_rope(permuted, heads), w)


def test_sharding_rules_drop_axes_that_do_not_divide():
  mesh = AbstractMesh((2, 2, 4), ("data", "fsdp", "tensor"), axis_types=(AxisType.Auto,) * 3)
  # Trailing unsharded axes are dropped (JAX's own canonical form: no recompile on a mismatch).
  assert logical_to_spec(("batch", "seq"), (8, 5), mesh) == PartitionSpec(("data", "fsdp"))
  assert logical_to_spec(("batch", "seq"), (2, 5), mesh) == PartitionSpec("data")
  assert logical_to_spec(("embed", "kv_heads"), (64, 3), mesh) == PartitionSpec("fsdp")
  assert logical_to_spec(("seq", "batch"), (5, 8), mesh) == PartitionSpec(None, ("data", "fsdp"))
  with pytest.raises(KeyError, match="no sharding rule"):
    logical_to_spec(("nonsense",), (4,), mesh)
  with pytest.raises(ValueError, match="needs 8 devices"):
    make_mesh((2, 2, 2))


def test_training_checkpoint_loads(tmp_path):
  from precisecoder.train.checkpointing import Checkpointer

  config = presets.get("tiny", num_layers=2)
  model = Decoder(config, rngs=nnx.Rngs(3))
  tokens = jnp.asarray([[4, 5, 6, 7]])
  for form, params in (("state", nnx.state(model, nnx.Param)),
                       ("pure", nnx.to_pure_dict(nnx.state(model, nnx.Param)))):
    checkpointer = Checkpointer(tmp_path / form / "checkpoints", async_save=False)
    meta = {"model": model_meta(config, tmp_path / "no-tokenizer"), "step": 7}
    checkpointer.save(7, params, {"count": jnp.zeros(())}, meta)
    checkpointer.close()
    loaded, _, loaded_config = load_checkpoint(tmp_path / form, with_tokenizer=False)
    assert loaded_config == config
    np.testing.assert_array_equal(np.asarray(loaded(tokens)), np.asarray(model(tokens)))
  with pytest.raises(CheckpointError, match="not a Hugging Face folder"):
    load_checkpoint(tmp_path / "state" / "checkpoints" / "7" / "params", with_tokenizer=False)


def test_qwen_tokenizer_fallback_without_tokenizer_files(tmp_path):
  from precisecoder.model import load_tokenizer

  tokenizer = load_tokenizer(tmp_path, arch="qwen3")
  ids = tokenizer.encode("def f(x):\n    return x + 1\n")
  assert tokenizer.decode(ids) == "def f(x):\n    return x + 1\n"
  text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
  assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
  assert tokenizer.encode("<|im_end|>") == [tokenizer.eos_token_id] == [151645]
  with pytest.raises(FileNotFoundError, match="no tokenizer files"):
    load_tokenizer(tmp_path, arch="llama")


def test_bfloat16_parameters_and_sampling():
  from precisecoder.sampling import sample

  config = presets.get("tiny", num_layers=2)
  f32 = Decoder(config, rngs=nnx.Rngs(0))
  bf16 = Decoder(config.replace(dtype="bfloat16"), rngs=nnx.Rngs(0))
  assert bf16.layers.q_proj[...].dtype == jnp.bfloat16
  tokens = jnp.asarray([[3, 4, 5, 6]])
  a, b = np.asarray(f32(tokens)), np.asarray(bf16(tokens))
  assert b.dtype == np.float32 and np.abs(a - b).max() < 0.05 * np.abs(a).max() + 1e-3
  out = sample(bf16, [[3, 4, 5]], num_samples=2, max_new_tokens=4, eos_ids=(), pad_id=0)
  assert out.tokens.shape == (2, 4) and np.isfinite(out.logprobs).all()
