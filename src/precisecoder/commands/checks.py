"""Argument and file checks the commands share: a bad value or path is one line naming it.

Argument types (`workers`, `fraction`, ...) plug into argparse, which prints the usage and one
error line naming the flag and exits 2. `output_file` / `output_folder` check a destination
before any work starts, without making anything, so a refused run leaves no empty folder;
`atomic_output` makes the folder, holds the file's lock, writes under a unique temporary name
next to it and renames, so a failed run leaves neither a half-written file nor a temporary one
behind, and a second command writing the same file is refused (commands/outputs.py).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import pathlib
import tempfile
from typing import IO, Callable, Iterator, Sequence

from precisecoder.execution.parent.pool import MAX_WORKERS, check_python


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
  """Every command's --help: each option's default after its help, except where there is
  nothing to say (a required option, a switch, an empty or unset default)."""

  def _get_help_string(self, action: argparse.Action) -> str:
    text = action.help or ""
    if (
      action.required
      or action.default in (None, False, "", argparse.SUPPRESS)
      or "%(default)" in text
      or not action.option_strings
    ):
      return text
    return f"{text} (default: %(default)s)" if text else "default: %(default)s"


def command_parser(
  prog: str, add_arguments: Callable[[argparse.ArgumentParser], None], description: str = ""
) -> argparse.ArgumentParser:
  """The parser of one `precisecoder` command, with its defaults shown in --help."""
  parser = argparse.ArgumentParser(
    prog=prog, description=description, formatter_class=HelpFormatter
  )
  add_arguments(parser)
  for sub in subparsers(parser):  # `data build generator`, `analyze traces`, ...
    sub.formatter_class = HelpFormatter
  return parser


def parse_with_overrides(
  parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[argparse.Namespace, list[str]]:
  """The parser's own flags, and the `--config.a.b=v` overrides it passes through (anything
  else is a usage error)."""
  args, rest = parser.parse_known_args(argv)
  overrides = [a for a in rest if a.startswith("--config.")]
  if len(overrides) != len(rest):
    parser.error(f"unrecognized arguments: {' '.join(a for a in rest if a not in overrides)}")
  return args, overrides


def subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
  """Every parser below `parser` (its subcommands, theirs, ...)."""
  found = []
  for action in parser._actions:  # pylint: disable=protected-access  # argparse has no API
    if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
      for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
        found += [sub, *subparsers(sub)]
  return found


class InputError(Exception):
  """An argument, input file or output path that cannot be used; the message names it."""


def positive_int(text: str) -> int:
  value = _int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
  return value


def non_negative_int(text: str) -> int:
  value = _int(text)
  if value < 0:
    raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
  return value


def workers(text: str) -> int:
  value = _int(text)
  if not 1 <= value <= MAX_WORKERS:
    raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_WORKERS}, got {text}")
  return value


def python(text: str) -> str:
  """An interpreter to run programs under (a path, or a name on PATH), as an absolute path."""
  try:
    return check_python(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"no such executable: {text!r}") from None


PYTHON_HELP = (
  "interpreter that runs the programs, with the task set's libraries (e.g. "
  ".venv-bigcodebench/bin/python from scripts/bigcodebench_env.sh; default: this one)"
)


def positive_float(text: str) -> float:
  value = _float(text)
  if not (value > 0 and math.isfinite(value)):  # nan fails both
    raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
  return value


def fraction(text: str) -> float:
  """A float in [0, 1] (nan is not)."""
  value = _float(text)
  if not 0.0 <= value <= 1.0:  # also false for nan
    raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
  return value


def _float(text: str) -> float:
  try:
    return float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _int(text: str) -> int:
  try:
    return int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
  if a.resolve() == b.resolve():
    return True
  try:
    return a.exists() and b.exists() and a.samefile(b)
  except OSError:
    return False


def output_file(
  path: str, flag: str = "--output", inputs: Sequence[tuple[str, str]] = ()
) -> pathlib.Path:
  """`path` checked as a file to write: not a folder, not one of the `(flag, path)` inputs, in a
  folder that exists or can be made (`atomic_output` makes it). Raises InputError."""
  out = pathlib.Path(path)
  if out.is_dir():
    raise InputError(f"{flag} {path}: is a folder; give a file name")
  for input_flag, input_path in inputs:
    if input_path and _same_file(out, pathlib.Path(input_path)):
      raise InputError(
        f"{flag} {path}: is the {input_flag} file; writing it would destroy the input"
      )
  _check_folder(out.parent, f"{flag} {path}")
  return out


def output_folder(
  path: str, flag: str = "--output", inputs: Sequence[tuple[str, str]] = (), *, make: bool = True
) -> pathlib.Path:
  """`path` checked as a folder to write into, and made unless `make` is False (the writer makes
  it once there is something to write). Raises InputError."""
  out = pathlib.Path(path)
  for input_flag, input_path in inputs:
    if input_path and _same_file(out, pathlib.Path(input_path)):
      raise InputError(
        f"{flag} {path}: is the {input_flag}; writing into it would change the input"
      )
  if out.exists() and not out.is_dir():
    raise InputError(f"{flag} {path}: exists and is not a folder")
  if make:
    _make_folder(out, f"{flag} {path}")
  else:
    _check_folder(out, f"{flag} {path}")
  return out


def _check_folder(folder: pathlib.Path, what: str) -> None:
  """That `folder` exists or can be made, and takes a file: tried for real (permission bits do
  not bind root, and a read-only mount ignores them), leaving nothing behind."""
  missing = []  # folder and the ancestors it lacks, innermost first
  for existing in (folder, *folder.parents):
    if existing.exists() or existing == existing.parent:
      break
    missing.append(existing)
  if not existing.is_dir():
    raise InputError(f"{what}: cannot make folder {folder}: {existing} is a file")
  made = []
  try:
    for parent in reversed(missing):
      parent.mkdir()
      made.append(parent)
    _probe(folder, what)
  except OSError as e:
    raise InputError(f"{what}: cannot make folder {folder} ({e.strerror or e})") from None
  finally:
    for parent in reversed(made):
      parent.rmdir()


def _make_folder(folder: pathlib.Path, what: str) -> None:
  try:
    folder.mkdir(parents=True, exist_ok=True)
  except (FileExistsError, NotADirectoryError):
    blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
    raise InputError(f"{what}: cannot make folder {folder}: {blocker} is a file") from None
  except OSError as e:
    raise InputError(f"{what}: cannot make folder {folder} ({e.strerror or e})") from None
  _probe(folder, what)


def _probe(folder: pathlib.Path, what: str) -> None:
  """Raises InputError unless a file can be made in `folder` (it is removed again)."""
  try:
    fd, name = tempfile.mkstemp(dir=folder, prefix=".precisecoder-write-check-")
  except OSError as e:
    raise InputError(f"{what}: folder {folder} is not writable ({e.strerror or e})") from None
  os.close(fd)
  os.unlink(name)


@contextlib.contextmanager
def atomic_output(path: pathlib.Path, flag: str = "--output") -> Iterator[IO[str]]:
  """A text file that becomes `path` only if the block ends normally; else it is removed.
  It is written under a unique temporary name in `path`'s folder while this command holds
  `path`'s lock (commands/outputs.py): a second command writing the same file is refused
  (InputError) rather than corrupting it."""
  from precisecoder.commands import outputs  # pylint: disable=import-outside-toplevel

  lock = outputs.OutputLock(path, flag, busy=InputError)
  lock.acquire()
  try:
    with outputs.replacing(path) as f:
      yield f
  finally:
    lock.release()
