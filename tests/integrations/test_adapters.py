"""What the framework adapters share (integrations/adapters.py), called directly: completion
text from plain and conversational completions, and OpenRLHF's query split into prompt and
completion. The adapters scoring through the service: test_service.py and each framework's
tests."""

import pytest

from precisecoder.integrations import adapters


def test_completion_text_reads_conversational_completions():
  assert adapters.completion_text("plain") == "plain"
  assert adapters.completion_text([{"role": "assistant", "content": "fixed"}]) == "fixed"
  parts = [
    {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
  ]
  assert adapters.completion_text(parts) == "ab"
  with pytest.raises(TypeError):
    adapters.completion_text(3)


def test_openrlhf_query_split():
  assert adapters.completion_from_query("PROMPT answer", "PROMPT ") == "answer"
  long_prompt = "x" * 300 + "<|im_start|>assistant\n"
  respaced = " " + long_prompt + "```python\nf()\n```<|im_end|>"
  assert adapters.completion_from_query(respaced, long_prompt) == "```python\nf()\n```<|im_end|>"
  assert adapters.completion_from_query("other", "PROMPT") is None
