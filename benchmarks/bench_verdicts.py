"""Verdicts on real code: BigCodeBench gold programs through `precisecoder score`.

--set humaneval and --set builtin score other golds the same way, each of which must pass (a
failure is a false negative): HumanEval's 164 canonical solutions under HumanEval's own `check`
as `assert` tests, and the built-in task sets' golds (the shipped HumanEval single, multi and
clean sets; the repository sets' clean and buggy tasks; each generator tier's clean tasks).
`score` runs assert and unittest tests split (docs/sandbox.md), as always.

Builds a clean task from every BigCodeBench record of --bigcodebench (PDB's data files: the gold
program `code_prompt + "\\n" + canonical_solution` as both buggy_code and gt_solution, its
unittest tests; `data.pdb.bigcodebench_clean_tasks`), scores each gold as the prediction of its
own task with `precisecoder score --python PY` (a subprocess, as a user runs it), and compares
every verdict with the plain interpreter's: plain_pass.json of the folder, or with --plain a run
of each gold here, unsandboxed, under PY (the program and its tests in one namespace, unittest's
own runner, MPLBACKEND=Agg, as BigCodeBench's harness does).

Prints the honest pass rate (golds that pass plainly and pass in `score`), every false negative
with `score`'s reason, and golds that pass in `score` but not plainly.

  python benchmarks/bench_verdicts.py [--set bigcodebench|humaneval|builtin]
      [--bigcodebench ../shared/bigcodebench] [--python .venv-bigcodebench/bin/python]
      [--workers 2] [--plain] [--task-timeout 20] [--builtin-n 40]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from precisecoder import tasks as tasks_lib
from precisecoder.data import pdb
from results import add_record_flag, recorded

REPO = pathlib.Path(__file__).resolve().parent.parent
_PLAIN_RUNNER = """
import sys, unittest
namespace = {"__name__": "__main__"}
exec(compile(open(sys.argv[1]).read(), "program", "exec"), namespace)
suite = unittest.TestSuite()
for value in list(namespace.values()):
  if isinstance(value, type) and issubclass(value, unittest.TestCase):
    suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(value))
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(suite)
sys.exit(0 if result.wasSuccessful() and result.testsRun else 1)
"""


def _record_files(folder: pathlib.Path) -> list[pathlib.Path]:
  return [p for p in sorted(folder.glob("*.json")) if p.name != "plain_pass.json"]


def _plain(task: tasks_lib.Task, python: str, timeout_s: float) -> bool:
  """Whether the gold passes its tests in a plain interpreter (one subprocess)."""
  with tempfile.TemporaryDirectory() as folder:
    path = pathlib.Path(folder) / "program.py"
    path.write_text(task.gt_solution + "\n\n" + task.tests["code"])
    env = dict(os.environ, MPLBACKEND="Agg")
    try:
      done = subprocess.run(
        [python, "-c", _PLAIN_RUNNER, str(path)],
        cwd=folder,
        env=env,
        capture_output=True,
        timeout=timeout_s,
        check=False,
      )
    except subprocess.TimeoutExpired:
      return False
  return done.returncode == 0


def _humaneval_checks() -> list[tasks_lib.Task]:
  """HumanEval's canonical solutions, each with HumanEval's own `check` as an assert test."""
  from precisecoder.data import humaneval  # pylint: disable=import-outside-toplevel

  made = []
  for problem in humaneval.problems():
    gold = humaneval.gold_program(problem)
    code = f"{problem['test']}\ncheck({problem['entry_point']})\n"
    made.append(
      tasks_lib.Task(
        task_id=f"{problem['task_id']}_check",
        buggy_code=gold,
        gt_solution=gold,
        gt_diff={},
        tests={"kind": "assert", "code": code},
        is_buggy=False,
        bug_count=0,
      )
    )
  return made


def _builtin_golds(n: int) -> list[tasks_lib.Task]:
  """The golds of the built-in task sets: the shipped HumanEval sets, the repository sets (`n`
  clean and `n` buggy per split) and `n` clean tasks of each generator tier (validation)."""
  # pylint: disable=import-outside-toplevel
  from precisecoder.data import generator, humaneval, repository

  made = [t for kind in humaneval.KINDS for t in humaneval.load_tasks(kind)]
  for split in ("validation", "test"):
    for buggy in (False, True):
      made += repository.make_tasks(split, n, 0, buggy=buggy)
  for tier in generator.TIERS:
    made += generator.make_clean_tasks("validation", n, 0, tier=tier)
  seen: set[str] = set()
  unique = []
  for task in made:  # task ids must be unique in one scoring
    if task.task_id in seen:
      continue
    seen.add(task.task_id)
    gold = task.gt_solution  # scored as its own prediction: a clean task of it
    unique.append(
      dataclasses.replace(task, buggy_code=gold, gt_diff={}, is_buggy=False, bug_count=0)
    )
  return unique


@recorded
def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--bigcodebench", default=str(REPO.parent / "shared" / "bigcodebench"))
  default_python = REPO / ".venv-bigcodebench" / "bin" / "python"
  parser.add_argument(
    "--python",
    default=str(default_python) if default_python.exists() else sys.executable,
    help="the task environment's interpreter",
  )
  parser.add_argument(
    "--set",
    choices=("bigcodebench", "humaneval", "builtin"),
    default="bigcodebench",
    help="which golds: BigCodeBench's (default), HumanEval's canonical solutions under "
    "HumanEval's checks, or the built-in task sets'",
  )
  parser.add_argument(
    "--builtin-n", type=int, default=40, help="--set builtin: tasks per generated set"
  )
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--task-timeout", type=float, default=20.0)
  parser.add_argument(
    "--plain",
    action="store_true",
    help="run every gold plainly here instead of reading plain_pass.json",
  )
  add_record_flag(parser)
  args = parser.parse_args()

  if args.set != "bigcodebench":
    task_list = _humaneval_checks() if args.set == "humaneval" else _builtin_golds(args.builtin_n)
    kinds = collections.Counter(t.tests["kind"] for t in task_list)
    print(f"{len(task_list)} {args.set} golds ({dict(kinds)}); programs under {args.python}")
    plain = {t.task_id: True for t in task_list}  # golds: HumanEval's, or verified when built
  else:
    folder = pathlib.Path(args.bigcodebench)
    report = pdb.bigcodebench_clean_tasks(_record_files(folder), timeout_s=args.task_timeout)
    task_list = report.tasks
    print(
      f"{len(task_list)} BigCodeBench tasks from {folder} ({json.dumps(report.summary())}); "
      f"programs under {args.python}"
    )
    if args.plain:
      with concurrent.futures.ThreadPoolExecutor(args.workers) as ex:
        plain = dict(
          zip(
            [t.task_id for t in task_list],
            ex.map(lambda t: _plain(t, args.python, args.task_timeout), task_list),
          )
        )
    else:
      plain = json.loads((folder / "plain_pass.json").read_text())

  with tempfile.TemporaryDirectory() as work:
    work = pathlib.Path(work)
    tasks_lib.write_tasks(work / "tasks.jsonl", task_list)
    (work / "preds.jsonl").write_text(
      "".join(
        json.dumps({"task_id": t.task_id, "program": t.gt_solution}) + "\n" for t in task_list
      )
    )
    started = time.monotonic()
    done = subprocess.run(
      [
        sys.executable,
        "-m",
        "precisecoder.cli",
        "score",
        "--tasks",
        str(work / "tasks.jsonl"),
        "--predictions",
        str(work / "preds.jsonl"),
        "--output",
        str(work / "scores.jsonl"),
        "--python",
        args.python,
        "--workers",
        str(args.workers),
        "--json",
      ],
      capture_output=True,
      text=True,
      check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
      print(done.stderr[-3000:], file=sys.stderr)
      return 2
    scores = {r["task_id"]: r for r in map(json.loads, (work / "scores.jsonl").open())}

  passed = {task_id: scores[task_id]["error"] is None for task_id in scores}
  plain_ids = [t.task_id for t in task_list if plain.get(t.task_id)]
  false_negatives = [i for i in plain_ids if not passed[i]]
  plain_failing_passed = [
    t.task_id for t in task_list if not plain.get(t.task_id) and passed[t.task_id]
  ]
  honest = len(plain_ids) - len(false_negatives)
  load = os.getloadavg()
  source = "run here" if args.plain else "plain_pass.json"
  print(
    f"plain interpreter: {len(plain_ids)} of {len(task_list)} golds pass "
    f"({source if args.set == 'bigcodebench' else 'golds of their sets'})"
  )
  print(
    f"score: {sum(passed.values())} of {len(task_list)} golds pass ({seconds:.0f} s, "
    f"{args.workers} workers, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})"
  )
  print(
    f"honest pass rate (golds that pass plainly): {honest}/{len(plain_ids)} "
    f"({100 * honest / max(1, len(plain_ids)):.1f}%); false negatives: {len(false_negatives)}"
  )
  for task_id in false_negatives:
    print(f"  FALSE NEGATIVE {task_id}: {scores[task_id]['error'][:300]}")
  for task_id in plain_failing_passed:
    print(f"  passes in score but not plainly: {task_id}")
  for line in done.stderr.splitlines():
    if line.startswith("precisecoder score:"):
      print(line)
  return 1 if false_negatives else 0


if __name__ == "__main__":
  sys.exit(main())
