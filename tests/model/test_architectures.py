"""Named architectures and their parameter counts."""

import jax
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures


def test_architectures_and_parameter_counts():
  # HF's count for SmolLM2-135M
  assert architectures.get("smollm2-135m").num_params() == 134_515_008
  tiny = architectures.get("tiny")
  model = Decoder(tiny, rngs=nnx.Rngs(0))
  assert sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))) == tiny.num_params()
  with pytest.raises(KeyError, match="unknown architecture"):
    architectures.get("gpt5")
