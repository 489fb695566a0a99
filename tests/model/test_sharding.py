"""Logical-axis rules, and sharded runs on 8 fake CPU devices giving the one-device logits and
samples.

The device count must be fixed before JAX starts, so the check runs in a fresh interpreter
(this file, run as a script) with XLA_FLAGS set.
"""

import json
import os
import subprocess
import sys

MESH_SHAPES = [(8, 1, 1), (2, 2, 2), (1, 2, 4)]


def _check() -> dict:
  import jax
  import jax.numpy as jnp
  import numpy as np
  from flax import nnx

  from precisecoder.model import Decoder, architectures, make_mesh, shard_model
  from precisecoder.model.sharding import state_shardings
  from precisecoder.sampling import sample

  assert jax.device_count() == 8, jax.devices()
  config = architectures.get("tiny")
  rng = np.random.default_rng(0)
  tokens = rng.integers(2, config.vocab_size, (8, 24)).astype(np.int32)
  mask = np.ones_like(tokens, bool)
  mask[::2, :5] = False
  prompts = [rng.integers(2, config.vocab_size, n).tolist() for n in (5, 9, 14, 3)]
  kwargs = dict(
    num_samples=2, max_new_tokens=16, temperature=1.0, top_p=0.9, eos_ids=(1,), pad_id=0, seed=7
  )

  def forward(model):
    graphdef, state = nnx.split(model)
    fn = jax.jit(lambda s, t, m: nnx.merge(graphdef, s)(t, m))
    return np.asarray(fn(state, jnp.asarray(tokens), jnp.asarray(mask)))

  reference = Decoder(config, rngs=nnx.Rngs(0))
  want_logits = forward(reference)
  want = sample(reference, prompts, **kwargs)
  report = {}
  for shape in MESH_SHAPES:
    mesh = make_mesh(shape)
    model = shard_model(Decoder(config, rngs=nnx.Rngs(0)), mesh)
    specs = state_shardings(nnx.state(model), mesh)
    q_spec = dict(nnx.to_flat_state(specs))[("layers", "q_proj")]
    assert model.layers.q_proj[...].sharding.spec == q_spec.spec
    with jax.set_mesh(mesh):
      got_logits = forward(model)
    got = sample(model, prompts, mesh=mesh, **kwargs)
    report[str(shape)] = dict(
      q_proj_spec=str(q_spec.spec),
      logits_max_diff=float(np.abs(got_logits - want_logits).max()),
      tokens_equal=bool((got.tokens == want.tokens).all()),
      lengths_equal=bool((got.lengths == want.lengths).all()),
      logprobs_max_diff=float(np.abs(got.logprobs - want.logprobs).max()),
    )
  return report


def test_sharded_logits_and_samples_match_one_device():
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
  # The timeout only turns a hang into a failure: a loaded host may take many minutes.
  proc = subprocess.run(
    [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=3600
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  assert set(report) == {str(m) for m in MESH_SHAPES}
  assert report["(1, 2, 4)"]["q_proj_spec"] == "P(None, 'fsdp', 'tensor')"  # trailing None dropped
  for shape, r in report.items():
    assert r["logits_max_diff"] < 1e-5, (shape, r)
    assert r["tokens_equal"] and r["lengths_equal"], (shape, r)
    assert r["logprobs_max_diff"] < 1e-5, (shape, r)


def test_sharding_rules_drop_axes_that_do_not_divide():
  import pytest
  from jax.sharding import AbstractMesh, AxisType, PartitionSpec

  from precisecoder.model.sharding import logical_to_spec, make_mesh

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


def test_mesh_scope_sets_the_current_mesh_only_when_there_is_one():
  import jax
  from jax.sharding import AxisType

  from precisecoder.model.sharding import mesh_scope

  mesh = jax.make_mesh((1,), ("data",), axis_types=(AxisType.Auto,))
  with mesh_scope(mesh):
    assert jax.sharding.get_abstract_mesh().axis_names == ("data",)
  with mesh_scope(None):
    assert jax.sharding.get_abstract_mesh().empty


if __name__ == "__main__":
  print(json.dumps(_check()))
