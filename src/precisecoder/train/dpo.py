"""DPO baseline on the policy's own samples, judged by the reward.

Each step samples `dpo.samples_per_task` completions per task and scores them. Chosen: the
passing sample with the highest precision (a precise fix), else the reference fix. Rejected:
a failing sample, else the passing sample that edits the most lines (an over-edit). Tasks
where the two cannot differ are skipped. The reference policy is the starting checkpoint.

On several hosts each samples and scores its own tasks; hosts find different numbers of pairs,
so each pads its pairs to a count all agree on with pairs of weight 0 (the loss is the
weighted mean over the global batch: the one-host loss).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from precisecoder import multihost
from precisecoder.model import make_mesh, run_checkpoints
from precisecoder.model.sharding import mesh_scope
from precisecoder.tasks import Task
from precisecoder.train import greedy_eval, metrics, policy as policy_lib, rollout as rollout_lib
from precisecoder.train import scoring, sequences, step as step_lib, tasksets
from precisecoder.train.run import Run, due, eval_due, sample_seed, steps_left
from precisecoder.intmath import round_up


def choose_pairs(
  terms: dict[str, np.ndarray], group_size: int
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


def preference_batch(
  prompt_ids: Sequence[Sequence[int]],
  chosen: Sequence[Sequence[int]],
  rejected: Sequence[Sequence[int]],
  pad_id: int,
  *,
  pairs: int,
  weighted: int | None = None,
  max_len: int | None = None,
) -> dict[str, np.ndarray]:
  """`pairs` preference pairs, interleaved (row 2i chosen, 2i + 1 rejected): the given ones,
  then copies of them up to `pairs`. `pair_weights` is 1 for the first `weighted` (default:
  all given) and 0 for the rest. Collective on several hosts (sequences.sequence_batch)."""
  n = len(prompt_ids)
  weighted = n if weighted is None else weighted
  if not 0 < n <= pairs or not 0 <= weighted <= n:
    raise ValueError(f"{n} pairs ({weighted} weighted) cannot be padded to {pairs}")
  take = np.arange(pairs) % n
  rows = [seq for i in take for seq in (chosen[i], rejected[i])]
  batch = sequences.sequence_batch(
    [prompt_ids[i] for i in take for _ in range(2)], rows, pad_id, max_len=max_len
  )
  batch["pair_weights"] = (np.arange(pairs) < weighted).astype(np.float32)
  return batch


def _pairs_per_host(local: int, mesh) -> tuple[int, int]:
  """(all hosts' pairs, the padded count each host builds: the most any host has, rounded up
  so that its 2 rows a pair fill whole devices)."""
  counts = multihost.allgather_rows(np.array([local], np.int64))
  multiple = multihost.rows_per_host_multiple(mesh) if mesh is not None else 1
  step = multiple // math.gcd(2, multiple)
  return int(counts.sum()), round_up(int(counts.max()), step)


def train(
  cfg: ml_collections.ConfigDict,
  workdir: str,
  *,
  checkpoint: str | None = None,
  seen: Sequence[Task] = (),
) -> int:
  """Runs (or resumes) DPO in `workdir` (`cfg` validated: config.validate); each host samples
  and scores its part of every global batch of `dpo.batch_size` tasks. `checkpoint` and
  `seen`: what `model.checkpoint="base"` resolved to (rl.train)."""
  k = cfg.dpo.samples_per_task
  with contextlib.ExitStack() as stack:
    # Set-up: the workdir, the policy, its reference and the optimiser at the step to start
    # from, the data, the scorer and the outputs.
    run = stack.enter_context(Run(cfg, workdir))
    mesh = make_mesh(cfg.model.mesh) if jax.device_count() > 1 else None
    policy = policy_lib.load_policy(cfg, mesh, checkpoint=checkpoint)
    graphdef, params = nnx.split(policy.model)
    policy = dataclasses.replace(policy, model=None)  # the weights live in the loop
    reference_params = jax.tree.map(lambda x: x.copy(), params)
    tx = step_lib.make_optimizer(cfg.optim, adapters_only=run.lora is not None)
    iterator = tasksets.task_iterator(tasksets.train_tasks(cfg), cfg.dpo.batch_size, cfg.seed)
    step, params, opt_state = run.restore(
      params, step_lib.init_optimizer(tx, params, mesh), iterator
    )
    step_fn = step_lib.make_dpo_step(graphdef, tx, cfg.dpo.beta)
    logprob_fn = step_lib.make_logprob_fn(graphdef)
    scorer = stack.enter_context(scoring.open_scorer(cfg.rl))
    writer = metrics.MetricsWriter(
      run.workdir,
      resume_step=step,
      enabled=run.primary,
      wandb=metrics.wandb_settings(cfg, run.workdir),
    )
    stack.callback(writer.close)
    evaluator = (
      greedy_eval.Evaluator(
        cfg, scorer, mesh, workdir=run.workdir, writer=writer, primary=run.primary, seen=seen
      )
      if cfg.train.eval_every > 0
      else None
    )
    progress = metrics.Progress(cfg.train.steps, step)
    model_meta = run_checkpoints.model_meta(
      policy.config,
      policy.source,
      lora=run.lora,
      seed=cfg.seed,
      base=policy.source if cfg.model.checkpoint else "",
    )

    def policy_at(params) -> policy_lib.Policy:
      return dataclasses.replace(policy, model=nnx.merge(graphdef, params))

    def save_checkpoint(step: int, params, opt_state, preempted: bool) -> float:
      """Saves `step` when due, and always when preempted; the seconds it blocked."""
      if not (preempted or due(step, cfg.train.checkpoint_every, cfg.train.steps)):
        return 0.0
      return run.save(step, params, opt_state, iterator.get_state(), model_meta)

    def evaluate(step: int, params) -> None:
      """Greedy evaluation when due (run.eval_due)."""
      if evaluator is not None and eval_due(cfg.train, step):
        evaluator(step, policy_at(params))

    def write_metrics(step: int, values: dict, message: str) -> None:
      writer.write(step, values)
      progress.update(step, message)
      if run.primary:
        run.dir.sync()

    if step == 0:  # a fresh run: the policy it starts from
      evaluate(step, params)
    while steps_left(cfg, step):
      t0 = time.perf_counter()
      batch_tasks: Sequence[Task] = tasksets.as_tasks(next(iterator), f"dpo batch {step + 1}")
      step += 1
      current = policy_at(params)
      rollout = rollout_lib.sample_rollout(
        current,
        list(batch_tasks),
        num_samples=k,
        max_new_tokens=cfg.rl.max_new_tokens,
        temperature=cfg.rl.temperature,
        seed=sample_seed(cfg.seed, step),
        include_tests=cfg.data.include_tests_in_prompt,
        prompt_bucket=cfg.rl.prompt_bucket,
        mesh=mesh,
      )
      terms = scorer.score(rollout.tasks, rollout.programs)
      pairs = choose_pairs(terms, k)
      every = multihost.allgather_rows(terms)
      total_pairs, padded = _pairs_per_host(len(pairs), mesh)
      values = {
        "pairs": total_pairs,
        "reward/unit": float(every["unit"].mean()),
        "reward/precision": float(every["precision"].mean()),
      }
      if total_pairs:  # every host joins the step, so one without pairs of its own pads
        # with the reference fix both ways, weight 0
        usable = pairs or [(0, None, None)]
        prompt_ids = [
          rollout.prompt_ids[g * k][rollout.prompt_mask[g * k]].tolist() for g, _, _ in usable
        ]
        eos = [current.eos_ids[0]]

        def answer(row: int | None, group: int) -> list[int]:
          if row is None:
            return (
              current.tokenizer.encode(
                sequences.reference_answer(batch_tasks[group]), add_special_tokens=False
              )
              + eos
            )
          return rollout.tokens[row, : rollout.lengths[row]].tolist()

        chosen = [answer(c, g) for g, c, _ in usable]
        rejected = [answer(r, g) for g, _, r in usable]
        batch = preference_batch(
          prompt_ids,
          chosen,
          rejected,
          current.pad_id,
          pairs=padded,
          weighted=len(pairs),
          max_len=cfg.dpo.max_len,
        )
        with mesh_scope(mesh):
          device_batch = step_lib.to_device(batch, mesh)
          ref = logprob_fn(
            reference_params,
            device_batch["tokens"],
            device_batch["mask"],
            device_batch["completion_mask"],
          )
          device_batch["ref_seq_logprobs"] = ref.sum(axis=-1)
          params, opt_state, m = step_fn(params, opt_state, device_batch)
        values.update({f"train/{key}": float(v) for key, v in jax.device_get(m).items()})
      else:
        logging.info("step %d: no preference pairs in this batch", step)
      preempted = run.preempted(step)  # a preempted run saves its step and stops
      saved = save_checkpoint(step, params, opt_state, preempted)
      write_metrics(
        step,
        {**values, "time/checkpoint": saved, "time/step": time.perf_counter() - t0},
        f"pairs={len(pairs)}",
      )
      if preempted:
        logging.warning("preempted: checkpoint of step %d saved; exiting", step)
        run.checkpointer.wait()
        return 0
      evaluate(step, params)
    run.end(step, params, opt_state, iterator.get_state(), model_meta)
  return 0
