"""What every `precisecoder` command shares: --help (exit 0, defaults shown, as the synopses in
README and docs/ say), and path arguments that work relative as well as absolute."""

import argparse
import importlib
import json
import pathlib
import re

import numpy as np
import pytest
from conftest import make_tiny_chat_checkpoint

from precisecoder import cli, tasks as tasks_lib
from precisecoder.commands import checks

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _parsers():
  """(command words, parser) for every command and subcommand, e.g. ("data", "build", "tfds")."""
  out = []
  for name, (module, _) in cli.COMMANDS.items():
    parser = checks.command_parser(
      f"precisecoder {name}",
      importlib.import_module(f"precisecoder.commands.{module}").add_arguments,
    )

    def walk(words, p):
      subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
      if not subs:
        out.append((words, p))
      for action in subs:
        for word, sub in action.choices.items():
          walk(words + (word,), sub)

    walk((name,), parser)
  return out


PARSERS = _parsers()


def _flags(parser):
  return {s for a in parser._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


@pytest.mark.parametrize("words", [w for w, _ in PARSERS] + [()], ids=" ".join)
def test_help_exits_0_for_every_command(words, capsys):
  try:
    code = cli.main([*words, "--help"])
  except SystemExit as e:  # argparse's commands exit, those parsing their own flags return
    code = e.code
  assert code == 0
  assert capsys.readouterr().out.startswith("usage: precisecoder")


def test_train_help_names_its_flags_and_exits_0(capsys):
  assert cli.main(["train", "--help"]) == 0
  text = capsys.readouterr().out
  assert "--config FILE[:PRESET]" in text and "--workdir DIR" in text and "--config.a.b=v" in text
  from precisecoder.commands import train

  with pytest.raises(SystemExit) as done:  # python -m precisecoder.train --help
    train.main(["--help"])
  assert done.value.code == 0 and "--workdir DIR" in capsys.readouterr().out


@pytest.mark.parametrize("words, parser", PARSERS, ids=[" ".join(w) for w, _ in PARSERS])
def test_every_option_has_help_and_its_default_is_shown(words, parser):
  text = re.sub(r"\s+", "", parser.format_help())  # argparse wraps lines, at hyphens too
  for action in parser._actions:
    if isinstance(action, argparse._HelpAction):
      continue
    assert action.help, f"precisecoder {' '.join(words)} {action.option_strings or action.dest}"
    if action.option_strings and not action.required and action.default not in (None, False, ""):
      shown = re.sub(r"\s+", "", str(action.default))
      assert f"(default:{shown}" in text, (words, action.option_strings)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _synopses():
  """The synopses in README and docs/: commands in code blocks that show optional flags (`[--`),
  with their continuation lines, by command words -> {(file, paragraph): flags}. Lines of one
  paragraph (no blank line between) are one synopsis, e.g. a command's two forms."""
  found = {}
  for path in DOCS:
    lines = path.read_text().splitlines()
    paragraph = 0
    for i, line in enumerate(lines):
      if not line.strip() or line.lstrip().startswith("```"):
        paragraph += 1
      match = re.match(r"\s*precisecoder ((?:[a-z]+ ?)+)", line)
      if not match:
        continue
      block = [line]
      while block[-1].rstrip().endswith("\\"):
        block.append(lines[i + len(block)])
      joined = " ".join(block)
      if "[--" not in joined:
        continue
      words = tuple(match.group(1).split())
      for candidate, _ in PARSERS:
        if words[: len(candidate)] == candidate:
          place = (path.relative_to(ROOT).as_posix(), paragraph)
          # `--config.a.b=v` overrides are the config's fields, not the command's flags.
          found.setdefault(candidate, {}).setdefault(place, set()).update(
            re.findall(r"--[a-z][a-z0-9-]*(?![\w.-])", joined)
          )
  return found


def test_synopses_name_every_flag_and_only_real_ones_once_in_readme_or_docs():
  synopses = _synopses()
  for words, parser in PARSERS:
    command = f"precisecoder {' '.join(words)}"
    assert words in synopses, f"README.md and docs/*.md have no synopsis of {command}"
    places = synopses[words]
    assert len(places) == 1, f"{command} has a synopsis in more than one place: {sorted(places)}"
    ((place, flags),) = places.items()
    assert flags == _flags(parser), (
      f"{command} ({place[0]}): the synopsis lacks {sorted(_flags(parser) - flags)}"
      f", names {sorted(flags - _flags(parser))} that the command has not"
    )


_CHATML = (
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
  "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_BUGGY, _FIXED = "def inc(x):\n    return x - 1\n", "def inc(x):\n    return x + 1\n"


def _training_workdir(hf_folder: pathlib.Path, workdir: pathlib.Path) -> None:
  """A training workdir holding step 1 of `hf_folder`'s weights, tokenizer named relative."""
  from flax import nnx
  from precisecoder.model import load_checkpoint
  from precisecoder.model.run_checkpoints import model_meta
  from precisecoder.train.checkpoint_writer import Checkpointer

  model, _, config = load_checkpoint(hf_folder, with_tokenizer=False)
  checkpointer = Checkpointer(workdir / "checkpoints", async_save=False)
  checkpointer.save(
    1,
    nnx.state(model, nnx.Param),
    {"count": np.zeros(())},
    {"model": model_meta(config, hf_folder), "step": 1},
  )
  checkpointer.close()


def test_every_path_argument_works_relative(tmp_path, monkeypatch, capsys):
  """Every command run from the folder its files are in, each path relative ("as README
  writes them"), a training workdir as --checkpoint included."""
  monkeypatch.chdir(tmp_path)
  make_tiny_chat_checkpoint(tmp_path / "hf", _CHATML, [_BUGGY + _FIXED])
  _training_workdir(pathlib.Path("hf"), pathlib.Path("run"))
  task = tasks_lib.Task(
    task_id="inc_0",
    buggy_code=_BUGGY,
    gt_solution=_FIXED,
    gt_diff=tasks_lib.derive_gt_diff(_BUGGY, _FIXED),
    tests={"kind": "call", "entry_point": "inc", "cases": [{"args": [1], "expected": 2}]},
  )
  tasks_lib.write_tasks("tasks.jsonl", [task])
  commands = [
    [
      "generate",
      "--checkpoint",
      "run",
      "--tasks",
      "tasks.jsonl",
      "--output",
      "out/p.jsonl",
      "--max-new-tokens",
      "4",
      "--compile-cache",
      "cache",
    ],
    [
      "score",
      "--tasks",
      "tasks.jsonl",
      "--predictions",
      "out/p.jsonl",
      "--output",
      "out/s.jsonl",
      "--workers",
      "1",
    ],
    [
      "evaluate",
      "--checkpoint",
      "run",
      "--tasks",
      "tasks.jsonl",
      "--output",
      "ev",
      "--max-new-tokens",
      "4",
      "--workers",
      "1",
      "--resamples",
      "10",
    ],
    ["analyze", "traces", "--run", "ev", "--output", "out/traces"],
    ["export", "--checkpoint", "run", "--output", "exported"],
    ["data", "card", "tasks.jsonl"],
    ["data", "verify", "tasks.jsonl", "--workers", "1"],
    ["data", "build", "tfds", "--split", "train=tasks.jsonl", "--data-dir", "tfds"],
    ["compare", "--report-only", "--workdir", "cmp", "--arms", "grpo", "--preset", "tiny"],
  ]
  pathlib.Path("cmp/grpo").mkdir(parents=True)
  pathlib.Path("cmp/grpo/config.json").write_text("{}")  # an arm that has started
  for argv in commands:
    assert cli.main(argv) == 0, (argv, capsys.readouterr().err)
  assert json.loads(pathlib.Path("out/p.jsonl").read_text())["task_id"] == "inc_0"
  assert pathlib.Path("out/s.jsonl").exists() and pathlib.Path("ev/table.md").exists()
  assert pathlib.Path("out/traces.md").exists() and pathlib.Path("exported/config.json").exists()
  assert pathlib.Path("cmp/report.md").exists()
  # The same checkpoint from another folder, through "..".
  (tmp_path / "elsewhere").mkdir()
  monkeypatch.chdir(tmp_path / "elsewhere")
  assert (
    cli.main(
      [
        "generate",
        "--checkpoint",
        "../run",
        "--tasks",
        "../tasks.jsonl",
        "--output",
        "p.jsonl",
        "--max-new-tokens",
        "4",
      ]
    )
    == 0
  )
  # evaluate's settings name the checkpoint by its absolute path: the same evaluation.
  assert (
    cli.main(
      [
        "evaluate",
        "--checkpoint",
        str(tmp_path / "run"),
        "--tasks",
        "../tasks.jsonl",
        "--output",
        "../ev",
        "--max-new-tokens",
        "4",
        "--workers",
        "1",
        "--resamples",
        "10",
      ]
    )
    == 0
  )
