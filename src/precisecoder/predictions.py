"""A prediction -> the program to score, or why there is none (DESIGN.md "Contract:
predictions and scores"). One path for `precisecoder score`, the reward server and the
trainer adapters, so that a completion scores the same wherever it comes from.

  program, why_not = resolve({"completion": text})   # or {"program": code}
"""

from __future__ import annotations

from typing import Any, Mapping

from precisecoder import prompts

MAX_PROGRAM_LINES = 10_000
# Characters allowed per line of the cap (a long program of long lines costs as much to diff).
CHARS_PER_LINE = 100
NO_PROGRAM = "no string 'completion' or 'program'"


def resolve(
  record: Mapping[str, Any], max_lines: int = MAX_PROGRAM_LINES
) -> tuple[str | None, str | None]:
  """(program, None), or (None, why not): `NO_PROGRAM`, or the size cap's reason.

  `program` is taken as it is; from a `completion` the thinking block is removed and the
  first ```python block (else the first fenced block, else the raw text) is the program; a
  block the token budget cut before its closing fence runs to the end (`prompts.extract_program`).
  """
  if isinstance(record.get("program"), str):
    program = record["program"]
  elif isinstance(record.get("completion"), str):
    program = prompts.extract_program(record["completion"])
  else:
    return None, NO_PROGRAM
  problem = too_large(program, max_lines)
  return (None, problem) if problem else (program, None)


def too_large(program: str, max_lines: int = MAX_PROGRAM_LINES) -> str | None:
  """Why `program` is over the size cap (its line diff alone would hold up a batch), or None."""
  lines = program.count("\n") + 1
  if lines > max_lines:
    return f"program of {lines} lines exceeds --max-program-lines {max_lines}: not scored"
  if len(program) > max_lines * CHARS_PER_LINE:
    return (
      f"program of {len(program)} characters exceeds {max_lines * CHARS_PER_LINE} "
      f"(--max-program-lines {max_lines} x {CHARS_PER_LINE}): not scored"
    )
  return None
