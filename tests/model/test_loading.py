"""`load_checkpoint` on a training run's checkpoints (model/run_checkpoints.py) and its errors."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures, load_checkpoint
from precisecoder.model.loading import CheckpointError
from precisecoder.model.run_checkpoints import model_meta


def test_a_training_runs_checkpoint_loads(tmp_path):
  from precisecoder.train.checkpoint_writer import Checkpointer

  config = architectures.get("tiny", num_layers=2)
  model = Decoder(config, rngs=nnx.Rngs(3))
  tokens = jnp.asarray([[4, 5, 6, 7]])
  for form, params in (
    ("state", nnx.state(model, nnx.Param)),
    ("pure", nnx.to_pure_dict(nnx.state(model, nnx.Param))),
  ):
    checkpointer = Checkpointer(tmp_path / form / "checkpoints", async_save=False)
    meta = {"model": model_meta(config, tmp_path / "no-tokenizer"), "step": 7}
    checkpointer.save(7, params, {"count": jnp.zeros(())}, meta)
    checkpointer.close()
    loaded, _, loaded_config = load_checkpoint(tmp_path / form, with_tokenizer=False)
    assert loaded_config == config
    np.testing.assert_array_equal(np.asarray(loaded(tokens)), np.asarray(model(tokens)))
  with pytest.raises(CheckpointError, match="not a Hugging Face folder"):
    load_checkpoint(tmp_path / "state" / "checkpoints" / "7" / "params", with_tokenizer=False)
