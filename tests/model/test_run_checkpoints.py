"""Reading the policy out of a training run's checkpoints (model/run_checkpoints.py), called
directly: the newest step is found from the workdir, its checkpoints folder or the step itself,
the tokenizer source is recorded absolute, execution options override the saved config, and
weights the config does not fit, or a folder without checkpoints, are named.
Through `load_checkpoint`: test_loading.py."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures, run_checkpoints
from precisecoder.train.checkpoint_writer import Checkpointer


def _save(workdir, models, config, tokenizer):
  """Checkpoints of {step: model}, as the trainers write them."""
  checkpointer = Checkpointer(workdir / "checkpoints", async_save=False)
  for step, model in models.items():
    checkpointer.save(
      step,
      nnx.state(model, nnx.Param),
      {"count": jnp.zeros(())},
      {"model": run_checkpoints.model_meta(config, tokenizer), "step": step},
    )
  checkpointer.close()


def test_the_newest_step_loads_from_any_of_its_folders(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "tok").mkdir()
  config = architectures.get("tiny", num_layers=1)
  model = Decoder(config, rngs=nnx.Rngs(1))
  other = Decoder(config, rngs=nnx.Rngs(2))
  _save(tmp_path / "run", {2: other, 10: model}, config, "tok")  # 10 after 2: by number
  tokens = jnp.asarray([[3, 4, 5]])
  for where in ("run", "run/checkpoints", "run/checkpoints/10"):
    loaded, loaded_config, tokenizer = run_checkpoints.load(where, remat="full")
    assert loaded_config == config.replace(remat="full") and tokenizer == tmp_path / "tok"
    np.testing.assert_array_equal(np.asarray(loaded(tokens)), np.asarray(model(tokens)))
  assert run_checkpoints.read_config("run").num_layers == 1
  # A local tokenizer is recorded absolute (runs are read from elsewhere); a hub id as given.
  assert run_checkpoints.model_meta(config, "tok")["tokenizer"] == str(tmp_path / "tok")
  assert run_checkpoints.model_meta(config, "org/model")["tokenizer"] == "org/model"


def test_weights_that_do_not_fit_and_folders_without_checkpoints_are_named(tmp_path):
  config = architectures.get("tiny", num_layers=1)
  wider = config.replace(intermediate_size=2 * config.intermediate_size)
  _save(tmp_path / "run", {1: Decoder(wider, rngs=nnx.Rngs(0))}, config, "tok")
  params = tmp_path / "run" / "checkpoints" / "1" / "params"
  with pytest.raises(ValueError, match=rf"^{params}: layers/\w+_proj has shape .*; config implies"):
    run_checkpoints.load(tmp_path / "run")
  with pytest.raises(FileNotFoundError, match="no <step>/params under it"):
    run_checkpoints.read_config(tmp_path)
