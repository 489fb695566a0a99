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


def _tiny_run(workdir):
  """A training checkpoint of the tiny preset's random model, which reads bytes (no tokenizer
  folder), with the metadata a trainer's Run.save writes."""
  from flax import nnx

  from precisecoder.model.run_checkpoints import model_meta
  from precisecoder.train import config as config_lib
  from precisecoder.train.checkpoint_writer import Checkpointer
  from precisecoder.train.policy import load_policy

  policy = load_policy(config_lib.default("tiny"))
  checkpointer = Checkpointer(workdir / "checkpoints", async_save=False)
  checkpointer.save(
    1,
    nnx.state(policy.model, nnx.Param),
    {"count": np.zeros(())},
    {"model": model_meta(policy.config, policy.source), "step": 1},
  )
  checkpointer.close()
  return workdir


def test_the_tiny_model_exports_with_a_tokenizer_transformers_loads(tmp_path):
  """The tiny run's export holds a tokenizer.json: transformers loads it with the weights,
  encodes as the trainer did, and its greedy tokens are ours."""
  import torch
  from transformers import AutoModelForCausalLM, AutoTokenizer

  from precisecoder.train.policy import ByteTokenizer

  run = _tiny_run(tmp_path / "run")
  out = tmp_path / "hf"
  assert cli.main(["export", "--checkpoint", str(run), "--output", str(out)]) == 0
  assert (out / "tokenizer.json").exists()
  tokenizer = AutoTokenizer.from_pretrained(out)
  hf_model = AutoModelForCausalLM.from_pretrained(out)
  text = "def inc(x):\n    return x - 1  # é\n"
  ids = tokenizer.encode(text)
  assert ids == ByteTokenizer().encode(text) and tokenizer.decode(ids) == text
  messages = [{"role": "user", "content": "Fix it."}]
  assert tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == (
    ByteTokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
  )
  generated = hf_model.generate(
    torch.tensor([ids]), max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id
  )[0, len(ids) :].tolist()
  ours, _, _ = load_checkpoint(run)
  tokens = list(ids)
  for _ in range(4):  # our greedy continuation, one token at a time
    tokens.append(int(np.argmax(np.asarray(ours(np.asarray([tokens], np.int32)))[0, -1])))
  assert generated == tokens[len(ids) :]


def test_export_refuses_a_non_empty_folder_unless_overwrite(checkpoint, tmp_path, capsys):
  folder, _ = checkpoint
  out = tmp_path / "hf"
  out.mkdir()
  (out / "tokenizer.json").write_text("{}")  # another model's, left behind
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(out)]) == 2
  assert f"--output {out}: is not empty (1 entries: tokenizer.json)" in (
    _one_line_error(capsys, "export")
  )
  assert (out / "tokenizer.json").read_text() == "{}"  # untouched
  (out / "stale.bin").write_text("x")
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(out), "--overwrite"]) == 0
  assert not (out / "stale.bin").exists()
  _, tok_a, _ = load_checkpoint(folder)
  _, tok_b, _ = load_checkpoint(out)
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
  export_hf(
    Decoder(config, rngs=nnx.Rngs(0)),
    config,
    make_chat_tokenizer(None, ["def f(x): return x + 1"]),
    base_dir,
  )
  lora = lora_lib.LoraConfig(
    rank=4, alpha=8.0, targets=lora_lib.parse_targets("q,k,v,o,gate,up,down")
  )
  model, _, _ = load_checkpoint(base_dir)
  lora_lib.attach(model, lora, seed=1)
  for i, name in enumerate(lora.targets):  # adapters as after training: B no longer zero
    b = getattr(model.layers, name + "_lora_b")
    b.set_value(0.05 * jax.random.normal(jax.random.key(i), b[...].shape))
  _, params = nnx.split(model)
  writer = checkpoint_writer.Checkpointer(
    tmp_path / "run" / "checkpoints", async_save=False, adapters_only=True
  )
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
