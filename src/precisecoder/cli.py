"""The `precisecoder` command: one subcommand per module in `precisecoder.commands`.

Each command module defines `add_arguments(parser)` and `main(args) -> int`. Modules are
imported only when their subcommand runs, so `precisecoder score` never imports JAX.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from precisecoder.commands import checks

# subcommand -> (module under precisecoder.commands, one-line help)
COMMANDS = {
  "score": ("score", "score predictions against tasks with the PreciseCoder metrics"),
  "generate": ("generate", "sample debugging completions from a checkpoint"),
  "evaluate": ("evaluate", "generate + score a checkpoint: the paper's table with intervals"),
  "analyze": ("analyze", "statistics over completions (thinking traces)"),
  "data": ("data", "build, inspect and convert task sets"),
  "train": ("train", "train a policy from an ml_collections config (RL, SFT, DPO)"),
  "base": ("base", "build and measure the small base policy (tokenizer + SFT from scratch)"),
  "compare": ("compare", "train reward recipes side by side (GRPO vs PreciseCoder) and report"),
  "export": ("export", "export a checkpoint to a Hugging Face safetensors folder"),
  "serve": ("serve", "a reward server: score over HTTP (also OpenRLHF's /get_reward)"),
}


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog="precisecoder", description="Post-train code models to fix bugs precisely."
  )
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  for name, (_, help_text) in COMMANDS.items():
    sub.add_parser(name, help=help_text, add_help=False)
  return parser


def main(argv: list[str] | None = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] not in COMMANDS:
    _parser().parse_args(argv)  # prints usage / help and exits
    return 2
  name, rest = argv[0], argv[1:]
  module = importlib.import_module(f"precisecoder.commands.{COMMANDS[name][0]}")
  parser = checks.command_parser(
    f"precisecoder {name}", module.add_arguments, description=COMMANDS[name][1]
  )
  if getattr(module, "PASSTHROUGH", False):  # absl-flag commands parse their own argv
    if "-h" in rest or "--help" in rest:
      parser.print_help()
      return 0
    return int(module.main(rest) or 0)
  return int(module.main(parser.parse_args(rest)) or 0)


if __name__ == "__main__":
  sys.exit(main())
