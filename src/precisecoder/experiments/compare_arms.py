"""Train several reward recipes ("arms") side by side: the arms' configs, checked to differ
only in their reward recipe (and in single answers vs multi-turn episodes, and in the
rollouts' staleness beside a twin), and their trainer processes.

Each arm is `configs/<arm>.py:<preset>` with the same `--config.` overrides, trained by its own
`python -m precisecoder.train` process in `<workdir>/<arm>` (resumable: a rerun continues
unfinished arms and skips finished ones). Arms must differ only in their reward recipe and
`rl.turns` (a single-turn arm beside an agent arm, configs/*_agent.py), and in the schedule
(SCHEDULE_FIELDS: an asynchronous arm, configs/*_async.py, beside its synchronous twin): base
model, tasks, seed, sampling and budget are checked to be identical before anything runs, so
every arm is evaluated on the same held-in tasks and clean programs at the same steps. The
`precisecoder compare` command (commands/compare.py) runs them and writes the report
(analysis/compare_report.py).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Sequence

import ml_collections
from absl import flags, logging
from ml_collections import config_flags

from precisecoder.experiments import base_model
from precisecoder.train import config as config_lib, metrics

DEFAULT_ARMS = ("grpo", "precisecoder")
KNOWN_ARMS = (
  "grpo",
  "precisecoder",
  "ea_grpo",
  "precision_only",
  "recall_only",
  "grpo_agent",
  "precisecoder_agent",
  "grpo_async",
  "precisecoder_async",
)
# What arms may differ in: the reward recipe, and single answers vs episodes with test
# feedback (`rl.turns`, configs/*_agent.py). Everything else must match across arms.
RECIPE_FIELDS = frozenset(
  {"rl.reward", "rl.advantage", "rl.lam", "rl.ea_alpha", "rl.ea_beta", "rl.scale_std", "rl.turns"}
)
# What an arm may differ in from its twin, an arm of the same reward recipe: how stale its
# rollouts may be (train/inflight.py) and the off-policy correction that goes with staleness.
# Recipes are compared at one schedule: an arm whose schedule differs from the first arm's
# needs its twin in the comparison, so that a recipe is never confounded with a schedule.
SCHEDULE_FIELDS = frozenset({"rl.max_staleness", "rl.is_correction", "rl.is_cap"})
PROGRESS_EVERY_S = 60.0


def default_configs_dir() -> pathlib.Path:
  """The repository's configs/ (beside src/), else ./configs."""
  repo = pathlib.Path(__file__).resolve().parents[3] / "configs"
  return repo if repo.is_dir() else pathlib.Path("configs")


def resolve_config(
  config_file: pathlib.Path, preset: str, overrides: Sequence[str]
) -> ml_collections.ConfigDict:
  """The config the arm's trainer process will see: the file at `preset`, then the
  `--config.a.b=v` overrides, parsed by the absl machinery of `python -m precisecoder.train`."""
  argv = ["compare", f"--config={config_file}:{preset}", *overrides]
  values = flags.FlagValues()
  # sys_argv: the overrides are read from this list, not from the process's own argv.
  config_flags.DEFINE_config_file(
    "config", None, "", flag_values=values, lock_config=True, sys_argv=argv
  )
  try:
    values(argv)
  except (flags.Error, AttributeError, KeyError, TypeError) as e:  # unknown field, bad value
    raise ValueError(
      f"{config_file}:{preset} with {' '.join(overrides) or 'no overrides'}: "
      f"{type(e).__name__}: {e}"
    ) from e
  return values.config


def check_same_budget(configs: dict[str, ml_collections.ConfigDict]) -> dict[str, str]:
  """Raises ValueError naming every field that differs beyond the reward recipe, rl.turns and
  the schedule (SCHEDULE_FIELDS), and every arm whose schedule differs from the first arm's
  without a twin. Returns the twins: {arm: the arm of its recipe at the first arm's schedule}
  for each arm at another schedule (`{"grpo_async": "grpo"}`)."""
  names = list(configs)
  flat = {name: config_lib.flatten(cfg) for name, cfg in configs.items()}
  for name in names:
    if configs[name].trainer != "rl":
      raise ValueError(
        f"arm {name!r} has trainer={configs[name].trainer!r}; compare trains RL arms only"
      )

  def differing(a: str, b: str, allowed: frozenset[str]) -> list[str]:
    keys = set(flat[a]) | set(flat[b])
    return [
      f"{k}: {a}={flat[a].get(k)!r} {b}={flat[b].get(k)!r}"
      for k in sorted(keys - allowed)
      if flat[a].get(k) != flat[b].get(k)
    ]

  first = names[0]
  differ = [
    d for name in names[1:] for d in differing(first, name, RECIPE_FIELDS | SCHEDULE_FIELDS)
  ]
  if differ:
    raise ValueError(
      "arms must share everything but the reward recipe, rl.turns and the schedule "
      f"({', '.join(sorted(SCHEDULE_FIELDS))}); differing: " + "; ".join(differ)
    )
  at_first = [name for name in names if not differing(first, name, RECIPE_FIELDS)]
  twins, orphans = {}, []
  for name in names:
    if name in at_first:
      continue
    twin = next((t for t in at_first if not differing(name, t, SCHEDULE_FIELDS)), None)
    if twin is None:
      schedule = ", ".join(f"{k}={flat[name].get(k)!r}" for k in sorted(SCHEDULE_FIELDS))
      orphans.append(f"{name} ({schedule})")
    else:
      twins[name] = twin
  if orphans:
    raise ValueError(
      f"arms at another schedule than the first arm {first!r} need their twin, an arm of the "
      "same reward recipe at the first arm's schedule (e.g. --arms grpo,grpo_async); without "
      "one: " + "; ".join(orphans)
    )
  return twins


def arm_finished(workdir: pathlib.Path, cfg: ml_collections.ConfigDict) -> bool:
  """Trained to the end and evaluated there (the last thing an arm's trainer writes but the
  report)."""
  steps = cfg.train.steps
  return (workdir / "eval" / f"step_{steps}.json").exists() or (
    cfg.train.eval_every <= 0 and (workdir / "report.md").exists()
  )


class ArmProcess:
  """One run's `python -m precisecoder.train` child, logging to `<workdir>/train.log`."""

  def __init__(
    self,
    name: str,
    config_file: pathlib.Path,
    preset: str,
    overrides: Sequence[str],
    workdir: pathlib.Path,
    steps: int,
  ):
    self.name, self.workdir, self.steps = name, workdir, steps
    workdir.mkdir(parents=True, exist_ok=True)
    self.log_path = workdir / "train.log"
    self._log = open(self.log_path, "a")
    self.started = time.perf_counter()
    command = [
      sys.executable,
      "-m",
      "precisecoder.train",
      f"--config={config_file}:{preset}",
      f"--workdir={workdir}",
      *overrides,
    ]
    self._log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
    self._log.flush()
    self.process = subprocess.Popen(
      command, stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ)
    )
    logging.info("arm %s: started (pid %d), log %s", name, self.process.pid, self.log_path)

  def poll(self) -> int | None:
    code = self.process.poll()
    if code is not None and not self._log.closed:
      self._log.close()
      self.wall_s = time.perf_counter() - self.started
    return code

  def tail(self, lines: int = 15) -> str:
    return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

  def terminate(self) -> None:
    if self.process.poll() is None:
      self.process.terminate()  # the trainer checkpoints its finished step on SIGTERM
      self.process.wait()
    self.poll()


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One trainer process of a comparison: an arm, at one seed when seeds are given."""

  name: str  # "grpo", or "grpo/seed_1" with seeds
  arm: str
  config_file: pathlib.Path
  cfg: ml_collections.ConfigDict
  overrides: tuple[str, ...]  # the comparison's overrides, then the run's seed
  workdir: pathlib.Path


def run_specs(
  arms: dict[str, tuple[pathlib.Path, ml_collections.ConfigDict]],
  preset: str,
  overrides: Sequence[str],
  workdir: pathlib.Path,
  seeds: Sequence[int] = (),
) -> list[RunSpec]:
  """The runs of a comparison, seed-major (every arm at the first seed, then the next), so
  that an interrupted comparison has whole seeds done. Without `seeds` one run per arm in
  `<workdir>/<arm>`, at the config's seed; with them `<workdir>/<arm>/seed_<k>`."""
  if not seeds:
    return [
      RunSpec(name, name, file, cfg, tuple(overrides), workdir / name)
      for name, (file, cfg) in arms.items()
    ]
  out = []
  for seed in seeds:
    for name, (file, _) in arms.items():
      run_overrides = (*overrides, f"--config.seed={seed}")
      out.append(
        RunSpec(
          f"{name}/seed_{seed}",
          name,
          file,
          resolve_config(file, preset, run_overrides),
          run_overrides,
          workdir / name / f"seed_{seed}",
        )
      )
  return out


def run_arms(
  runs: Sequence[RunSpec], preset: str, parallel: int
) -> tuple[dict[str, int], dict[str, float]]:
  """Trains the unfinished runs, `parallel` at a time; (exit status, wall seconds) per run."""
  pending = []
  codes: dict[str, int] = {}
  for spec in runs:
    if arm_finished(spec.workdir, spec.cfg):
      logging.info("arm %s: already finished in %s", spec.name, spec.workdir)
      codes[spec.name] = 0
    else:
      pending.append(spec)
  running: list[ArmProcess] = []
  walls: dict[str, float] = {}
  t0 = last_progress = time.perf_counter()
  try:
    while pending or running:
      while pending and len(running) < parallel:
        spec = pending.pop(0)
        running.append(
          ArmProcess(
            spec.name, spec.config_file, preset, spec.overrides, spec.workdir, spec.cfg.train.steps
          )
        )
      time.sleep(1.0)
      for arm in list(running):
        code = arm.poll()
        if code is None:
          continue
        running.remove(arm)
        codes[arm.name], walls[arm.name] = code, arm.wall_s
        if code:
          logging.error(
            "arm %s: exit status %d after %.0f s; last lines of %s:\n%s",
            arm.name,
            code,
            arm.wall_s,
            arm.log_path,
            arm.tail(),
          )
        else:
          logging.info("arm %s: done in %.0f s", arm.name, arm.wall_s)
      if running and time.perf_counter() - last_progress >= PROGRESS_EVERY_S:
        last_progress = time.perf_counter()
        logging.info(
          "compare: %.0f s; %s; %d arm(s) waiting",
          last_progress - t0,
          "; ".join(f"{a.name} step {metrics.last_step(a.workdir)}/{a.steps}" for a in running),
          len(pending),
        )
  finally:
    for arm in running:  # interrupted: stop the children cleanly, resumable next time
      arm.terminate()
  return codes, walls


def prepare_base(cfg: ml_collections.ConfigDict) -> None:
  """Builds the arms' shared base policy once, before any arm starts (they would otherwise
  wait on one another's build lock, each holding a process)."""
  if cfg.model.checkpoint == "base":
    logging.info("compare: base policy %s", base_model.ensure(cfg.base))
