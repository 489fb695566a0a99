"""`precisecoder compare`: train reward recipes side by side and report them (train/compare.py)."""

from __future__ import annotations

import argparse

PASSTHROUGH = True  # `--config.a.b=v` overrides are parsed by the comparison runner itself


def add_arguments(parser: argparse.ArgumentParser) -> None:
  del parser  # see precisecoder.train.compare


def main(argv: list[str]) -> int:
  from precisecoder.train import compare
  return compare.main(argv)
