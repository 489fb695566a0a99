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

A scorer compiles each program once, here (`marshalled`): the digest tells
programs apart, and the pool sends the same marshalled code to its workers,
which load it before they fork, so that no run compiles its program again.
"""

from __future__ import annotations

import _thread
import functools
import hashlib
import marshal
import types
import warnings

PROGRAM_FILENAME = "<program>"
# Programs above this size are compiled anew each time they are asked for, so that the cache
# (1024 entries) stays within tens of megabytes. Model outputs are far smaller.
_CACHED_SOURCE_CHARS = 1 << 14

# catch_warnings swaps process-wide state: one at a time. (Not `threading`: workers import this
# module, and threading's hook after every fork rebinds its globals and costs each run time.)
_quiet_compiles = _thread.allocate_lock()


def compile_program(source: str) -> types.CodeType:
  """The code object a run executes for `source`.

  No future flags leak in from the caller (`dont_inherit`) and asserts stay
  (`optimize=0`), whatever the compiling process was started with.
  """
  return compile(source, PROGRAM_FILENAME, "exec", dont_inherit=True, optimize=0)


def marshalled(source: str) -> tuple[bytes | None, str | None]:
  """(the code a run executes for `source`, marshalled, None), or (None, why it does not
  compile)."""
  if len(source) > _CACHED_SOURCE_CHARS:
    return _marshal(source)
  return _marshal_cached(source)


def _marshal(source: str) -> tuple[bytes | None, str | None]:
  try:
    # What compiling a program warns about (`x is 1`, `assert (a, b)`) is the program's affair,
    # not the scorer's output; its runs receive it compiled, so their stderr lacks it too.
    with _quiet_compiles, warnings.catch_warnings():
      warnings.simplefilter("ignore")
      code = compile_program(source)
  except SyntaxError as e:
    return None, f"syntax error at line {e.lineno}: {e.msg}"
  except (ValueError, RecursionError, MemoryError, OverflowError) as e:
    return None, f"cannot compile: {type(e).__name__}: {e}"
  return marshal.dumps(code), None


# A batch's programs: scorers ask for each program's identity, then the pool for its code.
_marshal_cached = functools.lru_cache(maxsize=1024)(_marshal)


@functools.lru_cache(maxsize=16384)
def identity(source: str) -> tuple[str | None, str | None]:
  """(digest of the compiled code, None), or (None, why `source` does not compile)."""
  data, error = marshalled(source)
  if data is None:
    return None, error
  return hashlib.blake2b(data, digest_size=16).hexdigest(), None
