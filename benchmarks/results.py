"""Benchmark scripts write their own figures into benchmarks/RESULTS.md (`--record`).

Each script owns one block of that file, between `<!-- begin: SCRIPT -->` and
`<!-- end: SCRIPT -->`. Recording replaces that block, and only it, with what the script printed
and the facts needed to read it later: the date, the commit and the machine (CPUs, load
average, accelerator). Figures measured on a shared machine mean little without its load, so
the load is taken as the run starts and as it ends.

    @recorded
    def main():
      parser = argparse.ArgumentParser(...)
      add_record_flag(parser)
      args = parser.parse_args()
      ...  # with --record, what main prints to stdout is recorded once it returns (0 or None)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import io
import os
import pathlib
import platform
import shlex
import shutil
import subprocess
import sys
import textwrap

RESULTS = pathlib.Path(__file__).resolve().parent / "RESULTS.md"
REPO = RESULTS.parents[1]


def markers(script: str) -> tuple[str, str]:
  return f"<!-- begin: {script} -->", f"<!-- end: {script} -->"


def replace_block(text: str, script: str, block: str) -> str:
  """`text` with `script`'s block replaced by `block` (markers included), or `block` appended
  as a new section when the file has none yet. Everything else stays byte for byte."""
  begin, end = markers(script)
  start = text.find(begin)
  if start < 0:
    return (text.rstrip("\n") + "\n\n" if text.strip() else "") + block + "\n"
  stop = text.find(end, start)
  if stop < 0:
    raise ValueError(f"{RESULTS.name}: {begin} has no {end}")
  if text.find(begin, start + len(begin)) >= 0:
    raise ValueError(f"{RESULTS.name}: {begin} appears twice")
  return text[:start] + block + text[stop + len(end) :]


def _git(*args: str) -> str:
  done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
  return done.stdout.strip() if done.returncode == 0 else ""


def commit() -> str:
  """The checked-out commit, marked when the code differs from it (RESULTS.md aside)."""
  head = _git("rev-parse", "--short", "HEAD") or "unknown"
  changed = _git(
    "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/RESULTS.md"
  )
  return f"{head} + uncommitted changes" if changed else head


def _cpu_model() -> str:
  with contextlib.suppress(OSError):
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  return platform.processor() or platform.machine()


def accelerator() -> str:
  """The accelerator a JAX script ran on (read only if it imported JAX: importing it here would
  take the accelerator from the benchmark), else the machine's GPUs as nvidia-smi lists them
  (present, not necessarily used), else none."""
  jax = sys.modules.get("jax")
  if jax is not None:
    with contextlib.suppress(Exception):
      devices = jax.devices()
      if jax.default_backend() != "cpu":
        return f"{len(devices)} x {devices[0].device_kind} ({jax.default_backend()})"
  if shutil.which("nvidia-smi"):
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    if listed.returncode == 0 and listed.stdout.strip():
      return "; ".join(listed.stdout.strip().splitlines())
  return "none"


def _load() -> str:
  return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def block(
  script: str, figures: str, command: str, load_start: str, load_end: str, now: datetime.datetime
) -> str:
  begin, end = markers(script)
  facts = textwrap.fill(
    f"Written by `{command}` on {now:%Y-%m-%d %H:%M} UTC at commit {commit()}. Machine: "
    f"{os.cpu_count()} CPUs ({_cpu_model()}), accelerator: {accelerator()}; load average "
    f"(1 / 5 / 15 min) {load_start} at the start, {load_end} at the end.",
    100,
    break_long_words=False,
    break_on_hyphens=False,
  )
  return "\n".join(
    [begin, f"### `{script}`", "", facts, "", "```text", figures.rstrip("\n"), "```", end]
  )


class _RecordFlag(argparse.Action):
  """--record: also tells `recorded` that this run is to be recorded."""

  def __call__(self, parser, namespace, values, option_string=None):
    global _requested
    _requested = True
    setattr(namespace, self.dest, True)


_requested = False


def add_record_flag(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    "--record",
    action=_RecordFlag,
    nargs=0,
    default=False,
    help="write what this run prints into benchmarks/RESULTS.md, replacing "
    "this script's block there",
  )


class _Tee(io.TextIOBase):
  def __init__(self, stream):
    self.stream, self.copy = stream, io.StringIO()

  def write(self, text: str) -> int:
    self.copy.write(text)
    return self.stream.write(text)

  def flush(self) -> None:
    self.stream.flush()

  def fileno(self) -> int:
    return self.stream.fileno()

  def isatty(self) -> bool:
    return self.stream.isatty()


@contextlib.contextmanager
def recording(script_file: str, results: pathlib.Path = RESULTS):
  """Yields a function that records what the body printed to stdout so far into `results`."""
  script = pathlib.Path(script_file).name
  command = "python " + shlex.join([f"benchmarks/{script}", *sys.argv[1:]])
  load_start, tee = _load(), _Tee(sys.stdout)

  def record() -> None:
    text = block(
      script,
      tee.copy.getvalue(),
      command,
      load_start,
      _load(),
      datetime.datetime.now(datetime.timezone.utc),
    )
    # Bytes, not text: reading text would turn the file's other line endings into "\n".
    before = results.read_bytes().decode() if results.exists() else ""
    results.write_bytes(replace_block(before, script, text).encode())
    print(f"recorded in {results}")

  with contextlib.redirect_stdout(tee):
    yield record


def recorded(main):
  """Decorates a benchmark's `main`: run with --record (`add_record_flag`), what it printed is
  written into RESULTS.md when it returns 0 or None. A run that raises or returns another
  status replaces no figures."""

  @functools.wraps(main)
  def run(*args, **kwargs):
    global _requested
    _requested = False
    with recording(main.__code__.co_filename, RESULTS) as record:
      status = main(*args, **kwargs)
      if _requested and status in (None, 0):
        record()
    return status

  return run
