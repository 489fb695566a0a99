"""README's tour, read out of README.md itself so that it cannot drift from the code.

The quick check parses every command of the tour with that command's own parser (and loads
the training config it names). The slow one runs the tour's block as written, from the
repository root, with bash, at tiny sizes: only the numbers in `TINY` are changed, /tmp is a
test folder and the server's port a free one. (Parsing the README, rather than keeping a copy
of the tour here, is what keeps the two from drifting.)
"""

import contextlib
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess

import pytest

from precisecoder import cli
from precisecoder.commands import checks

ROOT = pathlib.Path(__file__).resolve().parents[1]
# (pattern, replacement) applied to the tour's text: the sizes a test can afford.
TINY = [
  (r"(--train) \d+", r"\1 8"),
  (r"(--(?:validation|test|clean)) \d+", r"\1 2"),
  (r"(--max-new-tokens) \d+", r"\1 4"),
  (r"(precisecoder compare .*)", r"\1 --config.train.steps=1"),
]


def tour_script(readme: pathlib.Path = ROOT / "README.md") -> str:
  """The bash block under README's "## A tour" heading."""
  text = readme.read_text()
  match = re.search(r"^## A tour\n.*?^```bash\n(.*?)^```", text, re.M | re.S)
  assert match, f"{readme}: no ```bash block under '## A tour'"
  return match.group(1)


def tour_commands(script: str) -> list[list[str]]:
  """Each command of the script (continuation lines joined, comments dropped, split at `;`,
  `&` and `|`) as words."""
  commands = []
  for line in script.replace("\\\n", " ").splitlines():
    words = shlex.split(line, comments=True)
    command: list[str] = []
    for word in words + [";"]:
      if word in (";", "&", "|", "&&", "||"):
        if command:
          commands.append(command)
        command = []
      else:
        command.append(word.rstrip(";"))
        if word.endswith(";"):
          commands.append(command)
          command = []
  return commands


def test_every_tour_command_parses_with_its_own_parser():
  """A flag, subcommand, config file or preset the code no longer has fails here, in a second."""
  from precisecoder.train import config as config_lib

  seen = set()
  for words in tour_commands(tour_script()):
    if words[0] == "precisecoder":
      name, rest = words[1], words[2:]
      assert name in cli.COMMANDS, f"README tour: unknown command {name!r}"
      module = __import__(f"precisecoder.commands.{cli.COMMANDS[name][0]}", fromlist=["_"])
      parser = checks.command_parser(f"precisecoder {name}", module.add_arguments)
      if getattr(module, "PASSTHROUGH", False):
        checks.parse_with_overrides(parser, rest)
      else:
        parser.parse_args(rest)
      seen.add(name)
    elif words[:3] == ["python", "-m", "precisecoder.train"]:
      config = next(w.split("=", 1)[1] for w in words if w.startswith("--config="))
      config_lib.load_file(str(ROOT / config.split(":")[0]) + ":" + config.split(":")[1])
      seen.add("train")
  # The tour shows one example per command.
  assert seen >= {"data", "generate", "score", "train", "evaluate", "compare", "serve", "export"}


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.slow
def test_the_tour_runs_as_written_at_tiny_sizes(tmp_path):
  script = tour_script()
  for pattern, replacement in TINY:
    script, count = re.subn(pattern, replacement, script)
    assert count, f"README tour: nothing matches {pattern!r}: update TINY"
  script = script.replace("/tmp/", f"{tmp_path}/")
  script = re.sub(r"\b8000\b", str(_free_port()), script)
  env = {
    **os.environ,
    "PYTHONPATH": str(pathlib.Path(cli.__file__).parents[1]),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "JAX_PLATFORMS": "cpu",
  }
  assert (ROOT / ".venv" / "bin" / "activate").exists(), "the tour needs .venv (bootstrap.sh)"
  out, err = tmp_path / "tour.out", tmp_path / "tour.err"
  # Files, not pipes: a background command the script leaves running cannot hold the test.
  with open(out, "w") as stdout, open(err, "w") as stderr:
    process = subprocess.Popen(
      ["bash", "-e", "-o", "pipefail", "-x", "-c", script],
      cwd=ROOT,
      env=env,
      stdout=stdout,
      stderr=stderr,
      start_new_session=True,
    )
    try:
      code = process.wait(timeout=1800)
    finally:
      with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever the tour left behind (the server)
  assert code == 0, (out.read_text()[-3000:], err.read_text()[-6000:])
  assert '"unit"' in out.read_text()  # the reward server's answer
  for made in (
    "easy/easy_test.jsonl",
    "preds.jsonl",
    "scores.jsonl",
    "run-tiny/report.md",
    "eval-tiny/table.md",
    "compare-tiny/report.md",
    "run-tiny-hf/tokenizer.json",
  ):
    assert (tmp_path / made).exists(), made
