"""Mutation-engine yield: verified bugs kept / candidates attempted, per operator and category.

  python benchmarks/data_yield.py --source generator   # in-process checker (our own templates)
  python benchmarks/data_yield.py --source humaneval   # sandboxed pool (HumanEval's 164 problems)

Every candidate of every source program is verified (single-line: it must fail
the tests; multi-line: it must fail and no partial revert may pass), so the
table is the engine's full yield, not a sample.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import tqdm

from precisecoder.data import families, generator, humaneval, injection
from precisecoder.data.checking import PoolChecker, TrustedCallChecker
from results import add_record_flag, recorded


def generator_sources(per_family: int, seed: int) -> list[injection.Source]:
  rng = random.Random(seed)
  out = []
  for family in families.EASY + families.MEDIUM:
    for i in range(per_family):
      fn, _, code, knobs = family.render(rng)
      tests = generator.make_tests(family, fn, code, knobs, rng)
      out.append(injection.Source(f"{family.key}/{i}", code, tests))
  return out


def run(sources, checker, multi_line: bool) -> tuple[injection.Yield, int, float]:
  proposals = [injection.candidates(s, multi_line=multi_line) for s in sources]
  stats = injection.Yield()
  started = time.time()
  with tqdm.tqdm(total=sum(map(len, proposals)), unit="candidate", file=sys.stderr) as bar:
    kept = injection.verify(sources, proposals, checker, progress=bar.update, stats=stats)
  with_bug = sum(bool(k) for k in kept)
  return stats, with_bug, time.time() - started


def show(title: str, stats: injection.Yield, with_bug: int, n: int, seconds: float) -> None:
  table = stats.table()
  total_a = sum(v["attempted"] for v in table["operator"].values())
  total_k = sum(v["kept"] for v in table["operator"].values())
  print(
    f"\n## {title}: {total_k} / {total_a} kept ({total_k / max(total_a, 1):.1%}); "
    f"{with_bug} / {n} programs have a verified bug; {seconds:.1f} s"
  )
  print("| category / operator | kept | attempted | yield |\n|---|---|---|---|")
  for key in ("category", "operator"):
    for name, v in table[key].items():
      print(
        f"| {key}: {name} | {v['kept']} | {v['attempted']} | "
        f"{v['kept'] / max(v['attempted'], 1):.0%} |"
      )


@recorded
def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--source", choices=("generator", "humaneval"), default="generator")
  parser.add_argument("--per-family", type=int, default=4)
  parser.add_argument("--workers", type=int, default=None)
  add_record_flag(parser)
  args = parser.parse_args()
  if args.source == "generator":
    sources = generator_sources(args.per_family, seed=0)
    checker = TrustedCallChecker()
    for multi in (False, True):
      stats, with_bug, secs = run(sources, checker, multi)
      show(
        f"generator, {'multi-line' if multi else 'single-line'}",
        stats,
        with_bug,
        len(sources),
        secs,
      )
    return
  from precisecoder.execution import ExecutionPool  # pylint: disable=import-outside-toplevel

  sources = humaneval.sources()
  with ExecutionPool(workers=args.workers) as pool:
    checker = PoolChecker(pool, timeout_s=3.0)
    for multi in (False, True):
      stats, with_bug, secs = run(sources, checker, multi)
      show(
        f"HumanEval, {'multi-line' if multi else 'single-line'}",
        stats,
        with_bug,
        len(sources),
        secs,
      )


if __name__ == "__main__":
  main()
