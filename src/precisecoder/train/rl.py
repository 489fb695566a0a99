"""The RL loop (GRPO / GDPO): rollout -> reward -> advantages -> μ passes -> metrics.

One step:
  1. the next batch of tasks from the checkpointed iterator;
  2. sample G completions per task in `rollout_chunks` chunks; each finished chunk is scored
     by the reward pool in a background thread while the next chunk samples, so only the
     last chunk's scoring is exposed (reported as `time/reward_exposed`). With `rl.turns` > 1
     a sample is an episode (episodes.py): answers with feedback on the visible tests between
     them; its reward is its last program's, on all tests, and the loss sees its answers only;
  3. advantages from the reward recipe (reward_recipes.py);
  4. μ passes of shuffled minibatches through the clipped policy-gradient step (`learn`, on
     step.py's `make_rl_step` and losses.py's `policy_loss`): new parameters and optimiser
     state;
  5. metrics, periodic evaluation, asynchronous checkpoints; a preemption (SIGTERM, agreed
     on by every host) saves and exits 0.

With `rl.max_staleness` = k >= 1 a step starts by sampling the rollouts of step t + k with its
own starting parameters, and learns from those sampled k steps earlier, whose scoring ran while
the steps between learned (train/inflight.py: the schedule, and the checkpoint that holds the
rollouts in flight). k = 0 samples this step's own: the synchronous loop.

With `rl.sampler_devices` = n >= 1 (train/placement.py) the sampler has devices of its own:
the launched rollouts sample there on the sampler's thread while this one learns, from a copy
of the step's starting parameters that each update refreshes device to device (LoRA: its
adapters alone). The schedule (which parameters sample which step) is the shared placement's.
On several hosts each samples its own tasks on its own sampler mesh, their place in the
global batch agreed on this thread first (`agree_chunks`).

A step whose advantages are all zero (no group had reward variance) and whose loss has no KL
term has a gradient of exactly zero. It skips step 4 altogether: no forward or backward pass
and no optimiser update. Feeding Adam the zero gradient instead would still move the weights
(its momentum, and weight decay) in a direction this step's samples did not ask for, and would
advance its bias correction; skipped, the optimiser state is as if the step had not happened
(its step count, and a warm-up schedule with it, counts updates, not trainer steps). The step
is logged with `skipped_update: 1` and `train/grad_norm: 0`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import time
from collections.abc import Sequence
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import logging
from flax import nnx
from jax.sharding import Mesh

from precisecoder import episodes, multihost, reward_recipes, sampling
from precisecoder.model import lora as lora_lib, run_checkpoints
from precisecoder.model.sharding import mesh_scope
from precisecoder.rewards import RewardScorer
from precisecoder.tasks import Task
from precisecoder.train import greedy_eval, metrics, policy as policy_lib, rollout as rollout_lib
from precisecoder.train import dynamic_sampling, inflight, overlong, placement, scoring
from precisecoder.train import step as step_lib, tasksets
from precisecoder.train.run import Run, due, eval_due, sample_seed, steps_left

_TERMS_LOGGED = ("unit", "precision", "recall", "f1", "edit_lines", "noop")


def _score_timed(
  scorer, part: rollout_lib.Rollout, turns: int
) -> tuple[dict[str, np.ndarray], float]:
  t0 = time.perf_counter()
  terms = scorer.score(part.tasks, part.programs)
  if part.turns is not None:
    terms.update(_episode_rows(scorer, part, turns, terms))
  return terms, time.perf_counter() - t0


def _episode_rows(
  scorer, part: rollout_lib.Rollout, turns: int, final: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
  """Per episode: turns taken, feedback tokens, why it stopped, and the unit pass and edited
  lines of its program after each turn (the last turn's are the reward's terms)."""
  scored = [
    scorer.score(part.tasks, programs) for programs in episodes.turn_programs(part.turns, turns - 1)
  ] + [final]
  return {
    "agent_turns": np.array([len(t) for t in part.turns], np.float32),
    "agent_feedback_tokens": np.array(
      [sum(turn.feedback_tokens for turn in t) for t in part.turns], np.float32
    ),
    "agent_stop": np.array([episodes.STOP_REASONS.index(x) for x in part.stops], np.int32),
    "agent_unit": np.stack([s["unit"] for s in scored], axis=1),
    "agent_edit_lines": np.stack([s["edit_lines"] for s in scored], axis=1),
  }


def _agent_metrics(every: dict[str, np.ndarray]) -> dict[str, float]:
  """Turns used, pass and edited lines by turn, feedback tokens and stop reasons."""
  if "agent_turns" not in every:
    return {}
  out = {
    "agent/turns": float(every["agent_turns"].mean()),
    "agent/feedback_tokens": float(every["agent_feedback_tokens"].mean()),
  }
  for k in range(every["agent_unit"].shape[1]):
    out[f"agent/pass_turn{k + 1}"] = float(every["agent_unit"][:, k].mean())
    out[f"agent/edit_lines_turn{k + 1}"] = float(every["agent_edit_lines"][:, k].mean())
  for i, reason in enumerate(episodes.STOP_REASONS):
    out[f"agent/stop_{reason}"] = float(np.mean(every["agent_stop"] == i))
  return out


def _concat_terms(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


class Scoring:
  """A step's rollouts, sampled (in chunks) and being scored in the reward thread."""

  def __init__(self, parts: list[rollout_lib.Rollout], futures: list, t_sample: float, pad_id):
    self.parts, self.futures, self.t_sample, self.pad_id = parts, futures, t_sample, pad_id
    self.collected = None

  def result(self) -> tuple[rollout_lib.Rollout, dict[str, np.ndarray], dict[str, float]]:
    """(rollout, terms, timings) once every chunk is scored; `time/reward_exposed` is how
    long the first call waited for that."""
    if self.collected is None:
      t0 = time.perf_counter()
      scored = [f.result() for f in self.futures]
      exposed = time.perf_counter() - t0
      timing = {
        "time/sample": self.t_sample,
        "time/reward": sum(s for _, s in scored),
        "time/reward_exposed": exposed,
      }
      rollout = rollout_lib.concat_rollouts(self.parts, self.pad_id)
      self.collected = rollout, _concat_terms([t for t, _ in scored]), timing
    return self.collected


def rollout_chunks(rl: ml_collections.ConfigDict, tasks: int) -> list[np.ndarray]:
  """The tasks' indices of each of a step's `rl.rollout_chunks` chunks."""
  return np.array_split(np.arange(tasks), max(1, min(rl.rollout_chunks, tasks)))


def agree_chunks(
  rl: ml_collections.ConfigDict, policy: policy_lib.Policy, batch_tasks: list, include_tests: bool
) -> list[sampling.HostRows]:
  """Each chunk's place in the global batch (first row, padded width), agreed by every host
  (one collective: on the loop's thread, before its sampling is handed to the sampler's)."""
  agent = rollout_lib.agent_config(rl)
  return sampling.agree_rows(
    [
      rollout_lib.prompt_lengths(
        policy, [batch_tasks[j] for j in index], include_tests=include_tests, agent=agent
      )
      for index in rollout_chunks(rl, len(batch_tasks))
    ]
  )


def sample_and_score(
  rl: ml_collections.ConfigDict,
  policy: policy_lib.Policy,
  batch_tasks: list,
  scorer: RewardScorer,
  executor: concurrent.futures.Executor,
  *,
  seed: int,
  step: int,
  include_tests: bool,
  mesh: Mesh | None,
  part_offset: int = 0,
  host_rows: Sequence[sampling.HostRows] | None = None,
) -> Scoring:
  """Samples one step's rollouts (from `policy`, seeded by the run's `seed` and `step`, its
  chunks from `part_offset` on), handing each finished chunk to `executor` to be scored
  while the next one samples. `host_rows`: each chunk's place in the global batch when this
  host samples on a mesh of its own (`agree_chunks`)."""
  agent = rollout_lib.agent_config(rl)
  chunks = rollout_chunks(rl, len(batch_tasks))
  parts, futures = [], []
  t_sample = 0.0
  for i, index in enumerate(chunks):
    t0 = time.perf_counter()
    part = rollout_lib.sample_rollout(
      policy,
      [batch_tasks[j] for j in index],
      num_samples=rl.group_size,
      max_new_tokens=rl.max_new_tokens,
      temperature=rl.temperature,
      top_p=rl.top_p,
      seed=sample_seed(seed, step, part_offset + i),
      include_tests=include_tests,
      prompt_bucket=rl.prompt_bucket,
      mesh=mesh,
      agent=agent,
      pool=scorer if agent is not None else None,
      host_rows=host_rows[i] if host_rows is not None else None,
    )
    t_sample += time.perf_counter() - t0
    parts.append(part)
    futures.append(executor.submit(_score_timed, scorer, part, rl.turns))
  return Scoring(parts, futures, t_sample, policy.pad_id)


def mean_metrics(items: list[dict[str, Any]]) -> dict[str, float]:
  """Each metric's mean over the minibatches' (none: {})."""
  if not items:
    return {}
  return {k: float(np.mean([float(x[k]) for x in items])) for k in items[0]}


def minibatch_order(rows: int, group: int, seed: list[int]) -> np.ndarray:
  """A shuffled order of `rows` rows that keeps consecutive groups of `group` rows whole."""
  groups = np.random.default_rng(seed).permutation(rows // group)
  return (groups[:, None] * group + np.arange(group)).ravel().astype(np.int32)


def learn(
  rl: ml_collections.ConfigDict,
  step_fn,
  params: Any,
  opt_state: Any,
  batch: dict[str, np.ndarray],
  *,
  seed: int,
  step: int,
  mesh: Mesh | None,
  ref_fn=None,
  reference_params: Any = None,
) -> tuple[Any, Any, dict[str, float]]:
  """(params, opt_state, mean metrics) after μ passes over shuffled minibatches of `batch`
  (their order seeded by the run's `seed`, the `step` and the pass), one optimiser update per
  minibatch (`step_fn` donates the `params` and `opt_state` it is given: use the returned
  ones). With `ref_fn`, the batch's log-probabilities under `reference_params` first.

  `batch` holds this host's rows; the step's global batch (every host's rows, host-major) is
  placed on the mesh once and each minibatch is gathered from it on device, so the updates
  do not depend on how many hosts the rows came from."""
  device_batch = step_lib.to_device(batch, mesh)
  n = device_batch["tokens"].shape[0]
  size = min(rl.minibatch_size, n)  # divides n: config.validate checks it
  group = step_lib.shared_group(rl)  # minibatches of whole groups when they share prompts
  out = []
  with mesh_scope(mesh):
    if ref_fn is not None:
      step_lib.add_step_logprobs(ref_fn, params, reference_params, device_batch, rl)
    for epoch in range(rl.num_iterations):
      order = minibatch_order(n, group, [seed, step, epoch])
      for start in range(0, n, size):
        params, opt_state, m = step_fn(params, opt_state, device_batch, order[start : start + size])
        out.append(m)
  means = mean_metrics(jax.device_get(out))
  return params, opt_state, {**means, **step_lib.mismatch_metrics(out, device_batch, rl)}


def train(
  cfg: ml_collections.ConfigDict,
  workdir: str,
  *,
  checkpoint: str | None = None,
  seen: Sequence[Task] = (),
) -> int:
  """Runs (or resumes) RL training in `workdir` (`cfg` validated: config.validate); returns
  the process exit status. `checkpoint` and `seen`: what `model.checkpoint="base"` resolved to
  (the base policy's folder and SFT corpus; commands/train.py).

  On several hosts each samples and scores the groups of its own tasks (a group never spans
  hosts); reward terms are gathered so every host computes the same advantages and metrics.
  """
  rl = cfg.rl
  with contextlib.ExitStack() as stack:
    # Set-up: the workdir, the policy and optimiser at the step to start from, the data, the
    # scorer and the outputs.
    run = stack.enter_context(Run(cfg, workdir))
    meshes = placement.place(cfg)
    mesh = meshes.learner
    policy = policy_lib.load_policy(cfg, mesh, checkpoint=checkpoint)
    graphdef, params = nnx.split(policy.model)
    # The weights live in the loop: the policy kept here is the tokenizer and ids, and
    # `policy_at(params)` the one to sample from.
    policy = dataclasses.replace(policy, model=None)
    reference_params = jax.tree.map(lambda x: x.copy(), params) if rl.kl_beta > 0 else None
    tx = step_lib.make_optimizer(cfg.optim, adapters_only=run.lora is not None)
    iterator = tasksets.task_iterator(tasksets.train_tasks(cfg), rl.prompts_per_step, cfg.seed)
    step, params, opt_state = run.restore(
      params, step_lib.init_optimizer(tx, params, mesh), iterator
    )
    step_fn = step_lib.make_rl_step(graphdef, tx, rl)
    # Log-probs beyond the rollout's: the reference's (KL) and the learner's (IS correction).
    ref_fn = (
      step_lib.make_logprob_fn(graphdef, rl.temperature, step_lib.shared_group(rl))
      if step_lib.needs_logprob_fn(rl)
      else None
    )
    scorer = stack.enter_context(scoring.open_scorer(rl))
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
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="reward")
    stack.callback(executor.shutdown, wait=True)
    # Disaggregated: the sampler's thread and the copy of the weights onto its mesh (the
    # sampler thread hands chunks to the reward thread: it stops first).
    sampler_thread, to_sampler = None, None
    if meshes.disaggregated:
      sampler_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sampler")
      stack.callback(sampler_thread.shutdown, wait=True, cancel_futures=True)
      shardings = placement.sampler_shardings(params, meshes.sampler)
      to_sampler = functools.partial(placement.to_sampler, shardings=shardings)
      if run.lora is not None:  # the base is frozen: after the first copy only adapters move
        adapter_shardings = lora_lib.adapters_of(shardings)

    def refresh_sampler(params: Any, current: Any) -> Any:
      """The sampler's copy of the weights `params` (disaggregated), `current` the last."""
      if run.lora is None:
        return to_sampler(params)
      adapters = placement.to_sampler(lora_lib.adapters_of(params), adapter_shardings)
      return lora_lib.with_adapters(current, adapters)

    model_meta = run_checkpoints.model_meta(
      policy.config,
      policy.source,
      lora=run.lora,
      seed=cfg.seed,
      base=policy.source if cfg.model.checkpoint else "",
    )

    def policy_at(params: Any) -> policy_lib.Policy:
      """The policy with the weights `params` (it shares their arrays: sample with it before
      the next update donates them)."""
      return dataclasses.replace(policy, model=nnx.merge(graphdef, params))

    def save_checkpoint(step: int, params: Any, opt_state: Any, preempted: bool) -> float:
      """Saves `step` when due, and always when preempted; the seconds it blocked."""
      if not (preempted or due(step, cfg.train.checkpoint_every, cfg.train.steps)):
        return 0.0
      rollouts = inflight.save_state(in_flight)  # waits for their scores
      return run.save(step, params, opt_state, iterator.get_state(), model_meta, rollouts)

    def evaluate(step: int, params: Any) -> None:
      """Greedy evaluation when due (run.eval_due)."""
      if evaluator is not None and eval_due(cfg.train, step):
        evaluator(step, policy_at(params))

    def write_metrics(step: int, values: dict[str, Any], message: str) -> None:
      writer.write(step, values)
      progress.update(step, message)
      if run.primary:  # the report names the tasks whose rows scored 0 as broken
        metrics.record_broken_tasks(run.workdir, scorer.broken_tasks)
        run.dir.sync()

    def launch(step: int, version: int, params: Any) -> inflight.InFlight:
      """Draws the tasks of `step` and samples their rollouts with `params` (those after
      update `version`); they are scored in the reward thread (dynamic sampling: here)."""
      batch_tasks = tasksets.as_tasks(next(iterator), f"train batch {step}")
      sampler = policy_at(params)

      def sample_part(tasks: list, offset: int, host_rows=None) -> Scoring:
        return sample_and_score(
          rl,
          sampler,
          tasks,
          scorer,
          executor,
          seed=cfg.seed,
          step=step,
          include_tests=cfg.data.include_tests_in_prompt,
          mesh=meshes.sampler,
          part_offset=offset,
          host_rows=host_rows,
        )

      def agreed(tasks: list):  # each host's sampler mesh its own: agreed here, not there
        if not meshes.sampler_per_host:
          return None
        return agree_chunks(rl, policy, tasks, cfg.data.include_tests_in_prompt)

      if rl.dynamic_sampling:  # more tasks until the batch is groups with reward variance
        pending = inflight.Ready(
          dynamic_sampling.collect(
            rl,
            lambda tasks, offset: sample_part(tasks, offset, agreed(tasks)).result(),
            batch_tasks,
            lambda: tasksets.as_tasks(next(iterator), f"train batch {step}+"),
            policy.pad_id,
          )
        )
      elif sampler_thread is not None:  # beside the learning, on the sampler's devices
        pending = inflight.OnThread(
          sampler_thread.submit(sample_part, batch_tasks, 0, agreed(batch_tasks))
        )
      else:
        pending = sample_part(batch_tasks, 0)
      return inflight.InFlight(step, version, pending)

    if step == 0:  # a fresh run: the policy it starts from
      evaluate(step, params)
    # What the sampler samples with: the parameters after update `step` (shared: the same).
    sampler_params = to_sampler(params) if to_sampler else params
    # Rollouts sampled for the steps after this one (rl.max_staleness >= 1), as checkpointed.
    in_flight = inflight.restore(run.saved_rollouts(step), step)
    # The loop: one step is a batch of tasks sampled and scored, advantages, the updates, then
    # its checkpoint, metrics and evaluation when due. The rollouts of the next
    # rl.max_staleness steps are sampled first, with the parameters the step starts from, and
    # scored while it learns (k = 0: this step's own, scored before it learns).
    while steps_left(cfg, step):
      t_step = time.perf_counter()
      while len(in_flight) <= rl.max_staleness and step + len(in_flight) < cfg.train.steps:
        in_flight.append(launch(step + len(in_flight) + 1, step, sampler_params))
      launched = time.perf_counter() - t_step
      step += 1
      current = in_flight.popleft()
      t0 = time.perf_counter()
      rollout, terms, timing = current.pending.result()
      waited = time.perf_counter() - t0
      model_tokens = rollout.loss_mask.sum(axis=1, dtype=np.int32)  # feedback turns left out
      cut = overlong.cut_samples(rollout, policy.eos_ids, rl.max_new_tokens)
      every = multihost.allgather_rows({**terms, "lengths": model_tokens, "truncated": cut})
      advantages, reward = reward_recipes.compute_advantages(rl, every)
      batch = rollout_lib.training_arrays(
        rollout, policy.pad_id, completion_len=rollout_lib.response_len(rl)
      )
      batch["advantages"] = advantages[multihost.host_slice(len(advantages))]
      if rl.overlong == "filter":
        batch["completion_mask"] = overlong.filter_loss_mask(batch["completion_mask"], cut)
      t0 = time.perf_counter()
      # Every host holds the same advantages (computed from the gathered terms): it agrees.
      skip = not np.any(advantages) and rl.kl_beta == 0
      learned = {"grad_norm": 0.0}
      if not skip:
        params, opt_state, learned = learn(
          rl,
          step_fn,
          params,
          opt_state,
          batch,
          seed=cfg.seed,
          step=step,
          mesh=mesh,
          ref_fn=ref_fn,
          reference_params=reference_params,
        )
      timing["time/train"] = time.perf_counter() - t0
      if to_sampler is not None:
        # The learner waited on the sampler (its thread still sampling this step's rollouts)
        # beside the scores; then the new weights go over (none when nothing was updated).
        timing["time/sampler_wait"] = max(0.0, waited - timing["time/reward_exposed"])
        t0 = time.perf_counter()
        sampler_params = sampler_params if skip else refresh_sampler(params, sampler_params)
        timing["time/weight_transfer"] = time.perf_counter() - t0
      else:
        sampler_params = params
      groups = reward.reshape(-1, rl.group_size)
      exposed = timing["time/reward_exposed"] / (time.perf_counter() - t_step)
      values: dict[str, Any] = {
        "reward": float(reward.mean()),
        **{f"reward/{k}": float(every[k].mean()) for k in _TERMS_LOGGED},
        "advantage_abs": float(np.abs(advantages).mean()),
        "zero_variance_groups": float(np.mean(groups.std(axis=1) == 0)),
        "skipped_update": float(skip),
        # Updates between the parameters that sampled this step's rollouts and its own.
        "train/staleness": float(step - 1 - current.version),
        "completion_tokens": float(every["lengths"].mean()),
        "truncated_fraction": float(every["truncated"].mean()),
        # Rows of tasks whose reference fails or whose bug passes: zero reward, not learning.
        "broken_task_rows": float(every["broken_task"].mean()),
        **_agent_metrics(every),
        # KL to a reference exists only with one (rl.kl_beta > 0): no column of zeros.
        **{f"train/{k}": v for k, v in learned.items() if k != "kl" or rl.kl_beta > 0},
        **timing,
        # Sampling done in this step: its own rollouts at k = 0, step t + k's after.
        "time/launch": launched,
        "reward_exposed_fraction": exposed,
      }
      preempted = run.preempted(step)  # a preempted run saves its step and stops
      saved = save_checkpoint(step, params, opt_state, preempted)
      write_metrics(
        step,
        {**values, "time/checkpoint": saved, "time/step": time.perf_counter() - t_step},
        f"reward={values['reward']:.3f} pass={values['reward/unit']:.3f} "
        f"exposed_reward={exposed:.1%}",
      )
      if preempted:
        logging.warning("preempted: checkpoint of step %d saved; exiting", step)
        run.checkpointer.wait()
        return 0
      evaluate(step, params)
    run.end(
      step,
      params,
      opt_state,
      iterator.get_state(),
      model_meta,
      rollouts=lambda: inflight.save_state(in_flight),
    )
  return 0
