"""`precisecoder export` on a tiny checkpoint: the exported folder loads with the same logits
and tokenizer, and the command refuses an output that is its checkpoint or a file. Unloadable
checkpoints (shared with generate): tests/commands/test_generate.py."""

import numpy as np

from precisecoder import cli
from precisecoder.model import load_checkpoint
from tests.commands import test_generate
from tests.commands.test_generate import _one_line_error

checkpoint = test_generate.checkpoint  # the tiny checkpoint and its task file (a fixture)


def test_export_refuses_an_output_that_is_its_checkpoint_or_a_file(checkpoint, capsys):
  folder, tasks = checkpoint
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(folder)]) == 2
  assert "is the --checkpoint" in _one_line_error(capsys, "export")
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(tasks)]) == 2
  assert "exists and is not a folder" in _one_line_error(capsys, "export")


def test_export_then_load_gives_same_logits(checkpoint, tmp_path):
  folder, _ = checkpoint
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(tmp_path / "x")]) == 0
  a, tok_a, _ = load_checkpoint(folder)
  b, tok_b, _ = load_checkpoint(tmp_path / "x")
  tokens = np.asarray([tok_a.encode("def inc(x): return x")], np.int32)
  np.testing.assert_array_equal(np.asarray(a(tokens)), np.asarray(b(tokens)))
  assert tok_b.encode("def neg(x)") == tok_a.encode("def neg(x)")


def test_export_merges_a_lora_run_into_weights_transformers_reads(tmp_path):
  """A LoRA run's checkpoint (adapters only, on an HF base of the tiny preset's shape) exports
  merged: transformers' Qwen3 gives the logits of our decoder running the adapters unmerged."""
  import jax  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  from conftest import make_chat_tokenizer  # pylint: disable=import-outside-toplevel
  from flax import nnx  # pylint: disable=import-outside-toplevel

  from precisecoder.model import Decoder, architectures, export_hf  # pylint: disable=import-outside-toplevel
  from precisecoder.model import lora as lora_lib  # pylint: disable=import-outside-toplevel
  from precisecoder.model.run_checkpoints import model_meta  # pylint: disable=import-outside-toplevel
  from precisecoder.train import checkpoint_writer, config as config_lib  # pylint: disable=import-outside-toplevel
  from precisecoder.train import step as step_lib  # pylint: disable=import-outside-toplevel

  config = architectures.get("tiny")
  base_dir = tmp_path / "base"
  export_hf(Decoder(config, rngs=nnx.Rngs(0)), config,
            make_chat_tokenizer(None, ["def f(x): return x + 1"]), base_dir)
  lora = lora_lib.LoraConfig(rank=4, alpha=8.0, targets=lora_lib.parse_targets(
      "q,k,v,o,gate,up,down"))
  model, _, _ = load_checkpoint(base_dir)
  lora_lib.attach(model, lora, seed=1)
  for i, name in enumerate(lora.targets):  # adapters as after training: B no longer zero
    b = getattr(model.layers, name + "_lora_b")
    b.set_value(0.05 * jax.random.normal(jax.random.key(i), b[...].shape))
  _, params = nnx.split(model)
  writer = checkpoint_writer.Checkpointer(tmp_path / "run" / "checkpoints", async_save=False,
                                          adapters_only=True)
  tx = step_lib.make_optimizer(config_lib.default("tiny").optim, adapters_only=True)
  meta = {"step": 3, "model": model_meta(config, base_dir, lora=lora, base=base_dir)}
  writer.save(3, params, tx.init(params), meta)
  writer.close()

  out = tmp_path / "merged"
  assert cli.main(["export", "--checkpoint", str(tmp_path / "run"), "--output", str(out)]) == 0
  tokens = np.asarray([[5, 17, 300, 42, 9, 77, 128, 3]], np.int32)
  ours = np.asarray(model(tokens))
  hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
  with torch.no_grad():
    theirs = hf(input_ids=torch.tensor(tokens, dtype=torch.long)).logits.numpy()
  np.testing.assert_allclose(theirs, ours, atol=1e-4)
  base = np.asarray(load_checkpoint(base_dir)[0](tokens))
  assert np.abs(base - ours).max() > 1e-2  # the adapters changed what was exported
