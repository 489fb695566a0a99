"""Paired A/B of `score`'s speed: two source trees on bench_score.py's batch, in alternating turns.

On a shared machine wall-clock figures move with the load by more than a speed change is worth;
two pools measured in alternating turns see the same load, so their ratio, turn by turn, does not.
Each tree runs in its own process (PYTHONPATH=TREE) holding an ExecutionPool and bench_score's
batch (384 predictions over 64 tasks); the turns alternate which side goes first. Per pair it
prints both sides' wall seconds and whole-process-tree CPU seconds (the side, its workers and
every run they forked); at the end, the median and range of the ratios candidate/base of wall,
tree CPU and the scoring process's own CPU, and whether every turn scored every pair the same.

  python benchmarks/ab_score.py --base ../main/src [--candidate src] [--pairs 20] [--tasks 64]
      [--base-env KEY=VALUE ...] [--candidate-env KEY=VALUE ...]

--base-env and --candidate-env set environment variables of one side only (the same tree with
and without an environment switch, for example).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

from cpu_time import tree_cpu

HERE = pathlib.Path(__file__).resolve().parent


def side(tasks: int) -> None:
  """One side: scores the batch on each line of stdin, answers one JSON line per turn."""
  import bench_score  # pylint: disable=import-outside-toplevel
  from precisecoder import rewards  # pylint: disable=import-outside-toplevel
  from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel

  with ExecutionPool(workers=2) as pool:
    batch_tasks, programs = [], []
    for task in bench_score.build_tasks(pool, tasks, "mutate"):
      for program in bench_score.make_predictions(task, "statement"):
        batch_tasks.append(task)
        programs.append(program)
    for _ in range(2):  # warm-up turns: the pool learns run durations, caches fill
      rewards.RewardScorer(pool).score_samples(batch_tasks, programs)
    print("ready", flush=True)
    for _ in sys.stdin:
      cpu, own, wall = tree_cpu(os.getpid()), time.process_time(), time.perf_counter()
      scorer = rewards.RewardScorer(pool)  # a fresh one each turn, as bench_score's `score`
      scores = scorer.score_samples(batch_tasks, programs)
      wall, own = time.perf_counter() - wall, time.process_time() - own
      cpu = tree_cpu(os.getpid()) - cpu
      rows = json.dumps([scorer.term_row(s) for s in scores], sort_keys=True)
      print(
        json.dumps(
          {
            "wall": wall,
            "cpu": cpu,
            "parent": own,
            "rows": hashlib.blake2b(rows.encode(), digest_size=16).hexdigest(),
            "executed": scorer.stats()["programs_executed"],
          }
        ),
        flush=True,
      )


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--base", help="the source tree to compare against (required)")
  parser.add_argument("--candidate", default=str(HERE.parent / "src"))
  parser.add_argument("--pairs", type=int, default=20)
  parser.add_argument("--tasks", type=int, default=64)
  for name in ("base", "candidate"):
    parser.add_argument(
      f"--{name}-env",
      action="append",
      default=[],
      metavar="KEY=VALUE",
      help=f"an environment variable of the {name} side only",
    )
  parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.side:
    side(args.tasks)
    return
  if args.base is None:
    parser.error("--base is required")
  procs = {}
  for name, tree in (("base", args.base), ("candidate", args.candidate)):
    tree = os.path.abspath(tree)
    if not (pathlib.Path(tree) / "precisecoder").is_dir():
      raise SystemExit(f"--{name} {tree}: no precisecoder package there")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, str(HERE)]))
    for item in getattr(args, f"{name}_env"):
      key, equals, value = item.partition("=")
      if not equals:
        parser.error(f"--{name}-env {item}: not KEY=VALUE")
      env[key] = value
    procs[name] = subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, __file__, "--side", "--tasks", str(args.tasks)],
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      text=True,
      env=env,
      cwd="/",
    )
  for name, proc in procs.items():
    if proc.stdout.readline().strip() != "ready":
      raise SystemExit(f"the {name} side failed to start")
  print("load average at the start (1, 5, 15 min): %.2f, %.2f, %.2f" % os.getloadavg())
  turns: dict[str, list[dict]] = {"base": [], "candidate": []}
  for i in range(args.pairs):
    for name in ("base", "candidate") if i % 2 == 0 else ("candidate", "base"):
      procs[name].stdin.write("go\n")
      procs[name].stdin.flush()
      turns[name].append(json.loads(procs[name].stdout.readline()))
    b, c = turns["base"][-1], turns["candidate"][-1]
    print(
      f"pair {i:2d}  base {b['wall']:.3f} s / {b['cpu']:.2f} s CPU  candidate "
      f"{c['wall']:.3f} s / {c['cpu']:.2f} s CPU  ratio {c['wall'] / b['wall']:.3f} "
      f"(CPU {c['cpu'] / b['cpu']:.3f})  same scores {b['rows'] == c['rows']}",
      flush=True,
    )
  for proc in procs.values():
    proc.stdin.close()
    proc.wait()
  for key, what in (("wall", "wall"), ("cpu", "tree CPU"), ("parent", "scorer CPU")):
    ratios = [c[key] / b[key] for b, c in zip(turns["base"], turns["candidate"])]
    print(
      f"{what:10s} candidate/base median {statistics.median(ratios):.3f}, range "
      f"{min(ratios):.3f}-{max(ratios):.3f}, candidate faster in "
      f"{sum(r < 1 for r in ratios)}/{len(ratios)}; medians "
      f"{statistics.median(t[key] for t in turns['base']):.3f} vs "
      f"{statistics.median(t[key] for t in turns['candidate']):.3f} s"
    )
  same = all(b["rows"] == c["rows"] for b, c in zip(turns["base"], turns["candidate"]))
  print(
    f"every turn scored every pair the same: {same}; executions a turn "
    f"{turns['base'][0]['executed']} vs {turns['candidate'][0]['executed']}"
  )
  print("load average at the end (1, 5, 15 min): %.2f, %.2f, %.2f" % os.getloadavg())
  if not same:
    raise SystemExit(1)


if __name__ == "__main__":
  main()
