"""Tokenizers: the Qwen fallback when a checkpoint ships no tokenizer files."""

import pytest


def test_qwen_tokenizer_fallback_without_tokenizer_files(tmp_path):
  from precisecoder.model import load_tokenizer

  tokenizer = load_tokenizer(tmp_path, arch="qwen3")
  ids = tokenizer.encode("def f(x):\n    return x + 1\n")
  assert tokenizer.decode(ids) == "def f(x):\n    return x + 1\n"
  text = tokenizer.apply_chat_template(
    [{"role": "user", "content": "hi"}],
    tokenize=False,
    add_generation_prompt=True,
    enable_thinking=False,
  )
  assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
  assert tokenizer.encode("<|im_end|>") == [tokenizer.eos_token_id] == [151645]
  with pytest.raises(FileNotFoundError, match="no tokenizer files"):
    load_tokenizer(tmp_path, arch="llama")
