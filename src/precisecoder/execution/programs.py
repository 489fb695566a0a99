"""How a program's source becomes the code a run executes, and that code's identity.

The harness compiles every program with `compile_program`; scorers call
`identity` to learn, without a run, whether two programs are the same code.
Two sources that compile to byte-identical code objects (marshal) behave
identically in a run: a run cannot read its program's source text (the
filename is a placeholder, nothing is in linecache), and everything else a
program could observe -- bytecode, constants, docstrings, names, line and
column tables -- is in the marshalled object. Programs that differ only in
trailing comments or trailing white space are thus one program; a change
that moves a line is not (line numbers are observable).
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import types

PROGRAM_FILENAME = "<program>"


def compile_program(source: str) -> types.CodeType:
  """The code object a run executes for `source`.

  No future flags leak in from the caller (`dont_inherit`) and asserts stay
  (`optimize=0`), whatever the compiling process was started with.
  """
  return compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True, optimize=0)


@functools.lru_cache(maxsize=16384)
def identity(source: str) -> tuple[str | None, str | None]:
  """(digest of the compiled code, None), or (None, why `source` does not compile)."""
  try:
    code = compile_program(source)
  except SyntaxError as e:
    return None, f"syntax error at line {e.lineno}: {e.msg}"
  except (ValueError, RecursionError, MemoryError, OverflowError) as e:
    return None, f"cannot compile: {type(e).__name__}: {e}"
  return hashlib.blake2b(marshal.dumps(code), digest_size=16).hexdigest(), None
