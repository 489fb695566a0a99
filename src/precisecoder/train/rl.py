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
import time
from typing import Any

import jax
import ml_collections
import numpy as np

from precisecoder import episodes, multihost, reward_recipes
from precisecoder.model.sharding import mesh_scope
from precisecoder.train import policy as policy_lib, rollout as rollout_lib, step as step_lib
from precisecoder.train import dynamic_sampling, overlong, tasksets
from precisecoder.train.run import Run, sample_seed

_TERMS_LOGGED = ("unit", "precision", "recall", "f1", "edit_lines", "noop")


def _score_timed(scorer, part: rollout_lib.Rollout, turns: int
                 ) -> tuple[dict[str, np.ndarray], float]:
  t0 = time.perf_counter()
  terms = scorer.score(part.tasks, part.programs)
  if part.turns is not None:
    terms.update(_episode_rows(scorer, part, turns, terms))
  return terms, time.perf_counter() - t0


def _episode_rows(scorer, part: rollout_lib.Rollout, turns: int,
                  final: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Per episode: turns taken, feedback tokens, why it stopped, and the unit pass and edited
  lines of its program after each turn (the last turn's are the reward's terms)."""
  scored = [scorer.score(part.tasks, programs)
            for programs in episodes.turn_programs(part.turns, turns - 1)] + [final]
  return {
      "agent_turns": np.array([len(t) for t in part.turns], np.float32),
      "agent_feedback_tokens": np.array(
          [sum(turn.feedback_tokens for turn in t) for t in part.turns], np.float32),
      "agent_stop": np.array([episodes.STOP_REASONS.index(x) for x in part.stops], np.int32),
      "agent_unit": np.stack([s["unit"] for s in scored], axis=1),
      "agent_edit_lines": np.stack([s["edit_lines"] for s in scored], axis=1)}


def _agent_metrics(every: dict[str, np.ndarray]) -> dict[str, float]:
  """Turns used, pass and edited lines by turn, feedback tokens and stop reasons."""
  if "agent_turns" not in every:
    return {}
  out = {"agent/turns": float(every["agent_turns"].mean()),
         "agent/feedback_tokens": float(every["agent_feedback_tokens"].mean())}
  for k in range(every["agent_unit"].shape[1]):
    out[f"agent/pass_turn{k + 1}"] = float(every["agent_unit"][:, k].mean())
    out[f"agent/edit_lines_turn{k + 1}"] = float(every["agent_edit_lines"][:, k].mean())
  for i, reason in enumerate(episodes.STOP_REASONS):
    out[f"agent/stop_{reason}"] = float(np.mean(every["agent_stop"] == i))
  return out


def _concat_terms(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def collect(run: Run, policy: policy_lib.Policy, step: int, batch_tasks: list,
            executor: concurrent.futures.Executor, part_offset: int = 0
            ) -> tuple[rollout_lib.Rollout, dict[str, np.ndarray], dict[str, float]]:
  """Samples (from `policy`, seeded by `step`, its chunks from `part_offset` on) and scores
  one step's rollouts, overlapping scoring with sampling."""
  rl = run.cfg.rl
  agent = rollout_lib.agent_config(rl)
  chunks = np.array_split(np.arange(len(batch_tasks)), max(1, min(rl.rollout_chunks,
                                                                  len(batch_tasks))))
  parts, futures = [], []
  t_sample = 0.0
  for i, index in enumerate(chunks):
    t0 = time.perf_counter()
    part = rollout_lib.sample_rollout(
        policy, [batch_tasks[j] for j in index], num_samples=rl.group_size,
        max_new_tokens=rl.max_new_tokens, temperature=rl.temperature, top_p=rl.top_p,
        seed=sample_seed(run.cfg.seed, step, part_offset + i),
        include_tests=run.cfg.data.include_tests_in_prompt, prompt_bucket=rl.prompt_bucket,
        mesh=run.mesh, agent=agent, pool=run.scorer if agent is not None else None)
    t_sample += time.perf_counter() - t0
    parts.append(part)
    futures.append(executor.submit(_score_timed, run.scorer, part, rl.turns))
  t0 = time.perf_counter()
  scored = [f.result() for f in futures]
  exposed = time.perf_counter() - t0
  rollout = rollout_lib.concat_rollouts(parts, run.policy.pad_id)
  timing = {"time/sample": t_sample, "time/reward": sum(s for _, s in scored),
            "time/reward_exposed": exposed}
  return rollout, _concat_terms([t for t, _ in scored]), timing


def mean_metrics(items: list[dict[str, Any]]) -> dict[str, float]:
  """Each metric's mean over the minibatches' (none: {})."""
  if not items:
    return {}
  return {k: float(np.mean([float(x[k]) for x in items])) for k in items[0]}


def minibatch_order(rows: int, group: int, seed: list[int]) -> np.ndarray:
  """A shuffled order of `rows` rows that keeps consecutive groups of `group` rows whole."""
  groups = np.random.default_rng(seed).permutation(rows // group)
  return (groups[:, None] * group + np.arange(group)).ravel().astype(np.int32)


def learn(run: Run, step_fn, params: Any, opt_state: Any, batch: dict[str, np.ndarray],
          step: int, ref_fn=None) -> tuple[Any, Any, dict[str, float]]:
  """(params, opt_state, mean metrics) after μ passes over shuffled minibatches of `batch`,
  one optimiser update per minibatch (`step_fn` donates the `params` and `opt_state` it is
  given: use the returned ones).

  `batch` holds this host's rows; the step's global batch (every host's rows, host-major) is
  placed on the mesh once and each minibatch is gathered from it on device, so the updates
  do not depend on how many hosts the rows came from."""
  rl = run.cfg.rl
  device_batch = step_lib.to_device(batch, run.mesh)
  n = device_batch["tokens"].shape[0]
  size = min(rl.minibatch_size, n)  # divides n: config.validate checks it
  group = step_lib.shared_group(rl)  # minibatches of whole groups when they share prompts
  out = []
  with mesh_scope(run.mesh):
    if ref_fn is not None:
      step_lib.add_step_logprobs(ref_fn, params, run.reference_params, device_batch, rl)
    for epoch in range(rl.num_iterations):
      order = minibatch_order(n, group, [run.cfg.seed, step, epoch])
      for start in range(0, n, size):
        params, opt_state, m = step_fn(params, opt_state, device_batch,
                                       order[start:start + size])
        out.append(m)
  metrics = mean_metrics(jax.device_get(out))
  return params, opt_state, {**metrics, **step_lib.mismatch_metrics(out, device_batch, rl)}


def train(cfg: ml_collections.ConfigDict, workdir: str) -> int:
  """Runs (or resumes) RL training in `workdir` (`cfg` validated: config.validate); returns
  the process exit status.

  On several hosts each samples and scores the groups of its own tasks (a group never spans
  hosts); reward terms are gathered so every host computes the same advantages and metrics.
  """
  rl = cfg.rl
  with Run(cfg, workdir, total_steps=cfg.train.steps, keep_reference=rl.kl_beta > 0) as run:
    step_fn = step_lib.make_rl_step(run.graphdef, run.tx, rl)
    ref_fn = (step_lib.make_logprob_fn(run.graphdef, rl.temperature, step_lib.shared_group(rl))
              if step_lib.needs_logprob_fn(rl) else None)
    iterator = tasksets.task_iterator(tasksets.train_tasks(cfg), rl.prompts_per_step, cfg.seed)
    step, params, opt_state = run.begin(iterator)
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="reward")
    try:
      while run.steps_left(step):
        t_step = time.perf_counter()
        batch_tasks = tasksets.as_tasks(next(iterator), f"train batch {step + 1}")
        step += 1
        policy = run.policy_at(params)
        if rl.dynamic_sampling:  # more tasks until the batch is groups with reward variance
          rollout, terms, timing = dynamic_sampling.collect(
              rl, lambda tasks, offset: collect(run, policy, step, tasks, executor, offset),
              batch_tasks, lambda: tasksets.as_tasks(next(iterator), f"train batch {step}+"),
              run.policy.pad_id)
        else:
          rollout, terms, timing = collect(run, policy, step, batch_tasks, executor)
        model_tokens = rollout.loss_mask.sum(axis=1, dtype=np.int32)  # feedback turns left out
        cut = overlong.cut_samples(rollout, run.policy.eos_ids, rl.max_new_tokens)
        every = multihost.allgather_rows({**terms, "lengths": model_tokens, "truncated": cut})
        advantages, reward = reward_recipes.compute_advantages(rl, every)
        batch = rollout_lib.training_arrays(rollout, run.policy.pad_id,
                                            completion_len=rollout_lib.response_len(rl))
        batch["advantages"] = advantages[multihost.host_slice(len(advantages))]
        if rl.overlong == "filter":
          batch["completion_mask"] = overlong.filter_loss_mask(batch["completion_mask"], cut)
        t0 = time.perf_counter()
        # Every host holds the same advantages (computed from the gathered terms): it agrees.
        skip = not np.any(advantages) and rl.kl_beta == 0
        learned = {"grad_norm": 0.0}
        if not skip:
          params, opt_state, learned = learn(run, step_fn, params, opt_state, batch, step,
                                             ref_fn)
        timing["time/train"] = time.perf_counter() - t0
        groups = reward.reshape(-1, rl.group_size)
        exposed = timing["time/reward_exposed"] / (time.perf_counter() - t_step)
        record: dict[str, Any] = {
            "reward": float(reward.mean()),
            **{f"reward/{k}": float(every[k].mean()) for k in _TERMS_LOGGED},
            "advantage_abs": float(np.abs(advantages).mean()),
            "zero_variance_groups": float(np.mean(groups.std(axis=1) == 0)),
            "skipped_update": float(skip),
            "completion_tokens": float(every["lengths"].mean()),
            "truncated_fraction": float(every["truncated"].mean()),
            # Rows of tasks whose reference fails or whose bug passes: zero reward, not learning.
            "broken_task_rows": float(every["broken_task"].mean()),
            **_agent_metrics(every),
            # KL to a reference exists only with one (rl.kl_beta > 0): no column of zeros.
            **{f"train/{k}": v for k, v in learned.items() if k != "kl" or rl.kl_beta > 0},
            **timing, "reward_exposed_fraction": exposed,
        }
        if run.end_step(step, params, opt_state, record, iterator.get_state(), t_step,
                        f"reward={record['reward']:.3f} pass={record['reward/unit']:.3f} "
                        f"exposed_reward={exposed:.1%}"):
          return 0
    finally:
      executor.shutdown(wait=True)
    run.end(step, params, opt_state, iterator.get_state())
  return 0
