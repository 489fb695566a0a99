"""LoRA (model/lora.py): a fresh adapter is the base exactly; training, sampling and merged
weights agree; only the adapters get gradients, optimiser state and checkpoints."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from precisecoder.model import Decoder, architectures, lora as lora_lib
from precisecoder.model.decoder import KVCache, positions_from_mask
from precisecoder.train import checkpoint_writer, config as config_lib, step as step_lib

CONFIG = architectures.get("tiny", num_layers=2)
ALL = lora_lib.LoraConfig(rank=4, alpha=8.0, targets=lora_lib.parse_targets("q,k,v,o,gate,up,down"))


def _tokens(batch=2, length=12, seed=1):
  return jax.random.randint(jax.random.key(seed), (batch, length), 2, CONFIG.vocab_size)


def _with_random_b(model, seed=2):
  """Adapters as after some training: B no longer zero."""
  for i, name in enumerate(model.lora.targets):
    b = getattr(model.layers, name + "_lora_b")
    b.set_value(0.05 * jax.random.normal(jax.random.key(seed + i), b[...].shape))
  return model


def _adapter_bytes(tree):
  return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))


def test_targets_parse_and_bad_ones_are_named():
  assert lora_lib.parse_targets("q, v,down") == ("q_proj", "v_proj", "down_proj")
  with pytest.raises(ValueError, match="unknown LoRA targets.*'x'"):
    lora_lib.parse_targets("q,x")
  cfg = config_lib.default("tiny")
  cfg.model.lora.update(rank=4, targets="q,qq")
  with pytest.raises(config_lib.ConfigError, match="config.model.lora.targets='q,qq'"):
    config_lib.validate(cfg)


def test_fresh_adapters_leave_the_base_exactly():
  base = Decoder(CONFIG, rngs=nnx.Rngs(0))
  model = Decoder(CONFIG, rngs=nnx.Rngs(0), lora=ALL)
  attached = lora_lib.attach(Decoder(CONFIG, rngs=nnx.Rngs(0)), ALL, seed=3)
  tokens = _tokens()
  for m in (model, attached):
    np.testing.assert_array_equal(np.asarray(m(tokens)), np.asarray(base(tokens)))
    cache = KVCache.zeros(CONFIG, 2, 12)
    mask = jnp.ones(tokens.shape, bool)
    ours, _ = m.forward_cached(tokens, positions_from_mask(mask), mask, cache, jnp.int32(0))
    want, _ = base.forward_cached(tokens, positions_from_mask(mask), mask, cache, jnp.int32(0))
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(want))


def test_training_sampling_and_merged_weights_agree():
  model = _with_random_b(Decoder(CONFIG, rngs=nnx.Rngs(0), lora=ALL))
  base = Decoder(CONFIG, rngs=nnx.Rngs(0))
  tokens = _tokens()
  trained = np.asarray(model(tokens))  # unmerged factors (the train step's path)
  assert np.abs(trained - np.asarray(base(tokens))).max() > 1e-2  # the adapters do something
  mask = jnp.ones(tokens.shape, bool)
  sampled, _ = model.forward_cached(
    tokens, positions_from_mask(mask), mask, KVCache.zeros(CONFIG, 2, 12), jnp.int32(0)
  )  # merged
  np.testing.assert_allclose(np.asarray(sampled), trained, atol=2e-5)
  shared = model.shared_prefix_hidden(tokens[:1, :5], mask[:1, :5], tokens[:, 5:], mask[:, 5:])
  full = model.hidden_states(
    jnp.concatenate([jnp.repeat(tokens[:1, :5], 2, 0), tokens[:, 5:]], axis=1)
  )[:, 4:-1]
  np.testing.assert_allclose(np.asarray(shared), np.asarray(full), atol=2e-5)
  graphdef, state = nnx.split(model)
  merged = lora_lib.merged(nnx.merge(graphdef, state))
  assert merged.lora is None and not any(
    lora_lib.is_adapter(p) for p, _ in nnx.to_flat_state(nnx.state(merged))
  )
  np.testing.assert_allclose(np.asarray(merged(tokens)), trained, atol=2e-5)


def test_only_adapters_get_gradients_and_optimiser_state():
  model = Decoder(CONFIG, rngs=nnx.Rngs(0), lora=ALL)
  graphdef, params = nnx.split(model)
  tokens = _tokens()

  def loss(params):
    return jnp.mean(nnx.merge(graphdef, params)(tokens)[..., 5] ** 2)

  # Jitted: one compile, not one per eager op (the same gradients and updates).
  grads = jax.jit(jax.grad(loss))(params)
  for path, g in nnx.to_flat_state(grads):
    value = np.asarray(g.get_value())
    if path[-1].endswith("_lora_b"):  # B = 0: only B has a gradient at the start
      assert np.abs(value).max() > 0, path
    elif not lora_lib.is_adapter(path):
      assert not value.any(), path
  cfg = config_lib.default("tiny")
  full = jax.eval_shape(step_lib.make_optimizer(cfg.optim).init, params)  # its size only
  tx = step_lib.make_optimizer(cfg.optim, adapters_only=True)
  state = jax.jit(tx.init)(params)
  adapters = lora_lib.adapters_of(params)
  # Adam's two moments for the adapters, a few counters: the base has none.
  assert _adapter_bytes(state) < 2 * _adapter_bytes(adapters) + 64
  assert _adapter_bytes(state) < _adapter_bytes(full) / 10
  moved = jax.jit(lambda g, s, p: optax_apply(p, tx.update(g, s, p)[0]))(grads, state, params)
  for (path, old), (_, new) in zip(nnx.to_flat_state(params), nnx.to_flat_state(moved)):
    changed = not np.array_equal(np.asarray(old.get_value()), np.asarray(new.get_value()))
    assert changed == path[-1].endswith("_lora_b"), path


def optax_apply(params, updates):
  import optax  # pylint: disable=import-outside-toplevel

  return optax.apply_updates(params, updates)


def test_checkpoints_hold_the_adapters_only_and_restore_onto_the_base(tmp_path):
  model = _with_random_b(Decoder(CONFIG, rngs=nnx.Rngs(0), lora=ALL))
  _, params = nnx.split(model)
  tx = step_lib.make_optimizer(config_lib.default("tiny").optim, adapters_only=True)
  opt_state = tx.init(params)
  writer = checkpoint_writer.Checkpointer(tmp_path / "ckpt", async_save=False, adapters_only=True)
  writer.save(1, params, opt_state, {"step": 1})
  writer.wait()
  # What a resume starts from: the base reloaded, fresh adapters.
  _, fresh = nnx.split(Decoder(CONFIG, rngs=nnx.Rngs(0), lora=ALL))
  restored, _, meta = writer.restore(1, fresh, tx.init(fresh))
  writer.close()
  assert meta["step"] == 1
  for (path, want), (_, got) in zip(nnx.to_flat_state(params), nnx.to_flat_state(restored)):
    np.testing.assert_array_equal(
      np.asarray(got.get_value()), np.asarray(want.get_value()), err_msg=str(path)
    )
  saved = sum(
    f.stat().st_size for f in (tmp_path / "ckpt" / "1" / "params").rglob("*") if f.is_file()
  )
  assert saved < _adapter_bytes(params) / 4  # the base (most of the bytes) is not written
