"""The small policy's tokenizer: trained here on a few programs, any text round-trips, no token
crosses a line end, and transformers loads the saved folder with its ChatML template."""

import transformers

from precisecoder.model import bpe

CORPUS = [
  bpe.chat_text(
    "Fix the bug.\n```python\ndef f(xs):\n    return sum(xs) + 1\n```\n",
    f"```python\ndef f(xs):\n    return sum(xs) + {i}\n```",
  )
  for i in range(50)
]


def test_round_trip_lines_and_transformers_load(tmp_path):
  tok = bpe.train_bpe(CORPUS, 300, tmp_path / "tok")
  for text in (CORPUS[0], "naïve → ünïcode\tand\n\nblank lines\n", ""):
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
  ids = tok.encode(CORPUS[1], add_special_tokens=False)
  assert all("\n" not in piece[:-1] for piece in (tok.decode([i]) for i in ids))
  assert len(ids) < len(CORPUS[1]) / 3  # frequent lines merged
  loaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
  messages = [{"role": "user", "content": "Fix the bug."}]
  assert loaded.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
    bpe.chat_text("Fix the bug.")
  )
  assert loaded.eos_token == bpe.IM_END and loaded.pad_token == bpe.PAD
  assert loaded.convert_tokens_to_ids(list(bpe.SPECIAL_TOKENS)) == [0, 1, 2]
