"""`precisecoder train --config=configs/X.py --workdir=DIR`: absl flags, passed through."""

from __future__ import annotations

import argparse

PASSTHROUGH = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
  del parser  # flags are absl's (see precisecoder.train.main)


def main(argv: list[str]) -> int:
  from precisecoder.train.main import main as train_main
  train_main(argv)  # absl's app.run exits with the trainer's status
  return 0
