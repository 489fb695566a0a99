"""Per-run cost of split runs: the same jobs through a pool with split runs off and on, in turns.

Two pools (`ExecutionPool(unsafe_one_process=True)` and the default) run the same batches of
--jobs distinct `add` programs under each kind of test, alternating which goes first each round,
so both see the same load. Kinds: an assert job the pool holds (one process either way:
docs/sandbox.md, "Held jobs"), an assert job it does not hold (expected values computed by
the tests: a split run), a unittest job, and an assert job whose tests call the program 100 times
in a loop, drawing from `random` between the calls. Prints each kind's median wall milliseconds
per run over the rounds, both ways, their ratio, and the load average.

  python benchmarks/bench_split.py [--jobs 200] [--rounds 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from precisecoder.execution import ExecutionPool, Job, Limits
from results import add_record_flag, recorded

_CHECKS = "  assert candidate(2, 3) == {}\n  assert candidate(40, 2) == {}\n"
KINDS = {
  "assert, held": {
    "kind": "assert",
    "code": "def check(candidate):\n" + _CHECKS.format(5, 42) + "check(add)\n",
  },
  "assert, not held": {
    "kind": "assert",
    "code": "def check(candidate):\n" + _CHECKS.format("2 + 3", "40 + 2") + "check(add)\n",
  },
  "unittest": {
    "kind": "unittest",
    "classes": ["T"],
    "code": "import unittest\nclass T(unittest.TestCase):\n  def test_a(self):\n"
    "    self.assertEqual(add(2, 3), 5)\n"
    "  def test_b(self):\n    self.assertEqual(add(40, 2), 42)\n",
  },
  "assert, 100 calls, random": {
    "kind": "assert",
    "code": "import random\nfor _ in range(100):\n"
    "  x, y = random.randint(0, 99), random.randint(0, 99)\n  assert add(x, y) == x + y\n",
  },
}


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--jobs", type=int, default=200)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--workers", type=int, default=2)
  add_record_flag(parser)
  args = parser.parse_args()
  limits = Limits(timeout_s=20.0)
  programs = [f"def add(a, b):\n  return a + b + {i} - {i}\n" for i in range(args.jobs)]
  ms: dict[tuple[str, bool], list[float]] = {}
  print("load average at the start (1, 5, 15 min): %.2f, %.2f, %.2f" % os.getloadavg())
  with (
    ExecutionPool(workers=args.workers, unsafe_one_process=True) as plain,
    ExecutionPool(workers=args.workers) as split,
  ):
    pools = {False: plain, True: split}
    for turn in range(args.rounds + 1):  # the first round warms both pools up, and is not counted
      for name, tests in KINDS.items():
        jobs = [Job(program, tests, limits) for program in programs]
        for split_on in (False, True) if turn % 2 else (True, False):
          start = time.perf_counter()
          results = pools[split_on].execute(jobs)
          seconds = time.perf_counter() - start
          failed = [r for r in results if not r.passed]
          if failed:
            raise SystemExit(f"{name}, split {split_on}: {failed[0].status} {failed[0].detail}")
          if turn:
            ms.setdefault((name, split_on), []).append(1000 * seconds / len(jobs))
  print(
    f"wall ms per run, median of {args.rounds} rounds of {args.jobs} jobs, {args.workers} workers"
  )
  print(f"{'tests':<28} {'one process':>12} {'split':>8} {'ratio':>7}")
  for name in KINDS:
    one, two = (statistics.median(ms[name, s]) for s in (False, True))
    print(f"{name:<28} {one:12.2f} {two:8.2f} {two / one:6.2f}x")
  print("load average at the end (1, 5, 15 min): %.2f, %.2f, %.2f" % os.getloadavg())


if __name__ == "__main__":
  main()
