"""`precisecoder compare`: train reward recipes side by side and report them.

    precisecoder compare [--arms grpo,precisecoder] [--preset compare-cpu] [--workdir runs/compare]
        [--parallel N] [--configs DIR] [--report-only] [--config.a.b=v ...]

The arms and their trainer processes are train/compare.py's; the report, `<workdir>/report.md`
and `report.json` (analysis/comparison.py), is rebuilt on every run, so a rerun that trains
nothing (every arm finished) or `--report-only` just rewrites it.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from collections.abc import Sequence

from absl import logging

from precisecoder.train import compare

PASSTHROUGH = True  # `--config.a.b=v` overrides are parsed here, not by argparse's parser
PROG = "precisecoder compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
  del parser  # main() has its own parser (it must pass the --config.* overrides through)


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG, description="Train reward recipes side by side from the same base, tasks, seed "
      "and budget; evaluate each every train.eval_every steps on the same held-in tasks and "
      "clean programs; write WORKDIR/report.md (+ report.json, PNGs). Extra --config.a.b=v "
      "arguments override every arm's config. Rerunning resumes unfinished arms.")
  parser.add_argument("--arms", default=",".join(compare.DEFAULT_ARMS),
                      help=f"comma-separated config names in --configs (known: "
                      f"{', '.join(compare.KNOWN_ARMS)}); default %(default)s")
  parser.add_argument("--preset", default="compare-cpu",
                      help="model/budget preset of precisecoder/train/config.py, e.g. "
                      "compare-cpu, compare-h200, tiny; default %(default)s")
  parser.add_argument("--workdir", default="runs/compare", help="default %(default)s")
  parser.add_argument("--parallel", type=int, default=1,
                      help="arms trained at once, each its own process (memory adds up); "
                      "default %(default)s; README has measured times of both")
  parser.add_argument("--configs", type=pathlib.Path, default=None,
                      help="directory of the arms' config files; default the repository's configs/")
  parser.add_argument("--seeds", default="",
                      help="comma-separated run seeds (--config.seed), each arm trained once "
                      "per seed in WORKDIR/<arm>/seed_<k>; default: one run per arm in "
                      "WORKDIR/<arm> at the config's seed")
  parser.add_argument("--report-only", action="store_true",
                      help="rebuild the report from the arms' workdirs without training")
  return parser


def _seeds(text: str) -> list[int]:
  try:
    seeds = [int(x) for x in text.split(",") if x.strip()]
  except ValueError:
    raise ValueError(f"--seeds {text!r}: want comma-separated integers, e.g. 0,1,2") from None
  if len(seeds) != len(set(seeds)) or any(s < 0 for s in seeds):
    raise ValueError(f"--seeds {text!r}: give each non-negative seed once")
  return seeds


def parse_with_overrides(parser: argparse.ArgumentParser, argv: Sequence[str]
                         ) -> tuple[argparse.Namespace, list[str]]:
  """The parser's own flags, and the `--config.a.b=v` overrides it passes through (anything
  else is a usage error)."""
  args, rest = parser.parse_known_args(argv)
  overrides = [a for a in rest if a.startswith("--config.")]
  if len(overrides) != len(rest):
    parser.error(f"unrecognized arguments: {' '.join(a for a in rest if a not in overrides)}")
  return args, overrides


def main(argv: Sequence[str]) -> int:
  parser = _parser()
  args, overrides = parse_with_overrides(parser, argv)
  if args.parallel < 1:
    parser.error("--parallel must be at least 1")
  logging.set_verbosity(logging.INFO)
  configs_dir = args.configs or compare.default_configs_dir()
  names = [a.strip() for a in args.arms.split(",") if a.strip()]
  if len(names) != len(set(names)) or not names:
    parser.error(f"--arms {args.arms!r}: give each arm once")
  arms = {}
  try:
    for name in names:
      config_file = configs_dir / f"{name}.py"
      if not config_file.exists():
        parser.error(f"--arms: no config {config_file} "
                     f"(known arms: {', '.join(compare.KNOWN_ARMS)})")
      arms[name] = (config_file, compare.resolve_config(config_file, args.preset, overrides))
    compare.check_same_budget({name: cfg for name, (_, cfg) in arms.items()})
    workdir = pathlib.Path(args.workdir)
    seeds = _seeds(args.seeds)
    runs = compare.run_specs(arms, args.preset, overrides, workdir, seeds)
    for spec in runs:
      if not args.report_only:
        compare.check_resumable(spec.workdir, spec.cfg)
  except ValueError as e:
    print(f"{PROG}: {e}", file=sys.stderr)
    return 2
  workdir.mkdir(parents=True, exist_ok=True)
  run_path = workdir / "compare.json"
  run = json.loads(run_path.read_text()) if run_path.exists() else {"wall_s": {}}
  run.update(arms=names, preset=args.preset, overrides=overrides, seeds=seeds)
  codes: dict[str, int] = {}
  if not args.report_only:
    t0 = time.perf_counter()
    compare.prepare_base(next(iter(arms.values()))[1])
    codes, walls = compare.run_arms(runs, args.preset, args.parallel)
    for name, seconds in walls.items():  # a resumed arm's time adds to its earlier runs'
      run["wall_s"][name] = run["wall_s"].get(name, 0.0) + seconds
    run.setdefault("invocations", []).append(
        {"time": time.strftime("%Y-%m-%d %H:%M:%S"), "parallel": args.parallel,
         "trained": sorted(walls), "wall_s": time.perf_counter() - t0})
    run_path.write_text(json.dumps(run, indent=1) + "\n")
  from precisecoder.analysis import comparison  # matplotlib only once training is over
  path = comparison.write(workdir, names, run, seeds=seeds)
  print(f"Report: {path}", flush=True)
  failed = sorted(name for name, code in codes.items() if code)
  if failed:
    print(f"{PROG}: arms failed: {', '.join(failed)} (see WORKDIR/<arm>/train.log)",
          file=sys.stderr)
    return 1
  return 0
