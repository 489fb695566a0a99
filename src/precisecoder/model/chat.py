"""Chat-template rendering: messages -> the exact prompt text and its token ids."""

from __future__ import annotations

from collections.abc import Sequence


def render_prompt(tokenizer, messages: Sequence[dict[str, str]], *, thinking: bool = False) -> str:
  """The prompt text the model sees, ending with the assistant turn's opening.

  `enable_thinking` is Qwen3's switch; templates without it ignore the extra variable.
  """
  return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True,
                                       enable_thinking=thinking)


def encode_prompt(tokenizer, text: str) -> list[int]:
  """Token ids of rendered prompt text (the template already holds any BOS/special tokens)."""
  return list(tokenizer.encode(text, add_special_tokens=False))


def decode_completion(tokenizer, ids: Sequence[int]) -> str:
  return tokenizer.decode(list(ids), skip_special_tokens=True)
