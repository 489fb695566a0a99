"""Building a Decoder from a tensor source (model/build.py), called directly: a tiny model's
tensors, written out in Hugging Face names and layouts, build back into the same model (same
logits), and a tensor whose shape the config does not imply is refused naming it."""

import jax
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures
from precisecoder.model.build import build_decoder
from precisecoder.model.weights import weight_specs


def _hf_tensors(model, config):
  params = dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))
  tensors = {}
  for spec in weight_specs(config):
    value = np.asarray(params[spec.path].get_value())
    if spec.per_layer:
      for i in range(config.num_layers):
        tensors[spec.hf_name.format(i=i)] = spec.to_hf(value[i])
    else:
      tensors[spec.hf_name] = spec.to_hf(value)
  return tensors


def test_a_model_builds_back_from_its_tensors_and_bad_shapes_are_named():
  config = architectures.get("tiny", num_layers=2)
  model = Decoder(config, rngs=nnx.Rngs(3))
  tensors = _hf_tensors(model, config)
  built = build_decoder(config, tensors.__getitem__, where="fixture")
  tokens = jax.random.randint(jax.random.key(0), (2, 7), 0, config.vocab_size)
  np.testing.assert_array_equal(np.asarray(built(tokens)), np.asarray(model(tokens)))
  name = "model.layers.1.mlp.up_proj.weight"
  tensors[name] = tensors[name][:-1]
  with pytest.raises(ValueError, match=rf"^fixture: tensor '{name}' has shape \("):
    build_decoder(config, tensors.__getitem__, where="fixture")
