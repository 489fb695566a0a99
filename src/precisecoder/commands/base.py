"""`precisecoder base`: build (or find cached) a small base policy and print its measurements.

    precisecoder base [--preset cpu] [--rebuild] [--config.a.b=v ...]

The base is `configs/base.py:<preset>` with the overrides (experiments/base_model.py says what a
build does). Its folder, printed last, is a Hugging Face checkpoint for `generate`, `evaluate`,
`export` and `--config.model.checkpoint`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence

from absl import logging

from precisecoder import console
from precisecoder.commands import checks

PASSTHROUGH = True  # `--config.a.b=v` overrides are parsed here
PROG = "precisecoder base"


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.description = (
    "Build (once; cached by its config) a small base policy: a BPE tokenizer trained on the "
    "generator's training tasks, SFT from scratch on a mixture of answers; print its "
    "measurements and folder."
  )
  parser.epilog = "Extra --config.a.b=v arguments override configs/base.py's fields."
  parser.add_argument(
    "--preset",
    default="cpu",
    help="tiny, cpu, gpu, tiny-programs or cpu-programs (configs/base.py)",
  )
  parser.add_argument(
    "--rebuild", action="store_true", help="delete the cached base of this config first"
  )
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)


def main(argv: Sequence[str]) -> int:
  args, overrides = checks.parse_with_overrides(checks.command_parser(PROG, add_arguments), argv)
  from precisecoder.experiments import base_model, compare_arms  # pylint: disable=import-outside-toplevel
  from precisecoder.train import config as config_lib  # pylint: disable=import-outside-toplevel

  config_file = compare_arms.default_configs_dir() / "base.py"
  try:
    cfg = compare_arms.resolve_config(config_file, args.preset, overrides)
  except (ValueError, config_lib.ConfigError) as e:
    print(f"{PROG}: error: {e}", file=sys.stderr)
    return 2
  logging.set_verbosity(logging.INFO)
  console.quiet_libraries(args.verbose)
  if args.rebuild:
    shutil.rmtree(base_model.folder(cfg), ignore_errors=True)
  cached = base_model.cached_result(cfg)
  path = base_model.ensure(cfg)
  if cached is not None:
    print(base_model.summary(cached))
  print(f"base model: {path}")
  return 0
