"""A prediction -> the program to score: a program as given, a completion's first python block
(thinking removed), nothing for a record with neither, and the size cap in lines and characters."""

from precisecoder import predictions

FIX = "def f(x):\n  return x + 1\n"


def test_a_program_is_taken_as_it_is_and_a_completion_through_its_code_block():
  assert predictions.resolve({"program": "  x = 1  \n"}) == ("  x = 1  \n", None)
  completion = f"<think>```python\nwrong = 1\n```</think>Here:\n```python\n{FIX}```\nDone."
  program, why = predictions.resolve({"completion": completion})
  assert why is None and program.strip() == FIX.strip()  # not the block inside the thinking
  assert predictions.resolve({"program": FIX, "completion": "x = 2"})[0] == FIX  # program wins


def test_a_record_without_a_string_program_or_completion_has_none():
  for record in ({}, {"program": None}, {"completion": 3}, {"program": ["x = 1"]}):
    assert predictions.resolve(record) == (None, predictions.NO_PROGRAM)


def test_the_size_cap_counts_lines_and_characters():
  assert predictions.too_large("x = 1\n" * 9, max_lines=10) is None  # 10 lines with the last
  assert "11 lines exceeds --max-program-lines 10" in predictions.too_large(
    "x\n" * 10, max_lines=10
  )
  long_line = "x = '" + "a" * 1000 + "'"
  assert predictions.too_large(long_line, max_lines=10) is not None  # 10 x 100 characters
  assert predictions.too_large(long_line[:999], max_lines=10) is None
  program, why = predictions.resolve({"program": "x\n" * 10}, max_lines=10)
  assert program is None and "not scored" in why
