"""Compiled memory of one RL train step at the paper's shapes, new path beside the old.

  .venv/bin/python benchmarks/bench_memory.py [--preset qwen3-4b] [--batch 4] \
      [--prompt 1024] [--completion 4096] [--remat full] [--no-baseline] [--search-gib 80] \
      [--target cpu | tpu:v5p:2x2x1]

Nothing is allocated: parameters, optimiser state and batch are ShapeDtypeStructs, and the
figures are XLA's own accounting of the compiled step (`jit(step).lower(...).compile()
.memory_analysis()`). Two configurations of the same step, side by side: the old path (dense
[B, H, T, T] attention scores, full [B, T, V] float32 logits, the MLP over the whole sequence)
and the new (chunked attention, log-probs and MLP). `--search-gib N` then finds the largest
minibatch of the new path whose arguments + temporaries fit N GiB (two compiles give the
per-row slope, then the prediction is checked at the boundary). A third compile at 1 x (8 + 8)
tokens separates the part that does not grow with the sequence (the weights' gradients, the
optimiser update and, on CPU, float32 copies of bfloat16 weights and gradients).

`--target cpu` (default) compiles for this machine's CPU backend, which runs bfloat16 matmuls
and reductions in float32 and so keeps float32 copies of whole (stacked) weights and gradients
that no accelerator makes. `--target tpu:<topology>` compiles the same step ahead of time for
one chip of a TPU topology (e.g. tpu:v5p:2x2x1) without a TPU: it needs the libtpu wheel of
requirements-tpu.txt, kept out of .venv:

  pip install --no-deps --target /tmp/libtpu libtpu==0.0.42.1
  PYTHONPATH=/tmp/libtpu .venv/bin/python benchmarks/bench_memory.py --target tpu:v5p:2x2x1

Each 4B compile takes ~0.5-1 min (CPU) or ~0.5-4.5 min (TPU) and ~10 GB of host memory on a
2-core machine.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from precisecoder.model import Decoder, architectures  # noqa: E402
from precisecoder.train import config as train_config  # noqa: E402
from precisecoder.train import step as step_lib  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402

GIB = 2 ** 30


def rl_step_args(step, params, opt_state, batch) -> list:
  """The RL step's arguments for one minibatch of `batch` (whatever the step's signature)."""
  args = [params, opt_state, batch]
  if "rows" in inspect.signature(step).parameters:  # the step gathers its minibatch on device
    rows = batch["advantages"].shape[0]
    args.append(jnp.arange(rows, dtype=jnp.int32) if isinstance(batch["advantages"], jax.Array)
                else jax.ShapeDtypeStruct((rows,), jnp.int32,
                                          sharding=batch["advantages"].sharding))
  return args


def compile_device(target: str) -> jax.Device | None:
  """None to compile for this machine's backend; for `tpu:<topology>`, the first chip of
  that topology as a compile-only device (no TPU needed, only the libtpu wheel)."""
  if target == "cpu":
    return None
  platform, _, topology = target.partition(":")
  if platform != "tpu" or not topology:
    raise SystemExit(f"--target {target!r}: want cpu or tpu:<topology> (e.g. tpu:v5p:2x2x1)")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
  try:
    return topologies.get_topology_desc(topology, "tpu").devices[0]
  except RuntimeError as e:  # no libtpu, a topology it does not know, another process using it
    raise SystemExit(f"--target {target}: {e}\n(libtpu: pip install --no-deps --target "
                     "/tmp/libtpu libtpu==0.0.42.1, then PYTHONPATH=/tmp/libtpu; one process "
                     "at a time may load it)") from e


def step_memory(preset: str, batch: int, prompt: int, completion: int, *, dtype: str,
                device: jax.Device | None = None, **execution) -> dict[str, float]:
  """XLA's memory figures (GiB) of the compiled RL step, and the compile time (s); compiled
  for `device` (a compile-only TPU chip) when given, else for this machine's backend."""
  config = architectures.get(preset, dtype=dtype, **execution)
  graphdef, params = nnx.split(nnx.eval_shape(lambda: Decoder(config, rngs=nnx.Rngs(0))))
  cfg = train_config.default("tiny")
  tx = step_lib.make_optimizer(cfg.optim)
  opt_state = jax.eval_shape(tx.init, params)
  step = step_lib.make_rl_step(graphdef, tx, cfg.rl)
  t = prompt + completion
  sharding = None if device is None else jax.sharding.SingleDeviceSharding(device)
  shape = functools.partial(jax.ShapeDtypeStruct, sharding=sharding)
  params, opt_state = jax.tree.map(lambda x: shape(x.shape, x.dtype), (params, opt_state))
  data = {"tokens": shape((batch, t), jnp.int32), "mask": shape((batch, t), jnp.bool_),
          "completion_mask": shape((batch, completion), jnp.bool_),
          "old_logprobs": shape((batch, completion), jnp.float32),
          "advantages": shape((batch,), jnp.float32)}
  start = time.perf_counter()
  analysis = step.lower(*rl_step_args(step, params, opt_state, data)).compile().memory_analysis()
  seconds = time.perf_counter() - start
  temp = analysis.temp_size_in_bytes / GIB
  arguments = analysis.argument_size_in_bytes / GIB
  # Outputs alias the donated parameters and optimiser state: only the rest adds to the peak.
  extra_out = (analysis.output_size_in_bytes - analysis.alias_size_in_bytes) / GIB
  return dict(temp=temp, arguments=arguments, total=temp + arguments + max(extra_out, 0.0),
              compile_s=seconds)


def _row(name: str, batch: int, m: dict[str, float]) -> str:
  return (f"{name:38s}{batch:>6d}{m['temp']:>12.2f}{m['arguments']:>12.2f}{m['total']:>12.2f}"
          f"{m['compile_s']:>11.0f}s")


def largest_batch(measure, budget_gib: float, first: int) -> tuple[int, dict[int, dict]]:
  """Largest batch whose total fits `budget_gib`: a linear fit from two sizes, then checked."""
  seen = {first: measure(first)}
  seen[2 * first] = measure(2 * first)
  slope = (seen[2 * first]["total"] - seen[first]["total"]) / first
  if slope <= 0:
    raise RuntimeError(f"memory does not grow with the batch ({seen}); cannot extrapolate")
  guess = max(1, first + int((budget_gib - seen[first]["total"]) // slope))

  def total(batch):
    if batch not in seen:
      seen[batch] = measure(batch)
    return seen[batch]["total"]

  b = guess
  while b > 1 and total(b) > budget_gib:
    b -= 1
  while total(b + 1) <= budget_gib:
    b += 1
  return (b if total(b) <= budget_gib else 0), seen


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--preset", default="qwen3-4b")
  parser.add_argument("--dtype", default="bfloat16")
  parser.add_argument("--batch", type=int, default=4)
  parser.add_argument("--prompt", type=int, default=1024)
  parser.add_argument("--completion", type=int, default=4096)
  parser.add_argument("--remat", default="full")
  parser.add_argument("--attention", default="chunked", help="new path's attention")
  parser.add_argument("--logprob-chunk", type=int, default=1024)
  parser.add_argument("--mlp-chunk", type=int, default=4096)
  parser.add_argument("--no-baseline", action="store_true", help="skip the old path")
  parser.add_argument("--target", default="cpu",
                      help="cpu (this machine's backend) or tpu:<topology>, e.g. tpu:v5p:2x2x1 "
                      "(ahead-of-time for one chip of that TPU; needs libtpu, see above)")
  parser.add_argument("--search-gib", type=float, default=0.0,
                      help="also find the largest minibatch of the new path within this budget")
  add_record_flag(parser)
  args = parser.parse_args()
  device = compile_device(args.target)
  shapes = dict(prompt=args.prompt, completion=args.completion, dtype=args.dtype, device=device)
  new = dict(remat=args.remat, attention=args.attention, logprob_chunk=args.logprob_chunk,
             mlp_chunk=args.mlp_chunk)
  old = dict(remat=args.remat, attention="dense", logprob_chunk=0, mlp_chunk=0)

  backend = (jax.default_backend() if device is None
             else f"{args.target} (one {device.device_kind} chip)")
  print(f"{args.preset}, {args.dtype}, remat={args.remat}, {args.prompt} prompt + "
        f"{args.completion} completion tokens, compiled for {backend}; GiB")
  print(f"{'path':38s}{'batch':>6s}{'temp':>12s}{'arguments':>12s}{'total':>12s}"
        f"{'compile':>12s}")
  runs = [("new: chunked attention/log-probs/MLP", new)]
  if not args.no_baseline:
    runs.append(("old: dense scores + full logits", old))
  results = {}
  for name, execution in runs:
    results[name] = step_memory(args.preset, args.batch, **shapes, **execution)
    print(_row(name, args.batch, results[name]), flush=True)
  # The part that does not grow with the sequence (weights' gradients, optimiser update,
  # backend copies of them): the same step on 1 x (8 + 8) tokens.
  fixed = step_memory(args.preset, 1, 8, 8, dtype=args.dtype, device=device, **new)
  print(_row("either: 1 x (8 + 8) tokens", 1, fixed), flush=True)
  for name, m in results.items():
    print(f"{name.split(':')[0]}: sequence-dependent temporaries "
          f"{m['temp'] - fixed['temp']:.2f} GiB")
  if len(results) == 2:
    (_, a), (_, b) = results.items()
    print(f"temporaries: new / old = {a['temp'] / b['temp']:.3f}; sequence-dependent part: "
          f"{(b['temp'] - fixed['temp']) / (a['temp'] - fixed['temp']):.1f}x less")
  if args.search_gib:

    def measure(batch):
      m = (results[runs[0][0]] if batch == args.batch
           else step_memory(args.preset, batch, **shapes, **new))
      print(_row("new (search)", batch, m), flush=True)
      return m

    best, _ = largest_batch(measure, args.search_gib, args.batch)
    print(f"largest minibatch within {args.search_gib:g} GiB per device (arguments + "
          f"temporaries): {best} x ({args.prompt} + {args.completion})")


if __name__ == "__main__":
  main()
