"""In-process trusted checker vs the sandboxed pool, on the generator's mutants.

  python benchmarks/data_checkers.py [--per-family 1] [--workers 2]

The generator screens its own mutants in-process (TrustedCallChecker); the
build re-verifies in the pool. This prints, side by side, the verdict agreement
between the two on every single-line candidate of a sample of family members,
and both throughputs (runs per second) with their ratio.
"""

from __future__ import annotations

import argparse
import time

from precisecoder.data import injection, mutation
from precisecoder.data.checking import PoolChecker, TrustedCallChecker
from precisecoder.execution import ExecutionPool

from data_yield import generator_sources  # benchmarks/ is the working directory's sibling
from results import add_record_flag, recorded


@recorded
def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--per-family", type=int, default=1)
  parser.add_argument("--workers", type=int, default=2)
  add_record_flag(parser)
  args = parser.parse_args()
  sources = generator_sources(args.per_family, seed=1)
  items = [(s.code, s.tests) for s in sources]
  for s in sources:
    items += [(mutation.apply_mutations(s.code, [m]), s.tests) for m in injection.candidates(s)]
  started = time.perf_counter()
  trusted = TrustedCallChecker().passes(items)
  trusted_s = time.perf_counter() - started
  with ExecutionPool(workers=args.workers) as pool:
    started = time.perf_counter()
    pooled = PoolChecker(pool, timeout_s=3.0).passes(items)
    pool_s = time.perf_counter() - started
  agree = sum(a == b for a, b in zip(trusted, pooled))
  print(f"programs: {len(items)} ({len(sources)} correct + mutants)")
  print(
    f"verdict agreement: {agree} / {len(items)}; pass verdicts: trusted {sum(trusted)}, "
    f"pool {sum(pooled)}"
  )
  print(
    f"| checker | runs/s |\n|---|---|\n| in-process trusted | {len(items) / trusted_s:.0f} |\n"
    f"| sandboxed pool ({args.workers} workers) | {len(items) / pool_s:.0f} |"
  )
  print(f"speed ratio trusted / pool: {pool_s / trusted_s:.1f}x")
  for i, (a, b) in enumerate(zip(trusted, pooled)):
    if a != b:
      print(f"disagreement: trusted={a} pool={b}\n{items[i][0]}")
      break


if __name__ == "__main__":
  main()
