"""Benchmark scripts write their own figures into benchmarks/RESULTS.md (`--record`).

Each script owns one block of that file, between `<!-- begin: SCRIPT -->` and
`<!-- end: SCRIPT -->`. Recording replaces that block, and only it, with what the script printed
and the facts needed to read it later: the date, the commit and the machine (CPUs, load
average, accelerator). Figures measured on a shared machine mean little without its load, so
the load is taken as the run starts and as it ends.

    parser = argparse.ArgumentParser(...)
    results.add_record_flag(parser)
    args = parser.parse_args()
    with results.recording(__file__, args.record):
      ...  # everything the script prints to stdout is recorded
"""

from __future__ import annotations

import contextlib
import datetime
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
  return text[:start] + block + text[stop + len(end):]


def _git(*args: str) -> str:
  done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
  return done.stdout.strip() if done.returncode == 0 else ""


def commit() -> str:
  """The checked-out commit, marked when the code differs from it (RESULTS.md aside)."""
  head = _git("rev-parse", "--short", "HEAD") or "unknown"
  changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                 ":(exclude)benchmarks/RESULTS.md")
  return f"{head} + uncommitted changes" if changed else head


def _cpu_model() -> str:
  with contextlib.suppress(OSError):
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  return platform.processor() or platform.machine()


def accelerator() -> str:
  """The device a JAX script ran on (read only if it imported JAX: importing it here would
  take the accelerator from the benchmark), else what nvidia-smi lists, else none."""
  jax = sys.modules.get("jax")
  if jax is not None:
    with contextlib.suppress(Exception):
      devices = jax.devices()
      return f"{len(devices)} x {devices[0].device_kind} ({jax.default_backend()})"
  if shutil.which("nvidia-smi"):
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    if listed.returncode == 0 and listed.stdout.strip():
      return "; ".join(listed.stdout.strip().splitlines())
  return "none"


def _load() -> str:
  return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def block(script: str, figures: str, command: str, load_start: str, load_end: str,
          now: datetime.datetime) -> str:
  begin, end = markers(script)
  facts = textwrap.fill(
      f"Written by `{command}` on {now:%Y-%m-%d %H:%M} UTC at commit {commit()}. Machine: "
      f"{os.cpu_count()} CPUs ({_cpu_model()}), accelerator: {accelerator()}; load average "
      f"(1 / 5 / 15 min) {load_start} at the start, {load_end} at the end.", 100,
      break_long_words=False, break_on_hyphens=False)
  return "\n".join([begin, f"### `{script}`", "", facts, "", "```text", figures.rstrip("\n"), "```",
                    end])


def add_record_flag(parser) -> None:
  parser.add_argument("--record", action="store_true",
                      help="write what this run prints into benchmarks/RESULTS.md, replacing "
                           "this script's block there")


class _Tee(io.TextIOBase):

  def __init__(self, stream):
    self.stream, self.copy = stream, io.StringIO()

  def write(self, text: str) -> int:
    self.copy.write(text)
    return self.stream.write(text)

  def flush(self) -> None:
    self.stream.flush()


@contextlib.contextmanager
def recording(script_file: str, enabled: bool, results: pathlib.Path = RESULTS):
  """Records what the body prints to stdout into `results` when `enabled` and the body ends
  without an exception (a failed run replaces no figures)."""
  if not enabled:
    yield
    return
  script = pathlib.Path(script_file).name
  command = "python " + shlex.join([f"benchmarks/{script}", *sys.argv[1:]])
  load_start, tee = _load(), _Tee(sys.stdout)
  with contextlib.redirect_stdout(tee):
    yield
  text = block(script, tee.copy.getvalue(), command, load_start, _load(),
               datetime.datetime.now(datetime.timezone.utc))
  # Bytes, not text: reading text would turn the file's other line endings into "\n".
  before = results.read_bytes().decode() if results.exists() else ""
  results.write_bytes(replace_block(before, script, text).encode())
  print(f"recorded in {results}")
