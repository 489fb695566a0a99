"""SFT baseline: buggy program -> reference fix demonstrations, loss on the answer only."""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np

from precisecoder.tasks import Task
from precisecoder.train import sequences, step as step_lib, tasksets
from precisecoder.train.policy import Policy
from precisecoder.train.run import Run


def sft_batch(policy: Policy, tasks: Sequence[Task], *, include_tests: bool = True,
              max_len: int | None = None) -> dict[str, np.ndarray]:
  """Chat prompt of each task, then its reference answer and an end-of-sequence token."""
  prompt_ids = [policy.prompt_ids(t, include_tests=include_tests) for t in tasks]
  answers = [policy.tokenizer.encode(sequences.reference_answer(t), add_special_tokens=False)
             + [policy.eos_ids[0]] for t in tasks]
  return sequences.sequence_batch(prompt_ids, answers, policy.pad_id, max_len=max_len)


def train(cfg: ml_collections.ConfigDict, workdir: str) -> int:
  total = cfg.train.steps
  with Run(cfg, workdir, total_steps=total) as run:
    step_fn = step_lib.make_sft_step(run.graphdef, run.tx)
    demos = [t for t in tasksets.train_tasks(cfg) if t.is_buggy]
    iterator = tasksets.task_iterator(demos, cfg.sft.batch_size, cfg.seed)
    progress = run.begin(iterator)
    while run.steps_left():
      t0 = time.perf_counter()
      batch_tasks = tasksets.as_tasks(next(iterator), f"sft batch {run.step + 1}")
      run.step += 1
      batch = sft_batch(run.policy, batch_tasks, include_tests=cfg.data.include_tests_in_prompt,
                        max_len=cfg.sft.max_len)
      run.params, run.opt_state, m = step_fn(run.params, run.opt_state,
                                             step_lib.to_device(batch))
      m = {f"train/{k}": float(v) for k, v in jax.device_get(m).items()}
      if run.end_step(m, iterator.get_state(), t0, progress, f"loss={m['train/loss']:.4f}"):
        return 0
    run.end(iterator.get_state())
  return 0
