"""`precisecoder compare`: train reward recipes side by side and report them.

    precisecoder compare [--arms grpo,precisecoder] [--preset compare-cpu] [--workdir runs/compare]
        [--parallel N] [--configs DIR] [--seeds 0,1,2] [--remeasure N] [--report-only]
        [--config.a.b=v ...]

The arms and their trainer processes are experiments/compare_arms.py's; the report,
`<workdir>/report.md` and `report.json` (analysis/compare_report.py), is rebuilt on every run, so
a rerun that trains nothing (every arm finished) or `--report-only` just rewrites it.
`--remeasure N` then measures the finished runs on more held-out (and held-in) tasks than their
evaluation had (experiments/remeasure.py). Ctrl-C stops the arms as a preemption does (each saves a
checkpoint of the step it finished) and exits 130 with one line; the same command resumes them.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

from absl import logging

from precisecoder import console
from precisecoder.commands import checks
from precisecoder.experiments import compare_arms
from precisecoder.train import config as config_lib

PASSTHROUGH = True  # `--config.a.b=v` overrides are parsed here, not by argparse's parser
PROG = "precisecoder compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.description = (
    "Train reward recipes side by side from the same base, tasks, seed and budget; evaluate "
    "each every train.eval_every steps on the same validation tasks, clean programs and "
    "held-in tasks; write WORKDIR/report.md (+ report.json, PNGs). Rerunning resumes "
    "unfinished arms. Ctrl-C stops the arms as a preemption does (each checkpoints its step) "
    "and exits 130."
  )
  parser.epilog = "Extra --config.a.b=v arguments override every arm's config."
  parser.add_argument(
    "--arms",
    default=",".join(compare_arms.DEFAULT_ARMS),
    help=f"comma-separated config names in --configs (known: {', '.join(compare_arms.KNOWN_ARMS)})",
  )
  parser.add_argument(
    "--preset",
    default="compare-cpu",
    help="run preset (RUN_PRESETS in precisecoder/train/config.py), e.g. "
    "compare-cpu, compare-h200, tiny",
  )
  parser.add_argument(
    "--workdir",
    default="runs/compare",
    help="folder of the comparison: one workdir per arm, the report",
  )
  parser.add_argument(
    "--parallel",
    type=checks.positive_int,
    default=1,
    help="arms trained at once, each its own process (memory adds up); "
    "docs/compare.md says when it helps",
  )
  parser.add_argument(
    "--configs",
    type=pathlib.Path,
    default=None,
    help="directory of the arms' config files (default: the repository's configs/)",
  )
  parser.add_argument(
    "--seeds",
    default="",
    help="comma-separated run seeds (--config.seed), each arm trained once "
    "per seed in WORKDIR/<arm>/seed_<k> (default: one run per arm in "
    "WORKDIR/<arm> at the config's seed)",
  )
  parser.add_argument(
    "--report-only",
    action="store_true",
    help="rebuild the report from the arms' workdirs without training",
  )
  parser.add_argument(
    "--remeasure",
    type=checks.non_negative_int,
    default=0,
    metavar="N",
    help="once every run has finished, measure the base and each run's last checkpoint on N "
    "fresh held-out buggy tasks and N correct programs, and as many held-in ones where the "
    "runs evaluate held-in tasks (the report's wider measurements: narrower intervals; "
    "measured ones are kept) (default: 0, none)",
  )
  parser.add_argument("--verbose", action="store_true", help=console.VERBOSE_HELP)


def _arms(
  names: Sequence[str], configs_dir: pathlib.Path, preset: str, overrides: Sequence[str]
) -> dict[str, tuple[pathlib.Path, Any]]:
  """Each arm's config file and resolved config. Raises InputError."""
  arms = {}
  for name in names:
    config_file = configs_dir / f"{name}.py"
    if not config_file.is_file():
      raise checks.InputError(
        f"--arms: no config {config_file} (known arms: {', '.join(compare_arms.KNOWN_ARMS)})"
      )
    try:
      arms[name] = (config_file, compare_arms.resolve_config(config_file, preset, overrides))
    except (ValueError, config_lib.ConfigError) as e:
      raise checks.InputError(str(e)) from None
  return arms


def _check_workdir(args: argparse.Namespace, runs: Sequence[compare_arms.RunSpec]) -> pathlib.Path:
  """The comparison's folder, writable; for --report-only, one that some run has run in."""
  workdir = checks.output_folder(args.workdir, "--workdir", make=not args.report_only)
  if args.report_only:
    if not any((spec.workdir / "config.json").exists() for spec in runs):
      arm_dir = "<arm>/seed_<k>" if args.seeds.strip() else "<arm>"
      raise checks.InputError(
        f"--workdir {args.workdir}: no arm has run there (no {workdir}/{arm_dir}/config.json "
        f"for any of {', '.join(dict.fromkeys(spec.arm for spec in runs))}); nothing to "
        "report"
      )
  else:
    for spec in runs:
      try:
        config_lib.check_resumable(spec.workdir, spec.cfg)
      except config_lib.ConfigError as e:
        raise checks.InputError(str(e)) from None
  return workdir


def _seeds(text: str) -> list[int]:
  try:
    seeds = [int(x) for x in text.split(",") if x.strip()]
  except ValueError:
    raise ValueError(f"--seeds {text!r}: want comma-separated integers, e.g. 0,1,2") from None
  if len(seeds) != len(set(seeds)) or any(s < 0 for s in seeds):
    raise ValueError(f"--seeds {text!r}: give each non-negative seed once")
  return seeds


def main(argv: Sequence[str]) -> int:
  parser = checks.command_parser(PROG, add_arguments)
  args, overrides = checks.parse_with_overrides(parser, argv)
  logging.set_verbosity(logging.INFO)
  console.quiet_libraries(args.verbose)
  configs_dir = args.configs or compare_arms.default_configs_dir()
  names = [a.strip() for a in args.arms.split(",") if a.strip()]
  if len(names) != len(set(names)) or not names:
    parser.error(f"--arms {args.arms!r}: give each arm once")
  if args.remeasure and args.report_only:
    parser.error("--remeasure measures checkpoints; --report-only only rewrites the report")
  try:
    arms = _arms(names, configs_dir, args.preset, overrides)
    twins = compare_arms.check_same_budget({name: cfg for name, (_, cfg) in arms.items()})
    seeds = _seeds(args.seeds)
    runs = compare_arms.run_specs(arms, args.preset, overrides, pathlib.Path(args.workdir), seeds)
    workdir = _check_workdir(args, runs)
  except (checks.InputError, ValueError) as e:
    print(f"{PROG}: error: {e}", file=sys.stderr)
    return 2
  run_path = workdir / "compare.json"
  run = json.loads(run_path.read_text()) if run_path.exists() else {"wall_s": {}}
  run.update(arms=names, preset=args.preset, overrides=overrides, seeds=seeds, twins=twins)
  codes: dict[str, int] = {}
  if not args.report_only:
    t0 = time.perf_counter()
    try:
      compare_arms.prepare_base(next(iter(arms.values()))[1])
      codes, walls = compare_arms.run_arms(runs, args.preset, args.parallel)
    except KeyboardInterrupt:  # the arms were stopped with SIGTERM: each saved its last step
      print(
        f"{PROG}: interrupted; each running arm saved a checkpoint of its last step in "
        f"{workdir}: rerun the same command to resume",
        file=sys.stderr,
        flush=True,
      )
      return 130
    for name, seconds in walls.items():  # a resumed arm's time adds to its earlier runs'
      run["wall_s"][name] = run["wall_s"].get(name, 0.0) + seconds
    run.setdefault("invocations", []).append(
      {
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "parallel": args.parallel,
        "trained": sorted(walls),
        "wall_s": time.perf_counter() - t0,
      }
    )
    run_path.write_text(json.dumps(run, indent=1) + "\n")
    if args.remeasure and not any(codes.values()):
      from precisecoder.experiments import remeasure  # pylint: disable=import-outside-toplevel

      try:
        remeasure.remeasure(runs, args.remeasure)
      except ValueError as e:
        print(f"{PROG}: error: --remeasure: {e}", file=sys.stderr)
        return 2
      except KeyboardInterrupt:  # what was measured is kept
        print(f"{PROG}: interrupted; rerun to measure the rest", file=sys.stderr, flush=True)
        return 130
  from precisecoder.analysis import compare_report  # matplotlib only once training is over

  path = compare_report.write(workdir, names, run, seeds=seeds)
  print(f"Report: {path}", flush=True)
  failed = sorted(name for name, code in codes.items() if code)
  if failed:
    print(
      f"{PROG}: arms failed: {', '.join(failed)} (see WORKDIR/<arm>/train.log)", file=sys.stderr
    )
    return 1
  return 0
