"""`precisecoder export`: any checkpoint -> a Hugging Face folder (config.json + safetensors)."""

from __future__ import annotations

import argparse
import sys

from precisecoder import console
from precisecoder.commands import checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--checkpoint", required=True,
                      help="Hugging Face folder, .gguf file or training checkpoint directory")
  parser.add_argument("--output", required=True, help="folder to write")
  parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                      help="dtype of the written weights")
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)


def main(args: argparse.Namespace) -> int:
  """Exit status 2, with one line naming the flag or file, for unusable inputs."""
  console.quiet_libraries(args.verbose)
  from precisecoder.model import export_hf, load_checkpoint
  from precisecoder.model.loading import CheckpointError

  try:
    output = checks.output_folder(args.output, inputs=[("--checkpoint", args.checkpoint)],
                                  make=False)  # export_hf makes it: a refused run leaves none
    model, tokenizer, config = load_checkpoint(args.checkpoint, dtype="float32")
  except (checks.InputError, CheckpointError) as e:
    print(f"precisecoder export: error: {e}", file=sys.stderr)
    return 2
  out = export_hf(model, config, tokenizer, output, dtype=args.dtype)
  print(f"exported {config.arch} ({config.num_params() / 1e6:.1f}M parameters) to {out}")
  return 0
