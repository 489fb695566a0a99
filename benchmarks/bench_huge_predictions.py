"""`precisecoder score` on 2 MB completions beside the same predictions at their usual size.

Three 2 MB completions of one generated task: many short lines (over --max-program-lines),
one long line (over the character cap) and a long thinking trace before the fix (scored as
usual); the small arm has the fix alone in each. Each arm is scored --repeats times, in turns,
by the CLI in this process on a real pool; prints each arm's median wall seconds and the CPU
milliseconds of this process (reading, extracting, capping, diffing, scoring; the sandbox's
runs are the same in both arms), and the ratios. The goal (issue 10): the 2 MB file scores in
under 2 s, because the capped programs are neither diffed nor run (tests/commands/test_score.py
checks that they never reach the pool).

  python benchmarks/bench_huge_predictions.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pathlib
import tempfile
import time

import numpy as np

from precisecoder import cli, tasks as tasks_lib
from precisecoder.data import generator
from results import add_record_flag, recorded


def _predictions(fix: str, huge: bool) -> list[dict]:
  lines = "".join(f"v{i} = {i}\n" for i in range(300_000))[:2_000_000] if huge else ""
  long_line = f"s = '{'x' * 2_000_000}'\n" if huge else ""
  thinking = "why? " * 400_000 if huge else "why?"
  return [
    {"task_id": "t", "completion": f"```python\n{fix}{lines}```"},
    {"task_id": "t", "completion": f"```python\n{fix}{long_line}```"},
    {"task_id": "t", "completion": f"<think>{thinking}</think>```python\n{fix}```"},
  ]


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=5)
  add_record_flag(parser)
  args = parser.parse_args()
  if args.repeats < 1:
    parser.error("--repeats must be at least 1")
  task = generator.make_tasks("validation", "easy", 1, seed=0)[0]
  with tempfile.TemporaryDirectory() as folder:
    root = pathlib.Path(folder)
    tasks_lib.write_tasks(
      root / "tasks.jsonl", [tasks_lib.Task(**{**task.__dict__, "task_id": "t"})]
    )
    files = {}
    for name, huge in (("2 MB", True), ("small", False)):
      files[name] = root / f"{name.replace(' ', '')}.jsonl"
      files[name].write_text(
        "".join(json.dumps(p) + "\n" for p in _predictions(task.gt_solution, huge))
      )
    wall, cpu = {name: [] for name in files}, {name: [] for name in files}
    for _ in range(args.repeats):
      for name, path in files.items():
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
          status = cli.main(
            [
              "score",
              "--tasks",
              str(root / "tasks.jsonl"),
              "--predictions",
              str(path),
              "--output",
              str(root / "scores.jsonl"),
              "--json",
              "--workers",
              "1",
            ]
          )
        wall[name].append(time.perf_counter() - start_wall)
        cpu[name].append(time.process_time() - start_cpu)
        assert status == 0, (name, status)
  print(f"median of {args.repeats} turns (each a fresh `score`: pool start-up included)")
  print(f"{'predictions':<12} {'wall s':>7} {'CPU ms (this process)':>22}")
  for name in files:
    print(f"{name:<12} {np.median(wall[name]):7.2f} {1e3 * np.median(cpu[name]):22.1f}")
  print(
    f"2 MB / small: wall {np.median(wall['2 MB']) / np.median(wall['small']):.2f}x, "
    f"CPU {np.median(cpu['2 MB']) / np.median(cpu['small']):.2f}x"
  )
  print("load average at the end (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
  main()
