"""The debugging prompt (PDB's minimal-debug wording), its one rendering path, and program
extraction.

`debug_messages` builds the chat turn a policy answers; `render_prompt` applies the model's chat
template to it (the exact text the model sees) and `prompt_ids` tokenizes that text. Training,
evaluation and `precisecoder generate` all go through `prompt_ids`/`render_prompt`, so a policy
is never trained on one prompt and evaluated on another. `extract_program` turns the raw answer
back into the program that is scored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Mapping

from precisecoder.tasks import Task

# PDB's minimal-debug instruction (Bill1235813/PDB, src/module.py), kept verbatim: the
# benchmark's numbers are measured with it.
MINIMAL_DEBUG_INSTRUCTION = """\
Debug the given Python code that contains errors. ONLY fix the bugs. Make minimal edits.
Do NOT generate a new solution based on the problem description.
Do NOT reformat lines that are already correct.
Do NOT edit or add any comments."""

_PARTS_WITH_TESTS = """\
The input consists of three parts:
- A problem description outlining the intended functionality.
- A buggy code that needs to be fixed.
- A set of unit tests for the problem."""

_PARTS_WITHOUT_TESTS = """\
The input consists of two parts:
- A problem description outlining the intended functionality.
- A buggy code that needs to be fixed."""

_RESPONSE = """\
Your response should include:
- A self-contained, corrected Python implementation, only making minimal edits on the buggy code."""

_OUTPUT_FORMAT = """\
Output format (follow *exactly*):
```python
[Corrected code here]
```
Corrected Code Output (use the format above):"""

_THINK_HINT = (
  "Reason about where the bug is inside <think> </think> first, then give the corrected code."
)


def format_tests(tests: Mapping[str, Any], max_cases: int = 10) -> str:
  """The tests as Python-looking text for the prompt ("context only")."""
  kind = tests.get("kind")
  if kind in ("unittest", "assert"):
    return str(tests["code"]).rstrip()
  cases = list(tests.get("cases", []))[:max_cases]
  lines = []
  if kind == "call":
    for case in cases:
      args = [json.dumps(a) for a in case.get("args", [])]
      args += [f"{k}={json.dumps(v)}" for k, v in case.get("kwargs", {}).items()]
      lines.append(
        f"assert {tests['entry_point']}({', '.join(args)}) == {json.dumps(case['expected'])}"
      )
  elif kind == "io":
    for i, case in enumerate(cases, 1):
      lines.append(
        f"# Test {i}\n# stdin:\n{_comment(case['stdin'])}\n# expected stdout:\n"
        f"{_comment(case['stdout'])}"
      )
  else:
    raise ValueError(f"unknown test kind {kind!r}")
  return "\n".join(lines)


def _comment(text: str) -> str:
  return "\n".join(f"#   {line}" for line in text.rstrip("\n").splitlines()) or "#   (empty)"


def debug_prompt(task: Task, *, thinking: bool = False, include_tests: bool = True) -> str:
  """The user message: PDB's minimal-debug prompt for `task`."""
  with_tests = include_tests and bool(task.tests)
  parts = [
    MINIMAL_DEBUG_INSTRUCTION,
    "",
    _PARTS_WITH_TESTS if with_tests else _PARTS_WITHOUT_TESTS,
    "",
    _RESPONSE,
    "",
    "PART 1: Problem Description",
    "```text",
    task.prompt.rstrip(),
    "```",
    "",
    "PART 2: Buggy Code",
    "```python",
    task.buggy_code.rstrip(),
    "```",
    "",
  ]
  if with_tests:
    parts += ["PART 3: Unit Tests (context only)", "```python", format_tests(task.tests), "```", ""]
  if thinking:
    parts += [_THINK_HINT, ""]
  parts.append(_OUTPUT_FORMAT)
  return "\n".join(parts) + "\n"


def debug_messages(
  task: Task, thinking: bool = False, include_tests: bool = True
) -> list[dict[str, str]]:
  """Chat messages asking for a minimal fix of `task`'s buggy code.

  Model-specific thinking switches (Qwen3's `enable_thinking`) belong to the
  chat template call; `thinking=True` only asks for the reasoning in words.
  """
  return [
    {"role": "user", "content": debug_prompt(task, thinking=thinking, include_tests=include_tests)}
  ]


def render_prompt(
  tokenizer,
  task: Task,
  *,
  thinking: bool = False,
  include_tests: bool = True,
  prefill_thinking: str | None = None,
) -> str:
  """The prompt text the model sees: the chat template applied to `debug_messages(task)`,
  ending with the assistant turn's opening.

  `thinking` asks for reasoning in words and sets Qwen3's `enable_thinking` (templates without
  it ignore the variable; with it off, Qwen3 opens the turn with an empty think block).
  `prefill_thinking` puts another model's reasoning into the assistant turn, see
  `_prefilled_turn`.
  """
  messages = debug_messages(task, thinking=thinking, include_tests=include_tests)
  if prefill_thinking is not None:
    return _prefilled_turn(tokenizer, messages, prefill_thinking)
  return tokenizer.apply_chat_template(
    messages, tokenize=False, add_generation_prompt=True, enable_thinking=thinking
  )


# Stands for the answer while a template renders a whole assistant turn; cut off afterwards.
_ANSWER_MARK = "\u2063PRECISECODER-ANSWER\u2063"


def _prefilled_turn(tokenizer, messages: list[dict[str, str]], thinking_text: str) -> str:
  """The prompt with `thinking_text` as the assistant's thinking block, answer still to come.

  Template-aware: the template renders a whole assistant turn whose content is
  "<think>\n{thinking}\n</think>\n\n" + answer (Qwen3 moves that into its own reasoning
  layout), and the text is cut where the answer would start; so the prefix is exactly what the
  template gives for a turn with this reasoning. Templates that drop reasoning from assistant
  turns fall back to the plain form: the thinking-mode generation prompt followed by the block.
  """
  reasoning = thinking_text.strip("\n")
  block = f"<think>\n{reasoning}\n</think>\n\n"
  turn = tokenizer.apply_chat_template(
    messages + [{"role": "assistant", "content": block + _ANSWER_MARK}],
    tokenize=False,
    add_generation_prompt=False,
    enable_thinking=True,
  )
  cut = turn.find(_ANSWER_MARK)
  if cut >= 0 and reasoning in turn[:cut]:
    return turn[:cut]
  return (
    tokenizer.apply_chat_template(
      messages, tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    + block
  )


def feedback_turn(tokenizer, message: str, *, thinking: bool = False) -> str:
  """The text between the end of an assistant answer and the start of the next one when the
  user replies `message`: what the chat template renders after an answer (its end-of-turn
  marker, the user turn, the next assistant turn's opening), so a multi-turn episode continues
  exactly as the template lays out the whole conversation. `thinking` as in `render_prompt`.
  """
  first = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _ANSWER_MARK}]
  text = tokenizer.apply_chat_template(
    first + [{"role": "user", "content": message}],
    tokenize=False,
    add_generation_prompt=True,
    enable_thinking=thinking,
  )
  cut = text.find(_ANSWER_MARK)
  if cut < 0 or message not in text[cut:]:
    raise ValueError(
      "the chat template does not render an assistant answer and a user reply "
      "verbatim; multi-turn episodes need one that does"
    )
  return text[cut + len(_ANSWER_MARK) :]


def encode_prompt(tokenizer, text: str) -> list[int]:
  """Token ids of rendered prompt text (the template already holds any BOS/special tokens)."""
  ids = tokenizer.encode(text, add_special_tokens=False)
  return [int(i) for i in ids]


def prompt_ids(tokenizer, task: Task, **options: Any) -> list[int]:
  """`encode_prompt(render_prompt(...))`: the ids a policy is sampled and trained on."""
  return encode_prompt(tokenizer, render_prompt(tokenizer, task, **options))


def decode_completion(tokenizer, ids: Sequence[int]) -> str:
  return tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)


def decode_text(tokenizer, ids: Sequence[int]) -> str:
  """The text of `ids` as the model saw it, special tokens (an end of turn) included."""
  return tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)


_THINK_CLOSED = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>.*", re.DOTALL | re.IGNORECASE)
_PYTHON_BLOCK = re.compile(
  r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE
)
_ANY_BLOCK = re.compile(r"```[^\n`]*\r?\n(.*?)```", re.DOTALL)
# A block whose closing fence never came (the token budget cut the answer): the last fence of
# the text opens it, and it runs to the end.
_OPEN_PYTHON_BLOCK = re.compile(
  r"```[ \t]*(?:python3?|py)[ \t]*\r?\n((?:(?!```).)*)\Z", re.DOTALL | re.IGNORECASE
)
_OPEN_ANY_BLOCK = re.compile(r"```[^\n`]*\r?\n((?:(?!```).)*)\Z", re.DOTALL)


def strip_thinking(completion: str) -> str:
  """The completion without its thinking block(s); an unclosed block runs to the end."""
  text = _THINK_CLOSED.sub("", completion)
  if "</think>" in text.lower():  # templates that prefill "<think>" leave only the closing tag
    text = text[text.lower().rindex("</think>") + len("</think>") :]
  return _THINK_OPEN.sub("", text)


def thinking_block(completion: str) -> str | None:
  """The reasoning inside a completion's first thinking block, or None if it has none.

  An unclosed block (the length limit cut it) runs to the end; a completion holding only the
  closing tag (the template opened the block) yields the text before it.
  """
  lower = completion.lower()
  start, end = lower.find("<think>"), lower.find("</think>")
  if start >= 0 and (end < 0 or start < end):
    body_start = start + len("<think>")
    body_end = lower.find("</think>", body_start)
    return completion[body_start : body_end if body_end >= 0 else None].strip("\n")
  if end >= 0:
    return completion[:end].strip("\n")
  return None


def extract_program(completion: str) -> str:
  """The program in a model's answer.

  The first ```python block, else an unclosed ```python block (the answer was cut before its
  closing fence) to the end, else the first fenced block, else an unclosed one, else the text.
  """
  text = strip_thinking(completion)
  for pattern in (_PYTHON_BLOCK, _OPEN_PYTHON_BLOCK, _ANY_BLOCK, _OPEN_ANY_BLOCK):
    match = pattern.search(text)
    if match:
      return match.group(1)
  return text.strip("\n")
