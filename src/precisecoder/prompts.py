"""The debugging prompt (PDB's minimal-debug wording) and program extraction.

`debug_messages` builds the chat turn a policy answers; `extract_program`
turns the raw answer back into the program that is scored.
"""

from __future__ import annotations

import json
import re
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

_THINK_HINT = ("Reason about where the bug is inside <think> </think> first, then give the "
               "corrected code.")


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
      lines.append(f"assert {tests['entry_point']}({', '.join(args)}) == {json.dumps(case['expected'])}")
  elif kind == "io":
    for i, case in enumerate(cases, 1):
      lines.append(f"# Test {i}\n# stdin:\n{_comment(case['stdin'])}\n# expected stdout:\n"
                   f"{_comment(case['stdout'])}")
  else:
    raise ValueError(f"unknown test kind {kind!r}")
  return "\n".join(lines)


def _comment(text: str) -> str:
  return "\n".join(f"#   {line}" for line in text.rstrip("\n").splitlines()) or "#   (empty)"


def debug_prompt(task: Task, *, thinking: bool = False, include_tests: bool = True) -> str:
  """The user message: PDB's minimal-debug prompt for `task`."""
  with_tests = include_tests and bool(task.tests)
  parts = [MINIMAL_DEBUG_INSTRUCTION, "",
           _PARTS_WITH_TESTS if with_tests else _PARTS_WITHOUT_TESTS, "", _RESPONSE, "",
           "PART 1: Problem Description", "```text", task.prompt.rstrip(), "```", "",
           "PART 2: Buggy Code", "```python", task.buggy_code.rstrip(), "```", ""]
  if with_tests:
    parts += ["PART 3: Unit Tests (context only)", "```python", format_tests(task.tests), "```", ""]
  if thinking:
    parts += [_THINK_HINT, ""]
  parts.append(_OUTPUT_FORMAT)
  return "\n".join(parts) + "\n"


def debug_messages(task: Task, thinking: bool = False, include_tests: bool = True) -> list[dict[str, str]]:
  """Chat messages asking for a minimal fix of `task`'s buggy code.

  Model-specific thinking switches (Qwen3's `enable_thinking`) belong to the
  chat template call; `thinking=True` only asks for the reasoning in words.
  """
  return [{"role": "user", "content": debug_prompt(task, thinking=thinking, include_tests=include_tests)}]


_THINK_CLOSED = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>.*", re.DOTALL | re.IGNORECASE)
_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_ANY_BLOCK = re.compile(r"```[^\n`]*\r?\n(.*?)```", re.DOTALL)


def strip_thinking(completion: str) -> str:
  """The completion without its thinking block(s); an unclosed block runs to the end."""
  text = _THINK_CLOSED.sub("", completion)
  if "</think>" in text.lower():  # templates that prefill "<think>" leave only the closing tag
    text = text[text.lower().rindex("</think>") + len("</think>"):]
  return _THINK_OPEN.sub("", text)


def extract_program(completion: str) -> str:
  """The program in a model's answer: first ```python block, else first fenced block, else the text."""
  text = strip_thinking(completion)
  for pattern in (_PYTHON_BLOCK, _ANY_BLOCK):
    match = pattern.search(text)
    if match:
      return match.group(1)
  return text.strip("\n")
