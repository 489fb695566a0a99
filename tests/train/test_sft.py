"""SFT on a handful of demonstrations drives their loss toward zero (tiny random model)."""

import jax
import ml_collections
import numpy as np
from flax import nnx

from precisecoder import tasks as tasks_lib
from precisecoder.model import Decoder, architectures
from precisecoder.train import sequences, sft, step as step_lib
from precisecoder.train.policy import ByteTokenizer, Policy


def _task(i: int) -> tasks_lib.Task:
  fixed = f"def f(x):\n    return x + {i}"
  buggy = f"def f(x):\n    return x - {i}"
  return tasks_lib.Task(
    task_id=f"t{i}",
    buggy_code=buggy,
    gt_solution=fixed,
    gt_diff=tasks_lib.derive_gt_diff(buggy, fixed),
    tests={"kind": "call", "entry_point": "f", "cases": [{"args": [1], "expected": 1 + i}]},
  )


def test_sft_overfits_a_handful_of_examples():
  config = architectures.get("tiny", num_layers=1)
  policy = Policy(
    model=Decoder(config, rngs=nnx.Rngs(0)),
    tokenizer=ByteTokenizer(),
    config=config,
    eos_ids=[1],
    pad_id=0,
  )
  batch = sft.sft_batch(policy, [_task(i) for i in range(4)], include_tests=False)
  # Only the answer is supervised: prompt positions carry no loss.
  assert batch["completion_mask"].sum() == sum(
    len(ByteTokenizer().encode(f"```python\ndef f(x):\n    return x + {i}\n```")) + 1
    for i in range(4)
  )
  optim = ml_collections.ConfigDict(
    dict(learning_rate=1e-2, warmup_steps=0, weight_decay=0.0, b1=0.9, b2=0.99, grad_clip=1.0)
  )
  graphdef, params = nnx.split(policy.model)
  tx = step_lib.make_optimizer(optim)
  opt_state = tx.init(params)
  step_fn = step_lib.make_sft_step(graphdef, tx)
  # Train on short prompts (the buggy code alone) to keep the test quick on 2 cores.
  tok = ByteTokenizer()
  demos = [_task(i) for i in range(4)]
  short = sequences.sequence_batch(
    [tok.encode(t.buggy_code) for t in demos],
    [tok.encode(sequences.reference_answer(t)) + [1] for t in demos],
    pad_id=0,
  )
  device_batch = step_lib.to_device(short)
  losses = []
  for _ in range(60):
    params, opt_state, m = step_fn(params, opt_state, device_batch)
    losses.append(float(jax.device_get(m["loss"])))
  print(f"SFT loss {losses[0]:.3f} -> {losses[-1]:.4f}")
  assert losses[0] > 4.0  # ~log(1024) at random init
  assert losses[-1] < 0.1
  assert np.all(np.isfinite(losses))
