"""`precisecoder generate` and `precisecoder export` end to end on a tiny checkpoint."""

import json

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from precisecoder import cli
from precisecoder.model import load_checkpoint

_CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
           "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
_TASKS = [
    {"task_id": "inc_0", "prompt": "Return x plus one.",
     "buggy_code": "def inc(x):\n    return x - 1\n", "gt_solution": "def inc(x):\n    return x + 1\n",
     "tests": {"kind": "call", "entry_point": "inc", "cases": [{"args": [1], "expected": 2}]}},
    {"task_id": "neg_0", "prompt": "Return minus x.",
     "buggy_code": "def neg(x):\n    return x\n", "gt_solution": "def neg(x):\n    return -x\n",
     "tests": {"kind": "call", "entry_point": "neg", "cases": [{"args": [2], "expected": -2}]}},
]


def _tokenizer() -> transformers.PreTrainedTokenizerFast:
  """A small byte-level BPE with ChatML special tokens, trained here (no download)."""
  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
      vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  corpus = [t["buggy_code"] + t["gt_solution"] + t["prompt"] for t in _TASKS] * 20
  tok.train_from_iterator(corpus + ["Debug the given Python code that contains errors."], trainer)
  return transformers.PreTrainedTokenizerFast(
      tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
      chat_template=_CHATML)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  folder = tmp_path_factory.mktemp("tiny_llama")
  tokenizer = _tokenizer()
  config = transformers.LlamaConfig(
      vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
      tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
      pad_token_id=tokenizer.pad_token_id)
  torch.manual_seed(0)
  transformers.LlamaForCausalLM(config).save_pretrained(folder)
  tokenizer.save_pretrained(folder)
  tasks = folder / "tasks.jsonl"
  tasks.write_text("".join(json.dumps(t) + "\n" for t in _TASKS))
  return folder, tasks


def _read(path):
  return [json.loads(line) for line in path.read_text().splitlines()]


def test_generate_writes_contract_predictions(checkpoint, tmp_path):
  folder, tasks = checkpoint
  out = tmp_path / "pred.jsonl"
  argv = ["generate", "--checkpoint", str(folder), "--tasks", str(tasks), "--output", str(out),
          "--samples", "3", "--temperature", "1.0", "--max-new-tokens", "8", "--seed", "1",
          "--batch-size", "1", "--compile-cache", str(tmp_path / "cache")]
  assert cli.main(argv) == 0
  lines = _read(out)
  assert [(r["task_id"], r["sample"]) for r in lines] == [
      (t["task_id"], k) for t in _TASKS for k in range(3)]
  model, tokenizer, _ = load_checkpoint(folder)
  for r in lines:
    assert r["prompt"].startswith("<|im_start|>user\nDebug the given Python code")
    assert r["prompt"].endswith("<|im_start|>assistant\n")
    assert 1 <= r["num_tokens"] <= 8 and isinstance(r["completion"], str)
  assert len({r["completion"] for r in lines}) > 1
  # The same seed reproduces the file exactly.
  again = tmp_path / "again.jsonl"
  assert cli.main(argv[:6] + [str(again)] + argv[7:]) == 0
  assert again.read_text() == out.read_text()


def test_greedy_samples_agree(checkpoint, tmp_path):
  folder, tasks = checkpoint
  out = tmp_path / "greedy.jsonl"
  assert cli.main(["generate", "--checkpoint", str(folder), "--tasks", str(tasks), "--output",
                   str(out), "--samples", "2", "--temperature", "0", "--max-new-tokens", "6",
                   "--limit", "1"]) == 0
  lines = _read(out)
  assert len(lines) == 2 and lines[0]["completion"] == lines[1]["completion"]


def test_bad_task_file_is_a_clear_error(checkpoint, tmp_path):
  folder, _ = checkpoint
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"task_id": "x"\n')
  with pytest.raises(SystemExit, match="bad.jsonl:1"):
    cli.main(["generate", "--checkpoint", str(folder), "--tasks", str(bad), "--output",
              str(tmp_path / "p.jsonl")])


def test_export_then_load_gives_same_logits(checkpoint, tmp_path):
  folder, _ = checkpoint
  assert cli.main(["export", "--checkpoint", str(folder), "--output", str(tmp_path / "x")]) == 0
  a, tok_a, _ = load_checkpoint(folder)
  b, tok_b, _ = load_checkpoint(tmp_path / "x")
  tokens = np.asarray([tok_a.encode("def inc(x): return x")], np.int32)
  np.testing.assert_array_equal(np.asarray(a(tokens)), np.asarray(b(tokens)))
  assert tok_b.encode("def neg(x)") == tok_a.encode("def neg(x)")
