"""K turns of a conversation: continuing each row's KV cache (`sampling.Conversation`) vs
re-prefilling the whole conversation every turn (`sample` on prompt + answers + feedback).

Both sides decode greedily with no end token, so every row answers exactly `new_tokens` each
turn and both produce the same tokens (checked); each row hears `feedback` scripted tokens
between turns. Each side runs once to compile (reported), then `repeats` times alternately;
the best wall and CPU seconds of the K turns are compared.

  python benchmarks/bench_multiturn.py                   # tiny Qwen3, 8 prompts x 4 samples
  python benchmarks/bench_multiturn.py --smollm2         # SmolLM2-135M (GGUF), 4 x 2
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
from flax import nnx

from precisecoder.model import Decoder, architectures, bundled_smollm2_gguf, load_checkpoint
from precisecoder.sampling import Conversation, enable_compilation_cache, sample
from results import add_record_flag, recorded


def _feedback(rng_seed: int, rows: int, turns: int, length: int, vocab: int):
  rng = np.random.default_rng(rng_seed)
  return rng.integers(3, vocab, (turns, rows, length)).tolist()


def on_cache(model, prompts, samples, turns, new_tokens, feedback):
  conversation = Conversation(
    model,
    prompts,
    turns=turns,
    feedback_len=len(feedback[0][0]),
    num_samples=samples,
    max_new_tokens=new_tokens,
    temperature=0.0,
    eos_ids=(),
    pad_id=0,
  )
  answers = [conversation.first.tokens]
  for turn in range(1, turns):
    answers.append(conversation.reply(feedback[turn - 1]).tokens)
  return answers


def re_prefilled(model, prompts, samples, turns, new_tokens, feedback):
  history = [list(p) for p in prompts for _ in range(samples)]
  answers = []
  for turn in range(turns):
    if turn:
      history = [h + a + f for h, a, f in zip(history, answers[-1].tolist(), feedback[turn - 1])]
    answers.append(
      sample(
        model, history, max_new_tokens=new_tokens, temperature=0.0, eos_ids=(), pad_id=0
      ).tokens
    )
  return answers


def _timed(fn):
  wall, cpu = time.perf_counter(), time.process_time()
  out = fn()
  return out, time.perf_counter() - wall, time.process_time() - cpu


def compare(name, model, vocab, args):
  rng = np.random.default_rng(0)
  prompts = rng.integers(3, vocab, (args.prompts, args.prompt)).tolist()
  rows = args.prompts * args.samples
  feedback = _feedback(1, rows, args.turns, args.feedback, vocab)
  sides = {"on the cache": on_cache, "re-prefilled": re_prefilled}
  run = {
    label: (lambda fn=fn: fn(model, prompts, args.samples, args.turns, args.new_tokens, feedback))
    for label, fn in sides.items()
  }
  print(
    f"{name}: {args.prompts} prompts x {args.samples} samples, prompt {args.prompt}, "
    f"{args.turns} turns of {args.new_tokens} new tokens, {args.feedback} feedback tokens "
    "between turns",
    flush=True,
  )
  outputs, best = {}, {label: [np.inf, np.inf] for label in run}
  for label, fn in run.items():
    outputs[label], wall, _ = _timed(fn)
    print(f"  {label:13s} first run (compiles) {wall:7.1f} s", flush=True)
  same = all(np.array_equal(a, b) for a, b in zip(*outputs.values()))
  for _ in range(args.repeats):
    for label, fn in run.items():
      _, wall, cpu = _timed(fn)
      best[label] = [min(best[label][0], wall), min(best[label][1], cpu)]
  tokens = rows * args.turns * args.new_tokens
  for label, (wall, cpu) in best.items():
    print(
      f"  {label:13s} {wall:7.2f} s wall, {cpu:7.2f} s CPU, {tokens / wall:8.1f} answer "
      f"tokens/s (best of {args.repeats})"
    )
  cache, again = best["on the cache"], best["re-prefilled"]
  print(
    f"  re-prefilled / on the cache: wall {again[0] / cache[0]:.2f}x, CPU "
    f"{again[1] / cache[1]:.2f}x; same tokens on both sides: {same}",
    flush=True,
  )


@recorded
def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--prompts", type=int, default=8)
  parser.add_argument("--samples", type=int, default=4)
  parser.add_argument("--prompt", type=int, default=256)
  parser.add_argument("--turns", type=int, default=5)
  parser.add_argument("--new-tokens", type=int, default=64)
  parser.add_argument("--feedback", type=int, default=64)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument(
    "--smollm2",
    action="store_true",
    help="SmolLM2-135M from the bundled GGUF instead of the tiny model",
  )
  add_record_flag(parser)
  args = parser.parse_args()
  enable_compilation_cache()
  if args.smollm2:
    model, _, config = load_checkpoint(bundled_smollm2_gguf(), with_tokenizer=False)
    compare("SmolLM2-135M-Instruct", model, config.vocab_size, args)
  else:
    config = architectures.get("tiny")
    compare(
      f"tiny Qwen3 ({config.num_params() / 1e6:.1f}M params)",
      Decoder(config, rngs=nnx.Rngs(0)),
      config.vocab_size,
      args,
    )


if __name__ == "__main__":
  main()
