"""Chunked attention's balanced blocks vs the blocks as configured, and vs dense attention.

The RL loss's forward and backward (`train.step.completion_logprobs`, gradient of the sum) on
the tiny model, for sequences just past a block multiple (a prompt bucket plus the new tokens)
and on one. Side by side in this process, on the same weights and tokens:

  balanced  `attention.chunked` as it is: blocks of at most `--block`, balanced
            (`attention.balanced_block`: 1028 tokens are three blocks of 344);
  as given  the same code with blocks of exactly `--block` and a padded last block (the rule
            before balancing: 1028 tokens are three blocks of 512, 1536 slots);
  dense     [B, H, T, T] scores (`--config.model.attention=dense`).

Prints the median of --repeats timed calls after a compiling one, and each path's time over
the balanced one's.

  python benchmarks/bench_attention.py [--rows 8] [--lengths 1028,1120,1024] [--block 512]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from unittest import mock

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from precisecoder.intmath import cdiv  # noqa: E402
from precisecoder.model import architectures, attention, decoder  # noqa: E402
from precisecoder.train import step as step_lib  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402


def _as_given(length: int, block: int, align: int = 8) -> int:  # pylint: disable=unused-argument
  return min(block, length)


def _gradient_seconds(
  impl: str, block: int, rows: int, length: int, repeats: int, balanced: bool
) -> float:
  config = architectures.get("tiny", attention=impl, attention_block=block)
  graphdef, params = nnx.split(decoder.Decoder(config, rngs=nnx.Rngs(0)), nnx.Param)
  tokens = jnp.asarray(np.random.default_rng(0).integers(2, 258, (rows, length)), jnp.int32)
  mask = jnp.ones((rows, length), jnp.int32)

  def loss(p):
    return step_lib.completion_logprobs(graphdef, p, tokens, mask, 16)[0].sum()

  rule = attention.balanced_block if balanced else _as_given
  with mock.patch.object(attention, "balanced_block", rule):
    grad = jax.jit(jax.grad(loss))  # traced (and so blocked) under the rule
    jax.block_until_ready(grad(params))
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(grad(params))
    times.append(time.perf_counter() - start)
  return statistics.median(times)


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", type=int, default=8)
  parser.add_argument(
    "--lengths",
    default="1028,1120,1024",
    help="sequence lengths (prompt bucket + new tokens); 1024 is a block "
    "multiple, where balancing changes nothing",
  )
  parser.add_argument("--block", type=int, default=512)
  parser.add_argument("--repeats", type=int, default=3)
  add_record_flag(parser)
  args = parser.parse_args()
  print(
    f"tiny model, gradient of the RL loss's log-probs, {args.rows} rows, block {args.block}, "
    f"median of {args.repeats}; {jax.device_count()} {jax.default_backend()} device(s)"
  )
  print(
    f"{'tokens':>6} {'blocks':>13} {'balanced s':>11} {'as given s':>11} {'dense s':>8} "
    f"{'as given/bal':>13} {'dense/bal':>10}"
  )
  for length in (int(x) for x in args.lengths.split(",")):
    size = attention.balanced_block(length, args.block)
    blocks = f"{cdiv(length, size)} x {size}"
    balanced = _gradient_seconds("chunked", args.block, args.rows, length, args.repeats, True)
    given = _gradient_seconds("chunked", args.block, args.rows, length, args.repeats, False)
    dense = _gradient_seconds("dense", args.block, args.rows, length, args.repeats, True)
    print(
      f"{length:>6} {blocks:>13} {balanced:>11.2f} {given:>11.2f} {dense:>8.2f} "
      f"{given / balanced:>12.2f}x {dense / balanced:>9.2f}x"
    )


if __name__ == "__main__":
  main()
