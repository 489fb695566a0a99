"""Flags that several commands share, defined once so their names, types and help agree.

`add_sampling` (generate, evaluate): how completions are sampled and from what weights.
`add_episodes` (generate, evaluate): multi-turn episodes with test feedback; their
`add_visible_tests` also serve's POST /feedback.
`add_scoring` (score, serve, evaluate): the metric's settings and the execution pool.
"""

from __future__ import annotations

import argparse

from precisecoder.commands import checks

# The temperature --samples N > 1 samples at unless told: the trainer's rollout temperature
# (rl.temperature), so N samples are N different answers, as in training.
SAMPLES_TEMPERATURE = 1.0


def add_sampling(parser: argparse.ArgumentParser) -> None:
  """--samples, --temperature, --top-p, --top-k, --max-new-tokens, --batch-size, the prompt's
  switches and the weights' dtype, mesh and compilation cache."""
  parser.add_argument("--samples", type=checks.positive_int, default=1, help="completions per task")
  parser.add_argument(
    "--temperature",
    type=float,
    default=None,
    help="0 means greedy (default: greedy for --samples 1, "
    f"{SAMPLES_TEMPERATURE} for more; --samples N > 1 at 0 is refused)",
  )
  parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1: off)")
  parser.add_argument("--top-k", type=checks.non_negative_int, default=0, help="0 disables top-k")
  parser.add_argument(
    "--max-new-tokens",
    type=checks.positive_int,
    default=512,
    help="tokens generated per completion at most",
  )
  parser.add_argument(
    "--batch-size", type=checks.positive_int, default=8, help="prompts per sampler call"
  )
  parser.add_argument(
    "--thinking", action="store_true", help="ask for reasoning (and enable Qwen3's thinking mode)"
  )
  parser.add_argument(
    "--prefill-thinking",
    default="",
    metavar="FROM.jsonl",
    help="predictions file whose thinking blocks open the assistant turn",
  )
  parser.add_argument(
    "--no-tests-in-prompt", action="store_true", help="leave the unit tests out of the prompt"
  )
  parser.add_argument(
    "--dtype",
    choices=("float32", "bfloat16"),
    default="float32",
    help="dtype the weights are loaded in",
  )
  parser.add_argument(
    "--mesh",
    default="",
    help="named mesh (cpu, fsdp, v5p-32, ...) or data,fsdp,tensor shape (default: one device)",
  )
  parser.add_argument(
    "--compile-cache", default="", help="persistent JAX compilation cache directory"
  )


def add_episodes(parser: argparse.ArgumentParser) -> None:
  """The flags of multi-turn episodes (episodes.py)."""
  parser.add_argument(
    "--turns",
    type=checks.positive_int,
    default=1,
    help="answers per episode, with feedback on the visible tests between them",
  )
  add_visible_tests(parser)
  parser.add_argument(
    "--feedback-tokens",
    type=checks.positive_int,
    default=1024,
    help="longest feedback turn, chat template included (--turns > 1)",
  )


def add_visible_tests(parser: argparse.ArgumentParser) -> None:
  """--visible-tests, --visible-fraction: the tests whose outcome a feedback turn shows."""
  parser.add_argument(
    "--visible-tests",
    type=checks.positive_int,
    default=3,
    help="visible tests per task: at most this many (feedback turns)",
  )
  parser.add_argument(
    "--visible-fraction",
    type=checks.fraction,
    default=0.5,
    help="... and at most this fraction of its tests, at least one",
  )


def add_scoring(parser: argparse.ArgumentParser) -> None:
  """--pdb-compat, --epsilon, --lam, and the pool's --workers and --python."""
  parser.add_argument(
    "--pdb-compat",
    action="store_true",
    help="reproduce the released PDB evaluator (its ess quirk, ungated F1)",
  )
  parser.add_argument(
    "--epsilon",
    type=checks.non_negative_int,
    default=None,
    help="slack lines per reference block (default: 2 single-line, 1 multi-line)",
  )
  parser.add_argument(
    "--lam", type=checks.fraction, default=1 / 3, help="lambda of r = (1-l)*unit + l*F1, in [0, 1]"
  )
  parser.add_argument(
    "--workers",
    type=checks.workers,
    default=None,
    help=f"execution workers, 1 to {checks.MAX_WORKERS} (default: CPUs)",
  )
  parser.add_argument("--python", type=checks.python, default=None, help=checks.PYTHON_HELP)
