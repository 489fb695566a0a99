"""SFT: buggy program -> answer demonstrations, loss on the answer only.

A task's answers are its reference fix, or, for the small policy's base, the targets its SFT
mixture drew (`task.extra["sft_targets"]`: data/sft_mixture.py, train/base_model.py), trained
as consecutive rows that share the task's prompt (computed once per task on one device).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np
from jax.sharding import Mesh

from precisecoder import multihost
from precisecoder.tasks import Task
from precisecoder.model.sharding import mesh_scope
from precisecoder.train import sequences, step as step_lib, tasksets
from precisecoder.train.policy import Policy
from precisecoder.train.run import Run


def answers(task: Task) -> list[str]:
  """The programs a task is trained to answer: its drawn SFT targets, else its reference."""
  return list(task.extra.get("sft_targets") or [task.gt_solution])


def sft_batch(policy: Policy, tasks: Sequence[Task], *, include_tests: bool = True,
              max_len: int | None = None, power_of_two: bool = False) -> dict[str, np.ndarray]:
  """Chat prompt of each task, then each of its answers and an end-of-sequence token; the
  rows of one task are consecutive and share its (identically padded) prompt."""
  prompt_ids, answer_ids = [], []
  for task in tasks:
    ids = policy.prompt_ids(task, include_tests=include_tests)
    for program in answers(task):
      prompt_ids.append(ids)
      answer_ids.append(policy.tokenizer.encode(sequences.answer_text(program),
                                                add_special_tokens=False)
                        + [policy.eos_ids[0]])
  return sequences.sequence_batch(prompt_ids, answer_ids, policy.pad_id, max_len=max_len,
                                 power_of_two=power_of_two)


def length_units(tasks: Sequence[Task], batch_size: int, seed: int) -> list[list[Task]]:
  """The tasks cut into batches of similar answer length (shuffled within a length, by
  `seed`): a batch of short answers is not padded to a long one, and padded lengths take few
  values (few compilations). The iterator then shuffles whole batches."""
  rng = np.random.default_rng(seed)
  order = sorted(range(len(tasks)), key=lambda i: (max(map(len, answers(tasks[i]))) // 256,
                                                   rng.random()))
  return [[tasks[i] for i in order[start:start + batch_size]]
          for start in range(0, len(order) - batch_size + 1, batch_size)]


def fill_devices(batch: dict[str, np.ndarray], mesh: Mesh | None) -> dict[str, np.ndarray]:
  """This host's rows repeated, with no answer tokens, until they fill its devices: a mesh
  shards rows over whole devices, and a row without answer tokens adds nothing to the loss."""
  multiple = multihost.rows_per_host_multiple(mesh) if mesh is not None else 1
  rows = len(batch["tokens"])
  if rows % multiple == 0:
    return batch
  take = np.arange(rows + (-rows % multiple)) % rows
  filled = {k: v[take] for k, v in batch.items()}
  filled["completion_mask"][rows:] = False
  return filled


def train(cfg: ml_collections.ConfigDict, workdir: str) -> int:
  """Runs (or resumes) SFT in `workdir` (`cfg` validated: config.validate). On several hosts
  each takes its part of every global batch of `sft.batch_size` demonstrations."""
  with Run(cfg, workdir, total_steps=cfg.train.steps) as run:
    demos = [t for t in tasksets.train_tasks(cfg) if t.is_buggy]
    per_task = {len(answers(t)) for t in demos}
    if len(per_task) > 1:
      raise ValueError(f"SFT tasks carry different numbers of answers ({sorted(per_task)}); "
                       "every task needs the same number")
    # Each task's prompt once for its answers; on a mesh rows are dealt to devices one by one.
    group = per_task.pop() if demos and run.mesh is None else 1
    step_fn = step_lib.make_sft_step(run.graphdef, run.tx, group)
    by_length = cfg.sft.get("group_by_length", False)
    if by_length:  # whole batches of similar length, shuffled as units (one host)
      iterator = tasksets.task_iterator(length_units(demos, cfg.sft.batch_size, cfg.seed), 1,
                                        cfg.seed)
    else:
      iterator = tasksets.task_iterator(demos, cfg.sft.batch_size, cfg.seed)
    step, params, opt_state = run.begin(iterator)
    while run.steps_left(step):
      t0 = time.perf_counter()
      item = next(iterator)
      batch_tasks = tasksets.as_tasks(item[0] if by_length else item, f"sft batch {step + 1}")
      step += 1
      batch = sft_batch(run.policy, batch_tasks, include_tests=cfg.data.include_tests_in_prompt,
                        max_len=cfg.sft.max_len, power_of_two=by_length)
      batch = fill_devices(batch, run.mesh)
      with mesh_scope(run.mesh):
        params, opt_state, m = step_fn(params, opt_state, step_lib.to_device(batch, run.mesh))
      m = {f"train/{k}": float(v) for k, v in jax.device_get(m).items()}
      if run.end_step(step, params, opt_state, m, iterator.get_state(), t0,
                      f"loss={m['train/loss']:.4f}"):
        return 0
    run.end(step, params, opt_state, iterator.get_state())
  return 0
