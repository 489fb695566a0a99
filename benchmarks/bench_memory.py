"""Compiled memory of one RL train step at the paper's shapes, new path beside the old.

  .venv/bin/python benchmarks/bench_memory.py [--preset qwen3-4b] [--batch 4] \
      [--prompt 1024] [--completion 4096] [--remat full] [--no-baseline] [--search-gib 80] \
      [--target cpu | tpu:v5p:2x2x1] [--lora-rank 16] [--chips 4] [--no-fixed]

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

`--lora-rank R` compiles the step of a LoRA run (model/lora.py: rank-R adapters on every
projection, Adam state for them only) beside full fine-tuning; `--chips N` compiles for N
chips of the topology with the weights, optimiser state and batch sharded FSDP-style over them
(the `v5p-8` mesh for 4), figures per chip. Beside the named architectures, `--preset` takes
two shapes without checkpoints here, of the paper's other sizes, on the Qwen3 decoder:
`9b-class` (qwen3-8b with 40 layers: 9.0B) and `27b-class` (qwen3-14b's 5120 width with
Qwen3-32B's 64 heads and 25600 MLP, 52 layers: 26.9B). The LoRA table of RESULTS.md:

  for p in qwen3-4b 9b-class 27b-class; do for c in 1 4; do
    PYTHONPATH=/tmp/libtpu .venv/bin/python benchmarks/bench_memory.py --preset $p \
        --target tpu:v5p:2x2x1 --chips $c --no-baseline --no-fixed --lora-rank 16; done; done

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

from precisecoder.model import Decoder, architectures, lora as lora_lib  # noqa: E402
from precisecoder.model.sharding import logical_to_spec, mesh_scope  # noqa: E402
from precisecoder.train import config as train_config  # noqa: E402
from precisecoder.train import step as step_lib  # noqa: E402
from results import add_record_flag, recorded  # noqa: E402

GIB = 2**30

# Shapes of the paper's 9B and 27B sizes on our (Qwen3) decoder; no checkpoints behind them.
SHAPES = {
  "9b-class": architectures.get("qwen3-8b", num_layers=40),
  "27b-class": architectures.get("qwen3-14b", num_layers=52, num_heads=64, intermediate_size=25600),
}


def model_config(preset: str, **overrides):
  if preset in SHAPES:
    return SHAPES[preset].replace(**overrides)
  return architectures.get(preset, **overrides)


def rl_step_args(step, params, opt_state, batch) -> list:
  """The RL step's arguments for one minibatch of `batch` (whatever the step's signature)."""
  args = [params, opt_state, batch]
  if "rows" in inspect.signature(step).parameters:  # the step gathers its minibatch on device
    rows = batch["advantages"].shape[0]
    args.append(
      jnp.arange(rows, dtype=jnp.int32)
      if isinstance(batch["advantages"], jax.Array)
      else jax.ShapeDtypeStruct((rows,), jnp.int32, sharding=batch["advantages"].sharding)
    )
  return args


def compile_devices(target: str, chips: int = 1) -> list[jax.Device] | None:
  """None to compile for this machine's backend; for `tpu:<topology>`, its first `chips`
  chips as compile-only devices (no TPU needed, only the libtpu wheel)."""
  if target == "cpu":
    if chips != 1:
      raise SystemExit("--chips > 1 needs --target tpu:<topology>")
    return None
  platform, _, topology = target.partition(":")
  if platform != "tpu" or not topology:
    raise SystemExit(f"--target {target!r}: want cpu or tpu:<topology> (e.g. tpu:v5p:2x2x1)")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  try:
    devices = topologies.get_topology_desc(topology, "tpu").devices
  except RuntimeError as e:  # no libtpu, a topology it does not know, another process using it
    raise SystemExit(
      f"--target {target}: {e}\n(libtpu: pip install --no-deps --target "
      "/tmp/libtpu libtpu==0.0.42.1, then PYTHONPATH=/tmp/libtpu; one process "
      "at a time may load it)"
    ) from e
  if chips > len(devices):
    raise SystemExit(f"--chips {chips}: {target} has {len(devices)}")
  return list(devices[:chips])


def step_memory(
  preset: str,
  batch: int,
  prompt: int,
  completion: int,
  *,
  dtype: str,
  device: jax.Device | list[jax.Device] | None = None,
  lora_rank: int = 0,
  **execution,
) -> dict[str, float]:
  """XLA's memory figures (GiB, per chip) of the compiled RL step, and the compile time (s);
  compiled for `device` (compile-only TPU chips: one, or a list sharded over FSDP-style)
  when given, else for this machine's backend. `lora_rank` > 0: a LoRA run's step."""
  config = model_config(preset, dtype=dtype, **execution)
  lora = (
    lora_lib.LoraConfig(lora_rank, 2.0 * lora_rank, tuple(lora_lib.TARGETS.values()))
    if lora_rank
    else None
  )
  graphdef, abstract = nnx.split(
    nnx.eval_shape(lambda: Decoder(config, rngs=nnx.Rngs(0), lora=lora))
  )
  cfg = train_config.default("tiny")
  tx = step_lib.make_optimizer(cfg.optim, adapters_only=lora is not None)
  step = step_lib.make_rl_step(graphdef, tx, cfg.rl)
  t = prompt + completion
  mesh = None
  if isinstance(device, list):  # several chips: the weights over fsdp (the v5p-8 mesh's way)
    if len(device) > 1:
      mesh = jax.make_mesh(
        (1, len(device), 1),
        ("data", "fsdp", "tensor"),
        devices=device,
        axis_types=(jax.sharding.AxisType.Auto,) * 3,
      )
    device = device[0]

  def sharded(axes, shape_):
    return jax.sharding.NamedSharding(mesh, logical_to_spec(axes, shape_, mesh))

  if mesh is not None:
    params = jax.tree.map(
      lambda v: jax.ShapeDtypeStruct(
        v.get_value().shape,
        v.get_value().dtype,
        sharding=sharded(
          v.get_metadata().get("logical_axes") or (None,) * v.get_value().ndim, v.get_value().shape
        ),
      ),
      abstract,
      is_leaf=lambda v: isinstance(v, nnx.Variable),
    )
    opt_state = jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      jax.eval_shape(tx.init, params),
      step_lib.state_shardings(tx, params, mesh),
    )
    shape = lambda s, d: jax.ShapeDtypeStruct(
      s, d, sharding=sharded(("batch",) + (None,) * (len(s) - 1), s)
    )
  else:
    sharding = None if device is None else jax.sharding.SingleDeviceSharding(device)
    shape = functools.partial(jax.ShapeDtypeStruct, sharding=sharding)
    opt_state = jax.eval_shape(tx.init, abstract)
    params, opt_state = jax.tree.map(lambda x: shape(x.shape, x.dtype), (abstract, opt_state))
  data = {
    "tokens": shape((batch, t), jnp.int32),
    "mask": shape((batch, t), jnp.bool_),
    "completion_mask": shape((batch, completion), jnp.bool_),
    "old_logprobs": shape((batch, completion), jnp.float32),
    "advantages": shape((batch,), jnp.float32),
  }
  start = time.perf_counter()
  with mesh_scope(mesh):
    analysis = step.lower(*rl_step_args(step, params, opt_state, data)).compile().memory_analysis()
  seconds = time.perf_counter() - start
  temp = analysis.temp_size_in_bytes / GIB
  arguments = analysis.argument_size_in_bytes / GIB
  # Outputs alias the donated parameters and optimiser state: only the rest adds to the peak.
  extra_out = (analysis.output_size_in_bytes - analysis.alias_size_in_bytes) / GIB
  return dict(
    temp=temp, arguments=arguments, total=temp + arguments + max(extra_out, 0.0), compile_s=seconds
  )


def _row(name: str, batch: int, m: dict[str, float]) -> str:
  return (
    f"{name:38s}{batch:>6d}{m['temp']:>12.2f}{m['arguments']:>12.2f}{m['total']:>12.2f}"
    f"{m['compile_s']:>11.0f}s"
  )


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
  parser.add_argument(
    "--target",
    default="cpu",
    help="cpu (this machine's backend) or tpu:<topology>, e.g. tpu:v5p:2x2x1 "
    "(ahead-of-time for one chip of that TPU; needs libtpu, see above)",
  )
  parser.add_argument(
    "--lora-rank",
    type=int,
    default=0,
    help="also compile a LoRA run's step (rank-R adapters on every projection)",
  )
  parser.add_argument(
    "--lora-only", action="store_true", help="with --lora-rank: compile the LoRA step only"
  )
  parser.add_argument(
    "--chips",
    type=int,
    default=1,
    help="compile for this many chips of the topology, sharded over fsdp",
  )
  parser.add_argument(
    "--no-fixed",
    action="store_true",
    help="skip the 1 x (8 + 8) compile of the sequence-independent part",
  )
  parser.add_argument(
    "--search-gib",
    type=float,
    default=0.0,
    help="also find the largest minibatch of the new path within this budget",
  )
  add_record_flag(parser)
  args = parser.parse_args()
  devices = compile_devices(args.target, args.chips)
  device = devices if devices is None or len(devices) > 1 else devices[0]
  shapes = dict(prompt=args.prompt, completion=args.completion, dtype=args.dtype, device=device)
  new = dict(
    remat=args.remat,
    attention=args.attention,
    logprob_chunk=args.logprob_chunk,
    mlp_chunk=args.mlp_chunk,
  )
  old = dict(remat=args.remat, attention="dense", logprob_chunk=0, mlp_chunk=0)

  backend = (
    jax.default_backend()
    if devices is None
    else f"{args.target} ({len(devices)} {devices[0].device_kind} chip(s), figures per chip)"
  )
  print(
    f"{args.preset}, {args.dtype}, remat={args.remat}, {args.prompt} prompt + "
    f"{args.completion} completion tokens, compiled for {backend}; GiB"
  )
  print(f"{'path':38s}{'batch':>6s}{'temp':>12s}{'arguments':>12s}{'total':>12s}{'compile':>12s}")
  runs = [] if args.lora_only else [("new: chunked attention/log-probs/MLP", new)]
  if not args.no_baseline:
    runs.append(("old: dense scores + full logits", old))
  results = {}
  for name, execution in runs:
    results[name] = step_memory(args.preset, args.batch, **shapes, **execution)
    print(_row(name, args.batch, results[name]), flush=True)
  if args.lora_rank:
    lora = step_memory(args.preset, args.batch, **shapes, **new, lora_rank=args.lora_rank)
    print(_row(f"new, LoRA rank {args.lora_rank}", args.batch, lora), flush=True)
  if args.no_fixed:
    return
  # The part that does not grow with the sequence (weights' gradients, optimiser update,
  # backend copies of them): the same step on 1 x (8 + 8) tokens.
  fixed = step_memory(args.preset, 1, 8, 8, dtype=args.dtype, device=device, **new)
  print(_row("either: 1 x (8 + 8) tokens", 1, fixed), flush=True)
  for name, m in results.items():
    print(
      f"{name.split(':')[0]}: sequence-dependent temporaries {m['temp'] - fixed['temp']:.2f} GiB"
    )
  if len(results) == 2:
    (_, a), (_, b) = results.items()
    print(
      f"temporaries: new / old = {a['temp'] / b['temp']:.3f}; sequence-dependent part: "
      f"{(b['temp'] - fixed['temp']) / (a['temp'] - fixed['temp']):.1f}x less"
    )
  if args.search_gib:

    def measure(batch):
      m = (
        results[runs[0][0]]
        if batch == args.batch
        else step_memory(args.preset, batch, **shapes, **new)
      )
      print(_row("new (search)", batch, m), flush=True)
      return m

    best, _ = largest_batch(measure, args.search_gib, args.batch)
    print(
      f"largest minibatch within {args.search_gib:g} GiB per device (arguments + "
      f"temporaries): {best} x ({args.prompt} + {args.completion})"
    )


if __name__ == "__main__":
  main()
