"""The minimal-debug prompt and program extraction."""

import pytest

from precisecoder import prompts, tasks

TASK = tasks.Task(
  task_id="t",
  buggy_code="def f(x):\n    return x - 1\n",
  gt_solution="def f(x):\n    return x + 1\n",
  gt_diff=tasks.derive_gt_diff("def f(x):\n    return x - 1\n", "def f(x):\n    return x + 1\n"),
  tests={"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 2}]},
  prompt="Return x plus one.",
)


def test_debug_messages_wording_and_parts():
  (message,) = prompts.debug_messages(TASK)
  text = message["content"]
  assert message["role"] == "user"
  assert text.startswith(
    "Debug the given Python code that contains errors. ONLY fix the bugs. Make minimal edits.\n"
  )
  assert "PART 2: Buggy Code\n```python\ndef f(x):\n    return x - 1\n```" in text
  assert "PART 3: Unit Tests (context only)\n```python\nassert f(1) == 2\n```" in text
  assert text.rstrip().endswith("Corrected Code Output (use the format above):")
  no_tests = prompts.debug_messages(TASK, include_tests=False)[0]["content"]
  assert "PART 3" not in no_tests and "two parts" in no_tests
  assert "<think>" in prompts.debug_messages(TASK, thinking=True)[0]["content"]


def test_format_io_tests():
  text = prompts.format_tests({"kind": "io", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}]})
  assert "#   1 2" in text and "#   3" in text


def test_extract_first_python_block():
  completion = "Sure.\n```text\nnote\n```\n```python\nx = 1\n```\n```python\nx = 2\n```"
  assert prompts.extract_program(completion) == "x = 1\n"


def test_extract_first_fenced_block_without_language():
  assert prompts.extract_program("Here:\n```\ny = 2\n```\n") == "y = 2\n"


def test_thinking_removed_before_extraction():
  completion = "<think>maybe\n```python\nwrong = 1\n```\n</think>\n```python\nright = 1\n```"
  assert prompts.extract_program(completion) == "right = 1\n"
  # Prefilled "<think>" in the template: only the closing tag is in the completion.
  assert prompts.extract_program("reasoning...</think>\n```python\nz = 3\n```") == "z = 3\n"


def test_thinking_and_no_code_block_gives_raw_text():
  assert (
    prompts.extract_program("<think>hmm</think>\ndef f(x):\n    return x + 1\n")
    == "def f(x):\n    return x + 1"
  )
  assert prompts.extract_program("<think>never closed ```python\nx=1\n```") == ""


@pytest.mark.parametrize(
  "completion, program",
  [
    ("```python\ndef f(x):\n    return x + 1\n", "def f(x):\n    return x + 1\n"),
    ("Fixed:\n```py\ny = 2", "y = 2"),
    ("<think>the bug</think>\n```\nz = 3\n", "z = 3\n"),
    # A closed non-python block before the cut python block: the python block is the program.
    ("Input:\n```text\n1 2\n```\nFix:\n```python\nw = 4\n", "w = 4\n"),
    # Closed blocks still win over a later unclosed one.
    ("```python\na = 1\n```\nor\n```python\na = 2\n", "a = 1\n"),
  ],
)
def test_an_answer_cut_before_its_closing_fence_gives_the_open_block(completion, program):
  assert prompts.extract_program(completion) == program
