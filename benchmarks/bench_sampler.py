"""Decode throughput: our JAX sampler vs transformers' `generate` (PyTorch, KV cache on).

Both sides get the same weights, prompts and sampling settings (temperature 1, no EOS, so
every row decodes exactly `new_tokens`). Ours is timed after a warm-up call (compilation is
reported separately; the persistent cache removes it across runs).

  python benchmarks/bench_sampler.py                  # tiny Qwen3: batch 32, prompt 128, 128 new
  python benchmarks/bench_sampler.py --smollm2        # also SmolLM2-135M (GGUF) at batch 8
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "--single-thread" in sys.argv:  # must precede the JAX import; torch is set in main()
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
    " intra_op_parallelism_threads=1"
  ).strip()

import numpy as np
import torch
import transformers

from precisecoder.model import (
  architectures,
  bundled_smollm2_gguf,
  gguf_import,
  load_checkpoint,
  load_hf,
)
from precisecoder.sampling import sample
from results import add_record_flag, recorded


def _ours(model, prompts, new_tokens):
  kwargs = dict(num_samples=1, max_new_tokens=new_tokens, temperature=1.0, eos_ids=(), pad_id=0)
  calls = iter(range(1_000_000))

  def run():
    out = sample(model, prompts, seed=next(calls), **kwargs)
    assert (out.lengths == new_tokens).all()

  return run


def _torch(model, prompts, new_tokens):
  model.generation_config.eos_token_id = None
  ids = torch.tensor(prompts, dtype=torch.long)
  kwargs = dict(
    attention_mask=torch.ones_like(ids),
    max_new_tokens=new_tokens,
    min_new_tokens=new_tokens,
    do_sample=True,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    use_cache=True,
    pad_token_id=0,
  )

  def run():
    with torch.inference_mode():
      out = model.generate(ids, **kwargs)
    assert out.shape[1] == ids.shape[1] + new_tokens

  return run


def _timed(fn) -> tuple[float, float]:
  """(wall seconds, CPU seconds of this process); the latter resists other processes' load."""
  wall, cpu = time.perf_counter(), time.process_time()
  fn()
  return time.perf_counter() - wall, time.process_time() - cpu


def _compare(name, ours, theirs, tokens, repeats):
  """Warm-up, then alternate the two so that load from other processes hits both alike."""
  compile_s = _timed(ours)[0]
  _timed(theirs)
  ours_s, theirs_s = [], []
  for _ in range(repeats):
    ours_s.append(_timed(ours))
    theirs_s.append(_timed(theirs))
  print(name)
  rates = {}
  for label, runs in (("ours", ours_s), ("transformers", theirs_s)):
    wall = tokens / min(r[0] for r in runs)
    cpu = tokens / min(r[1] for r in runs)
    rates[label] = (wall, cpu)
    print(
      f"  {label:12s} {wall:8.1f} tok/s wall, {cpu:8.1f} tok/s per CPU-second (best of {repeats})"
    )
  print(f"  (ours: first call incl. compile {compile_s:.1f}s)")
  print(
    f"  ratio ours/transformers: wall {rates['ours'][0] / rates['transformers'][0]:.2f}x, "
    f"CPU time {rates['ours'][1] / rates['transformers'][1]:.2f}x",
    flush=True,
  )


def tiny_qwen3(batch, prompt_len, new_tokens, repeats):
  config = architectures.get("tiny")
  hf_config = transformers.Qwen3Config(
    **{k: v for k, v in config.to_hf().items() if k not in ("architectures", "model_type")}
  )
  torch.manual_seed(0)
  reference = transformers.Qwen3ForCausalLM(hf_config).eval()
  with tempfile.TemporaryDirectory() as folder:
    reference.save_pretrained(folder)
    ours, _ = load_hf(folder)
  rng = np.random.default_rng(0)
  prompts = rng.integers(2, config.vocab_size, (batch, prompt_len)).tolist()
  _compare(
    f"tiny Qwen3 ({config.num_params() / 1e6:.1f}M params), batch {batch}, prompt "
    f"{prompt_len}, {new_tokens} new tokens",
    _ours(ours, prompts, new_tokens),
    _torch(reference, prompts, new_tokens),
    batch * new_tokens,
    repeats,
  )


def smollm2(batch, prompt_len, new_tokens, repeats):
  path = bundled_smollm2_gguf()
  ours, _, config = load_checkpoint(path, with_tokenizer=False)
  reference = gguf_import.transformers_reference(path)
  rng = np.random.default_rng(0)
  prompts = rng.integers(3, config.vocab_size, (batch, prompt_len)).tolist()
  _compare(
    f"SmolLM2-135M-Instruct, batch {batch}, prompt {prompt_len}, {new_tokens} new tokens",
    _ours(ours, prompts, new_tokens),
    _torch(reference, prompts, new_tokens),
    batch * new_tokens,
    repeats,
  )


@recorded
def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--prompt", type=int, default=128)
  parser.add_argument("--new-tokens", type=int, default=128)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--smollm2", action="store_true", help="also SmolLM2-135M at batch 8")
  parser.add_argument("--smollm2-only", action="store_true")
  parser.add_argument(
    "--single-thread",
    action="store_true",
    help="one compute thread on both sides (fairer on a loaded machine)",
  )
  add_record_flag(parser)
  args = parser.parse_args()
  torch.set_num_threads(1 if args.single_thread else os.cpu_count())
  print(f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
  if not args.smollm2_only:
    tiny_qwen3(args.batch, args.prompt, args.new_tokens, args.repeats)
  if args.smollm2 or args.smollm2_only:
    smollm2(8, args.prompt, args.new_tokens, args.repeats)


if __name__ == "__main__":
  main()
