"""SFT: buggy program -> answer demonstrations, loss on the answer only.

A task's answers are its reference fix, or, for the small policy's base, the targets its SFT
mixture drew (`task.extra["sft_targets"]`: data/sft_mixture.py, experiments/base_model.py), trained
as consecutive rows that share the task's prompt (computed once per task on one device).
A step may take only some of each task's answers (`sft.answers_per_task`), the loss may add the
prompt's tokens (`sft.prompt_loss_weight`), and a fresh run may first warm up on copying
random-token spans (`sft.copy_warmup_steps`: train/copy_warmup.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np
from absl import logging
from flax import nnx
from jax.sharding import Mesh

from precisecoder import multihost
from precisecoder.model import make_mesh, run_checkpoints
from precisecoder.model.sharding import mesh_scope
from precisecoder.tasks import Task
from precisecoder.train import greedy_eval, metrics, policy as policy_lib, scoring, sequences
from precisecoder.train import step as step_lib, tasksets
from precisecoder.train.policy import Policy
from precisecoder.train.run import Run, due, eval_due, steps_left


def answers(task: Task) -> list[str]:
  """The programs a task is trained to answer: its drawn SFT targets, else its reference."""
  return list(task.extra.get("sft_targets") or [task.gt_solution])


def sft_batch(
  policy: Policy,
  tasks: Sequence[Task],
  *,
  include_tests: bool = True,
  max_len: int | None = None,
  multiple: int = 32,
  power_of_two: bool = False,
) -> dict[str, np.ndarray]:
  """Chat prompt of each task, then each of its answers and an end-of-sequence token; the
  rows of one task are consecutive and share its (identically padded) prompt. Padding:
  sequences.sequence_batch."""
  prompt_ids, answer_ids = [], []
  for task in tasks:
    ids = policy.prompt_ids(task, include_tests=include_tests)
    for program in answers(task):
      prompt_ids.append(ids)
      answer_ids.append(
        policy.tokenizer.encode(sequences.answer_text(program), add_special_tokens=False)
        + [policy.eos_ids[0]]
      )
  return sequences.sequence_batch(
    prompt_ids,
    answer_ids,
    policy.pad_id,
    multiple=multiple,
    max_len=max_len,
    power_of_two=power_of_two,
  )


def some_answers(tasks: Sequence[Task], k: int, rng: np.random.Generator) -> list[Task]:
  """Each task carrying `k` of its answers, drawn without replacement (in their order)."""
  out = []
  for task in tasks:
    programs = answers(task)
    keep = sorted(rng.choice(len(programs), size=k, replace=False))
    out.append(
      dataclasses.replace(task, extra={**task.extra, "sft_targets": [programs[i] for i in keep]})
    )
  return out


def _copy_warmup(cfg, run: Run, graphdef, params, tx, policy: Policy):
  """`params` after the copy warm-up of `cfg.sft` (train/copy_warmup.py), logged to the
  workdir's copy_warmup.jsonl, and whether a preemption stopped it."""
  if jax.device_count() > 1:
    raise ValueError("config.sft.copy_warmup_steps runs on one device")
  from precisecoder.train import copy_warmup  # pylint: disable=import-outside-toplevel

  warmup_lr = float(cfg.sft.get("copy_warmup_learning_rate", 0.0))
  if warmup_lr > 0:
    optim = ml_collections.ConfigDict({**cfg.optim.to_dict(), "learning_rate": warmup_lr})
    tx = step_lib.make_optimizer(optim)
  log_path = run.workdir / "copy_warmup.jsonl"
  log_path.unlink(missing_ok=True)  # a rerun from step 0 warms up again
  params, out = copy_warmup.warm_up(
    graphdef,
    params,
    tx,
    token_ids=copy_warmup.token_ids(policy.tokenizer, [policy.pad_id, *policy.eos_ids]),
    first=int(cfg.sft.get("copy_warmup_vocab", 0)),
    widen=int(cfg.sft.get("copy_warmup_widen", 0)),
    own_softmax=bool(cfg.sft.get("copy_warmup_own_softmax", False)),
    pad_id=policy.pad_id,
    steps=int(cfg.sft.copy_warmup_steps),
    rows=int(cfg.sft.get("copy_warmup_rows", 64)),
    length=int(cfg.sft.get("copy_warmup_length", 64)),
    seed=int(cfg.seed),
    log_path=log_path if run.primary else None,
    stop=lambda: run.preempted(0),
    target_accuracy=float(cfg.sft.get("copy_warmup_target_accuracy", 0.0)),
  )
  if out["step"] and not out["reached"] and cfg.sft.get("copy_warmup_target_accuracy", 0.0):
    logging.warning(
      "copy warm-up: copy accuracy %.1f%% after its %d steps, short of the target",
      100 * out["accuracy"],
      int(out["step"]),
    )
  return params, bool(out["stopped"])


def length_units(
  tasks: Sequence[Task], batch_size: int, seed: int, bin_chars: int = 256
) -> list[list[Task]]:
  """The tasks cut into batches of similar answer length, in bins of `bin_chars` characters
  (shuffled within a bin, by `seed`): a batch of short answers is not padded to a long one,
  and padded lengths take few values (few compilations). The iterator then shuffles whole
  batches."""
  rng = np.random.default_rng(seed)
  order = sorted(
    range(len(tasks)),
    key=lambda i: (max(map(len, answers(tasks[i]))) // bin_chars, rng.random()),
  )
  return [
    [tasks[i] for i in order[start : start + batch_size]]
    for start in range(0, len(order) - batch_size + 1, batch_size)
  ]


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


def train(
  cfg: ml_collections.ConfigDict,
  workdir: str,
  *,
  checkpoint: str | None = None,
  seen: Sequence[Task] = (),
) -> int:
  """Runs (or resumes) SFT in `workdir` (`cfg` validated: config.validate). On several hosts
  each takes its part of every global batch of `sft.batch_size` demonstrations. `checkpoint`
  and `seen`: what `model.checkpoint="base"` resolved to (rl.train)."""
  with contextlib.ExitStack() as stack:
    # Set-up: the workdir, the policy and optimiser at the step to start from, the data and
    # the outputs.
    run = stack.enter_context(Run(cfg, workdir))
    mesh = make_mesh(cfg.model.mesh) if jax.device_count() > 1 else None
    policy = policy_lib.load_policy(cfg, mesh, checkpoint=checkpoint)
    graphdef, params = nnx.split(policy.model)
    policy = dataclasses.replace(policy, model=None)  # the weights live in the loop
    tx = step_lib.make_optimizer(cfg.optim, adapters_only=run.lora is not None)
    demos = [t for t in tasksets.train_tasks(cfg) if t.is_buggy]
    per_task = {len(answers(t)) for t in demos}
    if len(per_task) > 1:
      raise ValueError(
        f"SFT tasks carry different numbers of answers ({sorted(per_task)}); "
        "every task needs the same number"
      )
    drawn = per_task.pop() if demos else 1
    # A step may train on some of each task's answers (`sft.answers_per_task`, 0: all): more
    # distinct prompts for the same rows.
    per_step = int(cfg.sft.get("answers_per_task", 0)) or drawn
    if per_step > drawn:
      raise ValueError(
        f"config.sft.answers_per_task={per_step} but the SFT tasks carry {drawn} answers each"
      )
    # Each task's prompt once for its answers; on a mesh rows are dealt to devices one by one.
    group = per_step if mesh is None else 1
    step_fn = step_lib.make_sft_step(
      graphdef, tx, group, prompt_weight=float(cfg.sft.get("prompt_loss_weight", 0.0))
    )
    by_length = cfg.sft.get("group_by_length", False)
    # 0: grouped lengths padded to powers of two; else to multiples of that many tokens, and
    # grouped in batches of tasks sorted by answer length (less padding, more compilations).
    length_multiple = int(cfg.sft.get("length_multiple", 0))
    if by_length:  # whole batches of similar length, shuffled as units (one host)
      bins = 1 if length_multiple else 256
      iterator = tasksets.task_iterator(
        length_units(demos, cfg.sft.batch_size, cfg.seed, bins), 1, cfg.seed
      )
    else:
      iterator = tasksets.task_iterator(demos, cfg.sft.batch_size, cfg.seed)
    step, params, opt_state = run.restore(
      params, step_lib.init_optimizer(tx, params, mesh), iterator
    )
    writer = metrics.MetricsWriter(
      run.workdir,
      resume_step=step,
      enabled=run.primary,
      wandb=metrics.wandb_settings(cfg, run.workdir),
    )
    stack.callback(writer.close)
    evaluator = None
    if cfg.train.eval_every > 0:
      scorer = stack.enter_context(scoring.open_scorer(cfg.rl))
      evaluator = greedy_eval.Evaluator(
        cfg, scorer, mesh, workdir=run.workdir, writer=writer, primary=run.primary, seen=seen
      )
    progress = metrics.Progress(cfg.train.steps, step)
    model_meta = run_checkpoints.model_meta(
      policy.config,
      policy.source,
      lora=run.lora,
      seed=cfg.seed,
      base=policy.source if cfg.model.checkpoint else "",
    )

    def save_checkpoint(step: int, params, opt_state, preempted: bool) -> float:
      """Saves `step` when due, and always when preempted; the seconds it blocked."""
      if not (preempted or due(step, cfg.train.checkpoint_every, cfg.train.steps)):
        return 0.0
      return run.save(step, params, opt_state, iterator.get_state(), model_meta)

    def evaluate(step: int, params) -> None:
      """Greedy evaluation when due (run.eval_due)."""
      if evaluator is not None and eval_due(cfg.train, step):
        evaluator(step, dataclasses.replace(policy, model=nnx.merge(graphdef, params)))

    def write_metrics(step: int, values: dict, message: str) -> None:
      writer.write(step, values)
      progress.update(step, message)
      if run.primary:
        run.dir.sync()

    if step == 0 and cfg.sft.get("copy_warmup_steps", 0) > 0:  # a fresh run: warm up first
      params, stopped = _copy_warmup(cfg, run, graphdef, params, tx, policy)
      if stopped:  # nothing to save before step 1: a rerun warms up again
        logging.warning("preempted during the copy warm-up; exiting")
        return 0
      opt_state = step_lib.init_optimizer(tx, params, mesh)
    if step == 0:  # a fresh run: the policy it starts from
      evaluate(step, params)
    while steps_left(cfg, step):
      t0 = time.perf_counter()
      item = next(iterator)
      batch_tasks = tasksets.as_tasks(item[0] if by_length else item, f"sft batch {step + 1}")
      step += 1
      if per_step < drawn:
        batch_tasks = some_answers(batch_tasks, per_step, np.random.default_rng([cfg.seed, step]))
      batch = sft_batch(
        policy,
        batch_tasks,
        include_tests=cfg.data.include_tests_in_prompt,
        max_len=cfg.sft.max_len,
        multiple=length_multiple or 32,
        power_of_two=by_length and not length_multiple,
      )
      batch = fill_devices(batch, mesh)
      with mesh_scope(mesh):
        params, opt_state, m = step_fn(params, opt_state, step_lib.to_device(batch, mesh))
      m = {f"train/{k}": float(v) for k, v in jax.device_get(m).items()}
      preempted = run.preempted(step)  # a preempted run saves its step and stops
      saved = save_checkpoint(step, params, opt_state, preempted)
      write_metrics(
        step,
        {**m, "time/checkpoint": saved, "time/step": time.perf_counter() - t0},
        f"loss={m['train/loss']:.4f}",
      )
      if preempted:
        logging.warning("preempted: checkpoint of step %d saved; exiting", step)
        run.checkpointer.wait()
        return 0
      evaluate(step, params)
    run.end(step, params, opt_state, iterator.get_state(), model_meta)
  return 0
