"""Train several reward recipes ("arms") side by side and report them against each other.

    precisecoder compare [--arms grpo,precisecoder] [--preset compare-cpu] [--workdir runs/compare]
        [--parallel N] [--configs DIR] [--config.a.b=v ...]
    python -m precisecoder.train.compare ...   (the same)

Each arm is `configs/<arm>.py:<preset>` with the same `--config.` overrides, trained by its own
`python -m precisecoder.train` process in `<workdir>/<arm>` (resumable: a rerun continues
unfinished arms, skips finished ones and rebuilds the report). Arms must differ only in their
reward recipe: base model, tasks, seed, sampling and budget are checked to be identical before
anything runs, so every arm is evaluated on the same held-in tasks and clean programs at the same
steps. The report (analysis/comparison.py) goes to `<workdir>/report.md` and `report.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Sequence

import ml_collections
from absl import flags, logging
from ml_collections import config_flags

DEFAULT_ARMS = ("grpo", "precisecoder")
KNOWN_ARMS = ("grpo", "precisecoder", "ea_grpo", "precision_only", "recall_only")
# What arms may differ in: the reward recipe. Everything else must match across arms.
RECIPE_FIELDS = frozenset({"rl.reward", "rl.advantage", "rl.lam", "rl.ea_alpha", "rl.ea_beta",
                           "rl.scale_std"})
# Fields a rerun may change without invalidating an arm's workdir (a longer run, its schedule).
RESUMABLE_FIELDS = frozenset({"train.steps", "train.stop_after", "train.eval_every",
                              "train.checkpoint_every", "train.report"})
PROGRESS_EVERY_S = 60.0


def default_configs_dir() -> pathlib.Path:
  """The repository's configs/ (beside src/), else ./configs."""
  repo = pathlib.Path(__file__).resolve().parents[3] / "configs"
  return repo if repo.is_dir() else pathlib.Path("configs")


def resolve_config(config_file: pathlib.Path, preset: str,
                   overrides: Sequence[str]) -> ml_collections.ConfigDict:
  """The config the arm's trainer process will see: the file at `preset`, then the
  `--config.a.b=v` overrides, parsed by the absl machinery of `python -m precisecoder.train`."""
  argv = ["compare", f"--config={config_file}:{preset}", *overrides]
  values = flags.FlagValues()
  # sys_argv: the overrides are read from this list, not from the process's own argv.
  config_flags.DEFINE_config_file("config", None, "", flag_values=values, lock_config=True,
                                  sys_argv=argv)
  try:
    values(argv)
  except (flags.Error, AttributeError, KeyError, TypeError) as e:  # unknown field, bad value
    raise ValueError(f"{config_file}:{preset} with {' '.join(overrides) or 'no overrides'}: "
                     f"{type(e).__name__}: {e}") from e
  return values.config


def flatten(cfg: ml_collections.ConfigDict | dict, prefix: str = "") -> dict[str, object]:
  items = cfg.items() if isinstance(cfg, dict) else cfg.to_dict().items()
  out: dict[str, object] = {}
  for key, value in items:
    if isinstance(value, (dict, ml_collections.ConfigDict)):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def check_same_budget(configs: dict[str, ml_collections.ConfigDict]) -> None:
  """Raises ValueError naming every field (other than the reward recipe) that differs."""
  names = list(configs)
  flat = {name: flatten(cfg) for name, cfg in configs.items()}
  for name in names:
    if configs[name].trainer != "rl":
      raise ValueError(f"arm {name!r} has trainer={configs[name].trainer!r}; compare trains RL "
                       "arms only")
  differ = []
  for name in names[1:]:
    keys = set(flat[names[0]]) | set(flat[name])
    differ += [f"{k}: {names[0]}={flat[names[0]].get(k)!r} {name}={flat[name].get(k)!r}"
               for k in sorted(keys - RECIPE_FIELDS) if flat[names[0]].get(k) != flat[name].get(k)]
  if differ:
    raise ValueError("arms must share everything but the reward recipe; differing: "
                     + "; ".join(differ))


def check_resumable(workdir: pathlib.Path, cfg: ml_collections.ConfigDict) -> None:
  """An arm's workdir written with another config (beyond its step budget) is not resumed.
  Fields the workdir's config lacks (added to the code since) are not compared."""
  path = workdir / "config.json"
  if not path.exists():
    return
  old, new = flatten(json.loads(path.read_text())), flatten(json.loads(cfg.to_json()))
  differ = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(old)
            if k not in RESUMABLE_FIELDS and old[k] != new.get(k)]
  if differ:
    raise ValueError(f"{path} was written with another config ({'; '.join(differ)}); pick a "
                     "new --workdir or rerun with the same arguments")


def arm_finished(workdir: pathlib.Path, cfg: ml_collections.ConfigDict) -> bool:
  """Trained to the end and evaluated there (the last thing an arm's trainer writes but the
  report)."""
  steps = cfg.train.steps
  return (workdir / "eval" / f"step_{steps}.json").exists() or (
      cfg.train.eval_every <= 0 and (workdir / "report.md").exists())


def _last_step(workdir: pathlib.Path) -> int:
  path = workdir / "metrics.jsonl"
  if not path.exists():
    return 0
  steps = [json.loads(line).get("step", 0) for line in path.read_text().splitlines()
           if line.strip()]
  return max(steps, default=0)


class ArmProcess:
  """One arm's `python -m precisecoder.train` child, logging to `<workdir>/train.log`."""

  def __init__(self, name: str, config_file: pathlib.Path, preset: str,
               overrides: Sequence[str], workdir: pathlib.Path, steps: int):
    self.name, self.workdir, self.steps = name, workdir, steps
    workdir.mkdir(parents=True, exist_ok=True)
    self.log_path = workdir / "train.log"
    self._log = open(self.log_path, "a")
    self.started = time.perf_counter()
    command = [sys.executable, "-m", "precisecoder.train", f"--config={config_file}:{preset}",
               f"--workdir={workdir}", *overrides]
    self._log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
    self._log.flush()
    self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                    env=dict(os.environ))
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


def run_arms(arms: dict[str, tuple[pathlib.Path, ml_collections.ConfigDict]], preset: str,
             overrides: Sequence[str], workdir: pathlib.Path, parallel: int
             ) -> tuple[dict[str, int], dict[str, float]]:
  """Trains the unfinished arms, `parallel` at a time; (exit status, wall seconds) per arm."""
  pending = []
  codes: dict[str, int] = {}
  for name, (config_file, cfg) in arms.items():
    if arm_finished(workdir / name, cfg):
      logging.info("arm %s: already finished in %s", name, workdir / name)
      codes[name] = 0
    else:
      pending.append((name, config_file, cfg))
  running: list[ArmProcess] = []
  walls: dict[str, float] = {}
  t0 = last_progress = time.perf_counter()
  try:
    while pending or running:
      while pending and len(running) < parallel:
        name, config_file, cfg = pending.pop(0)
        running.append(ArmProcess(name, config_file, preset, overrides, workdir / name,
                                  cfg.train.steps))
      time.sleep(1.0)
      for arm in list(running):
        code = arm.poll()
        if code is None:
          continue
        running.remove(arm)
        codes[arm.name], walls[arm.name] = code, arm.wall_s
        if code:
          logging.error("arm %s: exit status %d after %.0f s; last lines of %s:\n%s", arm.name,
                        code, arm.wall_s, arm.log_path, arm.tail())
        else:
          logging.info("arm %s: done in %.0f s", arm.name, arm.wall_s)
      if running and time.perf_counter() - last_progress >= PROGRESS_EVERY_S:
        last_progress = time.perf_counter()
        logging.info("compare: %.0f s; %s; %d arm(s) waiting", last_progress - t0, "; ".join(
            f"{a.name} step {_last_step(a.workdir)}/{a.steps}" for a in running), len(pending))
  finally:
    for arm in running:  # interrupted: stop the children cleanly, resumable next time
      arm.terminate()
  return codes, walls


def _parser(prog: str) -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=prog, description="Train reward recipes side by side from the same base, tasks, seed "
      "and budget; evaluate each every train.eval_every steps on the same held-in tasks and "
      "clean programs; write WORKDIR/report.md (+ report.json, PNGs). Extra --config.a.b=v "
      "arguments override every arm's config. Rerunning resumes unfinished arms.")
  parser.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                      help=f"comma-separated config names in --configs (known: "
                      f"{', '.join(KNOWN_ARMS)}); default %(default)s")
  parser.add_argument("--preset", default="compare-cpu",
                      help="model/budget preset of precisecoder/train/config.py, e.g. "
                      "compare-cpu, compare-h200, tiny; default %(default)s")
  parser.add_argument("--workdir", default="runs/compare", help="default %(default)s")
  parser.add_argument("--parallel", type=int, default=1,
                      help="arms trained at once, each its own process (memory adds up); "
                      "default %(default)s; README has measured times of both")
  parser.add_argument("--configs", type=pathlib.Path, default=None,
                      help="directory of the arms' config files; default the repository's configs/")
  parser.add_argument("--report-only", action="store_true",
                      help="rebuild the report from the arms' workdirs without training")
  return parser


def main(argv: Sequence[str] | None = None, prog: str = "precisecoder compare") -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  parser = _parser(prog)
  args, rest = parser.parse_known_args(argv)
  overrides = [a for a in rest if a.startswith("--config.")]
  if len(overrides) != len(rest):
    parser.error(f"unrecognized arguments: {' '.join(a for a in rest if a not in overrides)}")
  if args.parallel < 1:
    parser.error("--parallel must be at least 1")
  logging.set_verbosity(logging.INFO)
  configs_dir = args.configs or default_configs_dir()
  names = [a.strip() for a in args.arms.split(",") if a.strip()]
  if len(names) != len(set(names)) or not names:
    parser.error(f"--arms {args.arms!r}: give each arm once")
  arms = {}
  try:
    for name in names:
      config_file = configs_dir / f"{name}.py"
      if not config_file.exists():
        parser.error(f"--arms: no config {config_file} (known arms: {', '.join(KNOWN_ARMS)})")
      arms[name] = (config_file, resolve_config(config_file, args.preset, overrides))
    check_same_budget({name: cfg for name, (_, cfg) in arms.items()})
    workdir = pathlib.Path(args.workdir)
    for name, (_, cfg) in arms.items():
      if not args.report_only:
        check_resumable(workdir / name, cfg)
  except ValueError as e:
    print(f"{prog}: {e}", file=sys.stderr)
    return 2
  workdir.mkdir(parents=True, exist_ok=True)
  run_path = workdir / "compare.json"
  run = json.loads(run_path.read_text()) if run_path.exists() else {"wall_s": {}}
  run.update(arms=names, preset=args.preset, overrides=overrides)
  codes: dict[str, int] = {}
  if not args.report_only:
    t0 = time.perf_counter()
    codes, walls = run_arms(arms, args.preset, overrides, workdir, args.parallel)
    for name, seconds in walls.items():  # a resumed arm's time adds to its earlier runs'
      run["wall_s"][name] = run["wall_s"].get(name, 0.0) + seconds
    run.setdefault("invocations", []).append(
        {"time": time.strftime("%Y-%m-%d %H:%M:%S"), "parallel": args.parallel,
         "trained": sorted(walls), "wall_s": time.perf_counter() - t0})
    run_path.write_text(json.dumps(run, indent=1) + "\n")
  from precisecoder.analysis import comparison  # matplotlib only once training is over
  path = comparison.write(workdir, names, run)
  print(f"Report: {path}", flush=True)
  failed = sorted(name for name, code in codes.items() if code)
  if failed:
    print(f"{prog}: arms failed: {', '.join(failed)} (see WORKDIR/<arm>/train.log)",
          file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(prog="python -m precisecoder.train.compare"))
