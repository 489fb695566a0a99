"""The start of a split run's program process: a fresh interpreter that never held the tests.

The test process (`split_tests.start`) forks a child that keeps fds 0-2 and its end of their
socket, and replaces itself (execve) with a new interpreter running `main` here. Nothing of the
test process's memory survives the exec: not the compiled tests, not the job, not freed pages
that held them (docs/sandbox.md, "The program's process never held the tests"). The sandbox (the
run's namespaces, uid, limits, seccomp filter, no_new_privs) is the process's, and stays.

What this process needs comes over the socket, once, before anything else (`BOOT_FIELDS`): the
program (its source, or its code as the pool compiled it), the test process's sealed import path
(this interpreter's own library directories after it), and the names of the library modules the
tests import (a forked process had them loaded). Generator states, environment, working
directory and the rest follow with the first request, as they do whenever they change
(`split_tests._State`), and so do the set-up calls the tests' top level made into libraries
(`split_program.replay`).
"""

from __future__ import annotations

import _socket
import json
import os
import struct
import sys

# What the test process sends, and nothing else (`split_tests.boot_message`).
BOOT_FIELDS = frozenset({"program", "code", "path", "imports"})
_LENGTH = struct.Struct("!I")
_MAX_BOOT = 64 << 20


def command(socket_fd: int) -> list[str]:
  """The command line of the program's process: this interpreter, with the flags it runs with
  (the worker's: `-s`), and our source directory first on its path to load this module."""
  source = os.path.abspath(__file__)  # src/precisecoder/execution/program_side/program_boot.py
  for _ in range(4):
    source = os.path.dirname(source)
  return [
    sys.executable,
    *_FLAGS,
    "-c",
    _BOOT,
    source,
    str(socket_fd),
  ]


# Loads this module alone: its packages as bare namespaces, so that no package's __init__ (the
# pool's API: dataclasses, typing) runs in every program's process. The program's process loads
# only its own zone's modules and the shared ones (the package docstring, "Layout").
_BOOT = """import sys, types
source = sys.argv[1]
sys.path[0] = source
for name in ("precisecoder", "precisecoder.execution", "precisecoder.execution.program_side",
             "precisecoder.execution.shared"):
  package = types.ModuleType(name)
  package.__path__ = [source + "/" + name.replace(".", "/")]
  sys.modules[name] = package
from precisecoder.execution.program_side import program_boot
program_boot.main()
"""


def _interpreter_flags() -> tuple[str, ...]:
  flags = sys.flags
  chosen = [
    ("-I", flags.isolated),
    ("-E", flags.ignore_environment and not flags.isolated),
    ("-s", flags.no_user_site and not flags.isolated),
    ("-S", flags.no_site),
    ("-B", flags.dont_write_bytecode),
    ("-O" * flags.optimize, flags.optimize),
  ]
  return tuple(flag for flag, on in chosen if on)


_FLAGS = _interpreter_flags()
# The worker's hash seed, read when the worker loads this module (before it scrubs its
# environment for runs): the program's process starts with it (`environment`).
HASH_SEED = None if sys.flags.ignore_environment else os.environ.get("PYTHONHASHSEED")


def environment(given) -> dict[str, str]:
  """The program's process's environment at its start: the test process's, without the
  interpreter's own variables (as `-E` would ignore them; the tests' environment is applied
  again with the first request), and with the worker's hash seed, so that both processes hash
  text alike (a set of strings iterates in one order, as in one interpreter)."""
  env = {name: value for name, value in given.items() if not name.startswith("PYTHON")}
  if HASH_SEED is not None:
    env["PYTHONHASHSEED"] = HASH_SEED
  return env


def encode(fields: dict) -> bytes:
  data = json.dumps(fields).encode()
  return _LENGTH.pack(len(data)) + data


def _read_exactly(sock, size: int) -> bytes:
  """Exactly `size` bytes: what follows is the bridge's, read by its endpoint."""
  chunks, left = [], size
  while left:
    chunk = sock.recv(min(left, 1 << 20))
    if not chunk:
      raise EOFError("the test process left before the program's process started")
    chunks.append(chunk)
    left -= len(chunk)
  return b"".join(chunks)


def receive(sock) -> dict:
  (size,) = _LENGTH.unpack(_read_exactly(sock, _LENGTH.size))
  if size > _MAX_BOOT:
    raise ValueError("boot message too large")
  fields = json.loads(_read_exactly(sock, size))
  if type(fields) is not dict or set(fields) != BOOT_FIELDS:
    raise ValueError("a boot message has exactly the boot fields")
  return fields


def main() -> None:
  """Reads what the program needs, then runs it and serves the test process; never returns."""
  try:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, int(sys.argv[2]))
    fields = receive(sock)
    sys.argv = ["program"]
    sealed = [p for p in fields["path"] if type(p) is str]
    # Then this interpreter's own library directories, where the seal (which guards the test
    # process's imports, not this process's) left one out: a standard library under a home.
    sys.path[:] = sealed + [p for p in sys.path[1:] if p not in sealed]
    sys.path_importer_cache.clear()
    code = None
    if type(fields["code"]) is str:
      import base64  # pylint: disable=import-outside-toplevel
      import marshal  # pylint: disable=import-outside-toplevel

      code = marshal.loads(base64.b64decode(fields["code"]))
    _import_quietly(fields["imports"])
    from precisecoder.execution.program_side import split_program  # pylint: disable=import-outside-toplevel
  except BaseException as e:  # pylint: disable=broad-except
    try:
      os.write(2, f"the program's process did not start: {type(e).__name__}: {e}\n".encode())
    finally:
      os._exit(1)  # pylint: disable=protected-access
  split_program.execute(sock, {"program": fields["program"]}, code)


def _import_quietly(names) -> None:
  """The library modules the tests import, loaded as the forked process had them (a program may
  reach `np.testing` without importing it, as it could in one interpreter)."""
  import importlib  # pylint: disable=import-outside-toplevel

  for name in names if type(names) is list else []:
    if type(name) is not str:
      continue
    try:
      importlib.import_module(name)
    except BaseException:  # pylint: disable=broad-except
      pass
