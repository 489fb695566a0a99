"""Issue 12's accelerator figures in one run: decode bandwidth, train-step MFU, 4B at 1024 + 4096.

  python benchmarks/gpu_figures.py [--peak-tflops 790] [--peak-gbs 4300] [--json OUT.json]
  python benchmarks/gpu_figures.py --quick      # the CPU rehearsal: tiny model, small shapes

On random-init bfloat16 presets (no download), on the default JAX backend:
  1. attention check: the backend's own attention ("auto": cuDNN on a GPU) against the chunked
     one on a padded batch (max |logit difference| on real tokens);
  2. decode: qwen3-1.7b, batch 64, prompt 256, 256 new tokens through `sampling.sample`;
     tokens/s and the share of memory bandwidth (weights + the filled KV cache read per step,
     over the wall time of the whole call, prefill included: a lower bound);
  3. train step: qwen3-1.7b RL step at 16 x 512, no remat; MFU = 6 * parameters * tokens /
     time / peak bf16 FLOP/s (attention FLOPs not counted, as before);
  4. qwen3-4b RL step at 4 x (1024 + 4096) with full remat: XLA's compiled memory figures on
     this device, then three timed steps, MFU and the device's peak memory in use.
Peaks default to what was measured on the project's H200 (../shared/device/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from precisecoder.model import Decoder, architectures, attention, param_count
from precisecoder.model.config import EXECUTION_FIELDS
from precisecoder.sampling import sample
from precisecoder.train import config as train_config
from precisecoder.train import step as step_lib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_memory import GIB, rl_step_args  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402


def _padded_batch(batch: int, length: int, vocab: int, seed: int = 0):
  rng = np.random.default_rng(seed)
  tokens = rng.integers(2, vocab, (batch, length), dtype=np.int32)
  mask = np.ones((batch, length), bool)
  for row in range(batch):  # left-padded prompts, right-padded completions
    mask[row, : rng.integers(0, length // 4)] = False
    mask[row, length - rng.integers(0, length // 4) :] = False
  return jnp.asarray(tokens), jnp.asarray(mask)


def attention_check(preset: str) -> dict:
  config = architectures.get(preset, dtype="bfloat16", num_layers=2)
  tokens, mask = _padded_batch(4, 512, config.vocab_size)
  model = Decoder(config.replace(attention="chunked"), rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  chunked = jax.jit(lambda s: nnx.merge(graphdef, s)(tokens, mask))(state)
  resolved = attention.resolve("auto", config.dtype, config.head_dim)
  other = "dense" if resolved == "chunked" else resolved  # on CPU: chunked against dense
  g2, _ = nnx.split(Decoder(config.replace(attention=other), rngs=nnx.Rngs(0)))
  theirs = jax.jit(lambda s: nnx.merge(g2, s)(tokens, mask))(state)
  real = np.asarray(mask)
  diff = np.abs(np.asarray(chunked, np.float32) - np.asarray(theirs, np.float32))[real].max()
  return {"implementation": other, "vs": "chunked", "max_abs_logit_diff": float(diff)}


def decode(preset: str, batch: int, prompt: int, new: int, peak_gbs: float) -> dict:
  config = architectures.get(preset, dtype="bfloat16")
  model = Decoder(config, rngs=nnx.Rngs(0))
  rng = np.random.default_rng(0)
  prompts = [list(rng.integers(2, config.vocab_size, prompt)) for _ in range(batch)]
  kwargs = dict(num_samples=1, max_new_tokens=new, temperature=1.0, eos_ids=(), pad_id=0)
  sample(model, prompts, seed=0, **kwargs)  # compile
  start = time.perf_counter()
  out = sample(model, prompts, seed=1, **kwargs)
  seconds = time.perf_counter() - start
  assert (out.lengths == new).all()
  weight_bytes = param_count(model) * 2
  kv_per_slot = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 2 * batch
  bytes_per_step = weight_bytes + kv_per_slot * (prompt + new / 2)
  return {
    "tokens_per_s": batch * new / seconds,
    "seconds": seconds,
    "bandwidth_share": bytes_per_step * new / seconds / (peak_gbs * 1e9),
  }


def train_step(
  preset: str,
  batch: int,
  prompt: int,
  completion: int,
  remat: str,
  peak_tflops: float,
  steps: int = 3,
) -> dict:
  cfg = train_config.default("tiny")
  execution = {k: cfg.model[k] for k in EXECUTION_FIELDS}  # the trainers' defaults
  config = architectures.get(preset, dtype="bfloat16", **dict(execution, remat=remat))
  graphdef, params = nnx.split(Decoder(config, rngs=nnx.Rngs(0)))
  tx = step_lib.make_optimizer(cfg.optim)
  opt_state = tx.init(params)
  step = step_lib.make_rl_step(graphdef, tx, cfg.rl)
  tokens, mask = _padded_batch(batch, prompt + completion, config.vocab_size)
  data = {
    "tokens": tokens,
    "mask": mask,
    "completion_mask": mask[:, prompt:],
    "old_logprobs": jnp.full((batch, completion), -2.0, jnp.float32),
    "advantages": jnp.linspace(-1.0, 1.0, batch, dtype=jnp.float32),
  }
  start = time.perf_counter()
  compiled = step.lower(*rl_step_args(step, params, opt_state, data)).compile()
  compile_s = time.perf_counter() - start
  analysis = compiled.memory_analysis()
  params, opt_state, metrics = compiled(*rl_step_args(step, params, opt_state, data))
  jax.block_until_ready(metrics)
  start = time.perf_counter()
  for _ in range(steps):
    params, opt_state, metrics = compiled(*rl_step_args(step, params, opt_state, data))
  jax.block_until_ready(metrics)
  seconds = (time.perf_counter() - start) / steps
  flops = 6 * config.num_params() * batch * (prompt + completion)
  stats = jax.devices()[0].memory_stats() or {}
  return {
    "seconds_per_step": seconds,
    "mfu": flops / seconds / (peak_tflops * 1e12),
    "compile_s": compile_s,
    "loss": float(metrics["loss"]),
    "temp_gib": analysis.temp_size_in_bytes / GIB,
    "arguments_gib": analysis.argument_size_in_bytes / GIB,
    "peak_in_use_gib": stats.get("peak_bytes_in_use", 0) / GIB,
  }


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="tiny model and shapes (CPU)")
  parser.add_argument("--peak-tflops", type=float, default=790.0)
  parser.add_argument("--peak-gbs", type=float, default=4300.0)
  parser.add_argument(
    "--only", default="attention,decode,train,long", help="comma-separated parts to run"
  )
  parser.add_argument("--long-batch", type=int, default=4)
  parser.add_argument("--json", default="", help="also write the figures here")
  add_record_flag(parser)
  args = parser.parse_args()
  parts = set(args.only.split(","))
  small, big = ("tiny", "tiny") if args.quick else ("qwen3-1.7b", "qwen3-4b")
  scale = 8 if args.quick else 1
  print(f"backend {jax.default_backend()}: {jax.devices()[0].device_kind}", flush=True)
  figures = {}
  runs = {
    "attention": lambda: attention_check("tiny" if args.quick else "qwen3-0.6b"),
    "decode": lambda: decode(small, 64 // scale, 256 // scale, 256 // scale, args.peak_gbs),
    "train": lambda: train_step(
      small, 16 // scale, 256 // scale, 256 // scale, "none", args.peak_tflops
    ),
    "long": lambda: train_step(
      big,
      args.long_batch if not args.quick else 1,
      1024 // scale,
      4096 // scale,
      "full",
      args.peak_tflops,
      steps=2,
    ),
  }
  for name, run in runs.items():
    if name not in parts:
      continue
    start = time.perf_counter()
    try:
      figures[name] = run()
    except Exception as e:  # one failing part (e.g. out of memory) must not hide the others
      figures[name] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
    figures[name]["wall_s"] = time.perf_counter() - start
    print(name, json.dumps(figures[name], indent=None), flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(figures, f, indent=2)


if __name__ == "__main__":
  main()
