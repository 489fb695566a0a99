"""`precisecoder data`: build, verify, describe and convert task sets.

  precisecoder data build generator --out DIR [--tier easy] [--train N] [--validation N]
                                    [--test N] [--clean N] [--seed S]
  precisecoder data build humaneval --out DIR [--kinds single,multi,clean] [--seed S]
  precisecoder data build repository --out DIR [--validation N] [--test N] [--clean N]
                                     [--seed S]
  precisecoder data build pdb --records PATH --out DIR [--bigcodebench PATH]
                              [--livecodebench PATH] [--name NAME]
  precisecoder data build bigcodebench --records PATH [PATH ...] --out DIR [--name NAME]
  precisecoder data build tfds --split train=T.jsonl [--split validation=V.jsonl]
                               --data-dir DIR [--config NAME]
  precisecoder data verify TASKS.jsonl [...]
  precisecoder data card TASKS.jsonl [...] [--json]

Every `build` (except tfds) writes task files, a data card (card.json,
CARD.md), and a summary.json with the full verification in the sandboxed pool
(gold passes, buggy fails, every bug necessary, every multi-line bug atomic,
gt_diff round trip); the exit status is 1 if any check fails. Exit status 2 is
for unusable inputs. Programs run under --python (default: this interpreter); where reference
programs cannot import a module, a line names the environment their task set needs.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any, Sequence

import tqdm

from precisecoder.commands import checks
from precisecoder.data import cards, environments, generator, verification
from precisecoder.tasks import Task, TaskError, load_tasks, write_tasks


def add_arguments(parser: argparse.ArgumentParser) -> None:
  sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
  build = sub.add_parser("build", help="build a task set into a folder")
  what = build.add_subparsers(dest="what", required=True, metavar="SET")

  gen = what.add_parser("generator", help="seeded small-function tasks (train/validation/test)")
  gen.add_argument(
    "--tier", choices=generator.TIERS, default="easy", help="bug difficulty (docs/data.md)"
  )
  gen.add_argument("--train", type=checks.non_negative_int, default=2000, help="buggy train tasks")
  gen.add_argument(
    "--validation", type=checks.non_negative_int, default=200, help="buggy validation tasks"
  )
  gen.add_argument("--test", type=checks.non_negative_int, default=200, help="buggy test tasks")
  gen.add_argument(
    "--clean",
    type=checks.non_negative_int,
    default=100,
    help="clean tasks per validation/test split",
  )
  gen.add_argument("--seed", type=int, default=0, help="generation seed")

  he = what.add_parser("humaneval", help="HumanEval single-line, multi-line and clean sets")
  he.add_argument(
    "--kinds",
    default="single,multi,clean",
    help="comma-separated sets to build: single, multi, clean",
  )
  he.add_argument("--seed", type=int, default=0, help="bug-injection seed")

  repo = what.add_parser(
    "repository", help="modules of 3-5 functions with one buggy function (evaluation)"
  )
  repo.add_argument(
    "--validation", type=checks.non_negative_int, default=50, help="buggy validation modules"
  )
  repo.add_argument("--test", type=checks.non_negative_int, default=200, help="buggy test modules")
  repo.add_argument(
    "--clean", type=checks.non_negative_int, default=50, help="clean modules per split"
  )
  repo.add_argument("--seed", type=int, default=0, help="generation seed")

  pdb = what.add_parser("pdb", help="PDB records joined with local source-benchmark tests")
  pdb.add_argument("--records", required=True, help="PDB parquet / JSON / JSONL file or folder")
  pdb.add_argument("--bigcodebench", help="local BigCodeBench copy (JSON/JSONL/parquet)")
  pdb.add_argument("--livecodebench", help="local LiveCodeBench code_generation_lite copy")
  pdb.add_argument("--name", default="pdb", help="output file stem")

  bcb = what.add_parser(
    "bigcodebench", help="clean tasks from BigCodeBench records: each gold program as is"
  )
  bcb.add_argument(
    "--records",
    required=True,
    nargs="+",
    help="BigCodeBench JSON / JSONL / parquet files or folders (PDB's data files)",
  )
  bcb.add_argument("--name", default="bigcodebench_clean", help="output file stem")
  bcb.add_argument(
    "--task-timeout",
    type=checks.positive_float,
    default=20.0,
    help="the tasks' timeout_s (BigCodeBench's own harness allows 20 s)",
  )

  tfds = what.add_parser("tfds", help="TFDS ArrayRecord dataset from task files")
  tfds.add_argument(
    "--split",
    action="append",
    required=True,
    metavar="NAME=PATH",
    help="a split and its task file (repeat for several)",
  )
  tfds.add_argument("--data-dir", required=True, help="TFDS data directory to write into")
  tfds.add_argument("--config", default="default", help="TFDS builder config name")

  ver = sub.add_parser("verify", help="fully verify task files in the sandboxed pool")
  ver.add_argument("paths", nargs="+", metavar="TASKS.jsonl", help="task files")
  for b in (gen, he, repo, pdb, bcb, ver):
    if b is not ver:
      b.add_argument("--out", required=True, help="output folder")
    b.add_argument(
      "--workers",
      type=checks.workers,
      default=None,
      help=f"execution workers, 1 to {checks.MAX_WORKERS} (default: CPUs)",
    )
    b.add_argument("--python", type=checks.python, default=None, help=checks.PYTHON_HELP)
    b.add_argument(
      "--timeout",
      type=checks.positive_float,
      default=3.0,
      help="seconds per verification run (mutants that loop forever time out)",
    )

  card = sub.add_parser("card", help="print the data card of task files")
  card.add_argument("paths", nargs="+", metavar="TASKS.jsonl", help="task files")
  card.add_argument("--json", action="store_true", help="print the cards as JSON")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _pool(args: argparse.Namespace):
  from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel

  return ExecutionPool(workers=args.workers, python=args.python)


def _checker(pool, timeout_s: float):
  from precisecoder.data.checking import PoolChecker  # pylint: disable=import-outside-toplevel

  return PoolChecker(pool, timeout_s=timeout_s)


def _verify(named: dict[str, list[Task]], checker) -> dict[str, Any]:
  """Full verification of every set, with a progress bar; {name: summary + failures}."""
  out: dict[str, Any] = {}
  for name, tasks in named.items():
    total = sum(len(verification.runs_for(t)) for t in tasks)
    with tqdm.tqdm(total=total, desc=f"verify {name}", unit="run", file=sys.stderr) as bar:
      report = verification.verify_tasks(tasks, checker, progress=bar.update)
    out[name] = {**report.summary(), "failures_first": report.failures[:20]}
  return out


def _environment(checker) -> list[str]:
  """What the checker's failed imports say about the interpreter (`environments.advice`)."""
  return environments.advice(checker.missing_modules, checker.python)


def _print_environment(lines: Sequence[str]) -> None:
  for line in lines:
    print(f"precisecoder data: {line}", file=sys.stderr)


def _write_set(out: pathlib.Path, name: str, tasks: list[Task]) -> dict[str, Any]:
  write_tasks(out / f"{name}.jsonl", tasks)
  return cards.data_card(tasks, name)


def _finish(out: pathlib.Path, summary: dict[str, Any], card_list: list[dict[str, Any]]) -> int:
  (out / "card.json").write_text(json.dumps(card_list, indent=1) + "\n")
  (out / "CARD.md").write_text("\n".join(cards.card_markdown(c) for c in card_list))
  (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
  failures = sum(v["failures"] for v in summary.get("verification", {}).values())
  for c in card_list:
    print(
      f"{c['name']:>28}: {c['tasks']:6d} tasks ({c['buggy']} buggy, {c['clean']} clean), "
      f"{c['program_lines_mean']:.1f} lines, bugs/task {c['by_bug_count']}"
    )
  for name, v in summary.get("verification", {}).items():
    status = "OK" if not v["failures"] else f"{v['failures']} FAILED"
    print(f"{name:>28}: verified {v['tasks']} tasks with {v['checks']} runs: {status}")
    for line in v["failures_first"]:
      print(f"    {line}")
  _print_environment(summary.get("environment", ()))
  print(f"wrote {out}/ (task files, card.json, CARD.md, summary.json)")
  return 1 if failures else 0


# ---------------------------------------------------------------------------
# Builds
# ---------------------------------------------------------------------------


def _build_generator(args: argparse.Namespace, out: pathlib.Path) -> int:
  sets: dict[str, list[Task]] = {}
  started = time.time()
  for split in ("train", "validation", "test"):
    n = getattr(args, split)
    if n:
      sets[f"{args.tier}_{split}"] = generator.make_tasks(
        split, args.tier, n, args.seed, progress=True
      )
    if split != "train" and args.clean:
      sets[f"clean_{split}"] = generator.make_clean_tasks(
        split, args.clean, args.seed, tier=args.tier
      )
  generated_s = time.time() - started
  card_list = [_write_set(out, name, tasks) for name, tasks in sets.items()]
  with _pool(args) as pool:
    checker = _checker(pool, args.timeout)
    summary = {
      "set": "generator",
      "tier": args.tier,
      "seed": args.seed,
      "generation_seconds": round(generated_s, 2),
      "verification": _verify(sets, checker),
      "environment": _environment(checker),
    }
  return _finish(out, summary, card_list)


def _build_repository(args: argparse.Namespace, out: pathlib.Path) -> int:
  from precisecoder.data import repository  # pylint: disable=import-outside-toplevel

  sets: dict[str, list[Task]] = {}
  for split in ("validation", "test"):
    if getattr(args, split):
      sets[f"repository_{split}"] = repository.make_tasks(
        split, getattr(args, split), args.seed, progress=True
      )
    if args.clean:
      sets[f"repository_clean_{split}"] = repository.make_tasks(
        split, args.clean, args.seed, buggy=False, progress=True
      )
  card_list = [_write_set(out, name, tasks) for name, tasks in sets.items()]
  with _pool(args) as pool:
    checker = _checker(pool, args.timeout)
    summary = {
      "set": "repository",
      "seed": args.seed,
      "verification": _verify(sets, checker),
      "environment": _environment(checker),
    }
  return _finish(out, summary, card_list)


def _build_humaneval(args: argparse.Namespace, out: pathlib.Path) -> int:
  from precisecoder.data import humaneval  # pylint: disable=import-outside-toplevel

  kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
  for kind in kinds:
    if kind not in humaneval.KINDS:
      raise ValueError(f"--kinds: unknown kind {kind!r}; expected some of {humaneval.KINDS}")
  sets, reports = {}, {}
  with _pool(args) as pool:
    checker = _checker(pool, args.timeout)
    for kind in kinds:
      tasks, report = humaneval.build(kind, checker, seed=args.seed, progress=True)
      sets[f"humaneval_{kind}"] = tasks
      reports[kind] = report
    summary = {
      "set": "humaneval",
      "seed": args.seed,
      "injection": reports,
      "verification": _verify(sets, checker),
      "environment": _environment(checker),
    }
  card_list = [_write_set(out, name, tasks) for name, tasks in sets.items()]
  for kind, report in reports.items():
    _print_yield(f"humaneval {kind}", report.get("yield"))
  return _finish(out, summary, card_list)


def _print_yield(title: str, table: dict[str, Any] | None) -> None:
  if not table:
    return
  print(f"injection yield, {title} (kept / attempted):")
  for key in ("category", "operator"):
    for name, v in table[key].items():
      rate = v["kept"] / v["attempted"] if v["attempted"] else 0.0
      print(f"  {key:>8} {name:>24}: {v['kept']:5d} / {v['attempted']:5d}  ({rate:.0%})")


def _build_pdb(args: argparse.Namespace, out: pathlib.Path) -> int:
  from precisecoder.data import pdb  # pylint: disable=import-outside-toplevel

  report = pdb.load_pdb(
    args.records, bigcodebench=args.bigcodebench, livecodebench=args.livecodebench
  )
  with _pool(args) as pool:
    checker = _checker(pool, args.timeout)
    failing = set(pdb.failing_gold(report.tasks, checker))
    kept = [t for t in report.tasks if t.task_id not in failing]
    summary = {
      "set": "pdb",
      "load": report.summary(),
      "gold_failing": sorted(failing),
      "missing_tests": report.missing_tests,
      "duplicates": report.duplicates,
      "malformed": report.malformed,
      "source_errors": report.source_errors,
      "verification": _verify({args.name: kept}, checker),
      "environment": _environment(checker),
    }
  print(f"PDB records: {json.dumps(report.summary())}, gold failing its tests: {len(failing)}")
  card_list = [_write_set(out, args.name, kept)]
  return _finish(out, summary, card_list)


def _build_bigcodebench(args: argparse.Namespace, out: pathlib.Path) -> int:
  from precisecoder.data import pdb  # pylint: disable=import-outside-toplevel

  report = pdb.bigcodebench_clean_tasks(args.records, timeout_s=args.task_timeout)
  with _pool(args) as pool:
    checker = _checker(pool, args.timeout)
    summary = {
      "set": "bigcodebench",
      "load": report.summary(),
      "missing_tests": report.missing_tests,
      "duplicates": report.duplicates,
      "malformed": report.malformed,
      "source_errors": report.source_errors,
      "verification": _verify({args.name: report.tasks}, checker),
      "environment": _environment(checker),
    }
  print(f"BigCodeBench records: {json.dumps(report.summary())}")
  card_list = [_write_set(out, args.name, report.tasks)]
  return _finish(out, summary, card_list)


def _build_tfds(args: argparse.Namespace) -> int:
  from precisecoder.data import tfds_builder  # pylint: disable=import-outside-toplevel

  splits = {}
  for item in args.split:
    name, sep, path = item.partition("=")
    if not sep or not name or not path:
      raise ValueError(f"--split {item!r}: expected NAME=PATH")
    splits[name] = path
  builder_dir = tfds_builder.build_tfds(splits, args.data_dir, config=args.config)
  for name in splits:
    print(f"{name}: {len(tfds_builder.tfds_source(builder_dir, name))} tasks")
  print(f"wrote {builder_dir}")
  return 0


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def _load(paths: Sequence[str]) -> dict[str, list[Task]]:
  return {path: load_tasks(path) for path in paths}


def main(args: argparse.Namespace) -> int:
  try:
    if args.action == "card":
      card_list = [cards.data_card(tasks, name) for name, tasks in _load(args.paths).items()]
      print(
        json.dumps(card_list, indent=1)
        if args.json
        else "\n".join(cards.card_markdown(c) for c in card_list)
      )
      return 0
    if args.action == "verify":
      named = _load(args.paths)
      with _pool(args) as pool:
        checker = _checker(pool, args.timeout)
        results = _verify(named, checker)
      _print_environment(_environment(checker))
      return _finish_verify(results)
    if args.what == "tfds":
      return _build_tfds(args)
    out = checks.output_folder(args.out, "--out")
    build = {
      "generator": _build_generator,
      "humaneval": _build_humaneval,
      "repository": _build_repository,
      "pdb": _build_pdb,
      "bigcodebench": _build_bigcodebench,
    }
    return build[args.what](args, out)
  except (TaskError, ValueError, FileNotFoundError, OSError, checks.InputError) as e:
    print(f"precisecoder data: error: {e}", file=sys.stderr)
    return 2


def _finish_verify(results: dict[str, Any]) -> int:
  failures = 0
  for name, v in results.items():
    failures += v["failures"]
    status = "OK" if not v["failures"] else f"{v['failures']} FAILED"
    print(f"{name}: {v['tasks']} tasks, {v['checks']} runs: {status}")
    for line in v["failures_first"]:
      print(f"    {line}")
  return 1 if failures else 0
