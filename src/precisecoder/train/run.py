"""What every trainer shares: the workdir, the policy, the state a run starts from (the latest
checkpoint's, or step 0), evaluation with the reward pool, checkpoints and metrics. (The report
is the train command's: commands/train.py writes it once a trainer has finished.)

The loop's state is the trainer's: `begin` hands it the step, parameters and optimiser state
to start from, the trainer updates them in its loop, and passes them to `end_step` and `end`
(which checkpoint and evaluate them). A Run holds none of them once the loop has begun."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import Any, NamedTuple

import jax
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from precisecoder import multihost
from precisecoder.model import lora as lora_lib, make_mesh, run_checkpoints
from precisecoder.rewards import RewardScorer
from precisecoder.train import checkpoint_writer, config as config_lib, greedy_eval, metrics
from precisecoder.train import policy as policy_lib, rollout as rollout_lib, step as step_lib
from precisecoder.train import tasksets
from precisecoder.train import workdir as workdir_lib
from precisecoder.train.lock import WorkdirError


def sample_seed(seed: int, step: int, part: int = 0) -> int:
  """A sampling seed per (run seed, step, chunk): resuming at step k replays nothing."""
  return (seed * 1_000_003 + step * 1009 + part) % (2**31 - 1)


def _encode_data_state(state: Any) -> Any:
  if isinstance(state, bytes):
    return {"bytes": state.decode("latin-1")}
  return state


def _decode_data_state(state: Any) -> Any:
  if isinstance(state, dict) and set(state) == {"bytes"}:
    return state["bytes"].encode("latin-1")
  return state


class TrainState(NamedTuple):
  """Where a loop starts: the step last completed, the parameters and the optimiser state."""

  step: int
  params: Any
  opt_state: Any


class Run(contextlib.AbstractContextManager):
  """One training run in a workdir; resumes the workdir's latest checkpoint if it has one.

  `cfg` is a validated config (config.validate: the commands check it where it comes in).
  `keep_reference`: keep a frozen copy of the starting weights (`reference_params`, the KL and
  DPO reference), taken before resuming."""

  def __init__(self, cfg: ml_collections.ConfigDict, workdir: str, *, total_steps: int,
               keep_reference: bool = False):
    self.cfg = cfg
    # Shared outputs (config, metrics, events, evaluations, report) come from the primary host,
    # written to `self.workdir` (a local mirror when the workdir is a bucket).
    self.dir = workdir_lib.Workdir(workdir)
    self.workdir = self.dir.local
    self.primary = multihost.is_primary()
    self.lock = self.dir.lock()
    self._agree(self._claim)  # raises WorkdirError: held by another run
    self.checkpointer: checkpoint_writer.Checkpointer | None = None
    try:
      self._start(keep_reference, total_steps)
    except BaseException:  # a run that cannot start leaves the workdir free
      if self.checkpointer is not None:
        self.checkpointer.close()
      self.lock.release()
      raise

  def _agree(self, check) -> None:
    """Runs `check` on the primary host; every host raises the WorkdirError it raised."""
    problem = None
    if self.primary:
      try:
        check()
      except WorkdirError as e:
        problem = str(e)
    problem = next(filter(None, multihost.allgather_json(problem)), None)
    if problem:
      raise WorkdirError(problem)

  def _claim(self) -> None:
    self.lock.acquire()
    self.dir.fetch()

  def _check_resumable(self, resuming: bool) -> None:
    """A workdir that holds training progress continues only the run that made it; one whose
    run trained nothing (it failed early) takes the new config."""
    if resuming or metrics.last_step(self.workdir) > 0:
      try:
        config_lib.check_resumable(self.workdir, self.cfg)
      except config_lib.ConfigError as e:
        raise WorkdirError(str(e)) from None
    (self.workdir / "config.json").write_text(self.cfg.to_json_best_effort(indent=2) + "\n")

  def _start(self, keep_reference: bool, total_steps: int) -> None:
    cfg = self.cfg
    self.lora = lora_lib.from_config(cfg.model)  # adapters only: trained, held, checkpointed
    self.checkpointer = checkpoint_writer.Checkpointer(
        cfg.train.checkpoint_dir or self.dir.checkpoints, max_to_keep=cfg.train.keep_checkpoints,
        adapters_only=self.lora is not None)
    latest = self.checkpointer.latest_step()
    self._agree(lambda: self._check_resumable(latest is not None))
    self.total_steps = total_steps
    self.mesh = make_mesh(cfg.model.mesh) if jax.device_count() > 1 else None
    policy = policy_lib.load_policy(cfg, self.mesh)
    self.graphdef, params = nnx.split(policy.model)
    # The weights live in the trainer's loop: the policy kept here is the tokenizer and ids,
    # and `policy_at(params)` gives the one to sample from.
    self.policy = dataclasses.replace(policy, model=None)
    self.reference_params = (jax.tree.map(lambda x: x.copy(), params) if keep_reference
                             else None)
    self.tx = step_lib.make_optimizer(cfg.optim, adapters_only=self.lora is not None)
    opt_state = step_lib.init_optimizer(self.tx, params, self.mesh)
    step = 0
    self.data_state: Any = None
    if latest is not None:
      t0 = time.perf_counter()
      # Checkpoints written before the trainers owned their state also hold an RNG key
      # (`meta["rng"]`, never used): it is left unread.
      params, opt_state, meta = self.checkpointer.restore(latest, params, opt_state)
      step = int(meta["step"])
      self.data_state = _decode_data_state(meta.get("data_state"))
      logging.info("resumed %s at step %d (%.1f s)", self.workdir, step,
                   time.perf_counter() - t0)
    # Where the loop starts; `begin` hands it over to the trainer.
    self.start: TrainState | None = TrainState(step, params, opt_state)
    self.metrics = metrics.MetricsWriter(self.workdir, resume_step=step, enabled=self.primary,
                                         wandb=metrics.wandb_settings(cfg, self.workdir))
    self._progress: metrics.Progress | None = None
    self.preemption = checkpoint_writer.PreemptionWatcher(self.checkpointer)
    self._pool = None  # what holds the scorer's resources (a pool, or the remote client)
    self._scorer: RewardScorer | None = None

  def policy_at(self, params: Any) -> policy_lib.Policy:
    """The policy with the weights `params`, for sampling and evaluation (it shares their
    arrays: sample with it before the next update donates them)."""
    return dataclasses.replace(self.policy, model=nnx.merge(self.graphdef, params))

  @property
  def scorer(self) -> RewardScorer:
    if self._scorer is None:
      rl = self.cfg.rl
      epsilon = None if rl.epsilon < 0 else int(rl.epsilon)
      if rl.get("reward_urls", ""):
        # On reward servers: the same terms. A batch that fails on every server (after
        # retries) stops the run with the reason; rerunning resumes from the last checkpoint.
        from precisecoder.integrations.client import RemoteScorer
        self._scorer = self._pool = RemoteScorer(rl.reward_urls, epsilon=epsilon, lam=rl.lam)
      else:
        from precisecoder.execution import ExecutionPool  # worker processes start on first use
        self._pool = ExecutionPool(workers=rl.reward_workers, python=rl.python or None)
        self._scorer = RewardScorer(self._pool, epsilon=epsilon, lam=rl.lam)
    return self._scorer

  def save(self, step: int, params: Any, opt_state: Any, data_state: Any = None) -> float:
    """Starts an asynchronous checkpoint of `step`; returns seconds it blocked."""
    t0 = time.perf_counter()
    meta = {"step": step,
            "model": run_checkpoints.model_meta(
                self.policy.config, self.policy.source, lora=self.lora, seed=self.cfg.seed,
                base=self.policy.source if self.cfg.model.checkpoint else ""),
            "time": time.time()}
    self.checkpointer.save(step, params, opt_state, meta, _encode_data_state(data_state))
    return time.perf_counter() - t0

  def evaluate_and_record(self, step: int, params: Any) -> dict[str, float]:
    """Greedy evaluation on validation tasks and clean programs, and apart (each under its own
    key in the file and `eval_<split>/` in the metrics) on the held-in tasks and the
    multi-line split when the config asks for them; written to eval/step_N.json."""
    cfg = self.cfg
    if not hasattr(self, "_eval_tasks"):
      self._eval_tasks = tasksets.eval_tasks(cfg)
      self._split_tasks = {
          "heldin": (tasksets.heldin_tasks(cfg), cfg.train.eval_max_new_tokens),
          "multi": (tasksets.multi_tasks(cfg), cfg.train.eval_multi_max_new_tokens)}
    policy = self.policy_at(params)
    summary, records = self._greedy(policy, self._eval_tasks, cfg.train.eval_max_new_tokens)
    splits = {name: dict(zip(("summary", "records"), self._greedy(policy, tasks, max_new_tokens)))
              for name, (tasks, max_new_tokens) in self._split_tasks.items() if tasks}
    if not self.primary:
      return summary
    out = self.workdir / "eval"
    out.mkdir(exist_ok=True)
    result = {"step": step, "summary": summary, "records": records, **splits}
    (out / f"step_{step}.json").write_text(json.dumps(result, indent=1) + "\n")
    self.metrics.write(step, summary, prefix="eval/")
    for name, split in splits.items():
      self.metrics.write(step, split["summary"], prefix=f"eval_{name}/")
    logging.info("eval at step %d: %s", step,
                 "  ".join(f"{k}={v:.3f}" for k, v in summary.items() if isinstance(v, float)))
    return summary

  def _greedy(self, policy: policy_lib.Policy, tasks, max_new_tokens: int
              ) -> tuple[dict[str, float], list[dict]]:
    """(summary, per-task records) of `policy`'s greedy completions of `tasks`."""
    cfg = self.cfg
    # Several hosts: each evaluates an equal share (the last task repeated to even it out),
    # then the records are gathered and summarised as one set.
    share = -(-len(tasks) // jax.process_count())
    mine = tasks[multihost.host_slice(share * jax.process_count())] if len(tasks) else []
    mine = list(mine) + list(tasks[-1:]) * (share - len(mine))
    summary, records = greedy_eval.evaluate_greedy(
        policy, mine, self.scorer,
        max_new_tokens=max_new_tokens, batch_size=cfg.train.eval_batch_size,
        include_tests=cfg.data.include_tests_in_prompt, seed=cfg.seed,
        prompt_bucket=cfg.rl.prompt_bucket, mesh=self.mesh,
        agent=rollout_lib.agent_config(cfg.rl) if cfg.trainer == "rl" else None)
    if jax.process_count() > 1:
      records = [r for part in multihost.allgather_json(records) for r in part][:len(tasks)]
      timing = {k: summary[k] for k in ("sample_s", "score_s")}
      summary = {**greedy_eval.summarize(tasks, {
          k: np.array([r[k] for r in records]) for k in records[0]
          if isinstance(records[0][k], float)}), **timing}
    return summary, records

  def begin(self, iterator: Any) -> TrainState:
    """The head every trainer shares: the data iterator resumed where the checkpoint left
    it, the starting policy evaluated (fresh runs only), a progress line from the starting
    step. Returns the state the loop starts from; from here on the loop owns it."""
    start, self.start = self.start, None
    if self.data_state is not None:
      iterator.set_state(self.data_state)
    if start.step == 0 and self.cfg.train.eval_at_start and self.cfg.train.eval_every > 0:
      self.evaluate_and_record(start.step, start.params)
    self._progress = metrics.Progress(self.total_steps, start.step)
    return start

  def steps_left(self, step: int) -> bool:
    """Whether a step after `step` is due: before total_steps and train.stop_after (if set)."""
    return step < self.total_steps and not 0 <= self.cfg.train.stop_after <= step

  def end_step(self, step: int, params: Any, opt_state: Any, record: dict[str, Any],
               data_state: Any, t_start: float, message: str) -> bool:
    """The tail every trainer's step shares: checkpoint when due (always when preempted),
    metrics with the step time, progress, evaluation when due. True when preempted: the
    checkpoint is written and the trainer should return 0."""
    self.lock.check()  # a bucket's lock taken over by another run: stop before writing more
    preempted = self.preemption.preempted(step)
    saved = 0.0
    if self.should(step, self.cfg.train.checkpoint_every) or preempted:
      saved = self.save(step, params, opt_state, data_state)
    self.metrics.write(step, {**record, "time/checkpoint": saved,
                              "time/step": time.perf_counter() - t_start})
    self._progress.update(step, message)
    if self.primary:
      self.dir.sync()
    if preempted:
      logging.warning("preempted: checkpoint of step %d saved; exiting", step)
      self.checkpointer.wait()
      return True
    if self.should(step, self.cfg.train.eval_every):
      self.evaluate_and_record(step, params)
    return False

  def end(self, step: int, params: Any, opt_state: Any, data_state: Any) -> None:
    """The tail every trainer shares: when all steps are done, the last checkpoint awaited
    and this host's parameter fingerprint logged; else (stopped by train.stop_after) a
    checkpoint of the last step if it has none yet."""
    if step >= self.total_steps:
      self.checkpointer.wait()
      logging.info("step %d: parameters on this host: sha256 %s", step,
                   multihost.local_fingerprint(params))
    elif self.checkpointer.latest_step() != step:
      self.save(step, params, opt_state, data_state)

  def should(self, step: int, every: int) -> bool:
    """Whether something done `every` steps (0: never) falls on `step`: on its multiples
    and on the last step."""
    return every > 0 and (step % every == 0 or step == self.total_steps)

  def close(self) -> None:
    self.checkpointer.close()
    self.metrics.close()
    if self.primary:
      self.dir.sync()
    self.preemption.restore_handler()
    if self._pool is not None:
      self._pool.close()
    self.lock.release()

  def __exit__(self, *exc) -> None:
    self.close()
