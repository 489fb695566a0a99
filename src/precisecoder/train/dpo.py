"""DPO baseline on the policy's own samples, judged by the reward.

Each step samples `dpo.samples_per_task` completions per task and scores them. Chosen: the
passing sample with the highest precision (a precise fix), else the reference fix. Rejected:
a failing sample, else the passing sample that edits the most lines (an over-edit). Tasks
where the two cannot differ are skipped. The reference policy is the starting checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np
from absl import logging

from precisecoder.tasks import Task
from precisecoder.train import rollout as rollout_lib, sequences, step as step_lib, tasksets
from precisecoder.train.run import Run, sample_seed


def choose_pairs(terms: dict[str, np.ndarray], group_size: int
                 ) -> list[tuple[int, int | None, int]]:
  """(group, chosen row or None for the reference fix, rejected row) per usable group."""
  pairs = []
  unit = terms["unit"].reshape(-1, group_size)
  precision = terms["precision"].reshape(-1, group_size)
  lines = terms["edit_lines"].reshape(-1, group_size)
  for g in range(unit.shape[0]):
    passing = np.flatnonzero(unit[g] > 0.5)
    failing = np.flatnonzero(unit[g] <= 0.5)
    chosen = int(passing[np.argmax(precision[g, passing])]) if passing.size else None
    if failing.size:
      rejected = int(failing[np.argmax(lines[g, failing])])
    elif passing.size > 1 and lines[g, passing].max() > lines[g, chosen]:
      rejected = int(passing[np.argmax(lines[g, passing])])
    else:
      continue
    base = g * group_size
    pairs.append((g, None if chosen is None else base + chosen, base + rejected))
  return pairs


def train(cfg: ml_collections.ConfigDict, workdir: str) -> int:
  total = cfg.train.steps
  k = cfg.dpo.samples_per_task
  with Run(cfg, workdir, total_steps=total, keep_initial=True) as run:
    step_fn = step_lib.make_dpo_step(run.graphdef, run.tx, cfg.dpo.beta)
    logprob_fn = step_lib.make_logprob_fn(run.graphdef)
    iterator = tasksets.task_iterator(tasksets.train_tasks(cfg), cfg.dpo.batch_size, cfg.seed)
    progress = run.begin(iterator)
    while run.steps_left():
      t0 = time.perf_counter()
      batch_tasks: Sequence[Task] = tasksets.as_tasks(next(iterator), f"dpo batch {run.step + 1}")
      run.step += 1
      policy = run.sync_policy()
      rollout = rollout_lib.sample_rollout(
          policy, list(batch_tasks), num_samples=k, max_new_tokens=cfg.rl.max_new_tokens,
          temperature=cfg.rl.temperature, seed=sample_seed(cfg.seed, run.step),
          include_tests=cfg.data.include_tests_in_prompt, prompt_bucket=cfg.rl.prompt_bucket,
          mesh=run.mesh)
      terms = run.scorer.score(rollout.tasks, rollout.programs)
      pairs = choose_pairs(terms, k)
      record = {"pairs": len(pairs), "reward/unit": float(terms["unit"].mean()),
                "reward/precision": float(terms["precision"].mean())}
      if pairs:
        prompt_ids = [rollout.prompt_ids[r][rollout.prompt_mask[r]].tolist() for _, _, r in pairs]
        eos = [policy.eos_ids[0]]

        def answer(row: int | None, group: int) -> list[int]:
          if row is None:
            return policy.tokenizer.encode(sequences.reference_answer(batch_tasks[group]),
                                           add_special_tokens=False) + eos
          return rollout.tokens[row, :rollout.lengths[row]].tolist()

        chosen = [answer(c, g) for g, c, _ in pairs]
        rejected = [answer(r, g) for g, _, r in pairs]
        batch = sequences.sequence_batch(prompt_ids * 2, chosen + rejected, policy.pad_id,
                                         max_len=cfg.dpo.max_len)
        ref = logprob_fn(run.initial_params, batch["tokens"], batch["mask"],
                         batch["completion_mask"])
        batch["ref_seq_logprobs"] = np.asarray(ref).sum(axis=-1)
        run.params, run.opt_state, m = step_fn(run.params, run.opt_state,
                                               step_lib.to_device(batch))
        record.update({f"train/{key}": float(v) for key, v in jax.device_get(m).items()})
      else:
        logging.info("step %d: no preference pairs in this batch", run.step)
      if run.end_step(record, iterator.get_state(), t0, progress, f"pairs={len(pairs)}"):
        return 0
    run.end(iterator.get_state())
  return 0
