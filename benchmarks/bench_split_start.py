"""Per-run time of split runs, for comparing two source trees side by side (fork vs exec).

Runs N small split jobs (an `add` program; assert tests whose check the pool does not hold, and
unittest tests) through one pool worker, one job at a time in a row, and prints the wall time per
run for each kind. Give each tree in turn on PYTHONPATH (the pool's worker runs the tree this
process imported), alternating, in the same minutes: the machine is shared.

  PYTHONPATH=TREE/src python benchmarks/bench_split_start.py [--jobs 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import precisecoder
from precisecoder.execution import ExecutionPool, Job, Limits


def program(index: int) -> str:
  """A program of its own per job: the pool runs one job per distinct program and tests."""
  return f"def add(a, b):\n  return a + b  # {index}\n"


TESTS = {
  # `> 4`: a check the pool does not hold, so the tests run in the test process, not the pool.
  "assert": {"kind": "assert", "code": "def check(f):\n  assert f(2, 3) > 4\ncheck(add)\n"},
  "unittest": {
    "kind": "unittest",
    "code": "import unittest\nclass T(unittest.TestCase):\n"
    "  def test_add(self):\n    self.assertGreater(add(2, 3), 4)\n",
  },
}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--jobs", type=int, default=100)
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args()
  limits = Limits(timeout_s=20.0, memory_mb=1024)
  tree = os.path.dirname(os.path.dirname(os.path.abspath(precisecoder.__file__)))
  with ExecutionPool(workers=1) as pool:
    pool.execute([Job(program(-i), TESTS["unittest"], limits) for i in range(1, 5)])  # warm-up
    for kind, tests in TESTS.items():
      per_run = []
      for _ in range(args.rounds):
        start = time.perf_counter()
        results = pool.execute([Job(program(i), tests, limits) for i in range(args.jobs)])
        per_run.append((time.perf_counter() - start) / args.jobs * 1e3)
        failed = [r for r in results if not r.passed]
        if failed:
          raise SystemExit(f"{kind}: {len(failed)} runs failed: {failed[0]}")
      rounds = " ".join(f"{ms:.1f}" for ms in per_run)
      load = " ".join(f"{x:.1f}" for x in os.getloadavg())
      print(
        f"{tree} {kind}: median {statistics.median(per_run):.1f} ms/run "
        f"(rounds {rounds}; load {load})",
        flush=True,
      )


if __name__ == "__main__":
  main()
