"""What every trainer shares: the workdir, the policy and its optimiser state, resume from the
latest checkpoint, evaluation with the reward pool, metrics. (The report is the train command's:
commands/train.py writes it once a trainer has finished.)"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import jax
import ml_collections
import numpy as np
from absl import logging
from flax import nnx

from precisecoder import multihost
from precisecoder.model import make_mesh, run_checkpoints
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


class Run(contextlib.AbstractContextManager):
  """One training run in a workdir; resumes the workdir's latest checkpoint if it has one."""

  def __init__(self, cfg: ml_collections.ConfigDict, workdir: str, *, total_steps: int,
               keep_initial: bool = False):
    config_lib.validate(cfg)  # values that cannot work fail here, before anything loads
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
      self._start(keep_initial, total_steps)
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

  def _start(self, keep_initial: bool, total_steps: int) -> None:
    cfg = self.cfg
    self.checkpointer = checkpoint_writer.Checkpointer(
        cfg.train.checkpoint_dir or self.dir.checkpoints, max_to_keep=cfg.train.keep_checkpoints)
    latest = self.checkpointer.latest_step()
    self._agree(lambda: self._check_resumable(latest is not None))
    self.total_steps = total_steps
    self.mesh = make_mesh(cfg.model.mesh) if jax.device_count() > 1 else None
    self.policy = policy_lib.load_policy(cfg, self.mesh)
    self.graphdef, self.params = nnx.split(self.policy.model)
    # A frozen copy of the starting weights (KL reference, DPO reference) taken before resume.
    self.initial_params = jax.tree.map(lambda x: x.copy(), self.params) if keep_initial else None
    self.tx = step_lib.make_optimizer(cfg.optim)
    self.opt_state = step_lib.init_optimizer(self.tx, self.params, self.mesh)
    self.rng = jax.random.key(cfg.seed)
    self.step = 0
    self.data_state: Any = None
    if latest is not None:
      t0 = time.perf_counter()
      self.params, self.opt_state, meta = self.checkpointer.restore(
          latest, self.params, self.opt_state)
      self.step = int(meta["step"])
      self.rng = checkpoint_writer.rng_from_json(meta["rng"])
      self.data_state = _decode_data_state(meta.get("data_state"))
      logging.info("resumed %s at step %d (%.1f s)", self.workdir, self.step,
                   time.perf_counter() - t0)
    self.metrics = metrics.MetricsWriter(self.workdir, resume_step=self.step,
                                         enabled=self.primary)
    self.preemption = checkpoint_writer.PreemptionWatcher(self.checkpointer)
    self._pool = None  # what holds the scorer's resources (a pool, or the remote client)
    self._scorer: RewardScorer | None = None

  # The policy for sampling and evaluation shares the current parameters.
  def model(self):
    return nnx.merge(self.graphdef, self.params)

  def sync_policy(self) -> policy_lib.Policy:
    self.policy.model = self.model()
    return self.policy

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

  def save(self, data_state: Any = None) -> float:
    """Starts an asynchronous checkpoint of the current step; returns seconds it blocked."""
    t0 = time.perf_counter()
    meta = {"step": self.step, "rng": checkpoint_writer.rng_to_json(self.rng),
            "model": run_checkpoints.model_meta(self.policy.config, self.policy.source),
            "time": time.time()}
    self.checkpointer.save(self.step, self.params, self.opt_state, meta,
                           _encode_data_state(data_state))
    return time.perf_counter() - t0

  def evaluate_and_record(self) -> dict[str, float]:
    """Greedy evaluation on validation tasks and clean programs, and on the multi-line split
    when `data.num_multi` (kept apart: `multi` in the file, `eval_multi/` in the metrics);
    written to eval/step_N.json."""
    cfg = self.cfg
    if not hasattr(self, "_eval_tasks"):
      self._eval_tasks = tasksets.eval_tasks(cfg)
      self._multi_tasks = tasksets.multi_tasks(cfg)
    summary, records = self._greedy(self._eval_tasks, cfg.train.eval_max_new_tokens)
    multi = None
    if self._multi_tasks:
      multi = dict(zip(("summary", "records"), self._greedy(
          self._multi_tasks, cfg.train.eval_multi_max_new_tokens)))
    if not self.primary:
      return summary
    out = self.workdir / "eval"
    out.mkdir(exist_ok=True)
    result = {"step": self.step, "summary": summary, "records": records}
    if multi is not None:
      result["multi"] = multi
    (out / f"step_{self.step}.json").write_text(json.dumps(result, indent=1) + "\n")
    self.metrics.write(self.step, summary, prefix="eval/")
    if multi is not None:
      self.metrics.write(self.step, multi["summary"], prefix="eval_multi/")
    logging.info("eval at step %d: %s", self.step,
                 "  ".join(f"{k}={v:.3f}" for k, v in summary.items() if isinstance(v, float)))
    return summary

  def _greedy(self, tasks, max_new_tokens: int) -> tuple[dict[str, float], list[dict]]:
    """(summary, per-task records) of greedy completions of `tasks`."""
    cfg = self.cfg
    # Several hosts: each evaluates an equal share (the last task repeated to even it out),
    # then the records are gathered and summarised as one set.
    share = -(-len(tasks) // jax.process_count())
    mine = tasks[multihost.host_slice(share * jax.process_count())] if len(tasks) else []
    mine = list(mine) + list(tasks[-1:]) * (share - len(mine))
    summary, records = greedy_eval.evaluate_greedy(
        self.sync_policy(), mine, self.scorer,
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

  def begin(self, iterator: Any) -> metrics.Progress:
    """The head every trainer shares: the data iterator resumed where the checkpoint left
    it, the starting policy evaluated (fresh runs only), a progress line from this step."""
    if self.data_state is not None:
      iterator.set_state(self.data_state)
    if self.step == 0 and self.cfg.train.eval_at_start and self.cfg.train.eval_every > 0:
      self.evaluate_and_record()
    return metrics.Progress(self.total_steps, self.step)

  def steps_left(self) -> bool:
    """Whether another step is due: before total_steps and before train.stop_after (if set)."""
    return self.step < self.total_steps and not 0 <= self.cfg.train.stop_after <= self.step

  def end_step(self, record: dict[str, Any], data_state: Any, t_start: float,
               progress: metrics.Progress, message: str) -> bool:
    """The tail every trainer's step shares: checkpoint when due (always when preempted),
    metrics with the step time, progress, evaluation when due. True when preempted: the
    checkpoint is written and the trainer should return 0."""
    self.lock.check()  # a bucket's lock taken over by another run: stop before writing more
    preempted = self.preemption.preempted(self.step)
    saved = 0.0
    if self.should(self.cfg.train.checkpoint_every) or preempted:
      saved = self.save(data_state)
    self.metrics.write(self.step, {**record, "time/checkpoint": saved,
                                   "time/step": time.perf_counter() - t_start})
    progress.update(self.step, message)
    if self.primary:
      self.dir.sync()
    if preempted:
      logging.warning("preempted: checkpoint of step %d saved; exiting", self.step)
      self.checkpointer.wait()
      return True
    if self.should(self.cfg.train.eval_every):
      self.evaluate_and_record()
    return False

  def end(self, data_state: Any) -> None:
    """The tail every trainer shares: the last checkpoint awaited when all steps are done,
    else (stopped by train.stop_after) a checkpoint of the last step if it has none yet."""
    if self.step >= self.total_steps:
      self.finish()
    elif self.checkpointer.latest_step() != self.step:
      self.save(data_state)

  def should(self, every: int) -> bool:
    return every > 0 and (self.step % every == 0 or self.step == self.total_steps)

  def finish(self) -> None:
    """Waits for the last checkpoint and logs this host's parameter fingerprint."""
    self.checkpointer.wait()
    logging.info("step %d: parameters on this host: sha256 %s", self.step,
                 multihost.local_fingerprint(self.params))

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


def mean_metrics(items: list[dict[str, Any]]) -> dict[str, float]:
  if not items:
    return {}
  return {k: float(np.mean([float(x[k]) for x in items])) for k in items[0]}


def param_digest(params: Any) -> float:
  """A cheap fingerprint of the parameters (sum of |w|), for logs and resume checks."""
  return float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in jax.tree.leaves(params)))
